//! What a check-mode job would have changed ([`JobStatus::changes`]), read once the job ended:
//! first its detail, for `event_processing_finished` — AWX marks a job finished when its
//! playbook ends, while its events still arrive through a queue, so events read before that
//! could miss a change and predict "nothing" —, then
//! `GET jobs/{id}/job_events/?event=runner_on_ok&changed=true&order_by=counter&page_size=…`,
//! following `next` until [`MAX_TASK_CHANGES`], each event read by [`TaskChange::from_event`].
//! Read once per job and remembered; only terminal check jobs cost these reads.
//!
//! [`JobStatus::changes`]: slipway_provider::JobStatus::changes

use serde_json::Value;
use slipway_provider::{MAX_TASK_CHANGES, ProviderError, TaskChange};

use crate::http::HttpError;
use crate::job::JobKind;
use crate::{AapProvider, append, lock};

/// What the changed-tasks query reads of an event.
#[derive(Debug, serde::Deserialize)]
struct EventRow {
    #[serde(default)]
    event: String,
    #[serde(default)]
    event_data: Value,
}

impl AapProvider {
    /// The changed tasks of the ended check-mode job `id`: `Ok(None)` while AAP is still
    /// saving its events (ask again later).
    pub(crate) async fn check_changes(&self, kind: JobKind, id: u64) -> Result<Option<Vec<TaskChange>>, ProviderError> {
        if let Some(changes) = lock(&self.changes).get(&(kind, id)) {
            return Ok(Some(changes.clone()));
        }
        if kind != JobKind::Job {
            // Only a sliced job template's slices (found standing for their workflow job) get
            // here: a launch refuses them in check mode.
            return Err(ProviderError::Permanent(format!(
                "AAP workflow job {id} ran in check mode: its changes are in the jobs of its slices, which this provider does not read"
            )));
        }
        let context = |e: HttpError, what: &str| {
            let mut err = e.into_provider();
            append(&mut err, &format!(" while reading {what} of check-mode job {id}"));
            err
        };
        let detail: Value = self
            .http
            .get_json(&self.http.url(&format!("v2/jobs/{id}/")))
            .await
            .map_err(|e| context(e, "the detail"))?;
        if detail.get("event_processing_finished").and_then(Value::as_bool) == Some(false) {
            return Ok(None);
        }
        let mut url = self.http.url(&format!("v2/jobs/{id}/job_events/"));
        url.query_pairs_mut()
            .append_pair("event", "runner_on_ok")
            .append_pair("changed", "true")
            .append_pair("order_by", "counter")
            .append_pair("page_size", &self.page_size);
        let mut changes = Vec::new();
        self.http
            .walk(url, |row: EventRow| {
                changes.extend(TaskChange::from_event(&row.event, &row.event_data));
                changes.len() >= MAX_TASK_CHANGES
            })
            .await
            .map_err(|e| context(e, "the changed tasks"))?;
        lock(&self.changes).insert((kind, id), changes.clone());
        Ok(Some(changes))
    }
}
