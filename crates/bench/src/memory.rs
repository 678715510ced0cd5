//! Resident memory per in-flight operation: a Slipway child process, RSS once warmed up and
//! idle, then with N operations whose jobs are running at the simulator.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{ChildSlipway, Client, Setup, StoreKind, free_port, names};
use crate::runtimes::{sim_tick_ms, start_sim};

#[derive(Clone, Debug)]
pub struct Memory {
    pub in_flight: usize,
    pub poll_seconds: f64,
    /// How long the jobs had run when the waiting cores were measured, past their launch.
    pub aged_seconds: f64,
    pub idle_bytes: u64,
    pub loaded_bytes: u64,
    /// Slipway's CPU milliseconds per operation from the first PUT to the last launch.
    pub cpu_ms_per_op: Option<f64>,
    /// Cores Slipway keeps busy while the operations wait (their polls, timers, leases).
    pub waiting_cores: Option<f64>,
}

impl Memory {
    pub fn per_op_bytes(&self) -> f64 {
        self.loaded_bytes.saturating_sub(self.idle_bytes) as f64 / self.in_flight as f64
    }

    pub fn json(&self) -> Value {
        json!({"scenario": "memory", "in_flight": self.in_flight, "poll_seconds": self.poll_seconds,
               "aged_seconds": self.aged_seconds,
               "idle_rss_bytes": self.idle_bytes,
               "loaded_rss_bytes": self.loaded_bytes, "bytes_per_in_flight_op": self.per_op_bytes(),
               "cpu_ms_per_op": self.cpu_ms_per_op, "waiting_cores": self.waiting_cores})
    }

