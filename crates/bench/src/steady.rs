//! An open-loop PUT rate of 10 s jobs while many operations are already in flight: accept
//! latency, status-GET latency under concurrent readers, time from a PUT to its job's launch
//! at the simulator (first dispatch), and time from the simulator finishing a job to its
//! operation reading terminal (finish-to-visible).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Client, Rig, Setup, StoreKind, names, p50_p99_ms};
use crate::scrape;

/// The load of a steady run.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Operations already in flight (jobs that outlive the run) before the PUTs start.
    #[arg(long, default_value_t = 10_000)]
    pub in_flight: usize,
    /// New PUTs per second, open loop.
    #[arg(long, default_value_t = 200.0)]
    pub put_rate: f64,
    /// How long the PUTs go on.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// How long each new operation's job runs.
    #[arg(long, default_value_t = 10.0)]
    pub job_seconds: f64,
    /// Status GETs per second over the in-flight operations, open loop.
    #[arg(long = "get-rate", default_value_t = 2000.0)]
    pub readers_rate: f64,
    /// The type's poll interval.
    #[arg(long, default_value_t = 1.0)]
    pub poll_seconds: f64,
}

#[derive(clap::Args)]
pub struct Args {
    /// The store to run on.
    #[arg(long, value_enum, default_value = "sqlite-full")]
    pub store: StoreKind,
    /// The setups to run, comma-separated, from `polling,webhooks,hooks+10s`.
    #[arg(long, value_delimiter = ',', default_value = "polling,webhooks,hooks+10s")]
    pub setups: Vec<String>,
    #[command(flatten)]
    pub options: Options,
}

#[derive(Clone, Debug)]
pub struct Steady {
    pub label: String,
    pub options: Options,
    pub poll_seconds: f64,
    pub puts: usize,
    pub accept_ms: (f64, f64),
    /// Accept p99 inside the server (its own latency histogram; the bucket bound, ms): what
    /// of `accept_ms` is Slipway's handling rather than the client's or the machine's.
    pub server_accept_p99_ms: Option<f64>,
    /// The store's write transactions' p99 meanwhile (bucket bound, ms): how long a write
    /// that arrives behind one waits for it at most, nearly.
    pub transaction_p99_ms: Option<f64>,
    pub gets: usize,
    pub get_ms: (f64, f64),
    pub dispatch_ms: (f64, f64),
    pub visible_samples: usize,
    pub visible_ms: (f64, f64),
    pub aap_requests_per_second: f64,
    /// Cores Slipway's threads kept busy on average while the PUTs and GETs went on.
    pub slipway_cores: Option<f64>,
}

impl Steady {
    pub fn json(&self) -> Value {
        json!({"scenario": "steady", "setup": self.label, "in_flight": self.options.in_flight,
               "put_rate": self.options.put_rate, "job_seconds": self.options.job_seconds,
               "poll_seconds": self.poll_seconds, "puts": self.puts,
               "accept_p50_ms": self.accept_ms.0, "accept_p99_ms": self.accept_ms.1,
               "server_accept_p99_le_ms": self.server_accept_p99_ms,
               "store_transaction_p99_le_ms": self.transaction_p99_ms,
               "gets": self.gets, "get_rate": self.options.readers_rate,
               "get_p50_ms": self.get_ms.0, "get_p99_ms": self.get_ms.1,
               "first_dispatch_p50_ms": self.dispatch_ms.0, "first_dispatch_p99_ms": self.dispatch_ms.1,
               "finish_to_visible_samples": self.visible_samples,
               "finish_to_visible_p50_ms": self.visible_ms.0, "finish_to_visible_p99_ms": self.visible_ms.1,
               "aap_requests_per_second": self.aap_requests_per_second, "slipway_cores": self.slipway_cores})
    }
}

pub async fn run(args: Args) -> Result<(), String> {
    let all = setups(args.store, args.options.poll_seconds);
    if let Some(unknown) = args.setups.iter().find(|s| !all.iter().any(|(label, _)| label == s)) {
        return Err(format!("unknown setup '{unknown}': use polling, webhooks or hooks+10s"));
    }
    let mut rows = Vec::new();
    for (label, setup) in all.into_iter().filter(|(label, _)| args.setups.iter().any(|s| s == label)) {
        rows.push(measure(label, &setup, &args.options).await?);
    }
    print(&rows);
    Ok(())
}

/// Slipway's steady setups: polling every `poll_seconds`; the same with AAP webhooks; and
/// webhooks with polling as a 10 s safety net, as a deployment with webhooks would run.
pub fn setups(store: StoreKind, poll_seconds: f64) -> Vec<(&'static str, Setup)> {
    let polling = Setup::new(store, poll_seconds);
    vec![
        ("polling", polling.clone()),
        ("webhooks", Setup { webhooks: true, ..polling }),
        ("hooks+10s", Setup { webhooks: true, ..Setup::new(store, 10.0) }),
    ]
}

