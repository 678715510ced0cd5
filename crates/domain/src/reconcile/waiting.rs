//! What a worker keeps of a resource while it waits to poll the job it follows: the job as
//! recorded, and until when polling it is all there is to do — instead of the whole
//! snapshot, which is most of what an operation in flight costs in memory. Both answers are
//! the reconcile's own: the wait is taken only where `decide` asks for exactly that poll and
//! nothing it reads changes with time until `until`, and a poll's outcome is judged by
//! folding it into a copy of the job as `apply` would. The simulation test checks both
//! against `decide` and `apply` at every step of its runs.

use super::{Effect, Outcome, decide, record};
use crate::job::{Job, JobState};
use crate::names::IdempotencyKey;
use crate::policy::TypePolicy;
use crate::resource::Snapshot;
use crate::time::Timestamp;

/// A worker's memory of a resource whose next step is to poll one job.
#[derive(Clone, Debug, PartialEq)]
pub struct PollWait {
    job: Job,
    until: Timestamp,
}

impl PollWait {
    /// The wait, when from `now` until its `until` the next step of `snap` is to poll one job
    /// and change nothing else: `decide` asks exactly that now (on a copy), and none of what
    /// makes its answer change with time is there — no job launching, no cancel or kill
    /// pending, no second job of a key, no delete (its cascade and retries are timed) — but
    /// the active operation's deadline, which is `until`.
    pub fn of(snap: &Snapshot, policy: &TypePolicy, now: Timestamp) -> Option<PollWait> {
        let res = snap.resource.as_ref()?;
        let timed = |j: &Job| j.state == JobState::Launching || j.stop.is_some();
        if res.is_deleting() || !res.duplicate_jobs.is_empty() || res.jobs.iter().any(timed) {
            return None;
        }
        let mut copy = snap.clone();
        let Effect::Poll { key } = decide(&mut copy, policy, now) else { return None };
        if copy != *snap {
            return None;
        }
        let job = res.jobs.iter().find(|j| j.idempotency_key == key)?.clone();
        let until = super::operation_deadline(snap, policy).unwrap_or(Timestamp(i64::MAX));
        Some(PollWait { job, until })
    }

    /// The job to poll, as recorded.
    pub fn job(&self) -> &Job {
        &self.job
    }

    pub fn key(&self) -> &IdempotencyKey {
        &self.job.idempotency_key
    }

    /// Whether the wait still stands at `now`: before it, the next step is the poll.
    pub fn holds_at(&self, now: Timestamp) -> bool {
        now < self.until
    }

    /// A poll's outcome at `now`: `Some(when to poll next)` when recording it would change
    /// nothing, else `None` — it is news, for the store.
    pub fn absorb(&self, outcome: &Outcome, policy: &TypePolicy, now: Timestamp) -> Option<Timestamp> {
        if !self.holds_at(now) {
            return None;
        }
        let mut job = self.job.clone();
        let next = record::record_poll_on(&mut job, outcome.clone(), policy, now)?;
        (job == self.job && next > now).then_some(next.min(self.until))
    }
}
