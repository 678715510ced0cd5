//! `slipway-bench SCENARIO [options]`: runs a scenario on loopback and prints a table plus
//! one JSON line. Numbers are measured in the run, never asserted.
//!
//! Scenarios:
//! * `aap-requests [--ops N] [--job-seconds S] [--poll-seconds P]` — N concurrent create
//!   operations of S-second jobs against the AWX-API simulator, once polling only and once
//!   with AAP webhook notifications; AAP HTTP requests per completed operation.
//! * `store-compare [--ops N]` — N creates through one Slipway on SQLite (synchronous FULL
//!   and NORMAL) and on PostgreSQL (`SLIPWAY_BENCH_POSTGRES_URL`), same run: ops/s.

mod aap_requests;
mod harness;
mod store_compare;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(scenario) = args.first() else {
        eprintln!("usage: slipway-bench aap-requests [--ops N] [--job-seconds S] [--poll-seconds P]");
        eprintln!("       slipway-bench store-compare [--ops N]");
        return ExitCode::from(2);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let result = match scenario.as_str() {
        "aap-requests" => runtime.block_on(aap_requests::run(&args[1..])),
        "store-compare" => runtime.block_on(store_compare::run(&args[1..])),
        other => Err(format!("unknown scenario '{other}'")),
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
