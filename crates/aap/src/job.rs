//! What an AAP job is to this provider: its kind (job or workflow job, and so its endpoints),
//! AAP's status words as job states, the handle kept for it, and its cancel request.

use reqwest::Method;
use serde_json::{Value, json};
use slipway_domain::JobState;
use slipway_provider::{CancelOutcome, JobHandle, JobOutput, OUTPUT_CHUNK_BYTES, ProviderError};

use crate::AapProvider;
use crate::http::{Http, HttpError};

/// Which AAP object a job is, and so which endpoints serve it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobKind {
    Job,
    WorkflowJob,
}

impl JobKind {
    /// The `type` AAP gives the job, as stored in the handle's `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Job => "job",
            JobKind::WorkflowJob => "workflow_job",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "job" => Some(JobKind::Job),
            "workflow_job" => Some(JobKind::WorkflowJob),
            _ => None,
        }
    }

    pub(crate) fn jobs_path(self) -> &'static str {
        match self {
            JobKind::Job => "v2/jobs/",
            JobKind::WorkflowJob => "v2/workflow_jobs/",
        }
    }

    pub(crate) fn templates_path(self) -> &'static str {
        match self {
            JobKind::Job => "v2/job_templates/",
            JobKind::WorkflowJob => "v2/workflow_job_templates/",
        }
    }

    /// The jobs-list filter naming the template a job came from.
    pub(crate) fn template_filter(self) -> &'static str {
        match self {
            JobKind::Job => "job_template",
            JobKind::WorkflowJob => "workflow_job_template",
        }
    }

    pub(crate) fn noun(self) -> &'static str {
        match self {
            JobKind::Job => "job",
            JobKind::WorkflowJob => "workflow job",
        }
    }

    pub(crate) fn template_noun(self) -> &'static str {
        match self {
            JobKind::Job => "job template",
            JobKind::WorkflowJob => "workflow job template",
        }
    }
}

/// AAP job `status` → job state (docs/providers.md#status): unknown words (and `new`) keep polling.
pub fn map_status(word: &str) -> JobState {
    match word {
        "successful" => JobState::Succeeded,
        "failed" | "error" => JobState::Failed,
        "canceled" => JobState::Canceled,
        "pending" => JobState::Pending,
        "waiting" => JobState::Waiting,
        "running" => JobState::Running,
        _ => JobState::Unknown,
    }
}

/// The handle of AAP job `id` of `kind`, started from template `template` (`template_id`, when
/// known): what [`parse_handle`] reads back. Launch, `find` and listing all build it here, so
/// a job found or listed again carries the handle its launch gave it. A job that runs in
/// check mode (`job_type: check`) carries `"check": true` ([`is_check`]); others carry no
/// `check` key.
pub(crate) fn job_handle(kind: JobKind, id: u64, template_id: Option<u64>, template: &str, check: bool) -> JobHandle {
    let mut data = json!({ "kind": kind.as_str(), "template_id": template_id, "template": template });
    if check {
        data["check"] = Value::Bool(true);
    }
    JobHandle { job_id: id.to_string().into(), data }
}

/// Whether a handle is a check-mode job's (`"check": true`): its status, once it ended, carries
/// the tasks it would have changed.
pub fn is_check(h: &JobHandle) -> bool {
    h.data.get("check").and_then(Value::as_bool) == Some(true)
}

/// Whether an AWX job row (list or detail, launch answer) runs in check mode.
pub(crate) fn runs_in_check_mode(row: &Value) -> bool {
    row.get("job_type").and_then(Value::as_str) == Some("check")
}

/// The job kind and numeric id a handle refers to.
pub fn parse_handle(h: &JobHandle) -> Result<(JobKind, u64), ProviderError> {
    let id = Some(h.job_id.as_str())
        .filter(|s| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|id| *id > 0)
        .ok_or_else(|| ProviderError::Permanent(format!("invalid AAP job id {:?}", h.job_id)))?;
    let kind = match h.data.get("kind") {
        Some(Value::String(k)) => JobKind::parse(k),
        _ => None,
    }
    .ok_or_else(|| {
        ProviderError::Permanent(format!(
            "AAP job {id} has an unknown kind {} (want job or workflow_job)",
            h.data["kind"]
        ))
    })?;
    Ok((kind, id))
}

