//! The log lines an operator reads: one `info` line per operation state change and per job
//! end (with its failure), each carrying the resource, operation and job as fields. Taken
//! from the state a worker step read and the state it committed.

use slipway_domain::resource::Snapshot;
use slipway_domain::{JobState, ProvisioningState, Timestamp};

/// What a step started from, kept cheap (it is taken on every engine step): its operations'
/// statuses by position (a step never removes or reorders operations) and its jobs' states by
/// trigger time (unique within a resource's history).
#[derive(Debug, Default)]
pub(crate) struct Before {
    operations: Vec<ProvisioningState>,
    jobs: Vec<(Timestamp, JobState)>,
    drift_checked: Option<Timestamp>,
}

impl Before {
    pub fn of(snap: &Snapshot) -> Before {
        Before {
            operations: snap.operations.iter().map(|o| o.status).collect(),
            jobs: snap.resource.iter().flat_map(|r| r.jobs.iter().map(|j| (j.timestamp, j.state))).collect(),
            drift_checked: snap.resource.as_ref().and_then(|r| r.drift.as_ref()).map(|d| d.last_checked_at),
        }
    }

    /// Logs what changed between this and the committed `after`, and counts the jobs that ended.
    pub fn log_changes(&self, resource: &str, after: &Snapshot, metrics: &slipway_metrics::EngineMetrics) {
        for (op, was) in after.operations.iter().zip(&self.operations) {
            if *was != op.status {
                let error = op.error.as_ref().map(|e| format!("{}: {}", e.code, e.message)).unwrap_or_default();
                tracing::info!(resource, operation = %op.id, request = ?op.request, from = %was,
                    status = %op.status, error = %error, "operation status changed");
            }
        }
        let Some(res) = after.resource.as_ref() else { return };
        if let Some(drift) = res.drift.as_ref().filter(|d| Some(d.last_checked_at) != self.drift_checked) {
            let labels = slipway_metrics::DriftCheckLabels {
                r#type: res.id.type_key().to_string(),
                result: drift.state.as_str().into(),
            };
            metrics.drift_checks.get_or_create(&labels).inc();
            tracing::info!(resource, result = drift.state.as_str(), changed_tasks = drift.changes.len(),
                message = %drift.message, "drift checked");
        }
        for job in &res.jobs {
            let was = self.jobs.iter().find(|(t, _)| *t == job.timestamp).map(|(_, s)| *s);
            if was.is_some_and(|w| !w.is_terminal()) && job.state.is_terminal() {
                let operation = job.operation_id.as_ref().map(|o| o.to_string()).unwrap_or_default();
                let labels = slipway_metrics::JobEndLabels {
                    provider: job.provider.to_string(),
                    r#type: job.job_type.as_str().into(),
                    state: job.state.as_str().into(),
                };
                metrics.jobs_ended.get_or_create(&labels).inc();
                let details = if job.state == JobState::Succeeded { String::new() } else { job.message_with_details() };
                tracing::info!(resource, operation = %operation, job = %job.job_id_text(), key = %job.idempotency_key,
                    provider = %job.provider, template = %job.template, r#type = ?job.job_type, state = job.state.as_str(),
                    failure = %details, "job ended");
            }
        }
    }
}
