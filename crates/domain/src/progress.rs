//! How far a running job has got, as its operation shows it: `percentComplete` and the
//! current task's name. A provider reports the tasks a job has started (Ansible's
//! `playbook_on_task_start` events) and, where it can read the playbook, how many it expects;
//! the expected total is taken first from this resource's last successful job of the same
//! kind at the same config version — what the playbook really ran, conditionals and includes
//! included — then from the provider's count, then from the same kind at any version. The
//! percentage never goes down and stays at most 99 until the operation ends (a job may run
//! more tasks than expected); a succeeded operation that showed progress shows 100.

use crate::job::{Job, JobState};
use crate::resource::Snapshot;

/// The highest `percentComplete` of an operation still in progress.
pub const MAX_RUNNING_PERCENT: u8 = 99;

/// Longest current-task name kept (Ansible task names are free text).
pub const MAX_TASK_NAME: usize = 256;

/// What a provider read of a job's progress.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobProgress {
    /// Tasks the job has started, in every play (each counted once, whatever its hosts).
    pub tasks_started: u32,
    /// The task it started last; empty when it has started none.
    pub current_task: String,
    /// How many tasks the playbook has, as the provider counted them; `None` when it cannot.
    pub expected_tasks: Option<u32>,
}

impl JobProgress {
    /// Folds a reading into `job`: the count never goes down (a provider may read events
    /// that are still arriving), the task name follows the count.
    pub fn fold_into(&self, job: &mut Job) {
        job.tasks_started = job.tasks_started.max(self.tasks_started);
        let task = bounded(&self.current_task);
        if !job.state.is_terminal() && self.tasks_started >= job.tasks_started && !task.is_empty() {
            job.current_task = task;
        }
        if self.expected_tasks.is_some() {
            job.expected_tasks = self.expected_tasks;
        }
    }
}

fn bounded(name: &str) -> String {
    match name.char_indices().nth(MAX_TASK_NAME) {
        Some((end, _)) => name[..end].to_owned(),
        None => name.to_owned(),
    }
}

/// How many tasks `job` is expected to start (see the module doc); `None` when nothing tells.
pub fn expected_tasks(history: &[Job], job: &Job) -> Option<u32> {
    let same_kind = |j: &&Job| {
        j.timestamp != job.timestamp
            && j.state == JobState::Succeeded
            && j.tasks_started > 0
            && j.job_type == job.job_type
            && j.action == job.action
            && j.template == job.template
    };
    let newest = |jobs: Vec<&Job>| jobs.into_iter().max_by_key(|j| j.timestamp).map(|j| j.tasks_started);
    let kind: Vec<&Job> = history.iter().filter(same_kind).collect();
    let same_version = kind.iter().copied().filter(|j| j.config_version == job.config_version).collect();
    newest(same_version).or(job.expected_tasks.filter(|n| *n > 0)).or_else(|| newest(kind))
}

/// The percentage `started` of `expected` tasks stands for while the job runs: the task
/// that started is not done, so a job at its last task shows less than 100, and never more
/// than [`MAX_RUNNING_PERCENT`].
pub fn running_percent(started: u32, expected: u32) -> u8 {
    let done = u64::from(started.saturating_sub(1));
    let percent = done * 100 / u64::from(expected.max(1));
    u8::try_from(percent.min(u64::from(MAX_RUNNING_PERCENT))).unwrap_or(MAX_RUNNING_PERCENT)
}

/// Shows the progress of `job` on its operation, when that operation is in progress: the
/// current task, and the percentage when a total is known — never lower than it was.
pub fn show(snap: &mut Snapshot, job: &Job) {
    if job.tasks_started == 0 || job.operation_id.is_none() {
        return;
    }
    let expected = snap.resource.as_ref().and_then(|r| expected_tasks(&r.jobs, job));
    let Some(op) = job.operation_id.as_ref().and_then(|id| snap.operation_mut(id)) else { return };
    if op.is_terminal() {
        return;
    }
    if !job.current_task.is_empty() && op.current_task.as_deref() != Some(job.current_task.as_str()) {
        op.current_task = Some(job.current_task.clone());
    }
    // A preflight job is a prelude: its tasks are no share of the operation's work.
    if let Some(expected) = expected.filter(|_| job.job_type != crate::job::JobType::Preflight) {
        let percent = running_percent(job.tasks_started, expected);
        if op.percent_complete.is_none_or(|p| percent > p) {
            op.percent_complete = Some(percent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_version::ConfigVersion;
    use crate::job::JobType;
    use crate::time::Timestamp;

    fn succeeded(at: i64, tasks: u32, version: &str) -> Job {
        let mut j = Job::new(JobType::Provision, JobState::Succeeded, Timestamp(at))
            .with_job_id("j")
            .with_version(ConfigVersion::of_bytes(version.as_bytes()));
        j.tasks_started = tasks;
        j
    }

    #[test]
    fn percent_counts_started_tasks_as_not_done_and_stays_below_100() {
        assert_eq!(running_percent(1, 4), 0);
        assert_eq!(running_percent(3, 4), 50);
        assert_eq!(running_percent(4, 4), 75);
        assert_eq!(running_percent(9, 4), 99, "more tasks than expected");
        assert_eq!(running_percent(2, 0), 99, "a zero total is one");
    }

    #[test]
    fn expected_total_prefers_the_same_version_then_the_playbook_then_any_version() {
        let mut running = succeeded(100, 1, "v2");
        running.state = JobState::Running;
        let history = vec![succeeded(10, 7, "v2"), succeeded(20, 9, "v1"), running.clone()];
        assert_eq!(expected_tasks(&history, &running), Some(7));
        running.expected_tasks = Some(5);
        let other_versions = vec![succeeded(20, 9, "v1"), running.clone()];
        assert_eq!(expected_tasks(&other_versions, &running), Some(5), "the playbook's count");
        running.expected_tasks = None;
        assert_eq!(expected_tasks(&other_versions, &running), Some(9));
        let mut failed = succeeded(30, 3, "v2");
        failed.state = JobState::Failed;
        assert_eq!(expected_tasks(&[failed, running.clone()], &running), None, "a failed run tells nothing");
    }

    #[test]
    fn a_reading_never_lowers_the_count_and_bounds_the_name() {
        let mut job = Job::new(JobType::Provision, JobState::Running, Timestamp(1)).with_job_id("j");
        let reading =
            |n: u32, task: &str| JobProgress { tasks_started: n, current_task: task.into(), expected_tasks: None };
        let folded = |job: &mut Job, n: u32, task: &str| {
            let before = job.clone();
            reading(n, task).fold_into(job);
            *job != before
        };
        assert!(folded(&mut job, 3, "third"));
        assert!(!folded(&mut job, 2, "second"), "an older reading");
        assert_eq!((job.tasks_started, job.current_task.as_str()), (3, "third"));
        assert!(!folded(&mut job, 3, "third"), "nothing new");
        assert!(folded(&mut job, 4, &"x".repeat(1000)));
        assert_eq!(job.current_task.chars().count(), MAX_TASK_NAME);
    }
}
