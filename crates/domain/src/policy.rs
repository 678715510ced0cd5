//! Per-resource-type engine policy ([`TypePolicy`]): the poll interval and how it grows with
//! a job's age ([`TypePolicy::poll_interval_at`]: doubling up to `max_poll_interval` in whole
//! intervals, so slowed polls stay on the poll grid), convergence backoff, deadlines, history
//! size, block-deletion, the cancel retry and the launch-ambiguity window.

use std::time::Duration;

use crate::backoff::BackoffPolicy;
use crate::names::ProviderName;
use crate::operation::OperationRequest;
use crate::retry::RetryPolicy;

/// The launch-ambiguity window of a remote provider with the default 30 s request timeout:
/// that timeout plus a minute of margin.
pub const DEFAULT_LAUNCH_AMBIGUITY: Duration = Duration::from_secs(90);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypePolicy {
    /// `Namespace/type` as configured (`Slipway.Example/virtualNetworks`): what jobs are told
    /// the type is, whatever casing a request used.
    pub type_name: String,
    /// Provider instance that runs this type's jobs.
    pub provider: ProviderName,
    /// Delay between status polls of a job that has just started; see
    /// [`TypePolicy::poll_interval_at`] for how it grows with the job's age.
    pub poll_interval: Duration,
    /// The longest delay between status polls of a long-running job.
    pub max_poll_interval: Duration,
    /// Convergence retries after a failure; `None` switches them off.
    pub backoff: Option<BackoffPolicy>,
    pub create_deadline: Duration,
    pub update_deadline: Duration,
    pub delete_deadline: Duration,
    /// Entries kept in a resource's job history (at least 1).
    pub max_history: usize,
    /// A failed deprovision blocks deletion and is retried with backoff.
    pub block_deletion_on_failure: bool,
    /// How long to wait after asking a job to cancel before asking again.
    pub cancel_retry: Duration,
    /// The longest a launch request, once sent, may still be processed by the provider and
    /// create a job — even after the sender gave up on it or died (a controller finishes a
    /// request it has received). Until it has passed since the last send, a `Find` that sees
    /// no job does not allow a relaunch. Must cover the provider's request timeout, its
    /// worst processing time and the clock skew between replicas.
    pub launch_ambiguity: Duration,
    /// The most a job may report as outputs (their JSON text, in bytes); a job that reports
    /// more fails.
    pub max_output_bytes: usize,
    /// The type has child types: when a resource of it becomes `Succeeded`, the resources
    /// nested under it (children waiting for it) are woken, and its engine steps read its
    /// children (a delete deletes them first).
    pub has_child_types: bool,
    /// Some type's schema references this type: when a resource of it becomes `Succeeded`,
    /// the resources referencing it (waiting for it) are woken.
    pub is_referenced: bool,
    /// The type declares a validation job: every create and update runs it first, and only
    /// a pass lets the provisioning job launch.
    pub preflight: bool,
    /// Scheduled drift checks, when the type has them.
    pub drift: Option<crate::drift::DriftPolicy>,
    /// The api-version an operation the engine starts itself (a drift remediation) names
    /// on its status URLs: the type's newest.
    pub api_version: String,
}

/// The longest a running job goes unpolled unless its type says otherwise: half a minute,
/// how late news of a long job's end may come to a type that has no webhooks.
pub const DEFAULT_MAX_POLL_INTERVAL: Duration = Duration::from_secs(30);

/// A job is polled at most once per this fraction of its age: news of its end is late by at
/// most an eighth of how long it ran (or `poll_interval`, when that is longer).
const POLLS_PER_AGE: u32 = 8;

/// Outputs are shown on every GET of the resource and stored with it: 64 KiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 64 * 1024;

impl Default for TypePolicy {
    fn default() -> Self {
        TypePolicy {
            type_name: String::new(),
            provider: "ansible".into(),
            poll_interval: Duration::from_secs(2),
            max_poll_interval: DEFAULT_MAX_POLL_INTERVAL,
            backoff: Some(BackoffPolicy::default()),
            create_deadline: Duration::from_secs(3600),
            update_deadline: Duration::from_secs(3600),
            delete_deadline: Duration::from_secs(12 * 3600),
            max_history: 10,
            block_deletion_on_failure: true,
            cancel_retry: Duration::from_secs(60),
            launch_ambiguity: DEFAULT_LAUNCH_AMBIGUITY,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            has_child_types: false,
            is_referenced: false,
            preflight: false,
            drift: None,
            api_version: String::new(),
        }
    }
}

