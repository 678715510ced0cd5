//! The launch: the prompt check (a template that does not prompt for variables would drop
//! the envelope), exactly one `POST …/{id}/launch/` (never retried, never held at the
//! throttle gate: refused while it is closed), what its answer or failure means
//! ([`launch_status_error`], [`launch_transport_error`]), and the job AAP started while
//! ignoring the extra vars, cancelled and reported as a permanent failure.

use reqwest::Method;
use serde_json::{Value, json};
use slipway_domain::JobState;
use slipway_provider::{LaunchRequest, Launched, ProviderError};

use crate::AapProvider;
use crate::envelope::extra_vars;
use crate::http::{self, Http, HttpError};
use crate::job::{JobKind, map_status};
use crate::template::Template;

/// How a launch that got no usable answer is reported.
fn launch_transport_error(e: HttpError) -> ProviderError {
    match e {
        // Not a byte was sent: certainly no job.
        HttpError::NotSent(m) => ProviderError::Transient(m),
        HttpError::Invalid(m) => ProviderError::Permanent(m),
        // Sent, answer lost or unreadable: a job may exist.
        HttpError::Unknown(m) | HttpError::BadBody(m) => ProviderError::Indeterminate(m),
        HttpError::Status { message, .. } => ProviderError::Indeterminate(message),
        // Held back by the throttle gate: not sent, a refusal.
        HttpError::Throttled { retry_after, message } => ProviderError::RateLimited { retry_after, message },
    }
}

/// How a launch answered with a non-success status is reported. `404` and refusals also
/// drop the cached template (see the caller).
fn launch_status_error(e: HttpError) -> ProviderError {
    let HttpError::Status { status, retry_after, message } = e else {
        return launch_transport_error(e);
    };
    match status {
        429 => {
            ProviderError::RateLimited { retry_after: retry_after.unwrap_or(http::DEFAULT_RATE_LIMIT_WAIT), message }
        }
        // The template is gone (deleted or recreated): look it up again next time.
        404 => ProviderError::Transient(format!("{message} (the template will be looked up again)")),
        // The server did not process the request.
        408 => ProviderError::Transient(message),
        // A 5xx may come after AAP created the job (or from a gateway that forwarded it).
        s if s >= 500 => ProviderError::Indeterminate(message),
        // 400 (prompts, survey, passwords), 401, 403, 405, other refusals, redirects.
        _ => ProviderError::Permanent(message),
    }
}

impl AapProvider {
    /// Launches the request's template once (see the module doc).
    pub(crate) async fn launch_once(&self, request: &LaunchRequest) -> Result<Launched, ProviderError> {
        let name = self.template_name(request)?;
        let t = self.launchable_template(&name).await?;
        let url = self.http.url(&format!("{}{}/launch/", t.kind.templates_path(), t.id));
        let what = Http::what(&Method::POST, &url);
        let body = json!({ "extra_vars": extra_vars(self.envelope, request) });
        // Exactly one try: a repeated POST can start a second job. Never held at the throttle
        // gate either: refused (RateLimited) while it is closed.
        let reply = match self.http.send_now(Method::POST, &url, Some(&body)).await {
            Ok(reply) => reply,
            Err(e) => {
                let err = launch_transport_error(e);
                tracing::info!(provider = %self.name, template = %name, key = %request.idempotency_key, error = %err, "AAP launch failed");
                return Err(err);
            }
        };
        if !reply.status.is_success() {
            let status = reply.status.as_u16();
            if (400..500).contains(&status) && !matches!(status, 408 | 429) {
                self.forget_template(&name);
            }
            let err = launch_status_error(self.http.status_error(&what, &reply));
            tracing::info!(provider = %self.name, template = %name, key = %request.idempotency_key, error = %err, "AAP launch failed");
            return Err(err);
        }
        let answer = reply.json(&what).map_err(launch_transport_error)?;
        let (kind, id, state) = self.launched(&t, &answer)?;
        if let Some(ignored) = answer.get("ignored_fields").filter(|v| v.as_object().is_some_and(|m| !m.is_empty())) {
            return Err(self.reject_ignored(&t, kind, id, ignored).await);
        }
        tracing::info!(provider = %self.name, template = %name, job = id, kind = kind.as_str(), key = %request.idempotency_key, "launched AAP job");
        Ok(Launched { handle: t.handle(kind, id), state, template: name })
    }

