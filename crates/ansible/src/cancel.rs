//! Cancelling a job: SIGTERM to the runner and ansible-playbook now, then SIGKILL to whatever
//! of the job is left after the grace period, in an escalation task `shutdown` waits for; or,
//! for a forced cancel, SIGKILL to every process of the job at once.

use std::sync::Arc;
use std::time::Duration;

use slipway_provider::{CancelOutcome, JobHandle, ProviderError};

use crate::{Inner, blocking, jobdir, lock, terminate};

/// How often a pending cancellation checks whether the job is gone.
const CANCEL_POLL: Duration = Duration::from_millis(200);

/// Asks the job to stop: SIGTERM now, SIGKILL to what is left once `cancel_grace` has passed.
pub(crate) async fn cancel(inner: &Arc<Inner>, handle: &JobHandle) -> Result<CancelOutcome, ProviderError> {
    let inner = inner.clone();
    let (name, job) = inner.job_for_handle(handle)?;
    let requested = {
        let (inner, name, job) = (inner.clone(), name.clone(), job.clone());
        blocking(move || -> Result<_, ProviderError> {
            if !job.exists() {
                return Err(ProviderError::NotFound(format!("ansible job dir {} does not exist", job.dir.display())));
            }
            let obs = inner.observe(&name, &job);
            let Some(runner) = obs.runner.filter(|_| !obs.status.state.is_terminal()) else {
                return Ok(None);
            };
            if let Err(e) = jobdir::create_private(&job.cancel_marker()) {
                tracing::warn!(job = %name, error = %e, "cannot record the cancel request");
            }
            if !lock(&inner.cancelling).insert(name.clone()) {
                // Already signalled; its escalation is pending.
                return Ok(Some(None));
            }
            tracing::info!(job = %name, pid = runner.pid, "cancelling ansible job");
            let collected = terminate::request_cancel(&job, runner);
            Ok(Some(Some((runner, collected))))
        })
        .await??
    };
    let (runner, collected) = match requested {
        None => return Ok(CancelOutcome::AlreadyFinished),
        Some(None) => return Ok(CancelOutcome::Requested),
        Some(Some(plan)) => plan,
    };

    let grace = inner.cancel_grace;
    let task_inner = inner.clone();
    let escalation = async move {
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let now = tokio::time::Instant::now();
            tokio::time::sleep(CANCEL_POLL.min(deadline.saturating_duration_since(now))).await;
            let (job2, known) = (job.clone(), collected.clone());
            let left =
                blocking(move || terminate::remaining(&job2, Some(runner), &known)).await.map(|s| s.len()).unwrap_or(1);
            if left == 0 {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                let (job2, known) = (job.clone(), collected.clone());
                let _ = blocking(move || terminate::kill_all(&job2, Some(runner), &known)).await;
                break;
            }
        }
        lock(&task_inner.cancelling).remove(&name);
    };
    let mut tasks = lock(&inner.escalations);
    while tasks.try_join_next().is_some() {}
    tasks.spawn(escalation);
    Ok(CancelOutcome::Requested)
}

/// Kills every process of the job at once (a forced cancel); the next status reads it
/// `Canceled` (dead, no result, and the cancel marker written first).
pub(crate) async fn kill(inner: &Arc<Inner>, handle: &JobHandle) -> Result<CancelOutcome, ProviderError> {
    let inner = inner.clone();
    let (name, job) = inner.job_for_handle(handle)?;
    blocking(move || {
        if !job.exists() {
            return Err(ProviderError::NotFound(format!("ansible job dir {} does not exist", job.dir.display())));
        }
        let obs = inner.observe(&name, &job);
        let Some(runner) = obs.runner.filter(|_| !obs.status.state.is_terminal()) else {
            return Ok(CancelOutcome::AlreadyFinished);
        };
        if let Err(e) = jobdir::create_private(&job.cancel_marker()) {
            tracing::warn!(job = %name, error = %e, "cannot record the cancel request");
        }
        tracing::warn!(job = %name, pid = runner.pid, "killing ansible job at once (forced cancel)");
        terminate::kill_all(&job, Some(runner), &terminate::job_processes(&job, Some(runner)));
        Ok(CancelOutcome::Requested)
    })
    .await?
}
