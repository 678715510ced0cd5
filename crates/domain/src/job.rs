//! Automation jobs recorded on a resource, and the job-history helpers of the OSAC
//! provisioning package (docs/osac-lifecycle.md#job-history).

use crate::config_version::ConfigVersion;
use crate::ids::OperationId;
use crate::names::{IdempotencyKey, JobId, ProviderName};
use crate::time::Timestamp;

/// The `set_stats` key under which a job reports the resource's outputs (ansible-runner's
/// `playbook_on_stats` `artifact_data`, AWX's job `artifacts`).
pub const OUTPUTS_STAT: &str = "slipway_outputs";

/// The `set_stats` key under which a preflight job reports its checks: a list of
/// `{"name", "passed", "message"}` (see `reconcile::preflight`).
pub const CHECKS_STAT: &str = "slipway_checks";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobType {
    Provision,
    Deprovision,
    /// A POST action (`Job::action` names it).
    Action,
    /// The type's validation job, run before an operation's provisioning job.
    Preflight,
    /// The type's create or delete job (`Job::action` says which) run in Ansible's check
    /// mode with diff: a what-if's prediction. It changes nothing.
    Check,
}

impl JobType {
    pub const ALL: [JobType; 5] =
        [JobType::Provision, JobType::Deprovision, JobType::Action, JobType::Preflight, JobType::Check];

    /// The word the wire, the logs and the metrics use (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            JobType::Provision => "provision",
            JobType::Deprovision => "deprovision",
            JobType::Action => "action",
            JobType::Preflight => "preflight",
            JobType::Check => "check",
        }
    }
}

/// Observed state of a job. `Launching` is Slipway's intent state: the entry is committed
/// before the provider is asked to launch, so a crash leaves evidence to reconcile from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobState {
    Launching,
    Pending,
    Waiting,
    Running,
    Unknown,
    Succeeded,
    Failed,
    Canceled,
}

impl JobState {
    pub fn is_terminal(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed | JobState::Canceled)
    }

    pub fn is_successful(self) -> bool {
        self == JobState::Succeeded
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Launching => "Launching",
            JobState::Pending => "Pending",
            JobState::Waiting => "Waiting",
            JobState::Running => "Running",
            JobState::Unknown => "Unknown",
            JobState::Succeeded => "Succeeded",
            JobState::Failed => "Failed",
            JobState::Canceled => "Canceled",
        }
    }
}

/// How Slipway stops a job it no longer wants, and when it last asked the provider to (it
/// asks again every `TypePolicy::cancel_retry` until the job ends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Canceled with the provider's grace (`Effect::Cancel`): a cancel is always sent when
    /// it is decided.
    Cancel { asked_at: Timestamp },
    /// A forced cancel (`Effect::Kill`): stopped at once. It is decided in the request and
    /// sent by the engine, so it has not been asked for until the first kill goes out.
    Kill { asked_at: Option<Timestamp> },
}

impl Stop {
    /// When the provider was last asked to stop the job, if it was.
    pub fn asked_at(self) -> Option<Timestamp> {
        match self {
            Stop::Cancel { asked_at } => Some(asked_at),
            Stop::Kill { asked_at } => asked_at,
        }
    }

    pub fn is_kill(self) -> bool {
        matches!(self, Stop::Kill { .. })
    }
}

