//! `find`: every job of an idempotency key, oldest first, from the template's job list
//! (newest first, bounded by the intent time and the configured window), matched by the
//! `slipway_idempotency_key` extra var; a job with `job_type: check` gets a check handle. An empty answer comes only after the whole list (or the
//! window) was read without error.

use std::time::Duration;

use serde_json::Value;
use slipway_domain::JobState;
use slipway_provider::{LaunchRequest, Launched, ProviderError};

use crate::envelope::key_of;
use crate::job::{JobKind, map_status, parse_handle, runs_in_check_mode};
use crate::{AapProvider, append};

/// How far AAP's clock may be behind Slipway's when `find` bounds its search by the intent
/// time: a job created in that margin before the intent is still listed.
const FIND_CLOCK_SKEW: Duration = Duration::from_secs(600);

/// The job a `find` adopts from a list row: `(kind, id, state)`.
///
/// A sliced job template's launch answers with a workflow job whose slices are jobs of the
/// template carrying the same extra vars; a slice (`launch_type: workflow`) stands for its
/// workflow job (`summary_fields.source_workflow_job`), which is what a launch would have
/// returned.
pub(crate) fn found_job(row: &Value, listed: JobKind) -> Option<(JobKind, u64, JobState)> {
    let word = |v: &Value| map_status(v.get("status").and_then(Value::as_str).unwrap_or(""));
    if listed == JobKind::Job && row.get("launch_type").and_then(Value::as_str) == Some("workflow") {
        let parent = row.pointer("/summary_fields/source_workflow_job");
        if let Some(id) = parent.and_then(|p| p.get("id")).and_then(Value::as_u64).filter(|id| *id > 0) {
            return Some((JobKind::WorkflowJob, id, parent.map(word).unwrap_or(JobState::Unknown)));
        }
    }
    let id = row.get("id").and_then(Value::as_u64).filter(|id| *id > 0)?;
    let kind = row.get("type").and_then(Value::as_str).and_then(JobKind::parse).unwrap_or(listed);
    Some((kind, id, word(row)))
}

impl AapProvider {
    /// Every job of the request's idempotency key, oldest first (see the module doc).
    pub(crate) async fn find_by_key(&self, request: &LaunchRequest) -> Result<Vec<Launched>, ProviderError> {
        let name = self.template_name(request)?;
        // Always fresh: a cached id of a recreated template would list no jobs and wrongly
        // prove absence.
        self.forget_template(&name);
        let t = self.resolve(&name).await?;
        let mut url = self.http.url(t.kind.jobs_path());
        {
            let mut q = url.query_pairs_mut();
            q.append_pair(t.kind.template_filter(), &t.id.to_string());
            q.append_pair("order_by", "-id");
            q.append_pair("page_size", &self.page_size);
            // No job of the key is older than its intent (allowing for clock skew between
            // Slipway and AAP), nor than the configured window.
            let window = self.find_window.map(|w| self.clock.now().sub(w));
            let intent = request.intended_at.map(|t| t.sub(FIND_CLOCK_SKEW));
            if let Some(since) = window.into_iter().chain(intent).max() {
                q.append_pair("created__gt", &since.to_rfc3339());
            }
        }
        let key = request.idempotency_key.as_str();
        // The whole list: a launch request processed twice leaves two jobs with the key.
        let mut found = Vec::new();
        self.http
            .walk(url, |row: Value| {
                if row.get("extra_vars").and_then(key_of).is_some_and(|k| k == key) {
                    found.push(row);
                }
                false
            })
            .await
            .map_err(|e| {
                let mut err = e.into_provider();
                append(&mut err, &format!(" while looking for the job of key {key:?}"));
                err
            })?;
        if found.is_empty() {
            tracing::info!(provider = %self.name, template = %name, key, "no AAP job for the key");
        }
        let mut jobs: Vec<Launched> = Vec::with_capacity(found.len());
        // Listed newest first; answered oldest first. A job created while the list is read
        // shifts the pages, so a row can be listed twice: each job counts once.
        for row in found.iter().rev() {
            let (kind, id, state) = found_job(row, t.kind).ok_or_else(|| {
                ProviderError::Indeterminate(format!("AAP listed a job for key {key:?} without a numeric id"))
            })?;
            if jobs.iter().any(|j| parse_handle(&j.handle).is_ok_and(|listed| listed == (kind, id))) {
                continue;
            }
            tracing::info!(provider = %self.name, template = %name, job = id, key, "found an AAP job for the key");
            // A check-mode job is known as one from its own row, as its launch would have
            // made its handle: its status then reads its changes.
            jobs.push(Launched { handle: t.handle(kind, id, runs_in_check_mode(row)), state, template: name.clone() });
        }
        Ok(jobs)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn found_jobs() {
        let row = json!({"id": 40, "type": "job", "status": "running", "launch_type": "manual"});
        assert_eq!(found_job(&row, JobKind::Job), Some((JobKind::Job, 40, JobState::Running)));
        let wf = json!({"id": 41, "type": "workflow_job", "status": "pending"});
        assert_eq!(found_job(&wf, JobKind::WorkflowJob), Some((JobKind::WorkflowJob, 41, JobState::Pending)));
        // A slice of a sliced job template stands for its workflow job.
        let slice = json!({"id": 43, "type": "job", "status": "running", "launch_type": "workflow",
            "summary_fields": {"source_workflow_job": {"id": 42, "name": "jt", "status": "running"}}});
        assert_eq!(found_job(&slice, JobKind::Job), Some((JobKind::WorkflowJob, 42, JobState::Running)));
        // Without the parent reference the slice itself is all there is.
        let bare = json!({"id": 43, "type": "job", "status": "failed", "launch_type": "workflow"});
        assert_eq!(found_job(&bare, JobKind::Job), Some((JobKind::Job, 43, JobState::Failed)));
        assert_eq!(found_job(&json!({"status": "running"}), JobKind::Job), None);
    }
}