impl AapProvider {
    /// `POST …/{id}/cancel/`: 202 = requested (keep polling), 405 = already over.
    pub(crate) async fn cancel_job(&self, kind: JobKind, id: u64) -> Result<CancelOutcome, ProviderError> {
        let url = self.http.url(&format!("{}{id}/cancel/", kind.jobs_path()));
        let what = Http::what(&Method::POST, &url);
        // `{}` as the awx.awx collection sends: some proxies refuse a POST without a length.
        let reply =
            self.http.send_idempotent(Method::POST, &url, Some(&json!({}))).await.map_err(HttpError::into_provider)?;
        match reply.status.as_u16() {
            200..=299 => Ok(CancelOutcome::Requested),
            405 => Ok(CancelOutcome::AlreadyFinished),
            404 => Err(ProviderError::NotFound(format!("AAP {} {id} does not exist", kind.noun()))),
            _ => Err(self.http.status_error(&what, &reply).into_provider()),
        }
    }

    /// `GET jobs/{id}/stdout/?format=txt_download` (the whole text, which AWX builds from
    /// the job's events so far), from byte `offset` on. A workflow job prints nothing itself:
    /// its output is in its nodes' jobs, which the answer says.
    pub(crate) async fn job_output(&self, kind: JobKind, id: u64, offset: u64) -> Result<JobOutput, ProviderError> {
        if kind == JobKind::WorkflowJob {
            let note = format!("AAP workflow job {id} has no output of its own: see the jobs of its nodes.\n");
            let from = (offset as usize).min(note.len());
            return Ok(JobOutput::of(&note.as_bytes()[from..], from as u64, false));
        }
        let url = self.http.url(&format!("v2/jobs/{id}/stdout/?format=txt_download"));
        let what = Http::what(&Method::GET, &url);
        let reply = self.http.send_idempotent(Method::GET, &url, None).await.map_err(HttpError::into_provider)?;
        match reply.status.as_u16() {
            200..=299 => {
                let from = (offset as usize).min(reply.body.len());
                let to = (from + OUTPUT_CHUNK_BYTES).min(reply.body.len());
                Ok(JobOutput::of(&reply.body[from..to], from as u64, to < reply.body.len()))
            }
            404 => Err(ProviderError::NotFound(format!("AAP job {id} is no longer in the controller"))),
            _ => Err(self.http.status_error(&what, &reply).into_provider()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_mapping() {
        // The table in docs/providers.md#status.
        for (word, state) in [
            ("successful", JobState::Succeeded),
            ("failed", JobState::Failed),
            ("error", JobState::Failed),
            ("canceled", JobState::Canceled),
            ("pending", JobState::Pending),
            ("waiting", JobState::Waiting),
            ("running", JobState::Running),
            ("new", JobState::Unknown),
            ("unknown_status", JobState::Unknown),
            ("", JobState::Unknown),
            ("Successful", JobState::Unknown),
        ] {
            assert_eq!(map_status(word), state, "{word}");
        }
    }

    #[test]
    fn handles() {
        let h = |id: &str, data: Value| JobHandle { job_id: id.into(), data };
        assert_eq!(parse_handle(&h("42", json!({"kind": "job"}))).unwrap(), (JobKind::Job, 42));
        assert_eq!(parse_handle(&h("7", json!({"kind": "workflow_job"}))).unwrap(), (JobKind::WorkflowJob, 7));
        for (id, data) in [
            ("42", json!({"kind": "project_update"})),
            ("42", json!({})),
            ("42", json!(null)),
            ("42", json!({"kind": 1})),
            ("0", json!({"kind": "job"})),
            ("-1", json!({"kind": "job"})),
            ("+1", json!({"kind": "job"})),
            ("1 ", json!({"kind": "job"})),
            ("abc", json!({"kind": "job"})),
            ("", json!({"kind": "job"})),
            ("99999999999999999999999", json!({"kind": "job"})),
            ("../1", json!({"kind": "job"})),
        ] {
            assert!(matches!(parse_handle(&h(id, data.clone())), Err(ProviderError::Permanent(_))), "{id} {data}");
        }
    }
}
