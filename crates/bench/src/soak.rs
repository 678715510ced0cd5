//! Soak: a steady mixed load for a long time — creates, updates, actions, deletes, cancels and
//! GETs, AAP webhooks on — with the replicas restarted one at a time now and then, sampled
//! every so often: each replica's RSS and open files, the store's size, the outbox, the
//! operations in flight, and the accept and GET p99 of the window. Flat curves are the goal:
//! ended operations expire (`--operation-ttl-seconds`, short here so expiry happens within
//! the run), job history is capped, nothing accumulates; and the p99s do not drift.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{ChildSlipway, Client, Node, Setup, StoreKind, free_port, p50_p99_ms, postgres_url, unique_name};
use crate::runtimes::{sim_tick_ms, start_sim};
use crate::scrape;

#[derive(clap::Args)]
pub struct Args {
    /// How long the load runs.
    #[arg(long, default_value_t = 30.0)]
    pub minutes: f64,
    /// Client requests per second, mixed.
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    #[arg(long, value_enum, default_value = "postgres")]
    pub store: StoreKind,
    /// Replicas (PostgreSQL; SQLite runs one).
    #[arg(long, default_value_t = 2)]
    pub replicas: usize,
    /// A replica is stopped (SIGTERM) and started again this often, in turn.
    #[arg(long, default_value_t = 300)]
    pub restart_every_seconds: u64,
    /// Samples are taken this often.
    #[arg(long, default_value_t = 30)]
    pub sample_seconds: u64,
    /// `store.operation_ttl_seconds`: ended operations expire this long after they end.
    #[arg(long, default_value_t = 120)]
    pub operation_ttl_seconds: u64,
    /// Resources alive at once, at most; creates refill the pool as deletes empty it.
    #[arg(long, default_value_t = 200)]
    pub resources: usize,
}

/// One replica: its configuration, kept for restarts, and its process when running.
struct Replica {
    dir: tempfile::TempDir,
    port: u16,
    config: String,
    child: Option<ChildSlipway>,
}

impl Replica {
    async fn start(&mut self) -> Result<(), String> {
        self.child = Some(ChildSlipway::start(self.dir.path(), &self.config, self.port).await?.0);
        Ok(())
    }
}

/// What the clients saw in one sample window.
#[derive(Default)]
struct Window {
    accept: Vec<Duration>,
    get: Vec<Duration>,
    /// Answers by kind of request and status (`PUT 201`, `DELETE 409`, `GET refused`).
    answers: BTreeMap<String, u64>,
}

#[derive(Clone, Debug)]
struct Sample {
    minute: f64,
    rss_mb: Vec<f64>,
    open_files: Vec<usize>,
    store_mb: f64,
    outbox: f64,
    active: f64,
    accept_p99_ms: f64,
    get_p99_ms: f64,
    requests: u64,
    unexpected: u64,
}

