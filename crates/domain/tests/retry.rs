//! Every retry delay Slipway computes, as tables (attempt → delay), through the one
//! `RetryPolicy` (crates/domain/src/retry.rs): launch retries, notification retries, AAP GET
//! retries, and OSAC's history-derived backoff (docs/osac-lifecycle.md#backoff).

use std::time::Duration;

use slipway_domain::backoff::BackoffPolicy;
use slipway_domain::retry::{FixedJitter, JitterSource, RetryPolicy, SplitMix64, launch_retry};
use slipway_domain::{ConfigVersion, Job, JobState, JobType, Timestamp};

const MS: Duration = Duration::from_millis(1);
const S: Duration = Duration::from_secs(1);

fn secs(d: Duration) -> u64 {
    d.as_secs()
}

/// `reconcile::apply` after launch attempt n failed (`Launch attempt n failed`): 2 s doubling,
/// at most 64 s and at most 30 poll intervals (of at least 1 s).
#[test]
fn launch_retry_table() {
    let cases: [(Duration, [u64; 8]); 5] = [
        (2 * S, [2, 4, 8, 16, 32, 60, 60, 60]),
        (S, [2, 4, 8, 16, 30, 30, 30, 30]),
        (100 * MS, [2, 4, 8, 16, 30, 30, 30, 30]),
        (Duration::ZERO, [2, 4, 8, 16, 30, 30, 30, 30]),
        (10 * S, [2, 4, 8, 16, 32, 64, 64, 64]),
    ];
    for (poll, want) in cases {
        let policy = launch_retry(poll);
        let got: Vec<u64> = (1..=8).map(|attempt| secs(policy.delay(attempt))).collect();
        assert_eq!(got, want, "poll interval {poll:?}");
    }
    assert_eq!(launch_retry(2 * S).delay(u32::MAX), 60 * S, "no overflow");
    assert_eq!(launch_retry(Duration::MAX).delay(40), 64 * S, "no overflow");
}

/// Notifications (rows and destinations): `first_backoff` 1 s doubling to `max_backoff` 300 s.
#[test]
fn notification_retry_table() {
    let policy = RetryPolicy::exponential(S, 300 * S);
    let want = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300];
    let got: Vec<u64> = (0..20).map(|failures| secs(policy.delay(failures))).collect();
    assert_eq!(got, want);
    // The default 20 attempts wait 19 times: about an hour in all.
    assert_eq!((1..20).map(|f| policy.delay(f)).sum::<Duration>(), 3511 * S);
    assert_eq!(policy.delay(33), 300 * S);
    assert_eq!(policy.delay(u32::MAX), 300 * S);
    assert_eq!(RetryPolicy::exponential(Duration::MAX, Duration::MAX).delay(40), Duration::MAX, "saturates");
    assert_eq!(RetryPolicy::exponential(250 * MS, 10 * S).delay(3), S);
}

