//! The job and workflow job endpoints: lists with AWX's filters, detail, cancel.

use super::*;

/// The jobs a list may show, cheaply narrowed by plain `id` / `id__in` filters first so batch
/// polls stay O(ids) however many jobs exist (the generic filter still runs afterwards).
pub(super) fn candidate_jobs<'a>(st: &'a State, query: &str, keep: impl Fn(&Job) -> bool) -> Vec<&'a Job> {
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

pub(super) fn jobs(ctx: &Ctx, st: &mut State, kind: Kind, rest: &[&str]) -> Response {
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
        return if rest.len() == 1 || matches!(rest[1..], ["cancel"] | ["job_events"] | ["stdout"]) {
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
        ["stdout"] if kind == Kind::Job => {
            if !ctx.is(&Method::GET) {
                return method_not_allowed(&ctx.method);
            }
            stdout(&st.job_stdout(&st.jobs[&id]), &ctx.query)
        }
        _ => no_route(),
    }
}

/// `GET jobs/{id}/stdout/?format=…`: AWX's text formats as `text/plain` (`ansi` keeps colour
/// codes, which the simulator never writes), `json` (the default here, as for an API client
/// that asks for JSON) as `{"range": …, "content": …}`.
fn stdout(text: &str, query: &str) -> Response {
    let format = crate::util::parse_query(query)
        .into_iter()
        .find(|(k, _)| k == "format")
        .map(|(_, v)| v)
        .unwrap_or_else(|| "json".into());
    match format.as_str() {
        "txt" | "ansi" | "txt_download" | "ansi_download" => {
            let mut resp = Response::new(Body::from(text.to_string()));
            resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
            resp
        }
        "json" => {
            let lines = text.lines().count();
            json_response(200, &json!({"range": {"start": 0, "end": lines, "absolute_end": lines}, "content": text}))
        }
        other => detail(400, &format!("Unsupported stdout format: {other}")),
    }
}

// ---------------------------------------------------------------------------------------------
// Admin endpoints (`/_sim/`): the Rust handle over HTTP, for tests that run the binary. Not
// counted and never faulted.
