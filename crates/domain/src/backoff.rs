//! Retry backoff derived from job history (docs/osac-lifecycle.md#backoff): double the gap between the
//! trigger times of the two most recent failed jobs, clamped to [base, max]. No counters:
//! the history itself is the state, so it survives restarts. This module finds the gap; the
//! delay is [`RetryPolicy::after_gap`], the one retry computation (`crate::retry`).

use std::time::Duration;

use crate::config_version::ConfigVersion;
use crate::job::{Job, JobState, JobType};
use crate::operation::Rerun;
use crate::retry::RetryPolicy;
use crate::time::Timestamp;

/// A type's convergence backoff (`types[].backoff_base_seconds` / `_max_seconds`): OSAC's
/// history-derived [`RetryPolicy::history`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackoffPolicy {
    pub base: Duration,
    pub max: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        BackoffPolicy { base: Duration::from_secs(120), max: Duration::from_secs(1800) }
    }
}

impl BackoffPolicy {
    /// The retry policy this backoff computes its waits with.
    pub fn retry_policy(self) -> RetryPolicy {
        RetryPolicy::history(self.base, self.max)
    }

    fn after_failures(self, jobs: &[Job], matches: impl Fn(&Job) -> bool) -> Duration {
        // A requested retry starts the backoff over: failures before it do not count.
        let since = jobs.iter().rposition(|j| j.rerun == Some(Rerun::Retry)).unwrap_or(0);
        // Array order (newest appended last), Failed only (docs/osac-lifecycle.md#backoff).
        let mut failed = jobs[since..].iter().rev().filter(|j| j.state == JobState::Failed && matches(j));
        let gap = match (failed.next(), failed.next()) {
            // A gap of zero or less (equal timestamps, clock skew) is no gap.
            (Some(last), Some(prev)) => {
                u64::try_from(last.timestamp.millis_after(prev.timestamp)).ok().map(Duration::from_millis)
            }
            _ => None,
        };
        self.retry_policy().after_gap(gap)
    }

    /// Backoff before retrying provisioning of `version`.
    pub fn provision(self, jobs: &[Job], version: &ConfigVersion) -> Duration {
        self.after_failures(jobs, |j| j.job_type == JobType::Provision && &j.config_version == version)
    }

    /// Backoff before retrying a failed deprovision.
    pub fn deprovision(self, jobs: &[Job]) -> Duration {
        self.after_failures(jobs, |j| j.job_type == JobType::Deprovision)
    }
}

