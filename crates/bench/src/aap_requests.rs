//! AAP requests per completed create operation, polling only vs with webhooks.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Rig, Setup, StoreKind, names, total};

pub struct Outcome {
    pub mode: &'static str,
    pub ops: usize,
    pub job_seconds: f64,
    pub poll_seconds: f64,
    pub seconds: f64,
    pub requests: BTreeMap<String, u64>,
}

impl Outcome {
    pub fn per_op(&self) -> f64 {
        total(&self.requests) as f64 / self.ops as f64
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Concurrent create operations.
    #[arg(long, default_value_t = 1000)]
    pub ops: usize,
    /// How long each simulator job runs.
    #[arg(long, default_value_t = 2.0)]
    pub job_seconds: f64,
    /// The type's poll interval.
    #[arg(long, default_value_t = 1.0)]
    pub poll_seconds: f64,
}

pub async fn run(args: Args) -> Result<(), String> {
    let mut outcomes = Vec::new();
    for webhooks in [false, true] {
        outcomes.push(measure(args.ops, args.job_seconds, args.poll_seconds, webhooks).await?);
    }
    print(&outcomes);
    Ok(())
}

pub fn print(outcomes: &[Outcome]) {
    let Some(first) = outcomes.first() else { return };
    let (ops, job_seconds, poll_seconds) = (first.ops, first.job_seconds, first.poll_seconds);
    println!(
        "AAP requests per completed create operation ({ops} concurrent ops, {job_seconds} s jobs, poll {poll_seconds} s)"
    );
    println!("{:<10} {:>8} {:>10} {:>14} {:>10}", "mode", "ops", "seconds", "aap requests", "per op");
    for o in outcomes {
        let n = total(&o.requests);
        println!("{:<10} {:>8} {:>10.1} {:>14} {:>10.3}", o.mode, o.ops, o.seconds, n, n as f64 / o.ops as f64);
        for (endpoint, n) in &o.requests {
            println!("    {endpoint:<60} {n:>8}");
        }
    }
    let json: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            let n = total(&o.requests);
            json!({"scenario": "aap-requests", "mode": o.mode, "ops": o.ops, "job_seconds": job_seconds,
                   "poll_seconds": poll_seconds, "seconds": o.seconds, "aap_requests": n,
                   "aap_requests_per_op": n as f64 / o.ops as f64, "by_endpoint": o.requests})
        })
        .collect();
    println!("{}", Value::Array(json));
}

pub async fn measure(ops: usize, job_seconds: f64, poll_seconds: f64, webhooks: bool) -> Result<Outcome, String> {
    let setup = Setup { webhooks, ..Setup::new(StoreKind::SqliteFull, poll_seconds) };
    let rig = Rig::start(&setup, job_seconds).await?;
    let start = Instant::now();
    let accepted = rig.client.put_all(names("vm", ops), None).await?;
    let urls: Vec<String> = accepted.into_iter().map(|a| a.status_url).collect();
    rig.client.wait_succeeded(&urls, Duration::from_millis(20), Duration::from_secs(600)).await?;
    let seconds = start.elapsed().as_secs_f64();
    let requests = rig.sim.handle().requests();
    rig.stop().await?;
    Ok(Outcome {
        mode: if webhooks { "webhooks" } else { "polling" },
        ops,
        job_seconds,
        poll_seconds,
        seconds,
        requests,
    })
}
