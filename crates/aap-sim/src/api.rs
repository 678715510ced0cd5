//! Request handling: counting, fault injection, authentication, routing and the handlers of the
//! AWX API subset, plus the `/_sim/` admin endpoints.
//!
//! Routing is by hand rather than with axum routes because the API prefix is configuration,
//! the request counter needs the normalised path of every request (including unknown ones),
//! and AWX's trailing-slash redirects and 404/405 bodies are easier to reproduce in one place.

use std::sync::Arc;
use std::time::{Duration, Instant};

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
        return admin(&shared, &method, &path, req).await;
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
            templates(ctx, st, kind, rest, user)
        }
        [coll @ ("jobs" | "workflow_jobs"), rest @ ..] => {
            let kind = if *coll == "jobs" { Kind::Job } else { Kind::WorkflowJob };
            jobs(ctx, st, kind, rest)
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

/// A template by id or by named URL (`<name>++<organization name>`).
fn find_template(st: &State, kind: Kind, seg: &str) -> Option<SimTemplate> {
    if let Ok(id) = seg.parse::<u64>() {
        return st.template(kind, id).cloned();
    }
    let decoded = percent_decode(seg, false);
    let (name, org) = decoded.rsplit_once("++")?;
    st.templates(kind).iter().find(|t| t.name == name && st.organization_name(t.organization) == org).cloned()
}

fn templates(ctx: &Ctx, st: &mut State, kind: Kind, rest: &[&str], user: User) -> Response {
    let model = match kind {
        Kind::Job => &query::JOB_TEMPLATE,
        Kind::WorkflowJob => &query::WORKFLOW_JOB_TEMPLATE,
    };
    if rest.is_empty() {
        if !ctx.is(&Method::GET) {
            return method_not_allowed(&ctx.method);
        }
        let items = st.templates(kind).iter().map(|t| st.template_json(kind, t)).collect();
        return list_response(model, items, ctx);
    }
    let Some(t) = find_template(st, kind, rest[0]) else {
        return if rest.len() <= 2 { not_found() } else { no_route() };
    };
    match (&rest[1..], kind) {
        ([], _) => {
            if ctx.is(&Method::GET) {
                json_response(200, &st.template_json(kind, &t))
            } else {
                method_not_allowed(&ctx.method)
            }
        }
        (["launch"], _) => {
            if ctx.is(&Method::GET) {
                json_response(200, &launch_info(kind, &t))
            } else if ctx.method == Method::POST {
                launch(ctx, st, kind, &t, user)
            } else {
                method_not_allowed(&ctx.method)
            }
        }
        (["jobs"], Kind::Job) | (["workflow_jobs"], Kind::WorkflowJob) => {
            if !ctx.is(&Method::GET) {
                return method_not_allowed(&ctx.method);
            }
            let items = candidate_jobs(st, &ctx.query, |j| j.kind == kind && j.template_id == t.id)
                .iter()
                .map(|j| st.job_json(j, View::Detail))
                .collect();
            list_response(if kind == Kind::Job { &query::JOB } else { &query::WORKFLOW_JOB }, items, ctx)
        }
        _ => no_route(),
    }
}

/// `GET …/launch/`: what a launch will need. Nothing is ever needed in the simulator.
fn launch_info(kind: Kind, t: &SimTemplate) -> Value {
    let data = json!({"name": t.name, "id": t.id, "description": ""});
    match kind {
        Kind::Job => json!({
            "can_start_without_user_input": true, "passwords_needed_to_start": [],
            "ask_scm_branch_on_launch": false, "ask_variables_on_launch": t.ask_variables_on_launch,
            "ask_tags_on_launch": false, "ask_diff_mode_on_launch": false, "ask_skip_tags_on_launch": false,
            "ask_job_type_on_launch": false, "ask_limit_on_launch": false, "ask_verbosity_on_launch": false,
            "ask_inventory_on_launch": false, "ask_credential_on_launch": false,
            "ask_execution_environment_on_launch": false, "ask_labels_on_launch": false, "ask_forks_on_launch": false,
            "ask_job_slice_count_on_launch": false, "ask_timeout_on_launch": false,
            "ask_instance_groups_on_launch": false, "survey_enabled": t.survey_enabled,
            "variables_needed_to_start": [], "credential_needed_to_start": false,
            "inventory_needed_to_start": false, "job_template_data": data,
            "defaults": {"extra_vars": "", "diff_mode": false, "limit": "", "job_tags": "", "skip_tags": "",
                         "job_type": "run", "verbosity": 0, "inventory": {"name": null, "id": null},
                         "scm_branch": "", "credentials": [], "execution_environment": {}, "labels": [],
                         "forks": 0, "job_slice_count": 1, "timeout": 0, "instance_groups": []},
        }),
        Kind::WorkflowJob => json!({
            "can_start_without_user_input": true, "extra_vars": "",
            "ask_inventory_on_launch": false, "ask_limit_on_launch": false, "ask_scm_branch_on_launch": false,
            "ask_variables_on_launch": t.ask_variables_on_launch, "ask_labels_on_launch": false,
            "ask_skip_tags_on_launch": false, "ask_tags_on_launch": false, "survey_enabled": t.survey_enabled,
            "variables_needed_to_start": [], "node_templates_missing": [], "node_prompts_rejected": [],
            "workflow_job_template_data": data,
            "defaults": {"extra_vars": "", "inventory": {"name": null, "id": null}, "limit": null,
                         "scm_branch": null, "labels": [], "job_tags": null, "skip_tags": null},
        }),
    }
}

/// Launch fields other than `extra_vars` a template may prompt for, with the template value
/// (a value equal to it counts as neither accepted nor ignored). The simulator's templates
/// prompt for none of them.
const JT_PROMPT_FIELDS: &[(&str, &str)] = &[
    ("inventory", "null"),
    ("credentials", "[]"),
    ("scm_branch", "\"\""),
    ("limit", "\"\""),
    ("job_tags", "\"\""),
    ("skip_tags", "\"\""),
    ("job_type", "\"run\""),
    ("verbosity", "0"),
    ("diff_mode", "false"),
    ("execution_environment", "null"),
    ("labels", "[]"),
    ("forks", "0"),
    ("job_slice_count", "1"),
    ("timeout", "0"),
    ("instance_groups", "[]"),
];
const WFJT_PROMPT_FIELDS: &[(&str, &str)] = &[
    ("inventory", "null"),
    ("limit", "null"),
    ("scm_branch", "null"),
    ("labels", "[]"),
    ("skip_tags", "null"),
    ("job_tags", "null"),
];

fn launch(ctx: &Ctx, st: &mut State, kind: Kind, t: &SimTemplate, user: User) -> Response {
    let body = match ctx.json_body() {
        Ok(Value::Object(m)) => m,
        Ok(other) => {
            let got = match other {
                Value::Array(_) => "list",
                Value::String(_) => "str",
                Value::Number(_) => "int",
                Value::Bool(_) => "bool",
                _ => "NoneType",
            };
            return json_response(
                400,
                &json!({"__all__": [format!("Invalid data. Expected a dictionary, but got {got}.")]}),
            );
        }
        Err(resp) => return *resp,
    };

    let extra_vars = match body.get("extra_vars") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(Value::String(s)) => match parse_yaml_or_json(s) {
            Ok(m) => m,
            Err(e) => return json_response(400, &json!({"extra_vars": [e]})),
        },
        Some(_) => return json_response(400, &json!({"extra_vars": ["Must be a valid JSON or YAML dictionary."]})),
    };

    // `_accept_or_ignore_job_kwargs`: unprompted fields are dropped for job templates
    // (`_exclude_errors=['prompts']`) and rejected for workflow job templates.
    let mut ignored = Map::new();
    let mut errors = Map::new();
    let prompt_fields = if kind == Kind::Job { JT_PROMPT_FIELDS } else { WFJT_PROMPT_FIELDS };
    for (field, default) in prompt_fields {
        let Some(value) = body.get(*field) else { continue };
        let default: Value = serde_json::from_str(default).expect("valid default");
        if *value == default || value.is_null() {
            continue;
        }
        ignored.insert(field.to_string(), value.clone());
        errors.insert(field.to_string(), json!(["Field is not configured to prompt on launch."]));
    }
    let accept_vars = t.ask_variables_on_launch || t.survey_enabled;
    let accepted_vars = if accept_vars || extra_vars.is_empty() {
        extra_vars
    } else {
        let keys: Vec<&str> = extra_vars.keys().map(String::as_str).collect();
        let model = if kind == Kind::Job { "Job Template" } else { "Workflow Job Template" };
        errors.insert(
            "extra_vars".into(),
            json!([format!(
                "Variables {} are not allowed on launch. Check the Prompt on Launch setting on the {model} to include Extra Variables.",
                keys.join(", ")
            )]),
        );
        ignored.insert("extra_vars".into(), Value::Object(extra_vars.clone()));
        Map::new()
    };
    if kind == Kind::WorkflowJob && !errors.is_empty() {
        return json_response(400, &Value::Object(errors));
    }

    let plan = match plan_for(t, &accepted_vars) {
        Ok(p) => p,
        Err(msg) => return json_response(400, &json!({"extra_vars": [msg]})),
    };
    let limit = if ignored.contains_key("limit") {
        String::new()
    } else {
        body.get("limit").and_then(Value::as_str).unwrap_or("").to_string()
    };
    let id = st.jobs.launch(kind, t, Value::Object(accepted_vars), limit, plan, user);

    if st.rng.percent(st.faults.lose_launch_response_percent) {
        // The job exists and runs; the client never learns its id.
        if let Some(job) = st.jobs.get_mut(&id) {
            job.launch_lost = true;
        }
        st.injected.lost_launch_responses += 1;
        ctx.conn.kill();
        return Response::new(Body::empty());
    }

    let job = &st.jobs[&id];
    let mut v = st.job_json(job, View::Launch);
    let m = v.as_object_mut().expect("object");
    m.insert(kind.as_str().into(), json!(id));
    m.insert("ignored_fields".into(), Value::Object(ignored));
    let location = st.api(&format!("{}/{id}/", kind.collection()));
    let mut resp = json_response(201, &v);
    if let Ok(l) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(header::LOCATION, l);
    }
    resp
}

