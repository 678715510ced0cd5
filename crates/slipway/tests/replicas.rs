//! Several Slipway replicas on one PostgreSQL with the AAP simulator: replicas are killed
//! with SIGKILL and restarted while operations run; every operation must end Succeeded with
//! exactly one AAP job per (operation, attempt).

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::replica::{Lcg, Replica, create_on_any};
use crate::common::rid;
use aap_sim::{Sim, SimConfig};
use serde_json::Value;
use slipway_test_support::{eventually, ready_within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_survive_random_kill_9_without_duplicate_jobs() {
    const OPS: usize = 300;
    const T: Duration = Duration::from_secs(300);
    let dir = tempfile::tempdir().unwrap();
    if std::env::var_os("SLIPWAY_TEST_KEEP").is_some() {
        println!("replicas: logs kept in {}", dir.path().display());
    }
    let schema = common::replica::unique_schema("rep");
    let mut sim_config = SimConfig { tick_ms: 20, ..SimConfig::default() };
    for t in &mut sim_config.job_templates {
        t.duration_seconds = 1.0;
    }
    let sim = Sim::start("127.0.0.1:0", sim_config).await.unwrap();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let mut replicas: Vec<Replica> = (0..3).map(|i| Replica::new(dir.path(), i, &schema, &sim, 3)).collect();
    for r in &mut replicas {
        r.start();
    }
    for r in &replicas {
        let up = ready_within(&http, &r.base(), T).await;
        up.unwrap_or_else(|e| panic!("{} never became ready ({e}); logs in {}", r.name, dir.path().display()));
    }

    // Spread the creates over every replica's API.
    let accepting = Instant::now();
    let mut ops = Vec::new();
    for i in 0..OPS {
        let id = rid("computeInstances", &format!("vm{i}"));
        ops.push(
            create_on_any(&http, &replicas, i, &id)
                .await
                .unwrap_or_else(|| panic!("create {i} was accepted by no replica")),
        );
    }

    println!("replicas: {OPS} creates accepted in {:.1} s", accepting.elapsed().as_secs_f64());
    // Kill -9 a random replica each time another 40 jobs have been started, restart it
    // right after, five times: every kill lands while work is in flight.
    let mut rng = Lcg(7);
    let mut kills = 0;
    let h = sim.handle();
    for round in 1..=5 {
        eventually(&format!("{} jobs started before kill {round}", 40 * round), T, async || {
            let started = h.job_count();
            if started >= 40 * round { Ok(()) } else { Err(format!("only {started} jobs started")) }
        })
        .await;
        let victim = rng.next(replicas.len());
        replicas[victim].kill();
        kills += 1;
        replicas[victim].start();
    }
    let last_kill = Instant::now();

    // Every operation ends Succeeded; read through whichever replica answers.
    let mut pending: Vec<&String> = ops.iter().collect();
    eventually("every operation Succeeded", T, async || {
        let mut still = Vec::new();
        for op in pending.drain(..) {
            let mut status = None;
            for r in &replicas {
                if let Ok(resp) = http.get(format!("{}{op}", r.base())).send().await
                    && let Ok(body) = resp.json::<Value>().await
                {
                    status = body["status"].as_str().map(str::to_string);
                    break;
                }
            }
            match status.as_deref() {
                Some("Succeeded") => {}
                Some("Failed" | "Canceled") => panic!("operation {op} ended {status:?}"),
                _ => still.push(op),
            }
        }
        pending = still;
        if std::env::var_os("SLIPWAY_TEST_KEEP").is_some() {
            println!("replicas: {} pending at {:.1} s", pending.len(), last_kill.elapsed().as_secs_f64());
        }
        match pending.len() {
            0 => Ok(()),
            n => Err(format!("{n} operations still running; logs in {}", dir.path().display())),
        }
    })
    .await;
    let settle = last_kill.elapsed();

    let mut by_key: HashMap<String, usize> = HashMap::new();
    for job in sim.handle().jobs() {
        *by_key
            .entry(job.extra_vars["slipway_idempotency_key"].as_str().unwrap_or_default().to_string())
            .or_default() += 1;
    }
    let duplicates: Vec<_> = by_key.iter().filter(|(_, n)| **n > 1).collect();
    println!(
        "replicas: {OPS} operations, {kills} replica kills, {} AAP jobs, {} duplicates, {:.1} s from the last kill to all terminal",
        sim.handle().jobs().len(),
        duplicates.len(),
        settle.as_secs_f64()
    );
    assert!(duplicates.is_empty(), "duplicate AAP jobs: {duplicates:?}");
    assert_eq!(by_key.len(), OPS, "one job per operation");
    for r in &mut replicas {
        r.kill();
    }
    sim.shutdown().await;
    if std::env::var_os("SLIPWAY_TEST_KEEP").is_some() {
        let _ = dir.keep();
    }
}
