//! The check that a [`PollWait`] answers as `decide` and `apply` on the whole snapshot
//! would, run by the simulation at every step.

use std::time::Duration;

use slipway_domain::reconcile::{Effect, FailureKind, PollWait, apply, decide};
use slipway_domain::resource::Snapshot;
use slipway_domain::{JobState, Timestamp, TypePolicy};

use super::{failed, observed, secs};

/// Where the engine would keep only a poll wait of `snap`: the poll is the next step at any
/// time before the wait's `until`, and an outcome is absorbed exactly when recording it
/// changes nothing and asks to wait. `Ok(false)` when there is no wait to check.
pub fn check(snap: &Snapshot, policy: &TypePolicy, now: Timestamp) -> Result<bool, String> {
    let Some(wait) = PollWait::of(snap, policy, now) else { return Ok(false) };
    let poll = Effect::Poll { key: wait.key().clone() };
    let mut times = vec![now, now.add(policy.poll_interval), now.add(secs(300))];
    times.retain(|t| wait.holds_at(*t));
    let job = wait.job();
    let failure_text = job.message.strip_prefix("Failed to get job status: ").unwrap_or("x").to_string();
    let outcomes = [
        observed(job.state, &job.message, &job.error_details),
        observed(job.state, "something else", &job.error_details),
        observed(JobState::Succeeded, "successful", ""),
        observed(JobState::Failed, "failed", "boom"),
        failed(FailureKind::Transient, &failure_text),
        failed(FailureKind::Transient, "the controller is down"),
        failed(FailureKind::RateLimited { retry_after: Duration::from_secs(5) }, &failure_text),
        failed(FailureKind::NotFound, "gone"),
    ];
    for t in times {
        let mut copy = snap.clone();
        let effect = decide(&mut copy, policy, t);
        if effect != poll || copy != *snap {
            return Err(format!("a poll wait {wait:?} holds at {t:?}, but decide then gives {effect:?}"));
        }
        for outcome in &outcomes {
            let mut copy = snap.clone();
            let hold = apply(&mut copy, &poll, outcome.clone(), policy, t);
            let expected = hold.filter(|h| *h > t && copy == *snap);
            let absorbed = wait.absorb(outcome, policy, t);
            if absorbed != expected {
                return Err(format!(
                    "at {t:?} the poll wait absorbs {outcome:?} as {absorbed:?}, apply says {expected:?}"
                ));
            }
        }
    }
    Ok(true)
}