/// The job's timings and outcome: the template's, overridden per launch by the extra vars
/// `aap_sim_outcome` / `aap_sim_duration_seconds` / `aap_sim_pending_seconds`, or by Slipway's
/// envelope (`slipway.resource.properties.simulateFailure` / `.delaySeconds` for create jobs,
/// `simulateDeleteFailure` / `deleteDelaySeconds` for delete jobs, what the example
/// playbooks honour). The explicit `aap_sim_*` variables win over the envelope.
fn plan_for(t: &SimTemplate, vars: &Map<String, Value>) -> Result<Plan, String> {
    let outcome = Status::parse_outcome(&t.outcome).unwrap_or(Status::Successful);
    let mut plan = Plan {
        pending_seconds: t.pending_seconds,
        duration_seconds: t.duration_seconds,
        outcome,
        failure: format!("aap-sim: template {:?} is configured to end {}", t.name, t.outcome),
    };
    let slipway = match vars.get("slipway") {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::Null),
        Some(v) => v.clone(),
        None => Value::Null,
    };
    if let Some(props) = slipway.pointer("/resource/properties") {
        // As the example playbooks do: create jobs honour simulateFailure / delaySeconds,
        // delete jobs simulateDeleteFailure / deleteDelaySeconds.
        let deleting = slipway.get("action").and_then(Value::as_str) == Some("delete");
        let (fail, delay) = if deleting {
            ("simulateDeleteFailure", "deleteDelaySeconds")
        } else {
            ("simulateFailure", "delaySeconds")
        };
        if props.get(fail).and_then(Value::as_bool) == Some(true) {
            plan.outcome = Status::Failed;
            plan.failure = "simulated failure".into();
        }
        if let Some(d) = props.get(delay).and_then(Value::as_f64).filter(|d| *d >= 0.0) {
            plan.duration_seconds = d;
        }
    }
    if let Some(o) = vars.get("aap_sim_outcome") {
        let o = o.as_str().unwrap_or("");
        plan.outcome = Status::parse_outcome(o)
            .ok_or_else(|| format!("aap_sim_outcome {o:?} is not one of successful, failed, error, canceled"))?;
        plan.failure = format!("aap-sim: outcome {o} requested by aap_sim_outcome");
    }
    let seconds = |name: &str| -> Result<Option<f64>, String> {
        match vars.get(name) {
            None => Ok(None),
            Some(v) => v.as_f64().filter(|s| *s >= 0.0).map(Some).ok_or_else(|| format!("{name} must be a number ≥ 0")),
        }
    };
    if let Some(d) = seconds("aap_sim_duration_seconds")? {
        plan.duration_seconds = d;
    }
    if let Some(p) = seconds("aap_sim_pending_seconds")? {
        plan.pending_seconds = p;
    }
    Ok(plan)
}

