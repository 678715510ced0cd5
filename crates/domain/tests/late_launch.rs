//! The launch-ambiguity window and duplicate jobs (docs/exactly-once.md): "no job for the
//! key" inside the window of the last request is no proof of absence; a second job for a key
//! is canceled, followed and recorded, never adopted.

mod common;

use std::time::Duration;

use common::*;
use slipway_domain::JobState;
use slipway_domain::ProvisioningState as PS;
use slipway_domain::reconcile::{Effect, FailureKind, Outcome};

const POLL: Duration = Duration::from_secs(2);
const SLEEP: Effect = Effect::Sleep { until: None };

const WINDOW: Duration = Duration::from_secs(90);

/// A create whose launch request went out at `T0` and got no answer.
fn unanswered_launch() -> World {
    let mut w = World::created();
    w.policy.launch_ambiguity = WINDOW;
    let launch = w.decide();
    assert_eq!(launch, Effect::Launch { key: key(1, 1) });
    w.apply(&launch, failed(FailureKind::Indeterminate, "no answer within 30s"));
    w
}

#[test]
fn no_job_yet_inside_the_window_is_looked_for_again_never_relaunched() {
    let mut w = unanswered_launch();
    // The request may still be processed until T0 + 90 s: every look inside that finds
    // nothing is followed by another look, never by a launch.
    for t in [2, 10, 45, 89] {
        w.set_now(at(t));
        let find = w.decide();
        assert_eq!(find, Effect::Find { key: key(1, 1) }, "at {t} s");
        let hold = w.apply(&find, Outcome::Found(vec![])).expect("held");
        assert!(hold > w.now && hold <= at(90), "at {t} s: look again by the window's end, got {hold:?}");
        let job = w.job(&key(1, 1));
        assert_eq!(job.state, JobState::Launching);
        assert!(!job.absent_confirmed, "at {t} s: nothing is proven yet");
        assert!(job.message.contains("may still be processed until"), "{}", job.message);
    }
    // The job the request created shows up: adopted, one job for the key.
    w.set_now(at(89));
    let find = w.decide();
    let hold = w.apply(&find, Outcome::Found(vec![started("1001", JobState::Running)]));
    assert_eq!(hold, Some(at(89).add(POLL)));
    assert_eq!(w.job(&key(1, 1)).job_id_text(), "1001");
    assert_eq!(w.decide(), Effect::Poll { key: key(1, 1) });
    assert_eq!(w.res().job_seq, 1);
}

#[test]
fn looks_inside_the_window_wait_at_least_two_seconds_and_end_at_its_end() {
    let mut w = unanswered_launch();
    w.policy.poll_interval = Duration::from_millis(500);
    w.set_now(at(2));
    let find = w.decide();
    assert_eq!(w.apply(&find, Outcome::Found(vec![])), Some(at(4)));
    w.set_now(at(89));
    assert_eq!(w.apply(&find, Outcome::Found(vec![])), Some(at(90)));
}

#[test]
fn no_job_once_the_window_has_passed_allows_the_relaunch_of_the_same_key() {
    let mut w = unanswered_launch();
    w.set_now(at(90));
    let find = w.decide();
    assert_eq!(w.apply(&find, Outcome::Found(vec![])), None);
    assert!(w.job(&key(1, 1)).absent_confirmed);
    assert_eq!(w.decide(), Effect::Launch { key: key(1, 1) });
    let job = w.job(&key(1, 1));
    assert_eq!(job.launch_sent_at, Some(at(90)), "the window restarts with the new request");
    assert_eq!(job.launch_sends, 2);
}

#[test]
fn the_window_runs_from_the_last_request_sent() {
    let mut w = unanswered_launch();
    w.set_now(at(90));
    let find = w.decide();
    w.apply(&find, Outcome::Found(vec![]));
    let relaunch = w.decide();
    w.apply(&relaunch, failed(FailureKind::Indeterminate, "no answer"));
    // A crash-free replica looks again at 100 s: the first request's window is over, the
    // second one's is not.
    w.set_now(at(100));
    let find = w.decide();
    assert!(w.apply(&find, Outcome::Found(vec![])).is_some());
    assert!(!w.job(&key(1, 1)).absent_confirmed);
    w.set_now(at(180));
    assert_eq!(w.apply(&find, Outcome::Found(vec![])), None);
    assert!(w.job(&key(1, 1)).absent_confirmed);
}

#[test]
fn a_refused_launch_request_counts_as_not_sent() {
    for kind in [FailureKind::Transient, FailureKind::RateLimited { retry_after: secs(5) }] {
        let mut w = World::created();
        let launch = w.decide();
        w.apply(&launch, failed(kind, "refused"));
        assert_eq!(w.job(&key(1, 1)).launch_sends, 0, "{kind:?}");
        w.set_now(at(60));
        assert_eq!(w.decide(), launch, "{kind:?}: nothing was sent, no window to wait out");
        w.apply(&launch, launched("1001"));
        assert_eq!(w.job(&key(1, 1)).launch_sends, 1, "{kind:?}: one request reached the provider");
    }
}

