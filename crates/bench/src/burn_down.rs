//! N create operations of zero-duration simulator jobs, all at once: operations per second
//! from the first PUT to the last Succeeded, store commits and AAP requests per operation,
//! and the ratio to a design that commits three times per operation at the store's raw rate.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Rig, Setup, StoreKind, names, total};
use crate::store_ceiling::{self, Ceiling};

#[derive(Clone, Debug)]
pub struct BurnDown {
    pub label: String,
    pub store: StoreKind,
    pub ops: usize,
    pub seconds: f64,
    pub commits: u64,
    pub write_calls: u64,
    pub aap: BTreeMap<String, u64>,
    pub ceiling: Ceiling,
    /// CPU seconds Slipway's own threads spent on the run (not the simulator's or the
    /// client's, which share the process).
    pub cpu_seconds: Option<f64>,
}

impl BurnDown {
    pub fn ops_per_second(&self) -> f64 {
        self.ops as f64 / self.seconds
    }

    /// `ops/s ÷ (ceiling ÷ 3)`: above 1 beats three sequential commits per operation.
    pub fn ratio(&self) -> f64 {
        self.ops_per_second() / (self.ceiling.commits_per_second / 3.0)
    }

    pub fn per_op(&self, n: u64) -> f64 {
        n as f64 / self.ops as f64
    }

    /// Slipway's CPU milliseconds per operation.
    pub fn cpu_ms_per_op(&self) -> Option<f64> {
        self.cpu_seconds.map(|s| s * 1000.0 / self.ops.max(1) as f64)
    }

    pub fn json(&self) -> Value {
        json!({"scenario": "burn-down", "setup": self.label, "store": self.store.name(), "ops": self.ops,
               "seconds": self.seconds, "ops_per_second": self.ops_per_second(),
               "commits_per_op": self.per_op(self.commits), "write_calls_per_op": self.per_op(self.write_calls),
               "aap_requests_per_op": self.per_op(total(&self.aap)), "aap_by_endpoint": self.aap,
               "ceiling_commits_per_second": self.ceiling.commits_per_second, "ratio_to_ceiling_over_3": self.ratio(),
               "cpu_ms_per_op": self.cpu_ms_per_op()})
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// The stores to run on, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "sqlite-full,sqlite-normal,postgres")]
    pub stores: Vec<StoreKind>,
    /// Creates per run.
    #[arg(long, default_value_t = 10_000)]
    pub ops: usize,
    /// The type's poll interval.
    #[arg(long, default_value_t = 0.5)]
    pub poll_seconds: f64,
    /// Without `[auth]`, with it (every request signed in with an API token), or each in turn.
    #[arg(long, value_enum, default_value = "off")]
    pub auth: Auth,
    /// Without guardrails, with them (10 meters, locks at every scope, 20 policy assignments:
    /// `guardrails`), or each in turn.
    #[arg(long, value_enum, default_value = "off")]
    pub guardrails: Auth,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Auth {
    Off,
    On,
    Both,
}

pub async fn run(args: Args) -> Result<(), String> {
    let modes: &[bool] = match args.auth {
        Auth::Off => &[false],
        Auth::On => &[true],
        Auth::Both => &[false, true],
    };
    let guarded: &[bool] = match args.guardrails {
        Auth::Off => &[false],
        Auth::On => &[true],
        Auth::Both => &[false, true],
    };
    let mut rows = Vec::new();
    for store in args.stores {
        let ceiling = store_ceiling::measure(store, Duration::from_secs(2)).await?;
        for &on in modes {
            for &guardrails in guarded {
                let setup = Setup { auth: on, guardrails, ..Setup::new(store, args.poll_seconds) };
                let label = match (on, guardrails) {
                    (false, false) => "slipway",
                    (true, false) => "slipway+auth",
                    (false, true) => "slipway+guardrails",
                    (true, true) => "slipway+auth+guardrails",
                };
                rows.push(measure(label, &setup, args.ops, ceiling.clone()).await?);
            }
        }
    }
    print(&rows);
    Ok(())
}

pub async fn measure(label: &str, setup: &Setup, ops: usize, ceiling: Ceiling) -> Result<BurnDown, String> {
    let rig = Rig::start(setup, 0.0).await?;
    if setup.guardrails {
        crate::guardrails::seed(&rig.client).await?;
    }
    let before = rig.app.store_stats();
    let cpu_before = crate::harness::slipway_cpu_seconds();
    let start = Instant::now();
    let accepted = rig.client.put_all(names("vm", ops), None).await?;
    let urls: Vec<String> = accepted.into_iter().map(|a| a.status_url).collect();
    rig.client.wait_succeeded(&urls, Duration::from_millis(20), Duration::from_secs(900)).await?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = crate::harness::slipway_cpu_seconds().zip(cpu_before).map(|(a, b)| a - b);
    let after = rig.app.store_stats();
    let aap = rig.sim.handle().requests();
    rig.stop().await?;
    Ok(BurnDown {
        label: label.to_string(),
        store: setup.store,
        ops,
        seconds,
        commits: after.commits - before.commits,
        write_calls: after.write_calls - before.write_calls,
        aap,
        ceiling,
        cpu_seconds,
    })
}

pub fn print(rows: &[BurnDown]) {
    println!("burn-down: N creates at once, zero-duration AAP-simulator jobs, accepted → Succeeded");
    println!(
        "{:<10} {:<14} {:>7} {:>8} {:>9} {:>10} {:>10} {:>9} {:>11} {:>7} {:>10}",
        "setup",
        "store",
        "ops",
        "seconds",
        "ops/s",
        "commits/op",
        "writes/op",
        "aap/op",
        "ceiling/s",
        "ratio",
        "cpu ms/op"
    );
    for r in rows {
        println!(
            "{:<10} {:<14} {:>7} {:>8.2} {:>9.0} {:>10.2} {:>10.2} {:>9.3} {:>11.0} {:>7.2} {:>10}",
            r.label,
            r.store.name(),
            r.ops,
            r.seconds,
            r.ops_per_second(),
            r.per_op(r.commits),
            r.per_op(r.write_calls),
            r.per_op(total(&r.aap)),
            r.ceiling.commits_per_second,
            r.ratio(),
            r.cpu_ms_per_op().map_or("-".to_string(), |ms| format!("{ms:.3}"))
        );
        for (endpoint, n) in &r.aap {
            println!("    {endpoint:<60} {n:>8}");
        }
    }
    println!("{}", Value::Array(rows.iter().map(BurnDown::json).collect()));
}
