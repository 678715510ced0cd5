//! Request handling: counting, fault injection, authentication and routing, with the small
//! AWX endpoints here and the larger ones in [`templates`] (lookup, launch) and [`jobs`]
//! (lists, detail, cancel); the `/_sim/` endpoints are in [`admin`].
//!
//! Routing is by hand rather than with axum routes because the API prefix is configuration,
//! the request counter needs the normalised path of every request (including unknown ones),
//! and AWX's trailing-slash redirects and 404/405 bodies are easier to reproduce in one place.

mod admin;
mod jobs;
mod templates;

use jobs::candidate_jobs;

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State as AxState};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::awx::{AWX_VERSION, Kind, Status, User};
use crate::config::{Faults, SimTemplate};
use crate::lifecycle::{Job, Plan};
use crate::query::{self, Model};
use crate::shared::{ConnCtl, Shared};
use crate::state::State;
use crate::throttle::{Violation, burst_retry_after};
use crate::util::{base64_decode, format_api, now_micros, parse_query, parse_yaml_or_json, percent_decode};
use crate::views::View;

/// Violations kept at most (the first ones), so a misbehaving client cannot grow memory.
const MAX_VIOLATIONS: usize = 10_000;
/// Larger request bodies are refused (AWX sits behind nginx, whose default is far smaller).
const MAX_BODY: usize = 10 * 1024 * 1024;

fn json_response(status: u16, body: &Value) -> Response {
    let mut resp = Response::new(Body::from(serde_json::to_vec(body).expect("serialize JSON")));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn detail(status: u16, msg: &str) -> Response {
    json_response(status, &json!({"detail": msg}))
}

fn not_found() -> Response {
    detail(404, "Not found.")
}

fn no_route() -> Response {
    detail(404, "The requested resource could not be found.")
}

fn method_not_allowed(method: &Method) -> Response {
    detail(405, &format!("Method \"{method}\" not allowed."))
}

fn unauthenticated(msg: &str) -> Response {
    let mut resp = detail(401, msg);
    resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"api\""));
    resp
}

fn redirect(location: String) -> Response {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::MOVED_PERMANENTLY;
    if let Ok(v) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

/// `"METHOD /path/"` with ids (numeric segments, and the object segment of a `v2` path, which
/// also covers named URLs like `name++org`) replaced by `{id}`.
pub(crate) fn request_key(method: &Method, path: &str) -> String {
    let segs: Vec<&str> = path.split('/').collect();
    let v2 = segs.iter().position(|s| *s == "v2");
    let norm: Vec<&str> = segs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let is_id = !s.is_empty() && (s.bytes().all(|b| b.is_ascii_digit()) || v2.is_some_and(|v| i == v + 2));
            if is_id { "{id}" } else { *s }
        })
        .collect();
    format!("{method} {}", norm.join("/"))
}

enum Fault {
    None,
    /// `429` with this `Retry-After`.
    RateLimited(u64),
    /// `503`, with this `Retry-After` unless 0.
    Unavailable(u64),
    Drop,
}

fn decide_fault(st: &mut State, now: Instant) -> (Duration, Fault) {
    let Faults {
        latency_ms,
        rate_limit_every,
        retry_after_seconds,
        rate_limit_burst,
        error_5xx_percent,
        error_5xx_retry_after_seconds,
        drop_percent,
        ..
    } = st.faults;
    let burst = rate_limit_burst.and_then(|b| burst_retry_after(&b, st.faults_since, now));
    let fault = if let Some(retry_after) = burst {
        Fault::RateLimited(retry_after)
    } else if rate_limit_every > 0 && st.api_requests.is_multiple_of(rate_limit_every) {
        Fault::RateLimited(retry_after_seconds)
    } else if st.rng.percent(error_5xx_percent) {
        Fault::Unavailable(error_5xx_retry_after_seconds)
    } else if st.rng.percent(drop_percent) {
        Fault::Drop
    } else {
        Fault::None
    };
    (Duration::from_millis(latency_ms), fault)
}

/// How long a launch request takes to be processed: `launch_delay_ms` plus up to
/// `launch_delay_jitter_ms`.
fn launch_delay(st: &mut State) -> Duration {
    let Faults { launch_delay_ms, launch_delay_jitter_ms, .. } = st.faults;
    let jitter = if launch_delay_jitter_ms == 0 { 0 } else { st.rng.below(launch_delay_jitter_ms + 1) };
    Duration::from_millis(launch_delay_ms + jitter)
}