#[test]
fn two_jobs_found_for_one_key_keep_the_earliest_and_cancel_the_other() {
    let mut w = unanswered_launch();
    w.set_now(at(10));
    let find = w.decide();
    let hold =
        w.apply(&find, Outcome::Found(vec![started("1001", JobState::Running), started("1002", JobState::Pending)]));
    assert_eq!(hold, None, "cancel the duplicate right away");
    assert_eq!(w.job(&key(1, 1)).job_id_text(), "1001", "the earliest is kept");
    let dups = &w.res().duplicate_jobs;
    assert_eq!(dups.len(), 1);
    assert_eq!((dups[0].job_id_text(), dups[0].idempotency_key.as_str()), ("1002", key(1, 1).as_str()));
    assert!(dups[0].message.contains("second job"), "{}", dups[0].message);
    let cancel = Effect::CancelDuplicate { key: key(1, 1), job_id: "1002".into() };
    assert_eq!(w.decide(), cancel);
    assert_eq!(w.apply(&cancel, Outcome::CancelRequested), Some(at(10).add(POLL)));
    // Followed until it ends; asked again after `cancel_retry`; then the real job goes on.
    let poll = Effect::PollDuplicate { key: key(1, 1), job_id: "1002".into() };
    w.set_now(at(12));
    assert_eq!(w.decide(), poll);
    w.apply(&poll, observed(JobState::Running, "running", ""));
    w.set_now(at(10).add(w.policy.cancel_retry));
    assert_eq!(w.decide(), cancel, "asked again");
    w.apply(&cancel, Outcome::CancelRequested);
    w.set_now(at(80));
    assert_eq!(w.decide(), poll);
    assert_eq!(w.apply(&poll, observed(JobState::Canceled, "canceled", "")), None);
    assert_eq!(w.res().duplicate_jobs[0].state, JobState::Canceled);
    assert_eq!(w.decide(), Effect::Poll { key: key(1, 1) });
    // Seen again by a later look: recorded once.
    w.res_mut().jobs[0].launch_sends = 2;
    w.poll(&key(1, 1), observed(JobState::Succeeded, "successful", ""));
    assert_eq!(w.decide(), Effect::Find { key: key(1, 1) });
    w.apply(&find, Outcome::Found(vec![started("1001", JobState::Succeeded), started("1002", JobState::Canceled)]));
    assert_eq!(w.res().duplicate_jobs.len(), 1);
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.op(1).status, PS::Succeeded, "the operation follows the job it tracked");
}

#[test]
fn a_key_sent_twice_is_checked_for_a_late_second_job_before_its_operation_ends() {
    let mut w = unanswered_launch();
    w.set_now(at(90));
    let find = w.decide();
    w.apply(&find, Outcome::Found(vec![]));
    w.launch(&key(1, 1), "2001");
    // The first request is processed after all (the window was set too short): job 2002.
    w.set_now(at(95));
    w.poll(&key(1, 1), observed(JobState::Succeeded, "successful", ""));
    assert_eq!(w.decide(), find, "one more look before the operation ends on this job");
    assert_eq!(w.op(1).status, PS::Provisioning);
    w.apply(&find, Outcome::Found(vec![started("2001", JobState::Succeeded), started("2002", JobState::Running)]));
    assert!(w.job(&key(1, 1)).unique_confirmed);
    assert_eq!(w.decide(), Effect::CancelDuplicate { key: key(1, 1), job_id: "2002".into() });
    w.apply(&Effect::CancelDuplicate { key: key(1, 1), job_id: "2002".into() }, Outcome::CancelNotNeeded);
    let poll = Effect::PollDuplicate { key: key(1, 1), job_id: "2002".into() };
    assert_eq!(w.decide(), poll);
    w.apply(&poll, observed(JobState::Failed, "failed", ""));
    assert_eq!(w.decide(), SLEEP);
    assert_eq!(w.op(1).status, PS::Succeeded);
    assert_eq!(w.res().duplicate_jobs.len(), 1);
}

#[test]
fn a_failed_check_for_a_second_job_is_retried_or_given_up_without_touching_the_job() {
    for (kind, gives_up) in [(FailureKind::Transient, false), (FailureKind::Permanent, true)] {
        let mut w = World::provisioned();
        w.res_mut().jobs[0].launch_sends = 2;
        let before = w.job(&key(1, 1)).clone();
        let find = Effect::Find { key: key(1, 1) };
        let hold = w.apply(&find, failed(kind, "unauthorized"));
        let job = w.job(&key(1, 1));
        assert_eq!(job.unique_confirmed, gives_up, "{kind:?}");
        assert_eq!((job.state, &job.message, job.launch_attempts), (before.state, &before.message, 0));
        assert_eq!(hold.is_some(), !gives_up, "{kind:?}");
    }
}

#[test]
fn a_running_duplicate_is_never_trimmed_from_the_history() {
    let mut w = unanswered_launch();
    w.policy.max_history = 1;
    w.set_now(at(10));
    let find = w.decide();
    let three = vec![
        started("1001", JobState::Running),
        started("1002", JobState::Running),
        started("1003", JobState::Running),
    ];
    w.apply(&find, Outcome::Found(three));
    let ids: Vec<&str> = w.res().duplicate_jobs.iter().map(|d| d.job_id_text()).collect();
    assert_eq!(ids, ["1002", "1003"]);
}