/// One entry of a resource's job history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// The provider's job id: none until a launch or a find confirmed a job (a launch that
    /// failed outright never gets one).
    pub job_id: Option<JobId>,
    pub job_type: JobType,
    pub state: JobState,
    pub message: String,
    /// Trigger time (when the intent was recorded); never moved by polling.
    pub timestamp: Timestamp,
    pub config_version: ConfigVersion,
    pub block_deletion_on_failure: bool,
    /// Unique per launch attempt; passed to the job so a lost launch can be found again.
    pub idempotency_key: IdempotencyKey,
    pub provider: ProviderName,
    pub template: String,
    /// The operation this job was launched for (none for convergence retries).
    pub operation_id: Option<OperationId>,
    /// Provider-specific handle data (e.g. AAP job vs workflow job).
    pub handle: serde_json::Value,
    /// Failure details beyond the status word (failed task message, traceback).
    pub error_details: String,
    /// Whether Slipway is stopping the job, how, and when it last asked the provider.
    pub stop: Option<Stop>,
    /// Launch attempts that ended without a confirmed job (transient errors).
    pub launch_attempts: u32,
    /// While `Launching`: the provider said no such job exists, so launching is safe.
    pub absent_confirmed: bool,
    /// When a launch request for this key was last handed to the provider. A controller may
    /// still create the job until `launch_sent_at + launch_ambiguity` (see
    /// `TypePolicy::launch_ambiguity`), so "not found" proves nothing before then.
    pub launch_sent_at: Option<Timestamp>,
    /// Launch requests for this key that may have reached the provider. More than one means
    /// a late first request could still create a second job: the key is looked up once more
    /// when its job ends (`unique_confirmed`).
    pub launch_sends: u32,
    /// The provider was asked for every job of this key after the job ended and the
    /// duplicates it listed (if any) were recorded.
    pub unique_confirmed: bool,
    /// An action job's action (`restart`), a check job's job word (`create`, `delete`);
    /// empty for every other type.
    pub action: String,
    /// When Slipway saw the job end (it recorded a terminal state).
    pub ended_at: Option<Timestamp>,
    /// Launched for an update that runs the unchanged spec again: why (its operation's).
    pub rerun: Option<crate::operation::Rerun>,
    /// Tasks the job has started, as last read (`progress`); kept once it ended, so a later
    /// job of the same kind knows how many to expect.
    pub tasks_started: u32,
    /// The task it runs now; empty once it ended.
    pub current_task: String,
    /// How many tasks the provider counted in its playbook, when it can.
    pub expected_tasks: Option<u32>,
}

impl Job {
    /// A bare job entry; the remaining fields default to empty.
    pub fn new(job_type: JobType, state: JobState, timestamp: Timestamp) -> Self {
        Job {
            job_id: None,
            job_type,
            state,
            message: String::new(),
            timestamp,
            config_version: ConfigVersion::legacy(),
            block_deletion_on_failure: false,
            idempotency_key: IdempotencyKey::default(),
            provider: ProviderName::default(),
            template: String::new(),
            operation_id: None,
            handle: serde_json::Value::Null,
            error_details: String::new(),
            stop: None,
            launch_attempts: 0,
            absent_confirmed: false,
            launch_sent_at: None,
            launch_sends: 0,
            unique_confirmed: false,
            action: String::new(),
            ended_at: None,
            rerun: None,
            tasks_started: 0,
            current_task: String::new(),
            expected_tasks: None,
        }
    }

    /// The provider's job id as logs and the wire write it: empty before there is one.
    pub fn job_id_text(&self) -> &str {
        self.job_id.as_ref().map_or("", JobId::as_str)
    }

    pub fn with_job_id(mut self, id: impl Into<JobId>) -> Self {
        self.job_id = Some(id.into());
        self
    }

    pub fn with_version(mut self, v: ConfigVersion) -> Self {
        self.config_version = v;
        self
    }

    pub fn with_message(mut self, m: impl Into<String>) -> Self {
        self.message = m.into();
        self
    }

    /// When the provider was last asked to stop this job, if it was.
    pub fn stop_asked_at(&self) -> Option<Timestamp> {
        self.stop.and_then(Stop::asked_at)
    }

    /// Not asked to stop since `retry` ago (or ever): time to ask (again).
    pub fn stop_due(&self, now: Timestamp, retry: std::time::Duration) -> bool {
        self.stop_asked_at().is_none_or(|t| now >= t.add(retry))
    }

    /// A forced cancel is pending or under way.
    pub fn kill_requested(&self) -> bool {
        self.stop.is_some_and(Stop::is_kill)
    }

    /// Records that the provider is asked to stop the job now, the way already decided (a
    /// graceful cancel unless a kill was).
    pub fn ask_to_stop(&mut self, now: Timestamp) {
        self.stop = Some(if self.kill_requested() {
            Stop::Kill { asked_at: Some(now) }
        } else {
            Stop::Cancel { asked_at: now }
        });
    }

    /// Sent more than once and not yet checked for a second job of the same key.
    pub fn needs_duplicate_check(&self) -> bool {
        self.launch_sends > 1 && !self.unique_confirmed && self.job_id.is_some()
    }