/// The client a request comes from: its `User-Agent`.
fn client_of(headers: &HeaderMap) -> String {
    headers.get(header::USER_AGENT).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).unwrap_or_default()
}

/// Every request is processed to the end on a task of its own, as AWX (Django under uWSGI)
/// does: a client that disconnects or times out does not stop a request the controller has
/// received — a launch still creates its job — it only never hears the answer.
pub(crate) async fn dispatch(
    AxState(shared): AxState<Arc<Shared>>,
    ConnectInfo(conn): ConnectInfo<ConnCtl>,
    req: Request,
) -> Response {
    tokio::spawn(process(shared, conn, req)).await.unwrap_or_else(|_| detail(500, "aap-sim request task failed"))
}

async fn process(shared: Arc<Shared>, conn: ConnCtl, req: Request) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    if path == "/_sim" || path.starts_with("/_sim/") {
        return admin::admin(&shared, &method, &path, req).await;
    }

    let client = client_of(req.headers());
    let launching = method == Method::POST && path.ends_with("/launch/");
    let (latency, fault, launch_delay) = {
        let mut st = shared.lock();
        let key = request_key(&method, &path);
        let grace = Duration::from_millis(st.config.retry_after_grace_ms);
        if let Some(early) = st.clients.arrive(&client, started, grace) {
            let early_by_ms = u64::try_from(early.as_micros().div_ceil(1000)).unwrap_or(u64::MAX);
            tracing::warn!(%client, endpoint = %key, early_by_ms, "request before its Retry-After elapsed");
            if st.violations.len() < MAX_VIOLATIONS {
                st.violations.push(Violation { client: client.clone(), endpoint: key.clone(), early_by_ms });
            }
        }
        *st.requests.entry(key).or_insert(0) += 1;
        st.api_requests += 1;
        let (latency, fault) = decide_fault(&mut st, started);
        let delay = if launching { launch_delay(&mut st) } else { Duration::ZERO };
        (latency, fault, delay)
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    match fault {
        Fault::None => {}
        Fault::RateLimited(retry_after) => {
            let mut resp = detail(429, "Request was throttled.");
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            let mut st = shared.lock();
            st.injected.rate_limited += 1;
            st.clients.block(&client, Instant::now(), Duration::from_secs(retry_after));
            return resp;
        }
        Fault::Unavailable(retry_after) => {
            let mut resp = detail(503, "Service Unavailable (aap-sim fault injection).");
            let mut st = shared.lock();
            st.injected.unavailable += 1;
            if retry_after > 0 {
                resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
                st.clients.block(&client, Instant::now(), Duration::from_secs(retry_after));
            }
            return resp;
        }
        Fault::Drop => {
            shared.lock().injected.dropped += 1;
            conn.kill();
            return Response::new(Body::empty());
        }
    }

    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => return detail(413, "Request body too large."),
    };
    if !launch_delay.is_zero() {
        // A controller under load: the launch is received now and processed later.
        tokio::time::sleep(launch_delay).await;
    }
    let ctx = Ctx { method, path, query, headers: parts.headers, body, conn };
    let mut resp = {
        let mut st = shared.lock();
        route(&ctx, &mut st)
    };
    let h = resp.headers_mut();
    h.insert("X-API-Product-Name", HeaderValue::from_static("AWX"));
    h.insert("X-API-Product-Version", HeaderValue::from_static(AWX_VERSION));
    h.insert("X-API-Node", HeaderValue::from_static("aap-sim"));
    if let Ok(v) = HeaderValue::from_str(&format!("{:.3}s", started.elapsed().as_secs_f64())) {
        h.insert("X-API-Total-Time", v);
    }
    resp
}

struct Ctx {
    method: Method,
    path: String,
    query: String,
    headers: HeaderMap,
    body: Bytes,
    conn: ConnCtl,
}

impl Ctx {
    fn is(&self, m: &Method) -> bool {
        self.method == *m || (*m == Method::GET && self.method == Method::HEAD)
    }

    /// The request body as JSON: empty means `{}`; otherwise DRF's parse errors.
    fn json_body(&self) -> Result<Value, Box<Response>> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(json!({}));
        }
        if let Some(ct) = self.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok())
            && !ct.to_ascii_lowercase().contains("json")
        {
            return Err(Box::new(detail(415, &format!("Unsupported media type \"{ct}\" in request."))));
        }
        serde_json::from_slice(&self.body).map_err(|e| Box::new(detail(400, &format!("JSON parse error - {e}"))))
    }
}