/// When to retry after `latest` (measured from its trigger time), or `None` if due now.
pub fn retry_at(latest: &Job, backoff: Duration, now: Timestamp) -> Option<Timestamp> {
    let due = latest.timestamp.add(backoff);
    (due > now).then_some(due)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: i64 = 1000;
    const MIN: i64 = 60 * SEC;

    fn f(ver: &str, t_ms: i64) -> Job {
        Job::new(JobType::Provision, JobState::Failed, Timestamp(t_ms))
            .with_job_id("x")
            .with_version(ConfigVersion::new(ver))
    }

    fn retried(t_ms: i64) -> Job {
        Job { rerun: Some(Rerun::Retry), ..f("v1", t_ms) }
    }

    fn mins(m: u64) -> Duration {
        Duration::from_secs(m * 60)
    }

    #[test]
    fn reference_vectors() {
        let b = BackoffPolicy::default();
        let v1 = ConfigVersion::new("v1");
        let cases: Vec<(&str, Vec<Job>, Duration)> = vec![
            ("none", vec![], mins(2)),
            ("one failed", vec![f("v1", 0)], mins(2)),
            ("gap 5m", vec![f("v1", -5 * MIN), f("v1", 0)], mins(10)),
            ("gap 20m capped", vec![f("v1", -20 * MIN), f("v1", 0)], mins(30)),
            ("gap 30s floored", vec![f("v1", -30 * SEC), f("v1", 0)], mins(2)),
            ("equal timestamps", vec![f("v1", 0), f("v1", 0)], mins(2)),
            ("other version ignored", vec![f("v1", -5 * MIN), f("v2", 0)], mins(2)),
            (
                "deprovision ignored",
                vec![
                    f("v1", -5 * MIN),
                    Job::new(JobType::Deprovision, JobState::Failed, Timestamp(-3 * MIN)).with_job_id("d"),
                    f("v1", 0),
                ],
                mins(10),
            ),
            (
                "succeeded ignored",
                vec![
                    f("v1", -5 * MIN),
                    Job::new(JobType::Provision, JobState::Succeeded, Timestamp(-3 * MIN))
                        .with_job_id("s")
                        .with_version(v1.clone()),
                    f("v1", 0),
                ],
                mins(10),
            ),
            (
                "canceled not counted in gap",
                vec![
                    f("v1", -12 * MIN),
                    f("v1", -9 * MIN),
                    Job::new(JobType::Provision, JobState::Canceled, Timestamp(0))
                        .with_job_id("c")
                        .with_version(v1.clone()),
                ],
                mins(6),
            ),
            ("A-B-A history lengthens", vec![f("v1", -20 * MIN), f("v2", -10 * MIN), f("v1", 0)], mins(30)),
            ("negative gap (clock skew) floors", vec![f("v1", 0), f("v1", -5 * MIN)], mins(2)),
            ("a requested retry starts over", vec![f("v1", -20 * MIN), f("v1", -10 * MIN), retried(-MIN)], mins(2)),
            ("counted from the retry on", vec![f("v1", -30 * MIN), retried(-10 * MIN), f("v1", 0)], mins(20)),
        ];
        for (name, jobs, want) in cases {
            assert_eq!(b.provision(&jobs, &v1), want, "{name}");
        }
    }

    #[test]
    fn instant_failures_double_until_capped() {
        // docs/osac-lifecycle.md#backoff: triggers at 0, 2, 6, 14, 30, 60 → waits 2, 4, 8, 16, 30, 30.
        let b = BackoffPolicy::default();
        let v = ConfigVersion::new("v1");
        let mut jobs = vec![f("v1", 0)];
        let mut waits = Vec::new();
        for _ in 0..6 {
            let wait = b.provision(&jobs, &v);
            waits.push(wait.as_secs() / 60);
            let last = jobs.last().unwrap().timestamp;
            jobs.push(f("v1", last.add(wait).0));
        }
        assert_eq!(waits, [2, 4, 8, 16, 30, 30]);
    }

    #[test]
    fn deprovision_backoff() {
        let b = BackoffPolicy::default();
        let d = |t| Job::new(JobType::Deprovision, JobState::Failed, Timestamp(t)).with_job_id("d");
        assert_eq!(b.deprovision(&[]), mins(2));
        assert_eq!(b.deprovision(&[d(0)]), mins(2));
        assert_eq!(b.deprovision(&[d(0), d(2 * MIN)]), mins(4));
        assert_eq!(b.deprovision(&[d(0), d(2 * MIN), d(6 * MIN)]), mins(8));
        // provision failures do not count
        assert_eq!(b.deprovision(&[f("v1", -10 * MIN), d(0)]), mins(2));
    }

    #[test]
    fn retry_at_is_measured_from_trigger_time() {
        let job = f("v1", -3 * MIN);
        assert_eq!(retry_at(&job, mins(2), Timestamp(0)), None, "elapsed 3m ≥ 2m");
        let job = f("v1", -30 * SEC);
        assert_eq!(retry_at(&job, mins(2), Timestamp(0)), Some(Timestamp(90 * SEC)));
    }

    #[test]
    fn custom_policy_clamps() {
        let b = BackoffPolicy { base: Duration::from_secs(1), max: Duration::from_secs(5) };
        let v = ConfigVersion::new("v1");
        assert_eq!(b.provision(&[f("v1", 0), f("v1", 2 * SEC)], &v), Duration::from_secs(4));
        assert_eq!(b.provision(&[f("v1", 0), f("v1", 10 * SEC)], &v), Duration::from_secs(5));
    }
}