pub fn print(rows: &[Steady]) {
    println!("steady: open-loop PUTs of jobs while operations are in flight (latencies p50 / p99, ms)");
    println!(
        "{:<9} {:>9} {:>6} {:>5} {:>17} {:>12} {:>12} {:>17} {:>17} {:>17} {:>9} {:>6}",
        "setup",
        "in flight",
        "PUT/s",
        "poll",
        "accept",
        "server p99 ≤",
        "commit p99 ≤",
        "status GET",
        "first dispatch",
        "finish→visible",
        "AAP req/s",
        "cores"
    );
    for r in rows {
        let pair = |(a, b): (f64, f64)| format!("{a:.1} / {b:.1}");
        println!(
            "{:<9} {:>9} {:>6.0} {:>5} {:>17} {:>12} {:>12} {:>17} {:>17} {:>17} {:>9.0} {:>6}",
            r.label,
            r.options.in_flight,
            r.options.put_rate,
            r.poll_seconds,
            pair(r.accept_ms),
            r.server_accept_p99_ms.map_or("-".into(), |ms| format!("{ms}")),
            r.transaction_p99_ms.map_or("-".into(), |ms| format!("{ms}")),
            pair(r.get_ms),
            pair(r.dispatch_ms),
            pair(r.visible_ms),
            r.aap_requests_per_second,
            r.slipway_cores.map_or("-".into(), |c| format!("{c:.2}"))
        );
    }
    println!("{}", Value::Array(rows.iter().map(Steady::json).collect()));
}

/// Wall-clock microseconds, the simulator's time base.
pub(crate) fn now_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

