//! The launch: the prompt check (a template that does not prompt for variables would drop
//! the envelope), exactly one `POST …/{id}/launch/` (never retried, never held at the
//! throttle gate: refused while it is closed), what its answer or failure means
//! ([`launch_status_error`], [`launch_transport_error`]), and the job AAP started while
//! ignoring the extra vars, cancelled and reported as a permanent failure.
//!
//! Check mode (`LaunchRequest::check_mode`): AAP ignores a `job_type` the template does not
//! prompt for and runs the job as `run` — it would change what it was only to predict. So
//! the launch is refused unsent (`Unsupported`) unless the resolved template is a job
//! template that prompts for its job type (a workflow has no job type; a sliced job template
//! starts a workflow of slices); it then sends `"job_type": "check"`, and `"diff_mode": true`
//! when the template prompts for diff mode (else the job reports changes without diffs). A
//! launch answer saying the job type was ignored all the same (the template changed since it
//! was resolved) means a `run` job started: it is cancelled and the launch fails (see
//! [`AapProvider::reject_run_mode`]).

use reqwest::Method;
use serde_json::{Value, json};
use slipway_domain::JobState;
use slipway_provider::{LaunchRequest, Launched, ProviderError};

use crate::AapProvider;
use crate::envelope::extra_vars;
use crate::http::{self, Http, HttpError};
use crate::job::{JobKind, map_status, runs_in_check_mode};
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
        let check = request.is_check();
        if check {
            self.check_mode_launchable(&t)?;
        }
        let url = self.http.url(&format!("{}{}/launch/", t.kind.templates_path(), t.id));
        let what = Http::what(&Method::POST, &url);
        let mut body = json!({ "extra_vars": extra_vars(self.envelope, request) });
        if check {
            body["job_type"] = json!("check");
            if t.prompts_for_diff_mode {
                body["diff_mode"] = json!(true);
            }
        }
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
        let mut ignored: Vec<&str> = answer
            .get("ignored_fields")
            .and_then(Value::as_object)
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        if check {
            // Ignored, or not reported ignored but started as `run` all the same.
            let ran_as_run =
                answer.get("job_type").and_then(Value::as_str).is_some_and(|_| !runs_in_check_mode(&answer));
            if ignored.contains(&"job_type") || ran_as_run {
                return Err(self.reject_run_mode(&t, kind, id).await);
            }
            if ignored.contains(&"diff_mode") {
                // Still a check job: it reports its changed tasks, only without their diffs.
                self.forget_template(&t.name);
                tracing::warn!(provider = %self.name, template = %name, job = id, "AAP ignored diff_mode: the check job reports no diffs");
                ignored.retain(|f| *f != "diff_mode");
            }
        }
        if !ignored.is_empty() {
            return Err(self.reject_ignored(&t, kind, id, &ignored).await);
        }
        tracing::info!(provider = %self.name, template = %name, job = id, kind = kind.as_str(), check, key = %request.idempotency_key, "launched AAP job");
        Ok(Launched { handle: t.handle(kind, id, check), state, template: name })
    }

    /// Whether `t` can run a check-mode job (see the module doc); refused unsent otherwise.
    /// A template refused for what it does not prompt for is not kept cached: fixing it in AAP
    /// takes effect on the next attempt.
    fn check_mode_launchable(&self, t: &Template) -> Result<(), ProviderError> {
        let name = &t.name;
        let why = if t.kind == JobKind::WorkflowJob {
            format!(
                "the workflow job template '{name}' cannot run in check mode: AAP runs only job templates in check mode (a workflow has no job type)"
            )
        } else if !t.prompts_for_job_type {
            self.forget_template(name);
            format!(
                "the job template '{name}' does not prompt for its job type on launch: turn on 'Prompt on launch' for Job Type (ask_job_type_on_launch) to run it in check mode"
            )
        } else if t.sliced {
            self.forget_template(name);
            format!(
                "the job template '{name}' is sliced (job_slice_count above 1): its launch starts a workflow of slices, whose changes cannot be read; set job_slice_count to 1 to run it in check mode"
            )
        } else {
            return Ok(());
        };
        tracing::info!(provider = %self.name, template = %name, reason = %why, "AAP check-mode launch refused");
        Err(ProviderError::Unsupported(why))
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
    async fn reject_ignored(&self, t: &Template, kind: JobKind, id: u64, fields: &[&str]) -> ProviderError {
        self.forget_template(&t.name);
        let cancelled = self.cancel_started(kind, id).await;
        tracing::warn!(provider = %self.name, template = %t.name, job = id, ?fields, "AAP ignored launch fields");
        ProviderError::Permanent(format!(
            "{} {:?} ignored the launch fields [{}]: enable 'Prompt on launch' for variables; AAP {} {id} was {cancelled}",
            t.kind.template_noun(),
            t.name,
            fields.join(", "),
            kind.noun()
        ))
    }

    /// A check-mode launch whose job AAP started in `run` mode (it ignored `job_type`: the
    /// template stopped prompting for it after it was resolved). That job changes what it
    /// was only to predict, so it is cancelled at once (best effort) and logged as an error.
    /// The launch fails `Permanent`, not `Unsupported`: a job did start, and may have changed
    /// something before its cancel took effect; the message says so. It is not returned as
    /// launched: tracked as the check job, its end would read as a prediction, which it is
    /// not.
    async fn reject_run_mode(&self, t: &Template, kind: JobKind, id: u64) -> ProviderError {
        self.forget_template(&t.name);
        let cancelled = self.cancel_started(kind, id).await;
        tracing::error!(provider = %self.name, template = %t.name, job = id, %cancelled, "AAP started a check-mode launch in run mode (job_type ignored)");
        ProviderError::Permanent(format!(
            "the {} '{}' ignored job_type \"check\" (it does not prompt for its job type on launch: turn on 'Prompt on launch' for Job Type (ask_job_type_on_launch)): AAP {} {id} started in run mode and was {cancelled}; it may have changed something before that",
            t.kind.template_noun(),
            t.name,
            kind.noun()
        ))
    }

    /// Cancels a job a launch should not have started: `cancelled`, or `NOT cancelled (why)`.
    async fn cancel_started(&self, kind: JobKind, id: u64) -> String {
        match self.cancel_job(kind, id).await {
            Ok(_) => "cancelled".to_owned(),
            Err(e) => format!("NOT cancelled ({e})"),
        }
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
        let t = Template::new(3, JobKind::Job, "jt", true);
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
