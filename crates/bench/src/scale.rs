//! Many stored resources: N creates run to completion through an in-process Slipway, then a
//! fresh Slipway child process opens that database: time to ready, list-page latency
//! (first page, and pages deep in the collection via `nextLink`), its RSS and the database's
//! size per resource. Start-up is measured over [`STARTS`] starts of the same database (the
//! first right after populating), so one slow start shows as a spread instead of moving the
//! figure.
//!
//! With `--through-http M` below N, only M resources are created through the API; the rest
//! are copies of them under new names, written through the store's own `change` (the
//! records the engine left, job history and all), since a million creates through HTTP
//! would take most of an hour of the engine running jobs nobody measures.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use slipway_domain::SystemClock;

use crate::harness::{ChildSlipway, Rig, SUB, Setup, StoreKind, free_port, names, p50_p99_ms};

#[derive(Clone, Debug)]
pub struct Scale {
    pub resources: usize,
    /// Of `resources`, how many were created through the API (the rest copied in the store).
    pub through_http: usize,
    pub populate_seconds: f64,
    /// The median start: process spawned → `/readyz` answers 200.
    pub startup_ms: f64,
    /// Every start, the first (right after populating) first.
    pub starts_ms: Vec<f64>,
    pub first_page_ms: (f64, f64),
    pub deep_page_ms: (f64, f64),
    pub page_size: usize,
    pub rss_bytes: u64,
    /// The database's files (with its write-ahead log) after the runs.
    pub store_bytes: u64,
}

impl Scale {
    pub fn json(&self) -> Value {
        json!({"scenario": "scale", "resources": self.resources, "through_http": self.through_http,
               "populate_seconds": self.populate_seconds,
               "startup_ms": self.startup_ms, "startup_first_ms": self.starts_ms.first(),
               "startup_max_ms": self.starts_ms.iter().copied().fold(0.0, f64::max), "page_size": self.page_size,
               "first_page_p50_ms": self.first_page_ms.0, "first_page_p99_ms": self.first_page_ms.1,
               "walk_page_p50_ms": self.deep_page_ms.0, "walk_page_p99_ms": self.deep_page_ms.1,
               "rss_bytes": self.rss_bytes, "store_bytes_per_resource": self.store_bytes_per_resource()})
    }

    pub fn store_bytes_per_resource(&self) -> f64 {
        self.store_bytes as f64 / self.resources.max(1) as f64
    }

