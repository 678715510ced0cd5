//! Replicas on one PostgreSQL, as child processes (`slipway serve`, each its own node name):
//! * the burn-down against 1 and N replicas — total ops/s, CPU per op over every replica,
//!   and what replicas cost each other: writes refused by a fence (a lease another replica
//!   took) and transactions rolled back by a deadlock or serialization failure;
//! * takeover — operations in flight on N replicas, one killed with SIGKILL while launches
//!   are still going out: how long from the kill until each operation the killed replica
//!   held reaches Succeeded, by what it was doing then — a job running at the controller, a
//!   launch whose request had reached the controller, a launch intent whose request had not
//!   (that one may be relaunched only once the launch-ambiguity window has passed) — and
//!   every key's jobs at the controller counted (exactly once).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use slipway_domain::{JobState, ResourceRecord};
use slipway_store::postgres::{PostgresOptions, PostgresStore};

use crate::harness::{
    Accepted, ChildSlipway, Node, Setup, StoreKind, all_records, free_port, names, p50_p99_ms, postgres_url,
    unique_name,
};
use crate::runtimes::{SimServer, sim_tick_ms, start_sim};
use crate::scrape;

#[derive(clap::Args)]
pub struct Args {
    /// Replica counts for the burn-down, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,3")]
    pub replicas: Vec<usize>,
    /// Creates per burn-down run (zero-duration jobs).
    #[arg(long, default_value_t = 3_000)]
    pub ops: usize,
    /// Replicas in the takeover run; one of them is killed.
    #[arg(long, default_value_t = 3)]
    pub takeover_replicas: usize,
    /// Creates in the takeover run.
    #[arg(long, default_value_t = 300)]
    pub takeover_ops: usize,
    /// The takeover run's jobs last this long at the simulator.
    #[arg(long, default_value_t = 3.0)]
    pub job_seconds: f64,
    /// `engine.lease_seconds` of every replica in the takeover run.
    #[arg(long, default_value_t = 10)]
    pub lease_seconds: u64,
    /// The type's poll interval.
    #[arg(long, default_value_t = 0.5)]
    pub poll_seconds: f64,
}

pub async fn run(args: Args) -> Result<(), String> {
    let mut rows = Vec::new();
    for &n in &args.replicas {
        rows.push(burn_down(n, args.ops, args.poll_seconds).await?);
    }
    print_burn_down(&rows);
    let takeover = takeover(&args).await?;
    takeover.print();
    // Last, every record on one line: what `compare` reads.
    let mut all: Vec<Value> = rows.iter().map(ReplicaBurnDown::json).collect();
    all.push(takeover.json());
    println!("{}", Value::Array(all));
    Ok(())
}

/// N replicas of one Slipway on a fresh PostgreSQL schema, all talking to `sim`.
struct Replicas {
    nodes: Vec<Option<ChildSlipway>>,
    schema: String,
    _dirs: Vec<tempfile::TempDir>,
}

impl Replicas {
    async fn start(n: usize, setup: &Setup, sim: &SimServer, engine: &str) -> Result<Replicas, String> {
        let schema = unique_name("bench_replicas");
        let store = format!("url = \"{}\"\nschema = \"{schema}\"", postgres_url());
        let (mut nodes, mut dirs) = (Vec::new(), Vec::new());
        for i in 0..n {
            let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
            let port = free_port()?;
            let name = node_name(i);
            let node = Node { store: store.clone(), name: &name, engine };
            let config = setup.node_config(port, dir.path(), &sim.base_url(), &node)?;
            nodes.push(Some(ChildSlipway::start(dir.path(), &config, port).await?.0));
            dirs.push(dir);
        }
        Ok(Replicas { nodes, schema, _dirs: dirs })
    }

    fn running(&self) -> impl Iterator<Item = &ChildSlipway> {
        self.nodes.iter().flatten()
    }

    /// PUTs `names` spread evenly over the replicas, each taking its share concurrently.
    async fn put_spread(&self, names: Vec<String>, delay_seconds: Option<f64>) -> Result<Vec<Accepted>, String> {
        let clients: Vec<_> = self.running().map(|n| n.client.clone()).collect();
        let mut shares = vec![Vec::new(); clients.len()];
        for (i, name) in names.into_iter().enumerate() {
            shares[i % clients.len()].push(name);
        }
        let mut puts = tokio::task::JoinSet::new();
        for (client, share) in clients.into_iter().zip(shares) {
            puts.spawn(async move { client.put_all(share, delay_seconds).await });
        }
        let mut all = Vec::new();
        while let Some(accepted) = puts.join_next().await {
            all.extend(accepted.map_err(|e| e.to_string())??);
        }
        Ok(all)
    }

