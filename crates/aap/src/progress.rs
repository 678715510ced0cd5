//! A playbook job's progress ([`JobStatus::progress`]): one
//! `GET jobs/{id}/job_events/?event=playbook_on_task_start&order_by=-counter&page_size=1`,
//! whose `count` is the tasks the job started and whose one row names the newest. Read only
//! for a job that has run at least `progress_every`, and then at most once per that interval:
//! short jobs cost nothing more and long ones one request per interval, not one per status
//! poll. A followed job that succeeds is read once more, so its final count can estimate the
//! next job of its kind (AWX has no task list to count from). Workflow jobs have no events of
//! their own and report none.
//!
//! [`JobStatus::progress`]: slipway_provider::JobStatus::progress

use std::time::Duration;

use serde_json::Value;
use slipway_domain::JobState;
use slipway_provider::JobProgress;
use tokio::time::Instant;

use crate::job::JobKind;
use crate::{AapProvider, lock};

/// Jobs followed at once, at most (running ones; a job leaves when it ends).
pub(crate) const FOLLOWED: usize = 16_384;

/// What is kept of a running job between polls.
#[derive(Clone, Debug)]
pub(crate) struct Followed {
    /// When it was first seen running.
    since: Instant,
    /// When its events were last read, and what they said.
    read: Option<(Instant, JobProgress)>,
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
            let last = lock(&self.followed).take(&id)?.read.map(|(_, p)| p)?;
            if state != JobState::Succeeded {
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
                map.insert(id, Followed { since: now, read: None });
            }
            map.get(&id).cloned()?
        };
        let due = |from: Instant| now.duration_since(from) >= self.progress_every;
        let last = followed.read.clone().map(|(_, p)| p);
        if !due(followed.since) || followed.read.as_ref().is_some_and(|(at, _)| !due(*at)) {
            return last;
        }
        let fresh = self.read_progress(id).await;
        let reading = fresh.or(last);
        if let Some(entry) = lock(&self.followed).get_mut(&id) {
            entry.read = reading.clone().map(|p| (now, p));
        }
        reading
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
