//! `slipway-bench SCENARIO [options]`: runs a scenario on loopback and prints a table plus
//! one JSON line per table. Numbers are measured in the run, never asserted. Build with
//! `--release`; BENCHMARKS.md records the figures and what they mean, and
//! `slipway-bench SCENARIO --help` lists each scenario's options and defaults.
//!
//! Scenarios:
//! * `store-ceiling` — the yardstick: sequential single-row commits per second and commit
//!   latency of SQLite (synchronous FULL, NORMAL) and PostgreSQL.
//! * `policy-cost` — one write's admission-policy evaluation in µs, by the number of
//!   assignments.
//! * `burn-down` — N creates of zero-duration simulator jobs: ops/s, store commits and AAP
//!   requests per op, ratio to ceiling ÷ 3, and Slipway's CPU milliseconds per op; with
//!   `--auth`, every request signed in with an API token.
//! * `aap-requests` — AAP requests per completed operation, polling only vs with webhooks.
//! * `steady` — open-loop PUTs while N operations are in flight: accept, status-GET,
//!   first-dispatch and finish-to-visible latencies, polling and webhooks.
//! * `memory` — RSS of a Slipway child process per in-flight operation.
//! * `drift` — N resources of a type with a drift interval, created together so their checks
//!   come due together: the most drift workers and check jobs seen against the cap, new
//!   creates' first dispatch before and during the wave, and per check the CPU, store commits
//!   and AAP requests once the wave runs alone.
//! * `scale` — a fresh Slipway over N stored resources: startup, list pages, RSS.
//! * `local-jobs` — N creates through the local `ansible` provider against the same playbook
//!   run by `ansible-playbook` at the same concurrency: wall and CPU time Slipway adds per job.
//! * `curve` — `memory` (with a latency probe) at 1k, 10k and 100k operations in flight and
//!   `scale` at 10k, 100k and 1M stored resources: a table per sweep and an SVG of panels per
//!   sweep (`docs/bench/`).
//! * `replicas` — Slipway as 1 and as N replicas on one PostgreSQL: burn-down ops/s, fenced
//!   writes and transaction conflicts; then one replica SIGKILLed mid-launch and how long
//!   its operations take to move again, by what each was doing.
//! * `seed-design` — burn-down and steady as Slipway runs them and as the seed design would
//!   (30 s polls, one status request per job, no webhooks).
//! * `soak` — a steady mixed load for a long time, replicas restarted in turn, sampled for
//!   RSS, open files, store size, the outbox and the p99s: flat curves are the goal.
//! * `all` — the scenarios behind the benchmark issue's goals in one run (not `drift`,
//!   `curve` or `soak`), then each goal as met or missed.
//! * `compare BASE NEW [--rounds R] [--scenario 'NAME OPTIONS']...` — an A/B of two
//!   `slipway-bench` builds: the scenarios alternated for both over several rounds, each
//!   metric's median, every run, the ratio and a verdict (better / worse / within noise).
//!
//! An in-process Slipway runs on a tokio runtime of its own (threads `slipway-rt`) and the
//! simulator on another (one thread, `aap-sim-rt`), so the CPU figures count Slipway's
//! threads only, and the client's timings do not wait behind the simulator's work. Counts
//! come from `Store::stats` and the simulator's request counters, never from logs.
//!
//! PostgreSQL is at `SLIPWAY_BENCH_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`).

mod aap_requests;
mod all;
mod burn_down;
mod compare;
mod curve;
mod drift;
mod guardrails;
mod harness;
mod local_jobs;
mod memory;
mod plot;
mod replicas;
mod runtimes;
mod scale;
mod scrape;
mod seed_design;
mod soak;
mod steady;
mod store_ceiling;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

// As in the slipway binary: glibc malloc took a fifth of the CPU in the burn-down profile (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs a scenario on loopback and prints a table plus one JSON line per table (see the
/// crate docs and BENCHMARKS.md).
#[derive(Parser)]
#[command(name = "slipway-bench", version)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand)]
enum Scenario {
    /// The yardstick: sequential single-row commits per second of each store.
    StoreCeiling(store_ceiling::Args),
    /// N creates of zero-duration jobs at once: ops/s, commits, AAP requests and CPU per op.
    BurnDown(burn_down::Args),
    /// AAP requests per completed operation, polling only vs with webhooks.
    AapRequests(aap_requests::Args),
    /// Open-loop PUTs while operations are in flight: accept, GET, dispatch, finish→visible.
    Steady(steady::Args),
    /// Drift checks of N resources coming due at once: the cap, dispatch beside them, cost per check.
    Drift(drift::Args),
    /// Resident memory of a Slipway child process per in-flight operation.
    Memory(memory::Args),
    /// A fresh Slipway over N stored resources: start-up, list pages, RSS.
    Scale(scale::Args),
    /// The local provider against ansible-playbook: wall and CPU time added per job.
    LocalJobs(local_jobs::Args),
    /// How cost grows with operations in flight and with resources stored, drawn as SVG.
    Curve(curve::Args),
    /// Replicas on one PostgreSQL: burn-down by replica count, and takeover after a SIGKILL.
    Replicas(replicas::Args),
    /// A long steady mixed load with replica restarts: do memory, files, store and p99s stay flat?
    Soak(soak::Args),
    /// Burn-down and steady as Slipway runs them and as the seed design would.
    SeedDesign(seed_design::Args),
    /// What one write's admission-policy evaluation costs, by the number of assignments.
    PolicyCost(guardrails::CostArgs),
    /// Every scenario, then each goal as met or missed.
    All(all::Args),
    /// An A/B of two slipway-bench builds, scenarios alternated over several rounds.
    Compare(compare::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let result = runtime.block_on(async {
        match cli.scenario {
            Scenario::StoreCeiling(a) => store_ceiling::run(a).await,
            Scenario::BurnDown(a) => burn_down::run(a).await,
            Scenario::AapRequests(a) => aap_requests::run(a).await,
            Scenario::Steady(a) => steady::run(a).await,
            Scenario::Memory(a) => memory::run(a).await,
            Scenario::Drift(a) => drift::run(a).await,
            Scenario::Scale(a) => scale::run(a).await,
            Scenario::LocalJobs(a) => local_jobs::run(a).await,
            Scenario::Replicas(a) => replicas::run(a).await,
            Scenario::Soak(a) => soak::run(a).await,
            Scenario::Curve(a) => curve::run(a).await,
            Scenario::SeedDesign(a) => seed_design::run(a).await,
            Scenario::PolicyCost(a) => guardrails::run_cost(a).await,
            Scenario::All(a) => all::run(a).await,
            Scenario::Compare(a) => compare::run_compare(a).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slipway-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