pub async fn run(args: Args) -> Result<(), String> {
    let replicas_wanted = if args.store == StoreKind::Postgres { args.replicas.max(1) } else { 1 };
    let ports: Vec<u16> = (0..replicas_wanted).map(|_| free_port()).collect::<Result<_, _>>()?;
    let sim = start_sim(1.0, sim_tick_ms(1.0), Some(&format!("http://127.0.0.1:{}", ports[0]))).await?;
    let setup = Setup { webhooks: true, ..Setup::new(args.store, 2.0) };
    let shared_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let schema = unique_name("bench_soak");
    let store = match args.store {
        StoreKind::Postgres => format!("url = \"{}\"\nschema = \"{schema}\"", postgres_url()),
        other => other.config(shared_dir.path()),
    };
    let store = format!("{store}\noperation_ttl_seconds = {}", args.operation_ttl_seconds);
    let mut replicas = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let name = format!("soak-{i}");
        let node = Node { store: store.clone(), name: &name, engine: "" };
        // The load's actions: `restart` of the simulator's compute-instance templates.
        let config = setup.node_config(*port, dir.path(), &sim.base_url(), &node)? + "\n[types.actions.restart]\n";
        let mut replica = Replica { dir, port: *port, config, child: None };
        replica.start().await?;
        replicas.push(replica);
    }
    let clients: Vec<Client> = ports.iter().map(|p| Client::new(format!("http://127.0.0.1:{p}"))).collect();
    let window = Arc::new(Mutex::new(Window::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = tokio::spawn(drive(clients.clone(), args.rate, args.resources, Arc::clone(&window), Arc::clone(&stop)));

    let started = Instant::now();
    let until = started + Duration::from_secs_f64(args.minutes * 60.0);
    let mut next_restart = started + Duration::from_secs(args.restart_every_seconds);
    let mut restarts = 0usize;
    let mut samples = Vec::new();
    println!("minute  rss MB (each)  open files  store MB  outbox  active  accept p99  GET p99  requests  unexpected");
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(args.sample_seconds)).await;
        if Instant::now() >= next_restart {
            let victim = restarts % replicas.len();
            if let Some(child) = replicas[victim].child.take() {
                child.stop()?;
            }
            replicas[victim].start().await?;
            restarts += 1;
            next_restart += Duration::from_secs(args.restart_every_seconds);
        }
        let taken = std::mem::take(&mut *window.lock().expect("window"));
        let sample = sample(&replicas, &clients[0], args.store, shared_dir.path(), &schema, started, taken).await?;
        println!(
            "{:>6.1}  {:>13}  {:>10}  {:>8.1}  {:>6}  {:>6}  {:>10.1}  {:>7.1}  {:>8}  {:>10}",
            sample.minute,
            sample.rss_mb.iter().map(|m| format!("{m:.0}")).collect::<Vec<_>>().join("/"),
            sample.open_files.iter().map(ToString::to_string).collect::<Vec<_>>().join("/"),
            sample.store_mb,
            sample.outbox,
            sample.active,
            sample.accept_p99_ms,
            sample.get_p99_ms,
            sample.requests,
            sample.unexpected
        );
        samples.push(sample);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answers = load.await.map_err(|e| e.to_string())?;
    for r in &mut replicas {
        if let Some(child) = r.child.take() {
            child.stop()?;
        }
    }
    if args.store == StoreKind::Postgres {
        drop_schema(&schema).await?;
    }
    let summary = summarise(&samples, restarts, &answers);
    println!("{}", summary["verdict"].as_str().unwrap_or_default());
    println!("answers: {answers:?}");
    println!("{summary}");
    Ok(())
}

/// The mixed load, open loop at `rate`, until `stop`; every answer counted into `window`
/// (and all of them returned).
async fn drive(
    clients: Vec<Client>,
    rate: f64,
    pool: usize,
    window: Arc<Mutex<Window>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> BTreeMap<String, u64> {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.1)));
    let live: Arc<Mutex<Vec<String>>> = Arc::default();
    let totals: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let in_flight = Arc::new(tokio::sync::Semaphore::new(64));
    let (mut n, mut seed) = (0u64, 0x5eed_u64);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        tick.tick().await;
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let roll = (seed >> 33) % 100;
        n += 1;
        let client = clients[(n as usize) % clients.len()].clone();
        let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else { continue };
        let (live, window, totals) = (Arc::clone(&live), Arc::clone(&window), Arc::clone(&totals));
        let existing = {
            let names = live.lock().expect("live");
            (!names.is_empty()).then(|| names[(seed as usize >> 7) % names.len()].clone())
        };
        let full = live.lock().expect("live").len() >= pool;
        tokio::spawn(async move {
            let _permit = permit;
            let (kind, outcome, took) = match (existing, roll) {
                (Some(name), 0..=29) => request(&client, "GET", &name, None).await,
                (Some(name), 30..=54) if full => request(&client, "PUT", &name, Some(json!({"generation": n}))).await,
                (Some(name), 55..=64) if full => {
                    request(&client, "POST", &format!("{name}/restart"), Some(json!({}))).await
                }
                (Some(name), 65..=84) if full => {
                    let answer = request(&client, "DELETE", &name, None).await;
                    if answer.1 == "202" {
                        live.lock().expect("live").retain(|x| *x != name);
                    }
                    answer
                }
                (Some(_), 85..=89) if full => cancel(&client, n).await,
                _ => {
                    let name = format!("soak-{n}");
                    let answer = request(&client, "PUT", &name, Some(json!({}))).await;
                    if answer.1 == "201" {
                        live.lock().expect("live").push(name);
                    }
                    answer
                }
            };
            let key = format!("{kind} {outcome}");
            let mut w = window.lock().expect("window");
            if outcome.starts_with('2') {
                if kind == "GET" { w.get.push(took) } else { w.accept.push(took) }
            }
            *w.answers.entry(key.clone()).or_default() += 1;
            *totals.lock().expect("totals").entry(key).or_default() += 1;
        });
    }
    // Let the last requests land before the totals are read.
    let _ = in_flight.acquire_many(64).await;
    totals.lock().expect("totals").clone()
}