/// The jobs a list may show, cheaply narrowed by plain `id` / `id__in` filters first so batch
/// polls stay O(ids) however many jobs exist (the generic filter still runs afterwards).
fn candidate_jobs<'a>(st: &'a State, query: &str, keep: impl Fn(&Job) -> bool) -> Vec<&'a Job> {
    let mut ids: Option<Vec<u64>> = None;
    for (k, v) in parse_query(query) {
        let parsed: Option<Vec<u64>> = match k.as_str() {
            "id" => v.trim().parse().ok().map(|i| vec![i]),
            "id__in" => v.split(',').map(|s| s.trim().parse().ok()).collect(),
            _ => continue,
        };
        // Unparsable values are left to the generic filter, which answers 400.
        let Some(parsed) = parsed else { return st.jobs.values().filter(|j| keep(j)).collect() };
        ids = Some(match ids {
            None => parsed,
            Some(prev) => prev.into_iter().filter(|i| parsed.contains(i)).collect(),
        });
    }
    match ids {
        Some(mut ids) => {
            ids.sort_unstable();
            ids.dedup();
            ids.iter().filter_map(|i| st.jobs.get(i)).filter(|j| keep(j)).collect()
        }
        None => st.jobs.values().filter(|j| keep(j)).collect(),
    }
}