    pub fn print(&self) {
        println!(
            "memory: slipway RSS (child process, SQLite FULL, poll {} s, waiting measured {} s after launch)",
            self.poll_seconds, self.aged_seconds
        );
        println!(
            "{:>10} {:>12} {:>12} {:>14} {:>11} {:>13}",
            "in flight", "idle MiB", "loaded MiB", "bytes per op", "cpu ms/op", "waiting cores"
        );
        let mib = |b: u64| b as f64 / 1048576.0;
        let or_dash = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
        println!(
            "{:>10} {:>12.1} {:>12.1} {:>14.0} {:>11} {:>13}",
            self.in_flight,
            mib(self.idle_bytes),
            mib(self.loaded_bytes),
            self.per_op_bytes(),
            or_dash(self.cpu_ms_per_op, 3),
            or_dash(self.waiting_cores, 3)
        );
        println!("{}", self.json());
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Operations held in flight.
    #[arg(long, default_value_t = 10_000)]
    pub in_flight: usize,
    /// The type's poll interval.
    #[arg(long, default_value_t = 5.0)]
    pub poll_seconds: f64,
    /// Seconds to let the jobs run after the last launch before measuring the cores their
    /// waiting costs: long-running jobs are polled less often than young ones.
    #[arg(long, default_value_t = 0.0)]
    pub aged: f64,
}

pub async fn run(args: Args) -> Result<(), String> {
    measure(args.in_flight, args.poll_seconds, args.aged).await?.print();
    Ok(())
}

pub async fn measure(in_flight: usize, poll_seconds: f64, aged_seconds: f64) -> Result<Memory, String> {
    Ok(measure_probed(in_flight, poll_seconds, aged_seconds, false).await?.0)
}

/// Latencies measured against a Slipway with operations in flight.
#[derive(Clone, Debug)]
pub struct Probe {
    /// PUT → 201 p50/p99, ms, at [`PROBE_PUT_RATE`].
    pub accept_ms: (f64, f64),
    /// Status GET p50/p99, ms, at [`PROBE_GET_RATE`].
    pub get_ms: (f64, f64),
}

pub const PROBE_PUT_RATE: u32 = 200;
pub const PROBE_GET_RATE: u32 = 1000;
const PROBE_SECONDS: u32 = 5;

/// [`measure`], and with `probe` then [`PROBE_SECONDS`] of open-loop PUTs and status GETs at
/// fixed rates once the memory is read.
pub async fn measure_probed(
    in_flight: usize,
    poll_seconds: f64,
    aged_seconds: f64,
    probe: bool,
) -> Result<(Memory, Option<Probe>), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let sim = start_sim(0.0, sim_tick_ms(86_400.0), None).await?;
    let port = free_port()?;
    let setup = Setup { max_concurrent: in_flight + 2048, ..Setup::new(StoreKind::SqliteFull, poll_seconds) };
    let (slipway, _) = ChildSlipway::start(dir.path(), &setup.config(port, dir.path(), &sim.base_url())?, port).await?;
    // Warm up: connections, caches and the runtime's threads are part of idle, not per op.
    let warm = slipway.client.put_all(names("warm", 256), Some(0.0)).await?;
    let urls: Vec<String> = warm.into_iter().map(|a| a.status_url).collect();
    slipway.client.wait_succeeded(&urls, Duration::from_millis(20), Duration::from_secs(120)).await?;
    settle(&slipway.client).await;
    let idle_bytes = slipway.rss()?;
    let cpu_before = slipway.cpu_seconds();
    let held = slipway.client.put_all(names("held", in_flight), Some(86_400.0)).await?;
    let start = Instant::now();
    while sim.handle().job_count() < 256 + in_flight {
        if start.elapsed() > Duration::from_secs(300) {
            return Err("the operations were not all launched within 300 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cpu_ms_per_op = crate::harness::cpu_ms_per_op(cpu_before, slipway.cpu_seconds(), in_flight);
    tokio::time::sleep(Duration::try_from_secs_f64(aged_seconds).unwrap_or_default()).await;
    let launched = slipway.cpu_seconds();
    // Past a poll or two, so every worker is in its steady waiting state.
    let waiting = Duration::from_secs_f64(poll_seconds.min(60.0) + 1.0);
    tokio::time::sleep(waiting).await;
    let waiting_cores = slipway.cpu_seconds().zip(launched).map(|(a, b)| (a - b) / waiting.as_secs_f64());
    let loaded_bytes = slipway.rss()?;
    let probed = if probe {
        let urls: Vec<String> = held.into_iter().map(|a| a.status_url).collect();
        Some(probe_latencies(&slipway.client, urls).await?)
    } else {
        None
    };
    slipway.stop()?;
    sim.shutdown().await;
    let memory =
        Memory { in_flight, poll_seconds, aged_seconds, idle_bytes, loaded_bytes, cpu_ms_per_op, waiting_cores };
    Ok((memory, probed))
}

/// Open loop: a PUT every 1/[`PROBE_PUT_RATE`] s and a status GET (of the held operations,
/// in turn) every 1/[`PROBE_GET_RATE`] s, each timed from when it was due.
async fn probe_latencies(client: &Client, status_urls: Vec<String>) -> Result<Probe, String> {
    let mut tasks = tokio::task::JoinSet::new();
    let puts = PROBE_PUT_RATE * PROBE_SECONDS;
    let gets = PROBE_GET_RATE * PROBE_SECONDS;
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / PROBE_GET_RATE);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let every_put = PROBE_GET_RATE / PROBE_PUT_RATE;
    for i in 0..gets {
        let due = ticks.tick().await;
        if i % every_put == 0 && i / every_put < puts {
            let (client, name) = (client.clone(), format!("probe{i}"));
            tasks.spawn(async move { client.put(&name, Some(86_400.0)).await.map(|_| (true, due.elapsed())) });
        }
        let url = status_urls[i as usize % status_urls.len()].clone();
        let client = client.clone();
        tasks.spawn(async move { client.status(&url).await.map(|_| (false, due.elapsed())) });
    }
    let (mut accept, mut get) = (Vec::new(), Vec::new());
    while let Some(done) = tasks.join_next().await {
        let (is_put, took) = done.map_err(|e| e.to_string())??;
        if is_put { accept.push(took) } else { get.push(took) }
    }
    Ok(Probe { accept_ms: crate::harness::p50_p99_ms(accept), get_ms: crate::harness::p50_p99_ms(get) })
}

/// Lets the server finish what the last requests started.
async fn settle(client: &Client) {
    let _ = client.http.get(format!("{}/readyz", client.base)).send().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
}
