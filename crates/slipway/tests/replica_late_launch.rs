//! Issue 9 A, end to end: three replicas of the real binary on one PostgreSQL schema, an AWX
//! simulator that takes 3–5 s to process every launch request — longer than the replicas'
//! 2 s request timeout, and longer than their 3 s lease — and finishes each one even though
//! the replica gave up on it (as AWX does), and replicas killed with SIGKILL and restarted
//! while the launches are in flight.
//!
//! Every launch times out, so every key is resolved by looking for its job while its request
//! may still be processed. The end state: every operation Succeeded and exactly one AAP job
//! per idempotency key. Without the launch-ambiguity window, the first look finds nothing,
//! the key is launched again and the late request adds a second job.
//!
//! `SLIPWAY_TEST_KEEP=1` keeps the replicas' logs and prints where they are.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::replica::{ReplicaConfig, create_on_any, get_any, quick_sim, start_replicas, unique_schema};
use crate::common::rid;
use aap_sim::Faults;
use slipway_test_support::{eventually, ready_within};

/// `SLIPWAY_TEST_LATE_OPS` runs more (the probe used 300).
fn ops() -> usize {
    std::env::var("SLIPWAY_TEST_LATE_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(30)
}
const REPLICAS: usize = 3;
const LEASE_SECONDS: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launches_processed_after_their_timeout_and_kills_start_one_job_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let keep = std::env::var_os("SLIPWAY_TEST_KEEP").is_some();
    if keep {
        println!("replica-late-launch: logs kept in {}", dir.path().display());
    }
    let sim = quick_sim().await;
    let h = sim.handle();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let config = ReplicaConfig {
        request_timeout_seconds: 2,
        // Covers the 5 s worst case, with room for the replicas' (shared) clock.
        provider_toml: "launch_ambiguity_seconds = 10".into(),
        ..ReplicaConfig::new(&unique_schema("rll"), LEASE_SECONDS)
    };
    let mut replicas = start_replicas(dir.path(), &sim, &config, REPLICAS).await;
    h.set_faults(Faults { launch_delay_ms: 3_000, launch_delay_jitter_ms: 2_000, seed: 9, ..Faults::default() });

    let started = Instant::now();
    let n = ops();
    // Longest the run may take.
    let limit = Duration::from_secs(90.max(60 + n as u64 / 2));
    let mut ops = Vec::new();
    for i in 0..n {
        let id = rid("computeInstances", &format!("late{i}"));
        let op = create_on_any(&http, &replicas, i, &id)
            .await
            .unwrap_or_else(|| panic!("create {i} was accepted by no replica"));
        ops.push(op);
    }

    // Each replica killed once while launch requests are being processed (received, no job
    // yet), and restarted at once.
    let launch_requests = || h.requests().iter().filter(|(k, _)| k.ends_with("/launch/")).map(|(_, n)| *n).sum::<u64>();
    let mut kills = 0u64;
    for victim in &mut replicas {
        eventually(&format!("a launch in flight to kill {} under", victim.name), Duration::from_secs(30), async || {
            launch_requests() > h.job_count() as u64 && launch_requests() >= 5 * (kills + 1)
        })
        .await;
        victim.kill();
        victim.start();
        kills += 1;
        let up = ready_within(&http, &victim.base(), Duration::from_secs(30)).await;
        up.unwrap_or_else(|e| panic!("restart of {} ({e})", victim.name));
    }
    let killed_by = started.elapsed();

    let mut pending: Vec<&String> = ops.iter().collect();
    eventually("every operation Succeeded", limit.saturating_sub(started.elapsed()), async || {
        let mut still = Vec::new();
        for op in pending.drain(..) {
            match get_any(&http, &replicas, op).await.as_ref().and_then(|b| b["status"].as_str()) {
                Some("Succeeded") => {}
                Some(s @ ("Failed" | "Canceled")) => {
                    panic!("operation {op} ended {s}; logs in {}", dir.path().display())
                }
                _ => still.push(op),
            }
        }
        pending = still;
        match pending.first() {
            None => Ok(()),
            Some(op) => Err(format!(
                "{} operations still running after {limit:?}, e.g. {op}; logs in {}",
                pending.len(),
                dir.path().display()
            )),
        }
    })
    .await;
    let converged_in = started.elapsed();

    let jobs = h.jobs();
    let mut by_key: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for job in &jobs {
        let key = job.extra_vars["slipway_idempotency_key"].as_str().unwrap_or_default().to_string();
        by_key.entry(key).or_default().push(job.id);
    }
    let twice: Vec<_> = by_key.iter().filter(|(_, ids)| ids.len() > 1).collect();
    let launches = launch_requests();
    let finds: u64 =
        h.requests().iter().filter(|(k, _)| k.contains("/jobs/") && k.starts_with("GET")).map(|(_, n)| n).sum();
    println!(
        "replica-late-launch: {n} creates over {REPLICAS} replicas, launches answered after 3-5 s (timeout 2 s), \
         {kills} SIGKILLs by {:.1} s; all Succeeded after {:.1} s; {} AAP jobs for {} keys ({} keys with more than \
         one job); {launches} launch requests, {finds} job-list requests",
        killed_by.as_secs_f64(),
        converged_in.as_secs_f64(),
        jobs.len(),
        by_key.len(),
        twice.len(),
    );
    assert!(twice.is_empty(), "keys launched twice: {twice:?}; logs in {}", dir.path().display());
    for (i, r) in replicas.iter().enumerate() {
        assert!(!r.log().contains("more than one job for one idempotency key"), "replica {i} saw a duplicate");
    }
    assert_eq!(by_key.len(), n, "one key per operation");
    assert!(by_key.keys().all(|k| !k.is_empty()), "a job without an idempotency key");
    assert!(launches >= n as u64, "every operation sent its launch");

    for r in &mut replicas {
        r.kill();
    }
    sim.shutdown().await;
    if keep {
        let _ = dir.keep();
    }
}