/// One request: `(method, status or "refused", latency)`.
async fn request(client: &Client, method: &str, name: &str, properties: Option<Value>) -> (String, String, Duration) {
    let url = client.resource_url(name);
    let url = match name.split_once('/') {
        // An action: `{id}/{action}` before the query.
        Some((resource, action)) => client.resource_url(resource).replacen('?', &format!("/{action}?"), 1),
        None => url,
    };
    let request = match (method, properties) {
        ("PUT", Some(p)) => client.http.put(url).json(&json!({"location": "local", "properties": p})),
        ("POST", Some(body)) => client.http.post(url).json(&body),
        ("DELETE", _) => client.http.delete(url),
        _ => client.http.get(url),
    };
    let start = Instant::now();
    let outcome = match request.send().await {
        Ok(r) => r.status().as_u16().to_string(),
        Err(_) => "refused".to_string(),
    };
    (method.to_string(), outcome, start.elapsed())
}

/// Resources the cancels reuse: a canceled create leaves its resource, so fresh names would
/// pile up.
const CANCEL_NAMES: u64 = 16;

/// A long create (or update) canceled right away: `(CANCEL, status of the cancel, its
/// latency)`; `create refused` when the resource is still busy with an earlier one.
async fn cancel(client: &Client, n: u64) -> (String, String, Duration) {
    let Ok(accepted) = client.put(&format!("soak-cancel-{}", n % CANCEL_NAMES), Some(30.0)).await else {
        return ("CANCEL".into(), "create refused".into(), Duration::ZERO);
    };
    let start = Instant::now();
    let url = accepted.status_url.replacen('?', "/cancel?", 1);
    let outcome = match client.http.post(url).send().await {
        Ok(r) => r.status().as_u16().to_string(),
        Err(_) => "refused".to_string(),
    };
    ("CANCEL".into(), outcome, start.elapsed())
}

async fn sample(
    replicas: &[Replica],
    client: &Client,
    store: StoreKind,
    dir: &std::path::Path,
    schema: &str,
    started: Instant,
    window: Window,
) -> Result<Sample, String> {
    let rss_mb = replicas.iter().filter_map(|r| r.child.as_ref()?.rss().ok()).map(|b| b as f64 / 1e6).collect();
    let open_files = replicas
        .iter()
        .filter_map(|r| std::fs::read_dir(format!("/proc/{}/fd", r.child.as_ref()?.child.id())).ok())
        .map(Iterator::count)
        .collect();
    let metrics = scrape::scrape(client).await.unwrap_or_default();
    let store_mb = match store {
        StoreKind::Postgres => postgres_size(schema).await? as f64 / 1e6,
        _ => {
            ["s.db", "s.db-wal"]
                .iter()
                .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
                .map(|m| m.len())
                .sum::<u64>() as f64
                / 1e6
        }
    };
    let unexpected = window.answers.iter().filter(|(k, _)| !expected(k)).map(|(_, n)| n).sum();
    Ok(Sample {
        minute: started.elapsed().as_secs_f64() / 60.0,
        rss_mb,
        open_files,
        store_mb,
        outbox: scrape::gauge_sum(&metrics, "slipway_notification_outbox", ""),
        active: scrape::gauge_sum(&metrics, "slipway_operations_active", ""),
        accept_p99_ms: p99_ms(window.accept),
        get_p99_ms: p99_ms(window.get),
        requests: window.answers.values().sum(),
        unexpected,
    })
}

