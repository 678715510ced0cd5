//! `slipway-bench SCENARIO [options]`: runs a scenario on loopback and prints a table plus
//! one JSON line per table. Numbers are measured in the run, never asserted. Build with
//! `--release`; BENCHMARKS.md records the figures and what they mean.
//!
//! Scenarios (each option has a default):
//! * `store-ceiling [--stores LIST] [--seconds S]` — the yardstick: sequential single-row
//!   commits per second and commit latency of SQLite (synchronous FULL, NORMAL) and PostgreSQL.
//! * `burn-down [--stores LIST] [--ops N] [--poll-seconds P] [--auth off|on|both]` — N
//!   creates of zero-duration simulator jobs: ops/s, store commits and AAP requests per op,
//!   ratio to ceiling ÷ 3, and CPU milliseconds per op (this process's user + system time:
//!   Slipway, simulator and client together); with `--auth`, every request signed in with an
//!   API token.
//! * `aap-requests [--ops N] [--job-seconds S] [--poll-seconds P]` — AAP requests per
//!   completed operation, polling only vs with webhooks.
//! * `steady [--store S] [--in-flight N] [--put-rate R] [--seconds D] [--job-seconds J]
//!   [--get-rate G] [--poll-seconds P]` — open-loop PUTs while N operations are in flight:
//!   accept, status-GET, first-dispatch and finish-to-visible latencies, polling and webhooks.
//! * `memory [--in-flight N] [--poll-seconds P]` — RSS of a Slipway child process per in-flight operation.
//! * `scale [--resources N]` — a fresh Slipway over N stored resources: startup, list pages, RSS.
//! * `seed-design [--ops N] [steady options]` — burn-down and steady as Slipway runs them and
//!   as the seed design would (30 s polls, one status request per job, no webhooks).
//! * `all [--ops N] [--resources N] [steady options]` — everything above, then each goal of
//!   the benchmark issue as met or missed.
//! * `compare BASE NEW [--rounds R] [--scenarios LIST] [-- OPTIONS]` — an A/B of two
//!   `slipway-bench` builds: the scenarios alternated for both, R rounds (default 3), each
//!   metric's median, every run, the ratio and a verdict (better / worse / within noise).
//!
//! `LIST` is comma-separated from `sqlite-full,sqlite-normal,postgres`; PostgreSQL is at
//! `SLIPWAY_BENCH_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`).

mod aap_requests;
mod all;
mod burn_down;
mod compare;
mod harness;
mod memory;
mod scale;
mod seed_design;
mod steady;
mod store_ceiling;

use std::process::ExitCode;

// As in the slipway binary: glibc malloc took a fifth of the CPU in the burn-down profile (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: slipway-bench \
    store-ceiling|burn-down|aap-requests|steady|memory|scale|seed-design|all|compare [options] (see the crate docs)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(scenario) = args.first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let rest = &args[1..];
    let result = match scenario.as_str() {
        "store-ceiling" => runtime.block_on(store_ceiling::run(rest)),
        "burn-down" => runtime.block_on(burn_down::run(rest)),
        "aap-requests" => runtime.block_on(aap_requests::run(rest)),
        "steady" => runtime.block_on(steady::run(rest)),
        "memory" => runtime.block_on(memory::run(rest)),
        "scale" => runtime.block_on(scale::run(rest)),
        "seed-design" => runtime.block_on(seed_design::run(rest)),
        "all" => runtime.block_on(all::run(rest)),
        "compare" => runtime.block_on(compare::run_compare(rest)),
        other => Err(format!("unknown scenario '{other}'\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slipway-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--name value` from the arguments, parsed, or the default.
pub fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args.get(i + 1).and_then(|v| v.parse().ok()).ok_or_else(|| format!("{name} needs a valid value")),
    }
}
