//! A playbook job's progress ([`JobStatus::progress`]): one
//! `GET jobs/{id}/job_events/?event=playbook_on_task_start&order_by=-counter&page_size=1`,
//! whose `count` is the tasks the job started and whose one row names the newest. Unlike
//! status reads these cannot be batched, so two bounds keep them from adding to a
//! controller's load what status polling saves: a job is read only once it has run
//! `progress_every`, then at most once per that interval (short jobs cost nothing); and the
//! provider reads at most `progress_reads_per_second` in all (a token bucket), so with
//! thousands of long jobs running each one's progress is simply read less often. A followed
//! job that succeeds is read once more, budget permitting, so its final count can estimate
//! the next job of its kind (AWX has no task list to count from). Workflow jobs have no
//! events of their own and report none.
//!
//! [`JobStatus::progress`]: slipway_provider::JobStatus::progress

use std::time::Duration;

use serde_json::Value;
use slipway_domain::JobState;
use slipway_domain::rate::Rate;
use slipway_provider::JobProgress;
use tokio::time::Instant;

use crate::job::JobKind;
use crate::{AapProvider, lock};

/// Jobs followed at once, at most (running ones; a job leaves when it ends).
pub(crate) const FOLLOWED: usize = 16_384;

/// What is kept of a running job between polls.
#[derive(Clone, Debug)]
pub(crate) struct Followed {
    /// When its events are next to be read: `progress_every` after it was first seen
    /// running, then after each read (answered or not).
    due_at: Instant,
    /// What they said last.
    last: Option<JobProgress>,
}

/// The page of a task-start query.
#[derive(Debug, serde::Deserialize)]
struct TaskStarts {
    #[serde(default)]
    count: u32,
    #[serde(default)]
    results: Vec<Value>,
}

impl AapProvider {
    /// The progress of job `id` in `state`, when due (see the module doc); `None` otherwise.
    pub(crate) async fn progress(&self, kind: JobKind, id: u64, state: JobState) -> Option<JobProgress> {
        if kind != JobKind::Job {
            return None;
        }
        let now = Instant::now();
        if state.is_terminal() {
            // Only a job whose progress was read (a long one) is read once more.
            let last = lock(&self.followed).take(&id)?.last?;
            if state != JobState::Succeeded || !self.may_read_progress() {
                return Some(last);
            }
            // The final count; AWX may still be saving the last events, so never less.
            let fresh = self.read_progress(id).await;
            return Some(fresh.filter(|f| f.tasks_started >= last.tasks_started).unwrap_or(last));
        }
        if state != JobState::Running {
            return None;
        }
        let followed = {
            let mut map = lock(&self.followed);
            if map.get(&id).is_none() {
                map.insert(id, Followed { due_at: now + self.progress_every, last: None });
            }
            map.get(&id).cloned()?
        };
        // Over the budget it stays due, for a later poll.
        if now < followed.due_at || !self.may_read_progress() {
            return followed.last;
        }
        // A failed read is not repeated before the interval either, and keeps the last.
        let reading = self.read_progress(id).await.or(followed.last);
        if let Some(entry) = lock(&self.followed).get_mut(&id) {
            entry.due_at = now + self.progress_every;
            entry.last = reading.clone();
        }
        reading
    }

    /// Whether the provider-wide budget of progress reads has one left now (and takes it).
    fn may_read_progress(&self) -> bool {
        let now = self.clock.now();
        lock(&self.progress_budget).take(self.progress_rate, now).is_ok()
    }

    /// One read of job `id`'s task starts; `None` when AAP did not answer (it is advisory:
    /// the job's state is known regardless).
    async fn read_progress(&self, id: u64) -> Option<JobProgress> {
        let mut url = self.http.url(&format!("v2/jobs/{id}/job_events/"));
        url.query_pairs_mut()
            .append_pair("event", "playbook_on_task_start")
            .append_pair("order_by", "-counter")
            .append_pair("page_size", "1");
        match self.http.get_json::<TaskStarts>(&url).await {
            Ok(page) => {
                let newest = page.results.first();
                let task = newest.and_then(|e| e.get("task")).and_then(Value::as_str).unwrap_or_default();
                Some(JobProgress { tasks_started: page.count, current_task: task.to_owned(), expected_tasks: None })
            }
            Err(e) => {
                tracing::debug!(provider = %self.name, job = id, error = %e.message(), "no AAP job progress");
                None
            }
        }
    }
}

/// The default of `progress_every`: long enough that jobs of a minute cost a few reads.
pub const DEFAULT_PROGRESS_EVERY: Duration = Duration::from_secs(15);

/// The default of `progress_reads_per_second`: a few percent of what batched status polling
/// of ten thousand running jobs asks of a controller.
pub const DEFAULT_PROGRESS_READS_PER_SECOND: f64 = 5.0;

/// The budget's rate: `per_second`, with a burst of as many (at least one).
pub(crate) fn budget_rate(per_second: f64) -> Rate {
    Rate { per_second: per_second.max(0.0), burst: per_second.max(1.0) }
}