/// 0 for a window without any.
fn p99_ms(latencies: Vec<Duration>) -> f64 {
    if latencies.is_empty() { 0.0 } else { p50_p99_ms(latencies).1 }
}

/// Answers a client of this mix should see: success, a conflict with an operation in flight
/// (an update or delete racing another), a resource already deleted, and a replica that is
/// restarting (refused, or 503 while it stops), a cancel's resource still busy.
fn expected(key: &str) -> bool {
    let status = key.split_once(' ').map(|(_, s)| s).unwrap_or(key);
    status.starts_with('2') || matches!(status, "409" | "404" | "refused" | "503" | "create refused")
}

/// The schema's tables with their indexes and TOAST, in bytes.
async fn postgres_size(schema: &str) -> Result<i64, String> {
    let (client, connection) =
        tokio_postgres::connect(&postgres_url(), tokio_postgres::NoTls).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let row = client
        .query_one(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::BIGINT FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
            &[&schema],
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(row.get(0))
}

async fn drop_schema(schema: &str) -> Result<(), String> {
    let (client, connection) =
        tokio_postgres::connect(&postgres_url(), tokio_postgres::NoTls).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    // A name this run made (`unique_name`): safe to splice.
    client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.map_err(|e| e.to_string())
}

/// First third against last third: how much each curve moved.
fn summarise(samples: &[Sample], restarts: usize, answers: &BTreeMap<String, u64>) -> Value {
    let third = (samples.len() / 3).max(1);
    let median = |f: &dyn Fn(&Sample) -> f64, part: &[Sample]| {
        let mut v: Vec<f64> = part.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let (first, last) = (&samples[..third.min(samples.len())], &samples[samples.len().saturating_sub(third)..]);
    let metric = |name: &str, f: &dyn Fn(&Sample) -> f64| {
        let (a, b) = (median(f, first), median(f, last));
        (name.to_string(), json!({"first_third": a, "last_third": b, "ratio": if a > 0.0 { b / a } else { 0.0 }}))
    };
    let rss = |s: &Sample| s.rss_mb.iter().sum::<f64>();
    let fds = |s: &Sample| s.open_files.iter().sum::<usize>() as f64;
    let curves: serde_json::Map<String, Value> = [
        metric("rss_mb", &rss),
        metric("open_files", &fds),
        metric("store_mb", &|s| s.store_mb),
        metric("outbox", &|s| s.outbox),
        metric("active", &|s| s.active),
        metric("accept_p99_ms", &|s| s.accept_p99_ms),
        metric("get_p99_ms", &|s| s.get_p99_ms),
    ]
    .into_iter()
    .collect();
    let unexpected: u64 = answers.iter().filter(|(k, _)| !expected(k)).map(|(_, n)| n).sum();
    let verdict = format!(
        "soak: {} samples, {restarts} restarts, {} requests, {unexpected} unexpected answers; last third / first third: \
         RSS {:.2}, open files {:.2}, store {:.2}, accept p99 {:.2}, GET p99 {:.2}",
        samples.len(),
        answers.values().sum::<u64>(),
        curves["rss_mb"]["ratio"].as_f64().unwrap_or(0.0),
        curves["open_files"]["ratio"].as_f64().unwrap_or(0.0),
        curves["store_mb"]["ratio"].as_f64().unwrap_or(0.0),
        curves["accept_p99_ms"]["ratio"].as_f64().unwrap_or(0.0),
        curves["get_p99_ms"]["ratio"].as_f64().unwrap_or(0.0),
    );
    json!({"scenario": "soak", "samples": samples.len(), "restarts": restarts, "unexpected": unexpected,
           "curves": curves, "verdict": verdict})
}
