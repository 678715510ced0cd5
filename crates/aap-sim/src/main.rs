//! `aap-sim --listen 127.0.0.1:PORT [--config FILE]`: runs the AWX API simulator until SIGINT or
//! SIGTERM. Without `--config`, the built-in default serves Slipway's example templates.

use std::process::ExitCode;

use aap_sim::{Sim, SimConfig};

const USAGE: &str = "\
usage: aap-sim [--listen ADDR] [--config FILE]

  --listen ADDR   address to serve on (default 127.0.0.1:8052; port 0 picks a free one)
  --config FILE   TOML configuration (see crates/aap-sim/examples/aap-sim.toml); without it:
                  organization Default, job templates slipway-{create,delete}-{virtual-network,
                  subnet,security-group,compute-instance}, workflow slipway-workflow-demo, no auth

The API is served under the configured prefix (/api/ by default); test hooks under /_sim/.
AAP_SIM_LOG sets the log filter (default info).";

fn main() -> ExitCode {
    let mut listen = "127.0.0.1:8052".to_string();
    let mut config_path = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => match args.next() {
                Some(v) => listen = v,
                None => return usage("--listen needs an address"),
            },
            "--config" => match args.next() {
                Some(v) => config_path = Some(v),
                None => return usage("--config needs a file"),
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage(&format!("unknown argument {other:?}")),
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("AAP_SIM_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let config = match &config_path {
        Some(p) => match SimConfig::load(std::path::Path::new(p)) {
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

fn usage(msg: &str) -> ExitCode {
    eprintln!("aap-sim: {msg}\n\n{USAGE}");
    ExitCode::from(2)
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
