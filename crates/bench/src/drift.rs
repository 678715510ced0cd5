//! Drift checks coming due all at once (docs/osac-lifecycle.md#drift-detection): N resources
//! of a type with a drift interval, created together, come due within the interval's jitter.
//! Measured: whether the drift cap holds (the engine's drift workers, and the check jobs the
//! simulator runs at once, sampled), new creates' first-dispatch latency while the wave runs
//! against the same run's before it (the yardstick), and what one check costs — Slipway's
//! CPU, store commits and AAP requests — once the wave runs alone.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Client, Rig, Setup, StoreKind, names, p50_p99_ms, slipway_cpu_seconds};
use crate::scrape;

#[derive(clap::Args)]
pub struct Args {
    /// Resources checked for drift.
    #[arg(long, default_value_t = 1000)]
    pub resources: usize,
    /// Their type's drift_check_interval_seconds.
    #[arg(long, default_value_t = 40)]
    pub interval: u64,
    /// How long every simulated job (create or check) runs.
    #[arg(long, default_value_t = 1.0)]
    pub job_seconds: f64,
    /// New creates per second while dispatch latency is measured.
    #[arg(long, default_value_t = 20.0)]
    pub put_rate: f64,
    /// How long each dispatch phase (before the wave, during it) lasts.
    #[arg(long, default_value_t = 8.0)]
    pub phase_seconds: f64,
    /// What-ifs (of a changed spec) run before the wave, to measure what one costs.
    #[arg(long, default_value_t = 100)]
    pub what_ifs: usize,
    #[arg(long, value_enum, default_value = "sqlite-full")]
    pub store: StoreKind,
}

