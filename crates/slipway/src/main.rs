//! `slipway`: the control-plane binary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use slipway::app::App;
use slipway::config::Config;
use slipway_domain::SystemClock;

// glibc malloc took a fifth of the CPU in the burn-down profile (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "\
usage: slipway serve [--config FILE]     run the API, engine and notifier
       slipway check-config [--config FILE]
       slipway --help

Without --config, the built-in default is used (examples/slipway.toml): SQLite in
./slipway.db, the local Ansible provider and the example resource types. Every key can be
overridden with SLIPWAY_<SECTION>__<KEY> environment variables.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (command, config_path) = match parse_args(&args) {
        Ok(v) => v,
        Err(msg) => {
            eprintln!("{msg}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("SLIPWAY_LOG").unwrap_or_else(|_| "info".into()))
        .init();
    let config = match Config::load(config_path.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("slipway: {e}");
            return ExitCode::from(2);
        }
    };
    if command == "check-config" {
        println!("configuration ok: {} provider(s), {} type(s)", config.providers.len(), config.types.len());
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("slipway: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slipway: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(args: &[String]) -> Result<(String, Option<PathBuf>), String> {
    let mut command = None;
    let mut config = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => return Err("slipway: a declarative ARM-style API over Ansible automation".into()),
            "--config" | "-c" => config = Some(PathBuf::from(it.next().ok_or("--config needs a file")?)),
            "serve" | "check-config" if command.is_none() => command = Some(a.clone()),
            other => return Err(format!("unexpected argument '{other}'")),
        }
    }
    Ok((command.unwrap_or_else(|| "serve".into()), config))
}

async fn serve(config: Config) -> Result<(), slipway::app::AppError> {
    let app = App::start(config, Arc::new(SystemClock)).await?;
    app.run_until(shutdown_signal()).await
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
}
