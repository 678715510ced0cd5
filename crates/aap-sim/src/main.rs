//! `aap-sim [--listen ADDR] [--config FILE]`: runs the AWX API simulator until SIGINT or
//! SIGTERM. Without `--config`, the built-in default serves Slipway's example templates.

use std::path::PathBuf;
use std::process::ExitCode;

use aap_sim::{Sim, SimConfig};
use clap::Parser;

/// A simulator of the AWX / AAP controller REST API v2 subset Slipway uses.
///
/// Without --config: organization Default, Slipway's example job templates
/// (slipway-{create,delete}-{virtual-network,subnet,security-group,compute-instance}, the
/// cluster, node pool, external auth and compute-instance action templates), workflow
/// slipway-workflow-demo, no authentication. The API is served under the configured prefix
/// (/api/ by default); test hooks under /_sim/. AAP_SIM_LOG sets the log filter (default info).
#[derive(Parser)]
#[command(name = "aap-sim", version)]
struct Args {
    /// The address to serve on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8052")]
    listen: String,
    /// A TOML configuration (every option: crates/aap-sim/examples/aap-sim.toml).
    #[arg(long)]
    config: Option<PathBuf>,
}

fn main() -> ExitCode {
    let Args { listen, config: config_path } = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("AAP_SIM_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let config = match &config_path {
        Some(p) => match SimConfig::load(p) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("aap-sim: {e}");
                return ExitCode::from(2);
            }
        },
        None => SimConfig::default(),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aap-sim: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let prefix = config.api_prefix.clone();
        let sim = match Sim::start(&listen, config).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("aap-sim: listening on {listen}: {e}");
                return ExitCode::FAILURE;
            }
        };
        // Installed before the line below announces readiness: a SIGTERM sent as soon as the
        // line is read must stop the simulator gracefully, not by the default action.
        let stopped = wait_for_signal();
        // The one line on stdout: scripts read the address from it (useful with port 0).
        println!("aap-sim listening on {} (API {}{prefix}v2/)", sim.addr(), sim.base_url());
        stopped.await;
        eprintln!("aap-sim: shutting down");
        sim.shutdown().await;
        ExitCode::SUCCESS
    })
}

/// Registers the SIGTERM and SIGINT handlers now; the future ends on the first signal.
fn wait_for_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}