    pub fn print(&self) {
        println!("scale: a fresh Slipway process over stored resources (SQLite FULL)");
        if self.through_http < self.resources {
            println!(
                "({} created through the API, the other {} copies of them written through the store's change)",
                self.through_http,
                self.resources - self.through_http
            );
        }
        println!(
            "{:>10} {:>12} {:>11} {:>19} {:>19} {:>9} {:>11}",
            "resources", "populate s", "startup ms", "first page p50/p99", "page walk p50/p99", "RSS MiB", "DB B/res"
        );
        println!(
            "{:>10} {:>12.1} {:>11.1} {:>19} {:>19} {:>9.1} {:>11.0}",
            self.resources,
            self.populate_seconds,
            self.startup_ms,
            format!("{:.1} / {:.1}", self.first_page_ms.0, self.first_page_ms.1),
            format!("{:.1} / {:.1}", self.deep_page_ms.0, self.deep_page_ms.1),
            self.rss_bytes as f64 / 1048576.0,
            self.store_bytes_per_resource()
        );
        let starts: Vec<String> = self.starts_ms.iter().map(|ms| format!("{ms:.1}")).collect();
        println!("starts (ms, in order): {}", starts.join(" · "));
        println!("{}", self.json());
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Resources stored before the fresh process starts.
    #[arg(long, default_value_t = 100_000)]
    pub resources: usize,
    /// Of them, created through the API (default: all); the rest are copies written through
    /// the store.
    #[arg(long)]
    pub through_http: Option<usize>,
}

pub async fn run(args: Args) -> Result<(), String> {
    measure(args.resources, args.through_http.unwrap_or(args.resources)).await?.print();
    Ok(())
}

/// Starts of the populated database measured.
pub const STARTS: usize = 5;

pub async fn measure(resources: usize, through_http: usize) -> Result<Scale, String> {
    let through_http = through_http.clamp(1, resources.max(1));
    const PAGE: usize = 100;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let setup = Setup::new(StoreKind::SqliteFull, 0.2);
    let populate = Instant::now();
    let rig = Rig::start_in(&setup, 0.0, dir.path()).await?;
    let accepted = rig.client.put_all(names("vm", through_http), None).await?;
    let urls: Vec<String> = accepted.into_iter().map(|a| a.status_url).collect();
    rig.client.wait_succeeded(&urls, Duration::from_millis(20), Duration::from_secs(900)).await?;
    copy_in_store(rig.app.store(), through_http, resources).await?;
    let populate_seconds = populate.elapsed().as_secs_f64();
    let sim_url = rig.sim.base_url();
    let sim = rig.stop_app().await?;
    // The populating process's writes still being flushed by the kernel would land in the
    // first start's own commits (a synchronous=FULL fsync waits for them): flush them now.
    let _ = std::process::Command::new("sync").status();

    let port = free_port()?;
    let config = setup.config(port, dir.path(), &sim_url)?;
    let (slipway, first_start) = ChildSlipway::start(dir.path(), &config, port).await?;
    let list = format!(
        "{}/subscriptions/{SUB}/resourceGroups/bench/providers/Slipway.Example/computeInstances?api-version={}&$top={PAGE}",
        slipway.client.base,
        crate::harness::API
    );
    let mut first = Vec::new();
    for _ in 0..50 {
        let start = Instant::now();
        get_page(&slipway.client.http, &list).await?;
        first.push(start.elapsed());
    }
    let mut walk = Vec::new();
    let mut next = Some(list);
    let mut seen = 0;
    while let Some(url) = next.take() {
        let start = Instant::now();
        let page = get_page(&slipway.client.http, &url).await?;
        walk.push(start.elapsed());
        seen += page["value"].as_array().map_or(0, Vec::len);
        next = page["nextLink"].as_str().map(str::to_string);
    }
    if seen != resources {
        return Err(format!("the list walk saw {seen} resources, not {resources}"));
    }
    let rss_bytes = slipway.rss()?;
    slipway.stop()?;
    let mut starts_ms = vec![first_start.as_secs_f64() * 1000.0];
    for _ in 1..STARTS {
        let (slipway, started) = ChildSlipway::start(dir.path(), &config, port).await?;
        starts_ms.push(started.as_secs_f64() * 1000.0);
        slipway.stop()?;
    }
    sim.shutdown().await;
    let store_bytes =
        ["s.db", "s.db-wal"].iter().filter_map(|f| std::fs::metadata(dir.path().join(f)).ok()).map(|m| m.len()).sum();
    Ok(Scale {
        resources,
        through_http,
        store_bytes,
        populate_seconds,
        startup_ms: crate::harness::median(&starts_ms),
        starts_ms,
        first_page_ms: p50_p99_ms(first),
        deep_page_ms: p50_p99_ms(walk),
        page_size: PAGE,
        rss_bytes,
    })
}

/// Fills the collection up to `resources` with copies of the `made` resources the API
/// created (`vm0`…), named on from `vm{made}`: each is one `change` that puts the copied
/// record, many at a time so the store batches them as it batches the engine's writes.
async fn copy_in_store(
    store: std::sync::Arc<dyn slipway_store::Store>,
    made: usize,
    resources: usize,
) -> Result<(), String> {
    use slipway_domain::{ArmId, Clock};
    use slipway_store::{ChangeRequest, change_with};
    if made >= resources {
        return Ok(());
    }
    let originals = crate::harness::all_records(store.as_ref()).await?;
    if originals.is_empty() {
        return Err("no resources to copy".into());
    }
    let originals = std::sync::Arc::new(originals);
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(made));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..crate::harness::PUT_CONCURRENCY {
        let (store, originals, next) = (store.clone(), originals.clone(), next.clone());
        writers.spawn(async move {
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n >= resources {
                    return Ok::<_, String>(());
                }
                let mut record = originals[n % originals.len()].clone();
                record.id = ArmId::new(SUB, "bench", "Slipway.Example", "computeInstances", format!("vm{n}"))
                    .map_err(|e| e.to_string())?;
                let request = ChangeRequest::new(record.key(), SystemClock.now());
                change_with(store.as_ref(), request, move |snap| {
                    snap.resource = Some(record);
                    Ok(())
                })
                .await
                .map_err(|e| format!("copying into vm{n}: {e}"))?;
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.map_err(|e| e.to_string())??;
    }
    Ok(())
}

async fn get_page(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let r = http.get(url).send().await.map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("list: {}", r.status()));
    }
    r.json().await.map_err(|e| e.to_string())
}
