//! AAP requests per completed create operation, polling only vs with webhooks.

use std::collections::BTreeMap;

use aap_sim::{Sim, SimConfig, SimWebhook};
use serde_json::{Value, json};

use crate::harness::{aap_config, create_and_wait, free_port, start_slipway};

const HOOK_TOKEN: &str = "bench-hook-token";

struct Outcome {
    mode: &'static str,
    ops: usize,
    seconds: f64,
    requests: BTreeMap<String, u64>,
}

pub async fn run(args: &[String]) -> Result<(), String> {
    let ops: usize = crate::arg(args, "--ops", 200)?;
    let job_seconds: f64 = crate::arg(args, "--job-seconds", 2.0)?;
    let poll_seconds: f64 = crate::arg(args, "--poll-seconds", 1.0)?;
    let mut outcomes = Vec::new();
    for webhooks in [false, true] {
        outcomes.push(one(ops, job_seconds, poll_seconds, webhooks).await?);
    }
    println!(
        "AAP requests per completed create operation ({ops} concurrent ops, {job_seconds} s jobs, poll {poll_seconds} s)"
    );
    println!("{:<10} {:>8} {:>10} {:>14} {:>10}", "mode", "ops", "seconds", "aap requests", "per op");
    for o in &outcomes {
        let total: u64 = o.requests.values().sum();
        println!("{:<10} {:>8} {:>10.1} {:>14} {:>10.3}", o.mode, o.ops, o.seconds, total, total as f64 / o.ops as f64);
        for (endpoint, n) in &o.requests {
            println!("    {endpoint:<52} {n:>8}");
        }
    }
    let json: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            let total: u64 = o.requests.values().sum();
            json!({"scenario": "aap-requests", "mode": o.mode, "ops": o.ops, "job_seconds": job_seconds,
                   "poll_seconds": poll_seconds, "seconds": o.seconds, "aap_requests": total,
                   "aap_requests_per_op": total as f64 / o.ops as f64, "by_endpoint": o.requests})
        })
        .collect();
    println!("{}", Value::Array(json));
    Ok(())
}

async fn one(ops: usize, job_seconds: f64, poll_seconds: f64, webhooks: bool) -> Result<Outcome, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let port = free_port()?;
    let base = format!("http://127.0.0.1:{port}");
    let mut sim_config = SimConfig { tick_ms: 20, ..SimConfig::default() };
    for t in &mut sim_config.job_templates {
        t.duration_seconds = job_seconds;
    }
    if webhooks {
        sim_config.notifications.push(SimWebhook {
            url: format!("{base}/hooks/aap"),
            headers: BTreeMap::from([("X-Slipway-Token".to_string(), HOOK_TOKEN.to_string())]),
            ..SimWebhook::default()
        });
    }
    let sim = Sim::start("127.0.0.1:0", sim_config).await.map_err(|e| format!("aap-sim: {e}"))?;
    let token_file = dir.path().join("hook-token");
    std::fs::write(&token_file, HOOK_TOKEN).map_err(|e| e.to_string())?;
    let hook = if webhooks { format!("webhook_token_file = \"{}\"", token_file.display()) } else { String::new() };
    let store = format!("url = \"sqlite:{}\"", dir.path().join("slipway.db").display());
    let config_text = aap_config(port, &store, &sim.base_url(), poll_seconds, &hook);
    let app = start_slipway(dir.path(), &config_text).await?;
    let seconds = create_and_wait(&base, ops).await?.as_secs_f64();
    let requests = sim.handle().requests();
    app.shutdown().await.map_err(|e| e.to_string())?;
    sim.shutdown().await;
    Ok(Outcome { mode: if webhooks { "webhooks" } else { "polling" }, ops, seconds, requests })
}
