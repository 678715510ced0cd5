//! Every scenario in one run (sized to finish in under 15 minutes on 2 cores), then each
//! goal of the benchmark issues (5, and 22's raised ones) with the value measured in this
//! run. Goals at scales `all` does not reach (a million resources, 100,000 in flight) are
//! measured by their own scenarios.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Setup, StoreKind};
use crate::{aap_requests, burn_down, local_jobs, memory, replicas, scale, seed_design, steady, store_ceiling};

#[derive(clap::Args)]
pub struct Args {
    /// Creates in each burn-down.
    #[arg(long, default_value_t = 10_000)]
    pub ops: usize,
    /// Resources stored for the scale run.
    #[arg(long, default_value_t = 100_000)]
    pub resources: usize,
    #[command(flatten)]
    pub steady: steady::Options,
}

pub async fn run(args: Args) -> Result<(), String> {
    let Args { ops, resources, steady: options } = args;
    let started = Instant::now();
    println!("machine: {} cores; {}", cores(), os());
    println!();

    let mut ceilings = Vec::new();
    for store in StoreKind::ALL {
        ceilings.push(store_ceiling::measure(store, Duration::from_secs(2)).await?);
    }
    store_ceiling::print(&ceilings);
    println!();

    let mut burns = Vec::new();
    for c in &ceilings {
        burns.push(burn_down::measure("slipway", &Setup::new(c.store, 0.5), ops, c.clone()).await?);
    }
    burns.push(burn_down::measure("seed", &Setup::seed(StoreKind::SqliteFull), ops, ceilings[0].clone()).await?);
    burn_down::print(&burns);
    println!();

    let aap =
        vec![aap_requests::measure(1000, 2.0, 1.0, false).await?, aap_requests::measure(1000, 2.0, 1.0, true).await?];
    aap_requests::print(&aap);
    println!();

    let steadies = seed_design::steady_runs(StoreKind::SqliteFull, &options).await?;
    steady::print(&steadies);
    println!();

    let mem = memory::measure(options.in_flight, 5.0, 0.0).await?;
    mem.print();
    println!();

    let sc = scale::measure(resources, resources).await?;
    sc.print();
    println!();

    let local_args = local_jobs::Args { jobs: 8, concurrency: 2, venv: None, poll_seconds: 1.0 };
    let local = local_jobs::measure(&local_args).await;
    match &local {
        Ok(l) => l.print(),
        Err(e) => println!("local-jobs not run: {e}"),
    }
    println!();

    let replica_args = replicas::Args {
        replicas: vec![1, 3],
        ops: ops / 5,
        takeover_replicas: 3,
        takeover_ops: 150,
        job_seconds: 3.0,
        lease_seconds: 10,
        poll_seconds: 0.5,
    };
    let mut replica_runs = Vec::new();
    for &n in &replica_args.replicas {
        replica_runs.push(replicas::burn_down(n, replica_args.ops, replica_args.poll_seconds).await?);
    }
    replicas::print_burn_down(&replica_runs);
    let takeover = replicas::takeover(&replica_args).await?;
    takeover.print();
    println!();

    let find = |label: &str, store: StoreKind| burns.iter().find(|b| b.label == label && b.store == store);
    let sqlite = find("slipway", StoreKind::SqliteFull).ok_or("no SQLite burn-down")?;
    let sqlite_normal = find("slipway", StoreKind::SqliteNormal).ok_or("no SQLite NORMAL burn-down")?;
    let pg = find("slipway", StoreKind::Postgres).ok_or("no PostgreSQL burn-down")?;
    let seed = find("seed", StoreKind::SqliteFull).ok_or("no seed burn-down")?;
    let steady = |label: &str| steadies.iter().find(|s| s.label == label).ok_or(format!("no steady {label} run"));
    let (polling, hooked, hooked_slow, seed_steady) =
        (steady("polling")?, steady("webhooks")?, steady("hooks+10s")?, steady("seed")?);
    let mut goals: Vec<(String, String, bool)> = vec![
        goal("burn-down ≥ 2500 ops/s (SQLite FULL)", sqlite.ops_per_second(), |v| v >= 2500.0, "ops/s"),
        goal("burn-down ratio ≥ 1.3 (SQLite FULL)", sqlite.ratio(), |v| v >= 1.3, ""),
        goal("burn-down ratio ≥ 1 (SQLite NORMAL)", sqlite_normal.ratio(), |v| v >= 1.0, ""),
        goal("burn-down ≥ 1500 ops/s (PostgreSQL)", pg.ops_per_second(), |v| v >= 1500.0, "ops/s"),
        goal("burn-down ratio ≥ 1.5 (PostgreSQL)", pg.ratio(), |v| v >= 1.5, ""),
        goal("AAP requests/op ≤ 1.5 at 1000 ops (polling)", aap[0].per_op(), |v| v <= 1.5, "req/op"),
        goal("finish→visible p50 ≤ 50 ms (webhooks, poll 1 s)", hooked.visible_ms.0, |v| v <= 50.0, "ms"),
        goal("finish→visible p99 ≤ 250 ms (webhooks, poll 1 s)", hooked.visible_ms.1, |v| v <= 250.0, "ms"),
        goal("finish→visible p50 ≤ 100 ms (webhooks, poll 10 s)", hooked_slow.visible_ms.0, |v| v <= 100.0, "ms"),
        goal("finish→visible p99 ≤ 1000 ms (webhooks, poll 10 s)", hooked_slow.visible_ms.1, |v| v <= 1000.0, "ms"),
        goal(
            &format!("finish→visible p50 ≤ poll/2 = {} ms (polling)", polling.poll_seconds * 500.0),
            polling.visible_ms.0,
            |v| v <= polling.poll_seconds * 500.0,
            "ms",
        ),
        goal("accept p99 ≤ 10 ms at 200 PUT/s, 10k in flight", polling.accept_ms.1, |v| v <= 10.0, "ms"),
        goal("status GET p99 ≤ 5 ms at 2000 req/s", polling.get_ms.1, |v| v <= 5.0, "ms"),
        goal("first dispatch p99 ≤ 500 ms, 10k in flight", polling.dispatch_ms.1, |v| v <= 500.0, "ms"),
        goal("RSS ≤ 2048 bytes per in-flight op", mem.per_op_bytes(), |v| v <= 2048.0, "bytes"),
        goal(&format!("startup with {resources} resources ≤ 1000 ms"), sc.startup_ms, |v| v <= 1000.0, "ms"),
        goal(&format!("list page p99 ≤ 20 ms, {resources} resources"), sc.deep_page_ms.1, |v| v <= 20.0, "ms"),
        goal(
            &format!("RSS ≤ 100 MiB over {resources} resources"),
            sc.rss_bytes as f64 / 1_048_576.0,
            |v| v <= 100.0,
            "MiB",
        ),
    ];
    let (one, three) = (replica_runs[0].ops_per_second(), replica_runs[1].ops_per_second());
    let found_p99 = takeover.found_p99().unwrap_or(f64::INFINITY);
    let lease = takeover.lease_seconds as f64;
    let once = takeover.duplicated == 0 && takeover.missing == 0;
    goals.extend([
        goal("3 replicas' burn-down ≥ 0.8 × one replica's", three / one, |v| v >= 0.8, "×"),
        goal(
            &format!("takeover p99 ≤ lease + 2 = {} s (jobs found)", lease + 2.0),
            found_p99,
            |v| v <= lease + 2.0,
            "s",
        ),
        ("takeover: every key launched exactly once".into(), once.to_string(), once),
    ]);
    match &local {
        Ok(l) => goals.extend([
            goal("local jobs: wall added ≤ 10 % of ansible-playbook's", l.added_wall() * 100.0, |v| v <= 10.0, "%"),
            goal("local jobs: CPU added ≤ 5 % of ansible-playbook's", l.added_cpu() * 100.0, |v| v <= 5.0, "%"),
            ("local jobs: every job run exactly once".into(), l.exactly_once().to_string(), l.exactly_once()),
        ]),
        Err(e) => goals.push(("local jobs".into(), format!("not run: {e}"), false)),
    }
    println!("goals (this run)");
    for (name, value, met) in &goals {
        println!("  {:<52} {:>16}  {}", name, value, if *met { "met" } else { "MISSED" });
    }
    println!(
        "seed design in the same run: burn-down {:.0} vs {:.0} ops/s ({:.1}×), AAP {:.3} vs {:.3} req/op; \
         finish→visible p50 {:.0} vs {:.0} ms (polling), {:.0} ms (webhooks)",
        seed.ops_per_second(),
        sqlite.ops_per_second(),
        sqlite.ops_per_second() / seed.ops_per_second(),
        seed.per_op(crate::harness::total(&seed.aap)),
        sqlite.per_op(crate::harness::total(&sqlite.aap)),
        seed_steady.visible_ms.0,
        polling.visible_ms.0,
        hooked.visible_ms.0,
    );
    let summary: Vec<_> = goals.iter().map(|(n, v, m)| json!({"goal": n, "measured": v, "met": m})).collect();
    println!("{}", json!({"scenario": "all", "seconds": started.elapsed().as_secs_f64(), "goals": summary}));
    println!("all scenarios: {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn goal(name: &str, value: f64, met: impl Fn(f64) -> bool, unit: &str) -> (String, String, bool) {
    (name.to_string(), format!("{value:.2} {unit}"), met(value))
}

fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

fn os() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}