/// AAP GET retries: `retry_backoff` 500 ms doubling to `max_retry_wait` 10 s, plus up to 25%
/// jitter (still at most 10 s; the largest draw rounds to the full 25%). Attempt 0 is the
/// first retry.
#[test]
fn aap_get_retry_table() {
    let policy = RetryPolicy::exponential(500 * MS, 10 * S).with_jitter(0.25);
    let cases = [
        (0, 500, 625),
        (1, 1_000, 1_250),
        (2, 2_000, 2_500),
        (3, 4_000, 5_000),
        (4, 8_000, 10_000),
        (5, 10_000, 10_000),
        (12, 10_000, 10_000),
    ];
    for (attempt, plain, most) in cases {
        let at = |draw: u64| policy.jittered(policy.delay(attempt + 1), draw).as_millis() as u64;
        assert_eq!(policy.delay(attempt + 1).as_millis() as u64, plain, "attempt {attempt}");
        assert_eq!(at(0), plain, "attempt {attempt}: no jitter");
        assert_eq!(at(1 << 63), plain + (most - plain) / 2, "attempt {attempt}: half the jitter");
        let top = policy.jittered(policy.delay(attempt + 1), u64::MAX);
        assert!(top <= Duration::from_millis(most), "attempt {attempt}: {top:?}");
        assert!(top + MS >= Duration::from_millis(most), "attempt {attempt}: {top:?}");
        let (mut none, mut most) = (FixedJitter::NONE, FixedJitter::MOST);
        assert_eq!(policy.delay_with_jitter(attempt + 1, &mut none), policy.delay(attempt + 1));
        assert_eq!(policy.delay_with_jitter(attempt + 1, &mut most), top);
    }
    // A seeded source: the same seed gives the same waits, each within its bounds.
    let waits = |seed: u64| {
        let mut source = SplitMix64::new(seed);
        (1..=6).map(|n| policy.delay_with_jitter(n, &mut source)).collect::<Vec<_>>()
    };
    assert_eq!(waits(42), waits(42));
    assert_ne!(waits(42), waits(43));
    for (i, wait) in waits(42).into_iter().enumerate() {
        let plain = policy.delay(i as u32 + 1);
        assert!(wait >= plain && wait <= plain.mul_f64(1.25).min(10 * S), "retry {}: {wait:?}", i + 1);
    }
    let mut source = SplitMix64::from_name("node-a/aap");
    let spread: Vec<u64> = (0..1000).map(|_| source.draw() >> 62).collect();
    for quarter in 0..4 {
        let n = spread.iter().filter(|q| **q == quarter).count();
        assert!((200..300).contains(&n), "quarter {quarter}: {n} of 1000 draws");
    }
}

fn failed(ver: &str, t_ms: i64) -> Job {
    Job::new(JobType::Provision, JobState::Failed, Timestamp(t_ms))
        .with_job_id("x")
        .with_version(ConfigVersion::new(ver))
}

/// OSAC's history-derived backoff (defaults 2 min, 30 min): gap between the last two failed
/// triggers → wait.
#[test]
fn osac_history_backoff_table() {
    let policy = BackoffPolicy::default().retry_policy();
    assert_eq!(policy, RetryPolicy::history(120 * S, 1800 * S));
    let min = |m: u64| Duration::from_secs(m * 60);
    for (gap, want) in [
        (None, min(2)),
        (Some(Duration::ZERO), min(2)),
        (Some(30 * S), min(2)),
        (Some(min(1)), min(2)),
        (Some(min(2)), min(4)),
        (Some(min(5)), min(10)),
        (Some(min(14)), min(28)),
        (Some(min(15)), min(30)),
        (Some(min(20)), min(30)),
        (Some(Duration::MAX), min(30)),
    ] {
        assert_eq!(policy.after_gap(gap), want, "gap {gap:?}");
    }
    // Failures seen at once: triggers at 0, 2, 6, 14, 30, 60 min → waits 2, 4, 8, 16, 30, 30,
    // the exponential sequence of the same base and max.
    let v1 = ConfigVersion::new("v1");
    let backoff = BackoffPolicy::default();
    let mut jobs = vec![failed("v1", 0)];
    let mut waits = Vec::new();
    for _ in 0..6 {
        let wait = backoff.provision(&jobs, &v1);
        waits.push(wait.as_secs() / 60);
        let last = jobs.last().unwrap().timestamp;
        jobs.push(failed("v1", last.add(wait).0));
    }
    assert_eq!(waits, [2, 4, 8, 16, 30, 30]);
    let exponential = RetryPolicy::exponential(min(2), min(30));
    assert_eq!(waits, (1..=6).map(|n| exponential.delay(n).as_secs() / 60).collect::<Vec<_>>());
    // Jobs that run 5 minutes: the gap includes the run time (0, 5, 15, 35, 65, 95).
    let mut jobs = vec![failed("v1", 0)];
    let mut triggers = vec![0];
    for _ in 0..5 {
        let last = jobs.last().unwrap().timestamp;
        let wait = backoff.provision(&jobs, &v1).max(min(5));
        jobs.push(failed("v1", last.add(wait).0));
        triggers.push(jobs.last().unwrap().timestamp.0 / 60_000);
    }
    assert_eq!(triggers, [0, 5, 15, 35, 65, 95]);
}