    fn cpu_seconds(&self) -> Option<f64> {
        self.running().map(ChildSlipway::cpu_seconds).sum()
    }

    /// A counter's value summed over every series of it and over every running replica.
    async fn counter(&self, name: &str) -> Result<f64, String> {
        let mut total = 0.0;
        for node in self.running() {
            total += scrape::counter_sum(&scrape::scrape(&node.client).await?, name);
        }
        Ok(total)
    }

    /// The store the replicas share, opened beside them to see who holds what.
    async fn store(&self) -> Result<PostgresStore, String> {
        let options = PostgresOptions { schema: Some(self.schema.clone()), ..PostgresOptions::new(postgres_url()) };
        PostgresStore::connect(options).await.map_err(|e| e.to_string())
    }

    fn stop(self) -> Result<(), String> {
        for node in self.nodes.into_iter().flatten() {
            node.stop()?;
        }
        Ok(())
    }
}

fn node_name(i: usize) -> String {
    format!("bench-{i}")
}

#[derive(Clone, Debug)]
pub struct ReplicaBurnDown {
    pub replicas: usize,
    pub ops: usize,
    pub seconds: f64,
    pub cpu_seconds: Option<f64>,
    pub fenced_writes: f64,
    pub conflicts: f64,
}

impl ReplicaBurnDown {
    pub fn ops_per_second(&self) -> f64 {
        self.ops as f64 / self.seconds
    }

    pub fn json(&self) -> Value {
        json!({"scenario": "replicas", "setup": format!("burn-down, {} replicas", self.replicas),
               "replicas": self.replicas, "ops": self.ops, "seconds": self.seconds,
               "ops_per_second": self.ops_per_second(),
               "cpu_ms_per_op": self.cpu_seconds.map(|s| s * 1000.0 / self.ops as f64),
               "fenced_writes": self.fenced_writes, "transaction_conflicts": self.conflicts})
    }
}

pub async fn burn_down(replicas: usize, ops: usize, poll_seconds: f64) -> Result<ReplicaBurnDown, String> {
    let sim = start_sim(0.0, sim_tick_ms(0.0), None).await?;
    let setup = Setup::new(StoreKind::Postgres, poll_seconds);
    let nodes = Replicas::start(replicas, &setup, &sim, "").await?;
    let cpu_before = nodes.cpu_seconds();
    let start = Instant::now();
    let accepted = nodes.put_spread(names("vm", ops), None).await?;
    let urls: Vec<String> = accepted.into_iter().map(|a| a.status_url).collect();
    let first = nodes.running().next().ok_or("no replica")?;
    first.client.wait_succeeded(&urls, Duration::from_millis(20), Duration::from_secs(900)).await?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = nodes.cpu_seconds().zip(cpu_before).map(|(a, b)| a - b);
    let fenced_writes = nodes.counter("slipway_engine_fenced_writes").await?;
    let conflicts = nodes.counter("slipway_store_transaction_conflicts").await?;
    nodes.stop()?;
    sim.shutdown().await;
    Ok(ReplicaBurnDown { replicas, ops, seconds, cpu_seconds, fenced_writes, conflicts })
}

pub fn print_burn_down(rows: &[ReplicaBurnDown]) {
    println!("replicas: burn-down on one PostgreSQL, creates spread over the replicas");
    println!(
        "{:>9} {:>7} {:>8} {:>9} {:>10} {:>13} {:>10}",
        "replicas", "ops", "seconds", "ops/s", "cpu ms/op", "fenced writes", "conflicts"
    );
    for r in rows {
        let cpu = r.cpu_seconds.map_or("-".into(), |s| format!("{:.3}", s * 1000.0 / r.ops as f64));
        println!(
            "{:>9} {:>7} {:>8.2} {:>9.0} {:>10} {:>13.0} {:>10.0}",
            r.replicas,
            r.ops,
            r.seconds,
            r.ops_per_second(),
            cpu,
            r.fenced_writes,
            r.conflicts
        );
    }
    println!("{}", Value::Array(rows.iter().map(ReplicaBurnDown::json).collect()));
}

/// An operation the killed replica held, followed until it is done.
struct Tracked {
    name: String,
    held: Held,
    /// Seconds from the kill until a survivor held its lease.
    moved: Option<f64>,
}

/// What an operation the killed replica held was doing when it was killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Held {
    /// Not launched yet (no launch intent): the next owner launches it.
    NotLaunched,
    /// A launch intent whose request never reached the controller: the next owner finds no
    /// job and may relaunch only after the launch-ambiguity window.
    LaunchNotSent,
    /// A launch intent whose request had reached the controller: the next owner finds it.
    LaunchSent,
    /// A job the replica had recorded as launched: the next owner polls it.
    Running,
}