    /// A launch answer (2xx) → the job it started.
    fn launched(&self, t: &Template, body: &Value) -> Result<(JobKind, u64, JobState), ProviderError> {
        let id = body.get("id").and_then(Value::as_u64).filter(|id| *id > 0).ok_or_else(|| {
            ProviderError::Indeterminate(format!(
                "AAP accepted the launch of {:?} but its answer has no job id",
                t.name
            ))
        })?;
        // Key on `type`: a sliced job template answers with a workflow job.
        let kind = body.get("type").and_then(Value::as_str).and_then(JobKind::parse).unwrap_or(
            if body.get("workflow_job").is_some_and(|v| !v.is_null()) { JobKind::WorkflowJob } else { t.kind },
        );
        let state = body.get("status").and_then(Value::as_str).map(map_status).unwrap_or(JobState::Pending);
        Ok((kind, id, state))
    }

    /// AAP started a job but dropped the extra vars: the job runs without the resource and
    /// cannot be found by key. It is cancelled (best effort) and the launch fails.
    async fn reject_ignored(&self, t: &Template, kind: JobKind, id: u64, ignored: &Value) -> ProviderError {
        self.forget_template(&t.name);
        let fields: Vec<&str> = ignored.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
        let cancelled = match self.cancel_job(kind, id).await {
            Ok(_) => "cancelled".to_owned(),
            Err(e) => format!("NOT cancelled ({e})"),
        };
        tracing::warn!(provider = %self.name, template = %t.name, job = id, ?fields, "AAP ignored launch fields");
        ProviderError::Permanent(format!(
            "{} {:?} ignored the launch fields [{}]: enable 'Prompt on launch' for variables; AAP {} {id} was {cancelled}",
            t.kind.template_noun(),
            t.name,
            fields.join(", "),
            kind.noun()
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::AapOptions;

    #[test]
    fn launch_error_classification() {
        let st = |status, ra: Option<u64>| HttpError::Status {
            status,
            retry_after: ra.map(Duration::from_secs),
            message: format!("s{status}"),
        };
        assert_eq!(
            launch_status_error(st(429, Some(9))),
            ProviderError::RateLimited { retry_after: Duration::from_secs(9), message: "s429".into() }
        );
        assert!(
            matches!(launch_status_error(st(404, None)), ProviderError::Transient(m) if m.contains("looked up again"))
        );
        assert!(matches!(launch_status_error(st(408, None)), ProviderError::Transient(_)));
        for s in [400, 401, 403, 405, 409, 302] {
            assert!(matches!(launch_status_error(st(s, None)), ProviderError::Permanent(_)), "{s}");
        }
        for s in [500, 502, 503, 504] {
            assert!(matches!(launch_status_error(st(s, None)), ProviderError::Indeterminate(_)), "{s}");
        }
        assert!(matches!(launch_transport_error(HttpError::NotSent("c".into())), ProviderError::Transient(_)));
        assert!(matches!(launch_transport_error(HttpError::Unknown("t".into())), ProviderError::Indeterminate(_)));
        assert!(matches!(launch_transport_error(HttpError::BadBody("b".into())), ProviderError::Indeterminate(_)));
        assert!(matches!(launch_transport_error(HttpError::Invalid("i".into())), ProviderError::Permanent(_)));
        // Held back at the throttle gate: certainly not sent, a refusal with the time left.
        let held = HttpError::Throttled { retry_after: Duration::from_millis(1500), message: "held".into() };
        assert_eq!(
            launch_transport_error(held),
            ProviderError::RateLimited { retry_after: Duration::from_millis(1500), message: "held".into() }
        );
    }

    #[test]
    fn launch_answers() {
        let p = AapProvider::new(AapOptions { base_url: "http://127.0.0.1:1".into(), ..Default::default() }).unwrap();
        let t = Template { id: 3, kind: JobKind::Job, name: "jt".into(), prompts_for_variables: true };
        assert_eq!(
            p.launched(&t, &json!({"id": 12, "type": "job", "job": 12, "status": "pending"})).unwrap(),
            (JobKind::Job, 12, JobState::Pending)
        );
        // A sliced job template answers with a workflow job.
        assert_eq!(
            p.launched(&t, &json!({"id": 13, "type": "workflow_job", "workflow_job": 13, "status": "new"})).unwrap(),
            (JobKind::WorkflowJob, 13, JobState::Unknown)
        );
        assert_eq!(
            p.launched(&t, &json!({"id": 14, "workflow_job": 14})).unwrap(),
            (JobKind::WorkflowJob, 14, JobState::Pending)
        );
        assert_eq!(p.launched(&t, &json!({"id": 15})).unwrap().0, JobKind::Job);
        assert!(matches!(p.launched(&t, &json!({"job": 12})), Err(ProviderError::Indeterminate(_))));
    }
}
