//! Issue 4, proof 5: three replicas of the real binary on one PostgreSQL schema, creates
//! spread over their APIs, and the AWX-API simulator misbehaving all along: 20 % of requests
//! answered 503, periodic 429 bursts with `Retry-After`, 5 % of launch responses lost, 1 % of
//! connections dropped, and one replica killed with SIGKILL and restarted mid-run.
//!
//! The end state must be the one of a fault-free run: every operation Succeeded, every
//! resource Succeeded, exactly one AAP job per idempotency key, every job finished; and
//! `Retry-After` respected: the simulator, which tells the replicas apart by `User-Agent`
//! (`slipway/<version> (<node>/<provider>)`), saw no request of a replica arrive before the
//! time a 429 told that replica to wait for (requests already in flight when the 429 went out,
//! within the simulator's 100 ms grace, excepted).
//!
//! Real time, and why: the replicas are separate processes of the real binary, so no test
//! clock reaches them, and the engine's launch backoff (2, 4, 8, 16, then 30 s) and the 6 s
//! launch-ambiguity window run on their clocks. A launch fails here about one time in four
//! (503, lost answer, dropped connection), so the run takes 20-30 s on an idle machine but
//! has a long tail: an operation whose launch fails five times in a row needs about a minute
//! by the backoff alone, and a loaded machine stretches every step. [`T`] is therefore a
//! ceiling against a hang, not a speed claim: it leaves room for ten failed launches of one
//! operation in a row (a chance of about 1 in 7,000 per run) on a machine running the rest of
//! the suite beside it. How long convergence took is printed, not asserted.
//!
//! `SLIPWAY_TEST_KEEP=1` keeps the replicas' logs and prints where they are.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::replica::{
    Replica, ReplicaConfig, create_on_any, get_any, quick_sim, start_replicas, unique_schema,
};
use crate::common::{API, rid};
use aap_sim::{Faults, RateLimitBurst};
use slipway_test_support::eventually;

