//! The `/_sim/` admin endpoints: request counters, injected faults, jobs, violations, and the
//! resource state the simulated playbooks keep (`resources/{resource id}`: the ARM id as the
//! rest of the path, or percent-encoded as one segment).

use super::*;

pub(super) async fn admin(shared: &Shared, method: &Method, path: &str, req: Request) -> Response {
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
        (method, ["resources", rest @ ..]) => resources(&mut st, &method, rest, &body),
        _ => no_route(),
    }
}

/// `GET resources` (every record: `[{"id", "content"}]`), and for one resource id `GET`
/// (`{"id", "content"}`, 404 when none), `PUT` (`{"content": text}` exactly as written, or
/// `{"state": value}` written as the playbooks write it; an empty text removes it) and
/// `DELETE` (204, 404 when none).
fn resources(st: &mut State, method: &Method, rest: &[&str], body: &[u8]) -> Response {
    let no_content = || StatusCode::NO_CONTENT.into_response();
    if rest.is_empty() {
        if *method != Method::GET {
            return method_not_allowed(method);
        }
        let all: Vec<Value> =
            st.resources.all().into_iter().map(|(id, content)| json!({"id": id, "content": content})).collect();
        return json_response(200, &json!(all));
    }
    let id = percent_decode(&rest.join("/"), false);
    let id = if id.starts_with('/') { id } else { format!("/{id}") };
    match *method {
        Method::GET => match st.resources.get(&id) {
            Some(content) => json_response(200, &json!({"id": id, "content": content})),
            None => not_found(),
        },
        Method::PUT => {
            let parsed = serde_json::from_slice::<Value>(body).ok();
            let text = match parsed.as_ref().map(|v| (v.get("content"), v.get("state"))) {
                Some((Some(Value::String(text)), None)) => text.clone(),
                Some((None, Some(state))) => crate::resources::state_text(state),
                _ => return detail(400, "Expected {\"content\": <text>} or {\"state\": <JSON>}."),
            };
            st.resources.set(&id, text);
            no_content()
        }
        Method::DELETE => {
            if st.resources.remove(&id) {
                no_content()
            } else {
                not_found()
            }
        }
        _ => method_not_allowed(method),
    }
}