pub async fn measure(label: &str, setup: &Setup, o: &Options) -> Result<Steady, String> {
    let setup = Setup { max_concurrent: setup.max_concurrent.max(o.in_flight + 8192), ..setup.clone() };
    let rig = Rig::start(&setup, o.job_seconds).await?;
    let sim = rig.sim.handle();
    // Jobs that outlive the run keep these operations in flight.
    let held = rig.client.put_all(names("held", o.in_flight), Some(86_400.0)).await?;
    let settle = Instant::now();
    while sim.job_count() < o.in_flight {
        if settle.elapsed() > Duration::from_secs(300) {
            return Err("the in-flight operations were not all launched within 300 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let held_urls: Arc<Vec<String>> = Arc::new(held.into_iter().map(|a| a.status_url).collect());
    sim.reset_requests();
    let before = scrape::scrape(&rig.client).await?;
    let counting = Instant::now();
    let cpu_before = crate::harness::slipway_cpu_seconds();

    let stop_readers = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers = spawn_readers(&rig.client, held_urls, o.readers_rate, stop_readers.clone());

    // Open loop: each PUT starts at its scheduled time, whatever the earlier ones are doing.
    let total = (o.put_rate * o.seconds).round() as usize;
    let interval = Duration::from_secs_f64(1.0 / o.put_rate);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    // Every tenth new operation is watched from its PUT on, while the load goes on: a job
    // that finishes before the last PUT must be seen finishing then, not when the PUTs end.
    let (sampled, samples) = tokio::sync::mpsc::unbounded_channel();
    let watcher = {
        let (sim, client) = (rig.sim.handle(), rig.client.clone());
        let limit = o.job_seconds + 3.0 * setup.poll_seconds + 30.0;
        tokio::spawn(async move { watch_until_visible(&sim, &client, samples, limit).await })
    };
    let mut puts = tokio::task::JoinSet::new();
    for i in 0..total {
        ticker.tick().await;
        let client = rig.client.clone();
        let job_seconds = o.job_seconds;
        let sampled = (i % 10 == 0).then(|| sampled.clone());
        puts.spawn(async move {
            let sent = now_micros();
            let accepted = client.put(&format!("new{i}"), Some(job_seconds)).await?;
            if let Some(sampled) = sampled {
                let _ = sampled.send((accepted.name.clone(), accepted.status_url.clone()));
            }
            Ok::<_, String>((sent, accepted))
        });
    }
    drop(sampled);
    let mut accepted = Vec::new();
    while let Some(done) = puts.join_next().await {
        accepted.push(done.map_err(|e| e.to_string())??);
    }
    stop_readers.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut get_latencies = Vec::new();
    for r in readers {
        get_latencies.extend(r.await.map_err(|e| e.to_string())??);
    }
    let slipway_cores = crate::harness::slipway_cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| (after - before) / counting.elapsed().as_secs_f64());

    let after = scrape::scrape(&rig.client).await?;
    let visible = watcher.await.map_err(|e| e.to_string())??;
    let launches = launch_times(&rig.sim.handle());
    let dispatch: Vec<Duration> = accepted
        .iter()
        .filter_map(|(sent, a)| launches.get(&a.name).map(|(_, created)| micros(created - sent)))
        .collect();
    if dispatch.len() != accepted.len() {
        return Err(format!("{} of {} new operations never launched", accepted.len() - dispatch.len(), accepted.len()));
    }
    let aap = sim.requests().values().sum::<u64>() as f64 / counting.elapsed().as_secs_f64();
    let result = Steady {
        label: label.to_string(),
        options: o.clone(),
        poll_seconds: setup.poll_seconds,
        puts: accepted.len(),
        accept_ms: p50_p99_ms(accepted.iter().map(|(_, a)| a.latency).collect()),
        server_accept_p99_ms: scrape::quantile_bound_ms(
            &scrape::request_latency_buckets(&before, "PUT"),
            &scrape::request_latency_buckets(&after, "PUT"),
            0.99,
        ),
        transaction_p99_ms: scrape::quantile_bound_ms(
            &scrape::transaction_buckets(&before),
            &scrape::transaction_buckets(&after),
            0.99,
        ),
        gets: get_latencies.len(),
        get_ms: p50_p99_ms(get_latencies),
        dispatch_ms: p50_p99_ms(dispatch),
        visible_samples: visible.len(),
        visible_ms: p50_p99_ms(visible),
        aap_requests_per_second: aap,
        slipway_cores,
    };
    rig.stop().await?;
    Ok(result)
}

fn micros(us: i64) -> Duration {
    Duration::from_micros(us.max(0) as u64)
}

/// Status GETs at `rate` per second in total, open loop, over random in-flight operations.
fn spawn_readers(
    client: &Client,
    urls: Arc<Vec<String>>,
    rate: f64,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Result<Vec<Duration>, String>>> {
    const READERS: usize = 16;
    (0..READERS)
        .map(|r| {
            let (client, urls, stop) = (client.clone(), urls.clone(), stop.clone());
            tokio::spawn(async move {
                let mut ticker = tokio::time::interval(Duration::from_secs_f64(READERS as f64 / rate));
                let mut latencies = Vec::new();
                let mut i = r * 7919;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    ticker.tick().await;
                    i = (i + 104_729) % urls.len();
                    let start = Instant::now();
                    client.status(&urls[i]).await?;
                    latencies.push(start.elapsed());
                }
                Ok(latencies)
            })
        })
        .collect()
}

/// Resource name → (job id, created µs) for every simulator job.
pub(crate) fn launch_times(sim: &aap_sim::SimHandle) -> HashMap<String, (u64, i64)> {
    sim.job_times().into_iter().filter_map(|j| Some((j.resource_name?, (j.id, j.created_micros)))).collect()
}

/// For each sampled operation (name, status URL) as it is accepted: once the simulator
/// finished its job, reads its status every 10 ms until terminal; returns finish → visible
/// per sample (resolution 10 ms). Ends when no more samples can come and none is pending;
/// gives up `limit_seconds` after the last sample arrived.
async fn watch_until_visible(
    sim: &aap_sim::SimHandle,
    client: &Client,
    mut samples: tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
    limit_seconds: f64,
) -> Result<Vec<Duration>, String> {
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut job_of: HashMap<String, u64> = HashMap::new();
    let mut visible = Vec::new();
    let mut open = true;
    let mut last_sample = Instant::now();
    while open || !pending.is_empty() {
        loop {
            match samples.try_recv() {
                Ok(sample) => {
                    pending.push(sample);
                    last_sample = Instant::now();
                }
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        if last_sample.elapsed().as_secs_f64() > limit_seconds {
            return Err(format!("{} operations not terminal {limit_seconds} s after the last PUT", pending.len()));
        }
        if pending.iter().any(|(name, _)| !job_of.contains_key(name)) {
            job_of = launch_times(sim).into_iter().map(|(name, (id, _))| (name, id)).collect();
        }
        let ids: Vec<u64> = pending.iter().map(|(name, _)| job_of.get(name).copied().unwrap_or(0)).collect();
        let finished: Vec<(usize, i64)> =
            sim.finished_micros(&ids).into_iter().enumerate().filter_map(|(i, f)| Some((i, f?))).collect();
        let mut checks = tokio::task::JoinSet::new();
        for (i, finished_at) in finished {
            let (client, url) = (client.clone(), pending[i].1.clone());
            checks.spawn(async move {
                let status = client.status(&url).await?;
                let seen = now_micros();
                Ok::<_, String>((i, matches!(status.as_str(), "Succeeded" | "Failed" | "Canceled"), seen - finished_at))
            });
        }
        let mut done = Vec::new();
        while let Some(check) = checks.join_next().await {
            let (i, terminal, us) = check.map_err(|e| e.to_string())??;
            if terminal {
                visible.push(micros(us));
                done.push(i);
            }
        }
        done.sort_unstable();
        for i in done.into_iter().rev() {
            pending.swap_remove(i);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(visible)
}