impl TypePolicy {
    /// A resource group's: it runs no job, holds resources (its delete reads and deletes
    /// them first), and its delete may take as long as `delete_deadline`.
    pub fn resource_group(delete_deadline: Duration) -> Self {
        TypePolicy {
            type_name: format!("{}/{}", crate::ids::GROUP_NAMESPACE, crate::ids::GROUP_TYPE_NAME),
            provider: "none".into(),
            delete_deadline,
            has_child_types: true,
            ..TypePolicy::default()
        }
    }

    pub fn deadline(&self, request: OperationRequest) -> Duration {
        match request {
            OperationRequest::Create => self.create_deadline,
            OperationRequest::Update
            | OperationRequest::Action
            | OperationRequest::WhatIf
            | OperationRequest::CheckDrift => self.update_deadline,
            OperationRequest::Delete => self.delete_deadline,
        }
    }

    /// The delay before the next status poll of a job running for `age`: `poll_interval`
    /// doubled for as long as it stays within an eighth of the age, at most
    /// `max_poll_interval` (rounded down to a whole number of `poll_interval`s). Thousands of
    /// long jobs then cost few polls a second while a short one is still seen ending at once;
    /// and as every delay is a whole multiple of `poll_interval`, polls still fall on the
    /// type's poll grid and share its batches.
    pub fn poll_interval_at(&self, age: Duration) -> Duration {
        let base = self.poll_interval;
        let whole = (self.max_poll_interval.as_nanos() / base.as_nanos().max(1)).clamp(1, u32::MAX as u128) as u32;
        let growth = RetryPolicy::exponential(base, base.saturating_mul(whole));
        let mut step = 1;
        loop {
            let (interval, next) = (growth.delay(step), growth.delay(step + 1));
            if next <= interval || next.saturating_mul(POLLS_PER_AGE) > age {
                return interval;
            }
            step += 1;
        }
    }

    /// Backoff used for deprovision retries even when convergence retries are off.
    pub fn deprovision_backoff(&self) -> BackoffPolicy {
        self.backoff.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(poll: f64, max: f64) -> TypePolicy {
        TypePolicy {
            poll_interval: Duration::from_secs_f64(poll),
            max_poll_interval: Duration::from_secs_f64(max),
            ..TypePolicy::default()
        }
    }

    #[test]
    fn a_job_is_polled_less_often_as_it_ages_up_to_the_most() {
        let p = policy(1.0, 30.0);
        let at = |age: u64| p.poll_interval_at(Duration::from_secs(age)).as_secs_f64();
        assert_eq!([at(0), at(15), at(16), at(31), at(32), at(64), at(128)], [1.0, 1.0, 2.0, 2.0, 4.0, 8.0, 16.0]);
        // The last step is the most itself, not the next doubling past it.
        assert_eq!([at(239), at(240), at(100_000)], [16.0, 30.0, 30.0]);
    }

    #[test]
    fn every_delay_is_a_whole_number_of_base_intervals() {
        let p = policy(0.4, 5.0);
        for age in 0..200 {
            let d = p.poll_interval_at(Duration::from_secs(age)).as_millis();
            assert_eq!(d % 400, 0, "age {age}: {d} ms");
            assert!(d <= 5_000);
        }
        assert_eq!(p.poll_interval_at(Duration::from_secs(1_000)), Duration::from_millis(4_800));
    }

    #[test]
    fn a_most_no_longer_than_the_interval_polls_at_a_fixed_rate() {
        let p = policy(2.0, 2.0);
        assert_eq!(p.poll_interval_at(Duration::from_secs(86_400)), Duration::from_secs(2));
        let odd = policy(2.0, 0.5);
        assert_eq!(odd.poll_interval_at(Duration::from_secs(86_400)), Duration::from_secs(2));
    }
}