/// Checks credentials the way AWX's DRF authentication classes do. With neither a token nor
/// users configured, everything is allowed.
fn authenticate(st: &State, headers: &HeaderMap) -> Result<User, Box<Response>> {
    let required = st.config.token.is_some() || !st.config.users.is_empty();
    let header = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
    let (scheme, cred) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    let cred = cred.trim();
    match scheme.to_ascii_lowercase().as_str() {
        "bearer" if !cred.is_empty() => {
            if st.config.token.as_deref() == Some(cred) {
                return Ok(st.default_user());
            }
            if let Some(t) = st.tokens.values().find(|t| t.token == cred) {
                return Ok(t.user.clone());
            }
        }
        "basic" if !cred.is_empty() => {
            let decoded = base64_decode(cred).and_then(|b| String::from_utf8(b).ok());
            let ok = decoded.as_deref().and_then(|d| d.split_once(':')).and_then(|(user, pass)| {
                st.config.users.iter().any(|u| u.username == user && u.password == pass).then(|| st.user_named(user))?
            });
            match ok {
                Some(user) => return Ok(user),
                None if required => return Err(Box::new(unauthenticated("Invalid username/password."))),
                None => {}
            }
        }
        _ => {}
    }
    if required {
        Err(Box::new(unauthenticated("Authentication credentials were not provided.")))
    } else {
        Ok(st.default_user())
    }
}

fn route(ctx: &Ctx, st: &mut State) -> Response {
    let prefix = st.config.api_prefix.clone();
    let with_query = |p: String| if ctx.query.is_empty() { p } else { format!("{p}?{}", ctx.query) };
    if format!("{}/", ctx.path) == prefix {
        return redirect(with_query(prefix));
    }
    let Some(rest) = ctx.path.strip_prefix(&prefix) else { return no_route() };
    if rest.is_empty() {
        if !ctx.is(&Method::GET) {
            return method_not_allowed(&ctx.method);
        }
        let v2 = format!("{prefix}v2/");
        return json_response(
            200,
            &json!({"description": "AWX REST API", "current_version": v2, "available_versions": {"v2": v2},
                    "oauth2": format!("{prefix}o/"), "custom_logo": "", "custom_login_info": "",
                    "login_redirect_override": ""}),
        );
    }
    if rest == "v2" {
        return redirect(with_query(format!("{}/", ctx.path)));
    }
    let Some(rel) = rest.strip_prefix("v2/") else { return no_route() };
    // Django's APPEND_SLASH: every AWX URL ends with a slash.
    if !rel.is_empty() && !rel.ends_with('/') {
        return redirect(with_query(format!("{}/", ctx.path)));
    }
    let segs: Vec<&str> = if rel.is_empty() { Vec::new() } else { rel.trim_end_matches('/').split('/').collect() };

    // AWX serves the version root and ping to anyone; everything else needs a user.
    let public = matches!(segs.as_slice(), [] | ["ping"]);
    let user = match authenticate(st, &ctx.headers) {
        Ok(u) => u,
        Err(resp) if !public => return *resp,
        Err(_) => st.default_user(),
    };

    let get_only = |f: &dyn Fn() -> Response| if ctx.is(&Method::GET) { f() } else { method_not_allowed(&ctx.method) };
    match segs.as_slice() {
        [] => get_only(&|| json_response(200, &version_root(st))),
        ["ping"] => get_only(&|| json_response(200, &ping())),
        ["me"] => get_only(&|| {
            json_response(200, &json!({"count": 1, "next": null, "previous": null, "results": [st.user_json(&user)]}))
        }),
        ["tokens"] => match ctx.method {
            Method::POST => create_token(ctx, st, user),
            _ => method_not_allowed(&ctx.method),
        },
        ["tokens", id] => token_detail(ctx, st, id),
        ["organizations"] => get_only(&|| {
            let items = st.config.organizations.iter().map(|o| st.organization_json(o.id)).collect();
            list_response(&query::ORGANIZATION, items, ctx)
        }),
        ["organizations", id] => get_only(&|| {
            let org = st.config.organizations.iter().find(|o| Some(o.id) == id.parse().ok());
            org.map(|o| json_response(200, &st.organization_json(o.id))).unwrap_or_else(not_found)
        }),
        [coll @ ("job_templates" | "workflow_job_templates"), rest @ ..] => {
            let kind = if *coll == "job_templates" { Kind::Job } else { Kind::WorkflowJob };
            templates::templates(ctx, st, kind, rest, user)
        }
        [coll @ ("jobs" | "workflow_jobs"), rest @ ..] => {
            let kind = if *coll == "jobs" { Kind::Job } else { Kind::WorkflowJob };
            jobs::jobs(ctx, st, kind, rest)
        }
        ["unified_jobs"] => get_only(&|| {
            let items = candidate_jobs(st, &ctx.query, |_| true).iter().map(|j| st.job_json(j, View::Detail)).collect();
            list_response(&query::UNIFIED_JOB, items, ctx)
        }),
        _ => no_route(),
    }
}