fn jobs(ctx: &Ctx, st: &mut State, kind: Kind, rest: &[&str]) -> Response {
    let model = if kind == Kind::Job { &query::JOB } else { &query::WORKFLOW_JOB };
    if rest.is_empty() {
        if !ctx.is(&Method::GET) {
            return method_not_allowed(&ctx.method);
        }
        let items =
            candidate_jobs(st, &ctx.query, |j| j.kind == kind).iter().map(|j| st.job_json(j, View::Detail)).collect();
        return list_response(model, items, ctx);
    }
    let id = rest[0].parse::<u64>().ok().filter(|id| st.jobs.get(id).is_some_and(|j| j.kind == kind));
    let Some(id) = id else {
        return if rest.len() == 1 || matches!(rest[1..], ["cancel"] | ["job_events"]) {
            not_found()
        } else {
            no_route()
        };
    };
    match &rest[1..] {
        [] => {
            if ctx.is(&Method::GET) {
                json_response(200, &st.job_json(&st.jobs[&id], View::Detail))
            } else {
                method_not_allowed(&ctx.method)
            }
        }
        ["cancel"] => {
            let can_cancel = st.jobs[&id].status.is_active();
            if ctx.is(&Method::GET) {
                json_response(200, &json!({"can_cancel": can_cancel}))
            } else if ctx.method == Method::POST && can_cancel {
                st.jobs.request_cancel(id);
                let mut resp = Response::new(Body::empty());
                *resp.status_mut() = StatusCode::ACCEPTED;
                resp
            } else {
                method_not_allowed(&ctx.method)
            }
        }
        ["job_events"] if kind == Kind::Job => {
            if !ctx.is(&Method::GET) {
                return method_not_allowed(&ctx.method);
            }
            let events = st.job_events(&st.jobs[&id]);
            let mut resp = list_response(&query::JOB_EVENT, events, ctx);
            resp.headers_mut().insert("X-UI-Max-Events", HeaderValue::from_static("4000"));
            resp
        }
        _ => no_route(),
    }
}

// ---------------------------------------------------------------------------------------------
// Admin endpoints (`/_sim/`): the Rust handle over HTTP, for tests that run the binary. Not
// counted and never faulted.

