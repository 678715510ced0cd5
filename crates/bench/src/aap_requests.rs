//! AAP requests per completed create operation, polling only vs with webhooks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aap_sim::{Sim, SimConfig, SimWebhook};
use serde_json::{Value, json};
use slipway::app::App;
use slipway::config::Config;
use slipway_domain::SystemClock;

const API: &str = "2025-06-01";
const SUB: &str = "00000000-0000-0000-0000-0000000000b0";
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

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
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
    let config_text = format!(
        r#"
[server]
listen = "127.0.0.1:{port}"
retry_after_seconds = 0
[store]
url = "sqlite:{db}"
[engine]
node_name = "bench"
[[providers]]
name = "aap"
type = "aap"
url = "{sim}"
template_prefix = "slipway"
max_concurrent_requests = 16
{hook}
[[types]]
namespace = "Slipway.Example"
type = "computeInstances"
kind = "ComputeInstance"
api_versions = ["{API}"]
provider = "aap"
poll_interval_seconds = {poll_seconds}
"#,
        db = dir.path().join("slipway.db").display(),
        sim = sim.base_url(),
    );
    let config_path = dir.path().join("slipway.toml");
    std::fs::write(&config_path, config_text).map_err(|e| e.to_string())?;
    let config = Config::load(Some(&config_path), []).map_err(|e| e.to_string())?;
    let app = App::start(config, Arc::new(SystemClock)).await.map_err(|e| e.to_string())?;
    let http = reqwest::Client::new();
    let start = Instant::now();
    let mut puts = Vec::new();
    for i in 0..ops {
        let http = http.clone();
        let url = format!(
            "{base}/subscriptions/{SUB}/resourceGroups/bench/providers/Slipway.Example/computeInstances/vm{i}?api-version={API}"
        );
        puts.push(tokio::spawn(async move {
            let r = http.put(&url).json(&json!({"properties": {"size": "small", "image": "debian"}})).send().await;
            r.ok()
                .and_then(|r| r.headers().get("azure-asyncoperation").and_then(|v| v.to_str().ok()).map(str::to_string))
        }));
    }
    let mut status_urls = Vec::new();
    for p in puts {
        status_urls.push(p.await.map_err(|e| e.to_string())?.ok_or("a PUT was not accepted")?);
    }
    for url in &status_urls {
        loop {
            let body: Value =
                http.get(url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
            match body["status"].as_str() {
                Some("Succeeded") => break,
                Some("Failed" | "Canceled") => return Err(format!("operation ended {body}")),
                _ => {}
            }
            if start.elapsed() > Duration::from_secs(600) {
                return Err("operations did not finish within 10 minutes".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let requests = sim.handle().requests();
    app.shutdown().await.map_err(|e| e.to_string())?;
    sim.shutdown().await;
    Ok(Outcome { mode: if webhooks { "webhooks" } else { "polling" }, ops, seconds, requests })
}