fn version_root(st: &State) -> Value {
    let mut m = Map::new();
    for name in [
        "ping",
        "config",
        "me",
        "users",
        "tokens",
        "organizations",
        "job_templates",
        "jobs",
        "job_events",
        "workflow_job_templates",
        "workflow_jobs",
        "unified_jobs",
        "unified_job_templates",
        "notification_templates",
    ] {
        m.insert(name.into(), json!(st.api(&format!("{name}/"))));
    }
    Value::Object(m)
}

fn ping() -> Value {
    let now = format_api(now_micros());
    json!({
        "ha": false, "version": AWX_VERSION, "active_node": "aap-sim",
        "install_uuid": "00000000-0000-4000-8000-0000000a4a51",
        "instances": [{"node": "aap-sim", "node_type": "hybrid", "uuid": "00000000-0000-4000-8000-0000000a4a52",
                       "heartbeat": now, "capacity": 100, "version": AWX_VERSION}],
        "instance_groups": [{"name": "controlplane", "capacity": 100, "instances": ["aap-sim"]},
                            {"name": "default", "capacity": 100, "instances": ["aap-sim"]}],
    })
}

fn list_response(model: &Model, items: Vec<Value>, ctx: &Ctx) -> Response {
    match query::list(model, items, &ctx.path, &ctx.query) {
        Ok(page) => json_response(200, &page),
        Err(e) => detail(e.status, &e.detail),
    }
}

fn token_json(st: &State, id: u64, token: Option<&str>) -> Value {
    let t = &st.tokens[&id];
    json!({
        "id": id, "type": "o_auth2_access_token", "url": st.api(&format!("tokens/{id}/")),
        "related": {"user": st.api(&format!("users/{}/", t.user.id)), "activity_stream": st.api(&format!("tokens/{id}/activity_stream/"))},
        "summary_fields": {"user": {"id": t.user.id, "username": t.user.username, "first_name": "", "last_name": ""}},
        "created": format_api(t.created), "modified": format_api(t.created),
        "description": "", "user": t.user.id, "token": token.unwrap_or("************"),
        "refresh_token": null, "application": null,
        "expires": format_api(t.created + 31_536_000_000 * 1_000_000), "scope": "write",
    })
}

fn create_token(ctx: &Ctx, st: &mut State, user: User) -> Response {
    let body = match ctx.json_body() {
        Ok(b) => b,
        Err(resp) => return *resp,
    };
    if let Some(scope) = body.get("scope").and_then(Value::as_str)
        && scope != "read"
        && scope != "write"
    {
        let msg = "Must be a simple space-separated string with allowed scopes ['read', 'write'].";
        return json_response(400, &json!({"scope": [msg]}));
    }
    let (id, token) = st.create_token(user);
    let mut v = token_json(st, id, Some(&token.token));
    if let Some(d) = body.get("description").and_then(Value::as_str) {
        v["description"] = json!(d);
    }
    json_response(201, &v)
}

fn token_detail(ctx: &Ctx, st: &mut State, id: &str) -> Response {
    let Some(id) = id.parse::<u64>().ok().filter(|id| st.tokens.contains_key(id)) else { return not_found() };
    match ctx.method {
        Method::DELETE => {
            st.tokens.remove(&id);
            let mut resp = Response::new(Body::empty());
            *resp.status_mut() = StatusCode::NO_CONTENT;
            resp
        }
        Method::GET | Method::HEAD => json_response(200, &token_json(st, id, None)),
        _ => method_not_allowed(&ctx.method),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_keys_are_normalised() {
        assert_eq!(request_key(&Method::GET, "/api/v2/jobs/"), "GET /api/v2/jobs/");
        assert_eq!(request_key(&Method::GET, "/api/v2/jobs/42/"), "GET /api/v2/jobs/{id}/");
        assert_eq!(
            request_key(&Method::POST, "/api/controller/v2/job_templates/7/launch/"),
            "POST /api/controller/v2/job_templates/{id}/launch/"
        );
        assert_eq!(
            request_key(&Method::GET, "/api/v2/job_templates/Deploy++Default/"),
            "GET /api/v2/job_templates/{id}/"
        );
        assert_eq!(request_key(&Method::GET, "/api/"), "GET /api/");
    }
}