async fn admin(shared: &Shared, method: &Method, path: &str, req: Request) -> Response {
    let segs: Vec<&str> = path.trim_matches('/').split('/').skip(1).collect();
    let body = match axum::body::to_bytes(req.into_body(), MAX_BODY).await {
        Ok(b) => b,
        Err(_) => return detail(413, "Request body too large."),
    };
    let no_content = || StatusCode::NO_CONTENT.into_response();
    let mut st = shared.lock();
    match (method.clone(), segs.as_slice()) {
        (Method::GET, ["requests"]) => json_response(200, &json!(st.requests)),
        (Method::POST, ["requests", "reset"]) => {
            st.reset_counters();
            no_content()
        }
        (Method::GET, ["clients"]) => json_response(200, &json!(st.clients.requests())),
        (Method::GET, ["injected"]) => json_response(200, &json!(st.injected)),
        (Method::GET, ["violations"]) => json_response(200, &json!(st.violations)),
        (Method::GET, ["jobs"]) => {
            let jobs: Vec<_> = st.jobs.values().map(Job::sim_job).collect();
            json_response(200, &json!(jobs))
        }
        (Method::GET, ["jobs", id]) => match id.parse::<u64>().ok().and_then(|id| st.jobs.get(&id)) {
            Some(j) => json_response(200, &json!(j.sim_job())),
            None => not_found(),
        },
        (Method::DELETE, ["jobs", id]) => match id.parse::<u64>().ok().and_then(|id| st.jobs.remove(&id)) {
            Some(_) => no_content(),
            None => not_found(),
        },
        (Method::PUT, ["jobs", id, "status"]) => {
            let Some(id) = id.parse::<u64>().ok().filter(|id| st.jobs.contains_key(id)) else { return not_found() };
            let status = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v.get("status").and_then(Value::as_str).and_then(Status::parse));
            match status {
                Some(status) => {
                    let notices = st.force_status(id, status);
                    drop(st);
                    shared.notifier.send(notices);
                    no_content()
                }
                None => detail(400, "Expected {\"status\": <an AWX job status>}."),
            }
        }
        (Method::GET, ["faults"]) => json_response(200, &json!(st.faults)),
        (Method::PUT, ["faults"]) => match serde_json::from_slice::<Faults>(&body) {
            Ok(f) => {
                st.set_faults(f);
                no_content()
            }
            Err(e) => detail(400, &format!("Invalid faults: {e}")),
        },
        _ => no_route(),
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

    fn template() -> SimTemplate {
        SimTemplate { id: 1, name: "t".into(), duration_seconds: 2.0, ..SimTemplate::default() }
    }

    #[test]
    fn per_launch_overrides() {
        let vars = |v: Value| v.as_object().unwrap().clone();
        let p = plan_for(&template(), &Map::new()).unwrap();
        assert_eq!((p.outcome, p.duration_seconds), (Status::Successful, 2.0));
        let env = vars(json!({"slipway": {"resource": {"properties": {"simulateFailure": true, "delaySeconds": 7}}}}));
        let p = plan_for(&template(), &env).unwrap();
        assert_eq!((p.outcome, p.duration_seconds, p.failure.as_str()), (Status::Failed, 7.0, "simulated failure"));
        let env_str = vars(json!({"slipway": "{\"resource\": {\"properties\": {\"delaySeconds\": 0.5}}}"}));
        assert_eq!(plan_for(&template(), &env_str).unwrap().duration_seconds, 0.5);
        let both = vars(json!({"aap_sim_outcome": "error", "aap_sim_duration_seconds": 0.25,
            "slipway": {"resource": {"properties": {"simulateFailure": true, "delaySeconds": 7}}}}));
        let p = plan_for(&template(), &both).unwrap();
        assert_eq!((p.outcome, p.duration_seconds), (Status::Error, 0.25));
        let delete = vars(json!({"slipway": {"action": "delete", "resource": {"properties":
            {"simulateFailure": true, "delaySeconds": 7, "deleteDelaySeconds": 0.5}}}}));
        let p = plan_for(&template(), &delete).unwrap();
        assert_eq!((p.outcome, p.duration_seconds), (Status::Successful, 0.5), "delete jobs use the delete knobs");
        assert!(plan_for(&template(), &vars(json!({"aap_sim_outcome": "maybe"}))).is_err());
        assert!(plan_for(&template(), &vars(json!({"aap_sim_duration_seconds": "soon"}))).is_err());
    }
}