impl Held {
    fn name(self) -> &'static str {
        match self {
            Held::NotLaunched => "not launched",
            Held::LaunchNotSent => "launch not sent",
            Held::LaunchSent => "launch sent",
            Held::Running => "job running",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Takeover {
    pub replicas: usize,
    pub ops: usize,
    pub lease_seconds: u64,
    pub launch_ambiguity_seconds: u64,
    pub job_seconds: f64,
    /// Seconds from the kill until a survivor held the operation's lease, and until it
    /// Succeeded, by what each held operation was doing.
    pub held: BTreeMap<Held, Vec<(f64, f64)>>,
    /// Keys with more than one job at the controller, and with none.
    pub duplicated: usize,
    pub missing: usize,
}

impl Takeover {
    /// p99 of kill → taken over for the operations the next owner can go on with at once
    /// (all but those waiting out the ambiguity window), in seconds.
    pub fn found_p99(&self) -> Option<f64> {
        let found: Vec<f64> = self
            .held
            .iter()
            .filter(|(h, _)| **h != Held::LaunchNotSent)
            .flat_map(|(_, v)| v.iter().map(|(moved, _)| *moved))
            .collect();
        (!found.is_empty()).then(|| seconds_p50_p99(&found).1)
    }

    pub fn json(&self) -> Value {
        let held: serde_json::Map<String, Value> = self
            .held
            .iter()
            .map(|(h, v)| {
                let (moved, done) = split(v);
                let (m50, m99) = seconds_p50_p99(&moved);
                let (d50, d99) = seconds_p50_p99(&done);
                let row = json!({"count": v.len(), "moved_p50_seconds": m50, "moved_p99_seconds": m99,
                                 "succeeded_p50_seconds": d50, "succeeded_p99_seconds": d99});
                (h.name().to_string(), row)
            })
            .collect();
        json!({"scenario": "replicas", "setup": "takeover", "replicas": self.replicas, "ops": self.ops,
               "lease_seconds": self.lease_seconds, "launch_ambiguity_seconds": self.launch_ambiguity_seconds,
               "job_seconds": self.job_seconds, "held_by_killed": held, "found_moved_p99_seconds": self.found_p99(),
               "keys_duplicated": self.duplicated, "keys_missing": self.missing})
    }

    pub fn print(&self) {
        println!(
            "replicas: takeover — {} creates ({} s jobs) on {} replicas, one SIGKILLed mid-launch; lease {} s, \
             launch-ambiguity window {} s; seconds from the kill",
            self.ops, self.job_seconds, self.replicas, self.lease_seconds, self.launch_ambiguity_seconds
        );
        println!(
            "{:<18} {:>6} {:>10} {:>10} {:>14} {:>14}",
            "held by the killed", "ops", "moved p50", "moved p99", "succeeded p50", "succeeded p99"
        );
        for (held, v) in &self.held {
            let (moved, done) = split(v);
            let ((m50, m99), (d50, d99)) = (seconds_p50_p99(&moved), seconds_p50_p99(&done));
            println!("{:<18} {:>6} {m50:>10.2} {m99:>10.2} {d50:>14.2} {d99:>14.2}", held.name(), v.len());
        }
        println!("keys with two jobs at the controller: {}, with none: {}", self.duplicated, self.missing);
        println!("{}", self.json());
    }
}

fn split(pairs: &[(f64, f64)]) -> (Vec<f64>, Vec<f64>) {
    pairs.iter().copied().unzip()
}

fn seconds_p50_p99(seconds: &[f64]) -> (f64, f64) {
    let (p50, p99) = p50_p99_ms(seconds.iter().map(|s| Duration::from_secs_f64(*s)).collect());
    (p50 / 1e3, p99 / 1e3)
}

/// The AAP provider's default window: its 30 s request timeout plus a minute.
const LAUNCH_AMBIGUITY_SECONDS: u64 = 90;

pub async fn takeover(args: &Args) -> Result<Takeover, String> {
    let sim = start_sim(args.job_seconds, sim_tick_ms(args.job_seconds), None).await?;
    let setup = Setup::new(StoreKind::Postgres, args.poll_seconds);
    let engine = format!("lease_seconds = {}", args.lease_seconds);
    let mut nodes = Replicas::start(args.takeover_replicas.max(2), &setup, &sim, &engine).await?;
    let store = nodes.store().await?;
    let ops = args.takeover_ops;
    let accepted = nodes.put_spread(names("vm", ops), Some(args.job_seconds)).await?;
    let status_urls: HashMap<String, String> = accepted.into_iter().map(|a| (a.name, a.status_url)).collect();

    // Kill while launches are still going out: some of the victim's operations then have a
    // launch intent whose request did or did not reach the controller.
    let start = Instant::now();
    while sim.handle().job_count() < ops / 2 {
        if start.elapsed() > Duration::from_secs(120) {
            return Err("half the jobs were not launched within 120 s".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut victim = nodes.nodes[0].take().ok_or("no replica")?;
    victim.child.kill().map_err(|e| e.to_string())?;
    let killed = Instant::now();
    let _ = victim.child.wait();
    let at_controller = keys_at_controller(&sim);
    let held: Vec<(String, Held)> = all_records(&store)
        .await?
        .into_iter()
        .filter(|r| r.lease.as_ref().is_some_and(|l| l.owner == node_name(0)))
        .map(|r| {
            let held = held_as(&r, &at_controller);
            (r.id.name.clone(), held)
        })
        .collect();

    let survivor = nodes.running().next().ok_or("no survivor")?.client.clone();
    let limit = Duration::from_secs(args.lease_seconds + LAUNCH_AMBIGUITY_SECONDS + 120);
    let mut tracked: Vec<Tracked> = held.into_iter().map(|(name, held)| Tracked { name, held, moved: None }).collect();
    let mut times: BTreeMap<Held, Vec<(f64, f64)>> = BTreeMap::new();
    while !tracked.is_empty() {
        if killed.elapsed() > limit {
            return Err(format!("{} operations of the killed replica not done within {limit:?}", tracked.len()));
        }
        // Moved once a survivor took the lease over (or took it and already gave it back).
        let owners: HashMap<String, Option<String>> = all_records(&store)
            .await?
            .into_iter()
            .map(|r| (r.id.name.clone(), r.lease.map(|l| l.owner.into())))
            .collect();
        let now = killed.elapsed().as_secs_f64();
        let mut still = Vec::new();
        for mut t in tracked {
            let owner = owners.get(&t.name).cloned().flatten();
            if t.moved.is_none() && owner.is_none_or(|o| o != node_name(0)) {
                t.moved = Some(now);
            }
            let url = status_urls.get(&t.name).ok_or_else(|| format!("no status URL for {}", t.name))?;
            let url = url.replacen(&victim.client.base, &survivor.base, 1);
            match survivor.status(&url).await?.as_str() {
                "Succeeded" => {
                    let done = killed.elapsed().as_secs_f64();
                    times.entry(t.held).or_default().push((t.moved.unwrap_or(done), done));
                }
                s @ ("Failed" | "Canceled") => return Err(format!("{} ended {s}", t.name)),
                _ => still.push(t),
            }
        }
        tracked = still;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all_urls: Vec<String> =
        status_urls.values().map(|u| u.replacen(&victim.client.base, &survivor.base, 1)).collect();
    survivor.wait_succeeded(&all_urls, Duration::from_millis(50), Duration::from_secs(300)).await?;
    let mut jobs_per_key: HashMap<String, usize> = HashMap::new();
    for key in sim.handle().jobs().iter().filter_map(job_key) {
        *jobs_per_key.entry(key).or_default() += 1;
    }
    let duplicated = jobs_per_key.values().filter(|n| **n > 1).count();
    let missing = ops.saturating_sub(jobs_per_key.len());
    drop(store);
    nodes.stop()?;
    sim.shutdown().await;
    Ok(Takeover {
        replicas: args.takeover_replicas.max(2),
        ops,
        lease_seconds: args.lease_seconds,
        launch_ambiguity_seconds: LAUNCH_AMBIGUITY_SECONDS,
        job_seconds: args.job_seconds,
        held: times,
        duplicated,
        missing,
    })
}

fn job_key(job: &aap_sim::SimJob) -> Option<String> {
    job.extra_vars.get(slipway_provider::KEY_VAR)?.as_str().map(str::to_string)
}

fn keys_at_controller(sim: &SimServer) -> std::collections::HashSet<String> {
    sim.handle().jobs().iter().filter_map(job_key).collect()
}

fn held_as(record: &ResourceRecord, at_controller: &std::collections::HashSet<String>) -> Held {
    let Some(job) = record.jobs.iter().rev().find(|j| !j.state.is_terminal()) else { return Held::NotLaunched };
    match job.state {
        JobState::Launching if at_controller.contains(job.idempotency_key.as_str()) => Held::LaunchSent,
        JobState::Launching => Held::LaunchNotSent,
        _ => Held::Running,
    }
}