    /// `message` plus `": " + error_details` when details exist (OSAC `MessageWithDetails`).
    pub fn message_with_details(&self) -> String {
        if self.error_details.is_empty() {
            self.message.clone()
        } else if self.message.is_empty() {
            self.error_details.clone()
        } else {
            format!("{}: {}", self.message, self.error_details)
        }
    }
}

/// Appends and keeps only the newest `max_history` entries by position.
/// `max_history` is clamped to at least 1 so the new job is never dropped.
pub fn append_job(jobs: &mut Vec<Job>, job: Job, max_history: usize) {
    jobs.push(job);
    let keep = max_history.max(1);
    if jobs.len() > keep {
        let excess = jobs.len() - keep;
        jobs.drain(..excess);
    }
}

/// Latest job of a type by trigger timestamp; on equal timestamps the lowest index wins.
pub fn latest_job_by_type(jobs: &[Job], job_type: JobType) -> Option<&Job> {
    let mut latest: Option<&Job> = None;
    for job in jobs.iter().filter(|j| j.job_type == job_type) {
        if latest.is_none_or(|l| job.timestamp > l.timestamp) {
            latest = Some(job);
        }
    }
    latest
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn p(id: &str, state: JobState, t_min: i64) -> Job {
        Job::new(JobType::Provision, state, Timestamp(t_min * MIN)).with_job_id(id)
    }

    fn d(id: &str, state: JobState, t_min: i64) -> Job {
        Job::new(JobType::Deprovision, state, Timestamp(t_min * MIN)).with_job_id(id)
    }

    #[test]
    fn terminality() {
        use JobState::*;
        for (s, terminal, ok) in [
            (Launching, false, false),
            (Pending, false, false),
            (Waiting, false, false),
            (Running, false, false),
            (Unknown, false, false),
            (Succeeded, true, true),
            (Failed, true, false),
            (Canceled, true, false),
        ] {
            assert_eq!(s.is_terminal(), terminal, "{s:?}");
            assert_eq!(s.is_successful(), ok, "{s:?}");
        }
    }

    #[test]
    fn latest_by_timestamp_is_order_independent() {
        let jobs = vec![
            p("job3", JobState::Running, -30),
            p("job1", JobState::Succeeded, -120),
            p("job2", JobState::Failed, -60),
        ];
        assert_eq!(latest_job_by_type(&jobs, JobType::Provision).unwrap().job_id, Some("job3".into()));
    }

    #[test]
    fn latest_filters_by_type() {
        let jobs = vec![
            p("provision1", JobState::Succeeded, -120),
            d("deprovision1", JobState::Running, -30),
            p("provision2", JobState::Succeeded, -60),
        ];
        assert_eq!(latest_job_by_type(&jobs, JobType::Provision).unwrap().job_id, Some("provision2".into()));
        assert_eq!(latest_job_by_type(&jobs, JobType::Deprovision).unwrap().job_id, Some("deprovision1".into()));
        let only_provision = vec![p("a", JobState::Running, 0)];
        assert!(latest_job_by_type(&only_provision, JobType::Deprovision).is_none());
        assert!(latest_job_by_type(&[], JobType::Provision).is_none());
    }

    #[test]
    fn ties_go_to_the_first_index() {
        let jobs = vec![p("job1", JobState::Running, 0), p("job2", JobState::Running, 0)];
        assert_eq!(latest_job_by_type(&jobs, JobType::Provision).unwrap().job_id, Some("job1".into()));
    }

    #[test]
    fn append_trims_oldest_by_position() {
        let mut jobs = Vec::new();
        for i in 1..=5 {
            append_job(&mut jobs, p(&format!("job-{i}"), JobState::Pending, i), 3);
        }
        let ids: Vec<_> = jobs.iter().filter_map(|j| j.job_id.as_ref().map(JobId::as_str)).collect();
        assert_eq!(ids, ["job-3", "job-4", "job-5"]);
        append_job(&mut jobs, p("job-6", JobState::Pending, 6), 0);
        assert_eq!(jobs.len(), 1, "max history is clamped to 1");
        assert_eq!(jobs[0].job_id, Some("job-6".into()));
    }

    #[test]
    fn message_with_details() {
        let mut j = p("1", JobState::Failed, 0).with_message("Job failed");
        assert_eq!(j.message_with_details(), "Job failed");
        j.error_details = "Playbook execution failed".into();
        assert_eq!(j.message_with_details(), "Job failed: Playbook execution failed");
    }
}
