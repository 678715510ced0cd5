//! The log lines an operator reads: one `info` line per operation state change and per job
//! end (with its failure), each carrying the resource, operation and job as fields. Taken
//! from the state a worker step read and the state it committed.

use slipway_domain::resource::Snapshot;
use slipway_domain::{JobState, OperationId, ProvisioningState};

/// What a step started from: its operations' statuses and its jobs' states.
#[derive(Debug, Default)]
pub(crate) struct Before {
    operations: Vec<(OperationId, ProvisioningState)>,
    jobs: Vec<(String, JobState)>,
}

impl Before {
    pub fn of(snap: &Snapshot) -> Before {
        Before {
            operations: snap.operations.iter().map(|o| (o.id.clone(), o.status)).collect(),
            jobs: snap
                .resource
                .iter()
                .flat_map(|r| r.jobs.iter().map(|j| (j.idempotency_key.clone(), j.state)))
                .collect(),
        }
    }

    /// Logs what changed between this and the committed `after`.
    pub fn log_changes(&self, resource: &str, after: &Snapshot) {
        for op in &after.operations {
            let was = self.operations.iter().find(|(id, _)| id == &op.id).map(|(_, s)| *s);
            if was.is_some_and(|w| w != op.status) {
                let error = op.error.as_ref().map(|e| format!("{}: {}", e.code, e.message)).unwrap_or_default();
                tracing::info!(resource, operation = %op.id, request = ?op.request, from = ?was.unwrap_or(op.status),
                    status = %op.status, error = %error, "operation status changed");
            }
        }
        let Some(res) = after.resource.as_ref() else { return };
        for job in &res.jobs {
            let was = self.jobs.iter().find(|(k, _)| k == &job.idempotency_key).map(|(_, s)| *s);
            if was.is_some_and(|w| !w.is_terminal()) && job.state.is_terminal() {
                let operation = job.operation_id.as_ref().map(|o| o.to_string()).unwrap_or_default();
                let details = if job.state == JobState::Succeeded { String::new() } else { job.message_with_details() };
                tracing::info!(resource, operation = %operation, job = %job.job_id, key = %job.idempotency_key,
                    provider = %job.provider, template = %job.template, r#type = ?job.job_type, state = job.state.as_str(),
                    failure = %details, "job ended");
            }
        }
    }
}