pub async fn run(a: Args) -> Result<(), String> {
    let setup =
        Setup { type_settings: format!("drift_check_interval_seconds = {}", a.interval), ..Setup::new(a.store, 0.5) };
    let rig = Rig::start(&setup, a.job_seconds).await?;
    let cap = slipway_engine::EngineOptions { max_concurrent: setup.max_concurrent, ..Default::default() }.drift_cap();

    let created = rig.client.put_all(names("d", a.resources), None).await?;
    let urls: Vec<String> = created.iter().map(|c| c.status_url.clone()).collect();
    let first_done = Instant::now();
    rig.client.wait_succeeded(&urls, Duration::from_millis(200), Duration::from_secs(600)).await?;
    let wave_at = first_done + Duration::from_secs_f64(a.interval as f64 * 0.9);
    if Instant::now() + Duration::from_secs_f64(a.phase_seconds) > wave_at {
        return Err(format!("creating {} resources outlasted the interval: raise --interval", a.resources));
    }
    let before = dispatch_phase(&rig, "before", &a).await?;
    let what_if = what_if_cost(&rig, a.what_ifs).await?;
    if Instant::now() > wave_at {
        return Err("the what-ifs outlasted the interval: raise --interval or lower --what-ifs".into());
    }
    tokio::time::sleep_until((wave_at + Duration::from_secs(1)).into()).await;

    let sampler = tokio::spawn(sample_in_flight(rig.client.clone(), rig.sim.handle(), a.phase_seconds));
    let during = dispatch_phase(&rig, "during", &a).await?;
    let (max_workers, max_sim_checks) = sampler.await.map_err(|e| e.to_string())??;

    // The wave's rest, alone: what a check costs.
    tokio::time::sleep(Duration::from_secs_f64(a.job_seconds + 2.0)).await;
    let store = rig.app.store();
    let checked = |text: &str| scrape::counter_sum(text, "slipway_drift_checks");
    let (text0, cpu0, stats0, aap0) =
        (scrape::scrape(&rig.client).await?, slipway_cpu_seconds(), store.stats(), sim_requests(&rig));
    let alone = Instant::now();
    let deadline = alone + Duration::from_secs(600);
    let mut text = text0.clone();
    while checked(&text) < a.resources as f64 {
        if Instant::now() > deadline {
            return Err(format!("only {} of {} checks done", checked(&text), a.resources));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        text = scrape::scrape(&rig.client).await?;
    }
    let checks = checked(&text) - checked(&text0);
    let (cpu1, stats1, aap1) = (slipway_cpu_seconds(), store.stats(), sim_requests(&rig));
    let per = |n: f64| if checks > 0.0 { n / checks } else { f64::NAN };
    let cpu_ms = cpu0.zip(cpu1).map(|(a, b)| per((b - a) * 1000.0));
    let drifted = scrape::gauge_sum(&text, "slipway_drift_checks_total", "result=\"Drifted\"");
    rig.stop().await?;

    println!("drift: {} resources, interval {} s, {} s jobs, cap {cap}", a.resources, a.interval, a.job_seconds);
    println!("  first dispatch p50/p99 before the wave: {:.1} / {:.1} ms", before.0, before.1);
    println!("  first dispatch p50/p99 during the wave: {:.1} / {:.1} ms", during.0, during.1);
    println!(
        "  per what-if ({} of a changed spec, before the wave): {} CPU ms, {:.2} store commits, {:.2} AAP requests",
        a.what_ifs,
        what_if.0.map_or("?".into(), |c| format!("{c:.2}")),
        what_if.1,
        what_if.2
    );
    println!(
        "  most drift workers seen: {max_workers} (cap {cap}); most check jobs running at the simulator: {max_sim_checks}"
    );
    println!(
        "  per check, the wave alone ({checks:.0} checks in {:.1} s): {} CPU ms, {:.2} store commits, {:.2} AAP requests; {drifted:.0} drifted",
        alone.elapsed().as_secs_f64(),
        cpu_ms.map_or("?".into(), |c| format!("{c:.2}")),
        per((stats1.commits - stats0.commits) as f64),
        per((aap1 - aap0) as f64),
    );
    let out = json!({"scenario": "drift", "resources": a.resources, "interval_seconds": a.interval,
        "job_seconds": a.job_seconds, "cap": cap,
        "dispatch_before_p50_ms": before.0, "dispatch_before_p99_ms": before.1,
        "dispatch_during_p50_ms": during.0, "dispatch_during_p99_ms": during.1,
        "dispatch_p99_ratio": during.1 / before.1,
        "max_drift_workers": max_workers, "max_check_jobs_running": max_sim_checks,
        "checks_alone": checks, "cpu_ms_per_check": cpu_ms,
        "commits_per_check": per((stats1.commits - stats0.commits) as f64),
        "aap_requests_per_check": per((aap1 - aap0) as f64), "drifted": drifted,
        "what_ifs": a.what_ifs, "cpu_ms_per_what_if": what_if.0, "commits_per_what_if": what_if.1,
        "aap_requests_per_what_if": what_if.2});
    println!("{out}");
    Ok(())
}

/// `n` what-ifs of a changed spec on the first resources, 32 at a time, each followed to its
/// end: Slipway's CPU ms, store commits and AAP requests per what-if.
async fn what_if_cost(rig: &Rig, n: usize) -> Result<(Option<f64>, f64, f64), String> {
    let store = rig.app.store();
    let (cpu0, stats0, aap0) = (slipway_cpu_seconds(), store.stats(), sim_requests(rig));
    let queue = std::sync::Arc::new(std::sync::Mutex::new(0..n));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..32.min(n) {
        let (client, queue) = (rig.client.clone(), queue.clone());
        tasks.spawn(async move {
            loop {
                let Some(i) = queue.lock().map_err(|e| e.to_string())?.next() else { return Ok::<_, String>(()) };
                let url = client.resource_url(&format!("d{i}")).replace("?api-version", "/whatIf?api-version");
                let body = json!({"location": "local", "properties": {"size": "large", "image": "debian"}});
                let r = client.http.post(url).json(&body).send().await.map_err(|e| e.to_string())?;
                let status_url = r
                    .headers()
                    .get("azure-asyncoperation")
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| format!("what-if d{i}: {}", r.status()))?
                    .to_string();
                client.wait_succeeded(&[status_url], Duration::from_millis(100), Duration::from_secs(120)).await?;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| e.to_string())??;
    }
    let (cpu1, stats1, aap1) = (slipway_cpu_seconds(), store.stats(), sim_requests(rig));
    let per = |x: f64| x / n.max(1) as f64;
    let cpu = cpu0.zip(cpu1).map(|(a, b)| per((b - a) * 1000.0));
    Ok((cpu, per((stats1.commits - stats0.commits) as f64), per((aap1 - aap0) as f64)))
}

fn sim_requests(rig: &Rig) -> u64 {
    rig.sim.handle().requests().values().sum()
}

/// Creates at `put_rate` for `phase_seconds`: from each PUT to its job's creation at the
/// simulator, p50 and p99 in ms.
async fn dispatch_phase(rig: &Rig, phase: &str, a: &Args) -> Result<(f64, f64), String> {
    let total = (a.put_rate * a.phase_seconds).round() as usize;
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / a.put_rate));
    let mut puts = tokio::task::JoinSet::new();
    for i in 0..total {
        ticker.tick().await;
        let client = rig.client.clone();
        let name = format!("{phase}{i}");
        puts.spawn(async move {
            let sent = crate::steady::now_micros();
            client.put(&name, None).await.map(|_| (name, sent))
        });
    }
    let mut sent = Vec::new();
    while let Some(done) = puts.join_next().await {
        sent.push(done.map_err(|e| e.to_string())??);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let launched = crate::steady::launch_times(&rig.sim.handle());
        let dispatch: Vec<Duration> = sent
            .iter()
            .filter_map(|(name, at)| {
                launched.get(name).map(|(_, created)| Duration::from_micros((created - at).max(0) as u64))
            })
            .collect();
        if dispatch.len() == sent.len() {
            return Ok(p50_p99_ms(dispatch));
        }
        if Instant::now() > deadline {
            return Err(format!("{phase}: {} of {} creates never launched", sent.len() - dispatch.len(), sent.len()));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The most drift workers (Slipway's gauge) and check jobs running at the simulator seen,
/// sampled every 100 ms for `seconds`.
async fn sample_in_flight(client: Client, sim: aap_sim::SimHandle, seconds: f64) -> Result<(f64, usize), String> {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let (mut workers, mut checks) = (0.0f64, 0usize);
    while Instant::now() < end {
        let text = scrape::scrape(&client).await?;
        workers = workers.max(scrape::gauge_sum(&text, "slipway_engine_drift_workers", ""));
        let running = sim
            .jobs()
            .iter()
            .filter(|j| j.job_type == "check" && matches!(j.status.as_str(), "pending" | "waiting" | "running"))
            .count();
        checks = checks.max(running);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((workers, checks))
}
