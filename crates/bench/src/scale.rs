//! Many stored resources: N creates run to completion through an in-process Slipway, then a
//! fresh Slipway child process opens that database: time to ready, list-page latency
//! (first page, and pages deep in the collection via `nextLink`), and its RSS. Start-up is
//! measured over [`STARTS`] starts of the same database (the first right after populating),
//! so one slow start shows as a spread instead of moving the figure.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{ChildSlipway, Rig, SUB, Setup, StoreKind, free_port, names, p50_p99_ms};

#[derive(Clone, Debug)]
pub struct Scale {
    pub resources: usize,
    pub populate_seconds: f64,
    /// The median start: process spawned → `/readyz` answers 200.
    pub startup_ms: f64,
    /// Every start, the first (right after populating) first.
    pub starts_ms: Vec<f64>,
    pub first_page_ms: (f64, f64),
    pub deep_page_ms: (f64, f64),
    pub page_size: usize,
    pub rss_bytes: u64,
}

impl Scale {
    pub fn json(&self) -> Value {
        json!({"scenario": "scale", "resources": self.resources, "populate_seconds": self.populate_seconds,
               "startup_ms": self.startup_ms, "startup_first_ms": self.starts_ms.first(),
               "startup_max_ms": self.starts_ms.iter().copied().fold(0.0, f64::max), "page_size": self.page_size,
               "first_page_p50_ms": self.first_page_ms.0, "first_page_p99_ms": self.first_page_ms.1,
               "walk_page_p50_ms": self.deep_page_ms.0, "walk_page_p99_ms": self.deep_page_ms.1,
               "rss_bytes": self.rss_bytes})
    }

    pub fn print(&self) {
        println!("scale: a fresh Slipway process over stored resources (SQLite FULL)");
        println!(
            "{:>10} {:>12} {:>11} {:>19} {:>19} {:>9}",
            "resources", "populate s", "startup ms", "first page p50/p99", "page walk p50/p99", "RSS MiB"
        );
        println!(
            "{:>10} {:>12.1} {:>11.1} {:>19} {:>19} {:>9.1}",
            self.resources,
            self.populate_seconds,
            self.startup_ms,
            format!("{:.1} / {:.1}", self.first_page_ms.0, self.first_page_ms.1),
            format!("{:.1} / {:.1}", self.deep_page_ms.0, self.deep_page_ms.1),
            self.rss_bytes as f64 / 1048576.0
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
}

pub async fn run(args: Args) -> Result<(), String> {
    measure(args.resources).await?.print();
    Ok(())
}

/// Starts of the populated database measured.
pub const STARTS: usize = 5;

pub async fn measure(resources: usize) -> Result<Scale, String> {
    const PAGE: usize = 100;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let setup = Setup::new(StoreKind::SqliteFull, 0.2);
    let populate = Instant::now();
    let rig = Rig::start_in(&setup, 0.0, dir.path()).await?;
    let accepted = rig.client.put_all(names("vm", resources), None).await?;
    let urls: Vec<String> = accepted.into_iter().map(|a| a.status_url).collect();
    rig.client.wait_succeeded(&urls, Duration::from_millis(20), Duration::from_secs(900)).await?;
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
    Ok(Scale {
        resources,
        populate_seconds,
        startup_ms: crate::harness::median(&starts_ms),
        starts_ms,
        first_page_ms: p50_p99_ms(first),
        deep_page_ms: p50_p99_ms(walk),
        page_size: PAGE,
        rss_bytes,
    })
}

async fn get_page(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let r = http.get(url).send().await.map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("list: {}", r.status()));
    }
    r.json().await.map_err(|e| e.to_string())
}