const OPS: usize = 100;
const REPLICAS: usize = 3;
const LEASE_SECONDS: u64 = 3;
/// The 429 bursts: 1.5 s windows every 7 s, from when the faults are set.
const BURST_EVERY: Duration = Duration::from_millis(7_000);
const BURST_LENGTH: Duration = Duration::from_millis(1_500);
/// Longest the fault phase may take before the test calls it a hang (see the module doc).
const T: Duration = Duration::from_secs(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_converge_under_aap_faults_and_honour_retry_after() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let keep = std::env::var_os("SLIPWAY_TEST_KEEP").is_some();
    if keep {
        println!("replica-aap-faults: logs kept in {}", dir.path().display());
    }
    let schema = unique_schema("rapf");
    let sim = quick_sim().await;
    let h = sim.handle();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let mut replicas = start_replicas(dir.path(), &sim, &ReplicaConfig::new(&schema, LEASE_SECONDS), REPLICAS).await;
    let user_agent = |r: &Replica| format!("slipway/{} ({}/aap)", env!("CARGO_PKG_VERSION"), r.name);

    // Faults from now on; the burst windows start with them.
    let faults = Faults {
        error_5xx_percent: 20,
        rate_limit_burst: Some(RateLimitBurst {
            every_ms: BURST_EVERY.as_millis() as u64,
            length_ms: BURST_LENGTH.as_millis() as u64,
        }),
        lose_launch_response_percent: 5,
        drop_percent: 1,
        seed: 10,
        ..Faults::default()
    };
    h.reset_requests();
    let faults_set = Instant::now();
    h.set_faults(faults);

    // Creates spread over every replica's API (the next one when one does not take it).
    let mut ops = Vec::new();
    for i in 0..OPS {
        let id = rid("computeInstances", &format!("vm{i}"));
        let op = create_on_any(&http, &replicas, i, &id)
            .await
            .unwrap_or_else(|| panic!("create {i} was accepted by no replica"));
        ops.push((id, op));
    }
    let accepted_in = faults_set.elapsed();

    // One replica killed with SIGKILL and restarted while the work runs. Its Retry-After gate
    // lives in the process, so the kill happens between bursts, when no 429 is holding it:
    // a new life cannot know what the old one was told.
    let victim = 1;
    let victim_ua = user_agent(&replicas[victim]);
    let quiet = |now: Instant| {
        let phase = Duration::from_nanos((now.duration_since(faults_set).as_nanos() % BURST_EVERY.as_nanos()) as u64);
        phase > BURST_LENGTH + Duration::from_millis(1_200) && phase + Duration::from_millis(1_000) < BURST_EVERY
    };
    eventually(&format!("a quiet moment to kill {}", replicas[victim].name), Duration::from_secs(20), async || {
        quiet(Instant::now()) && h.blocked_until(&victim_ua).is_none()
    })
    .await;
    let killed_at = faults_set.elapsed();
    replicas[victim].kill();
    replicas[victim].start();

    // Every operation ends Succeeded; read through whichever replica answers.
    let mut pending: Vec<&(String, String)> = ops.iter().collect();
    let mut rounds = 0;
    eventually("every operation Succeeded", T.saturating_sub(faults_set.elapsed()), async || {
        rounds += 1;
        let mut still = Vec::new();
        for op in pending.drain(..) {
            match get_any(&http, &replicas, &op.1).await.as_ref().and_then(|b| b["status"].as_str()) {
                Some("Succeeded") => {}
                Some(s @ ("Failed" | "Canceled")) => {
                    panic!("operation {} ended {s}; logs in {}", op.1, dir.path().display())
                }
                _ => still.push(op),
            }
        }
        pending = still;
        if keep {
            println!("replica-aap-faults: {} pending at {:.1} s", pending.len(), faults_set.elapsed().as_secs_f64());
        }
        match pending.first() {
            None => Ok(()),
            Some(op) => Err(format!(
                "{} operations still running after {:?}, e.g. {}; logs in {}",
                pending.len(),
                T,
                op.1,
                dir.path().display()
            )),
        }
    })
    .await;
    let converged_in = faults_set.elapsed();
    let injected = h.injected();
    let counted = h.requests();
    let requests: u64 = counted.values().sum();
    let by_client = h.requests_by_client();
    let violations = h.retry_after_violations();
    h.set_faults(Faults::default());

    // Every resource is Succeeded, none left mid-way.
    for (id, _) in &ops {
        let body = get_any(&http, &replicas, &format!("{id}?api-version={API}")).await;
        let state = body.as_ref().and_then(|b| b["properties"]["provisioningState"].as_str()).map(str::to_string);
        assert_eq!(state.as_deref(), Some("Succeeded"), "resource {id}: {body:?}");
    }

    // Exactly one AAP job per idempotency key, one key per operation, every job finished.
    let jobs = h.jobs();
    let mut by_key: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for job in &jobs {
        let key = job.extra_vars["slipway_idempotency_key"].as_str().unwrap_or_default().to_string();
        by_key.entry(key).or_default().push(job.id);
    }
    let duplicates: Vec<_> = by_key.iter().filter(|(_, ids)| ids.len() > 1).collect();
    let unfinished: Vec<_> = jobs.iter().filter(|j| j.status != "successful").map(|j| (j.id, &j.status)).collect();
    let lost_adopted = jobs.iter().filter(|j| j.launch_lost).count();

    println!(
        "replica-aap-faults: {OPS} creates over {REPLICAS} replicas accepted in {:.1} s; replica-{victim} killed \
         (SIGKILL) and restarted at {:.1} s; all Succeeded {:.1} s after the faults began ({:.1} s in all, \
         {rounds} status rounds)",
        accepted_in.as_secs_f64(),
        killed_at.as_secs_f64(),
        converged_in.as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
    println!(
        "replica-aap-faults: faults injected: {} x 429, {} x 503, {} dropped connections, {} lost launch responses \
         ({lost_adopted} jobs started by a launch whose answer was lost)",
        injected.rate_limited, injected.unavailable, injected.dropped, injected.lost_launch_responses,
    );
    println!(
        "replica-aap-faults: {requests} AAP requests, {:.1} per operation; per endpoint: {counted:?}; per replica: \
         {by_client:?}",
        requests as f64 / OPS as f64,
    );
    println!(
        "replica-aap-faults: {} AAP jobs for {} keys, {} duplicates; {} Retry-After violations",
        jobs.len(),
        by_key.len(),
        duplicates.len(),
        violations.len()
    );

    assert!(duplicates.is_empty(), "duplicate AAP jobs: {duplicates:?}");
    assert!(unfinished.is_empty(), "AAP jobs not finished successfully: {unfinished:?}");
    assert_eq!(by_key.len(), OPS, "one job per operation: {:?}", by_key.keys().collect::<Vec<_>>());
    assert!(by_key.keys().all(|k| !k.is_empty()), "a job without an idempotency key");
    assert!(violations.is_empty(), "requests before their Retry-After: {violations:#?}");
    // The run exercised what it claims to.
    assert!(
        injected.rate_limited > 0 && injected.unavailable > 0 && injected.lost_launch_responses > 0,
        "{injected:?}"
    );
    assert!(
        by_client.keys().filter(|c| c.starts_with("slipway/")).count() == REPLICAS,
        "every replica talked to AAP under its own name: {by_client:?}"
    );

    for r in &mut replicas {
        r.kill();
    }
    sim.shutdown().await;
    if keep {
        let _ = dir.keep();
    }
}
