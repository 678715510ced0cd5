//! `slipway`: the control-plane binary. Server commands — `serve`, `check-config`,
//! `api-token`, `backup`, `restore` — run on the library half (`slipway::app`, `check`,
//! `backup`, `restore`); client commands are `slipway_cli`'s, embedded beside them.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use slipway::app::App;
use slipway::config::{Config, LogFormat};
use slipway::plan::{Plan, StorePlan};
use slipway_auth::api_tokens::{self, NewApiToken};
use slipway_auth::prefix_owner;
use slipway_cli::commands::platform::TokenCommand;
use slipway_domain::activity::{ActivityCaller, ActivityEntry, RequestInfo};
use slipway_domain::{Clock, SystemClock};

/// The override `--data-dir` stands for.
const DATA_DIR_ENV: &str = "SLIPWAY_SERVER__DATA_DIR";

// glibc malloc took a fifth of the CPU in the burn-down profile (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A declarative ARM-style API over Ansible automation: the server (`serve`) and its client.
///
/// Server commands (serve, check-config, api-token): without --config, the built-in default
/// is used (examples/slipway.toml, its paths in the checkout the binary was built from):
/// SQLite in the data directory, the local Ansible provider and the example resource types.
/// Every key can be overridden with SLIPWAY_<SECTION>__<KEY> environment variables.
///
/// Client commands (resource, op, jobs, describe, token, subscription, role-assignment,
/// config) speak to a running server, chosen by flag, SLIPWAY_URL/SLIPWAY_TOKEN/… or a
/// profile (docs/cli.md).
#[derive(Parser)]
#[command(name = "slipway", version, after_help = slipway_cli::EXIT_CODES_HELP)]
struct Cli {
    /// The server's configuration file.
    #[arg(long, short, global = true)]
    config: Option<PathBuf>,
    /// The server's data directory: its database, job directories and the examples' state
    /// files (server.data_dir; default: the platform's, ~/.local/share/slipway).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    client: slipway_cli::GlobalArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Server(ServerCommand),
    #[command(flatten)]
    Client(slipway_cli::ClientCommand),
}

#[derive(Subcommand)]
enum ServerCommand {
    /// Run the API, engine and notifier.
    Serve,
    /// Load and check the configuration, then exit.
    CheckConfig {
        /// Also ask each provider: is it reachable, are its credentials accepted, does every
        /// template the types need exist there.
        #[arg(long)]
        online: bool,
    },
    /// Manage API tokens for automation (kept in the store: every replica sees them).
    #[command(subcommand)]
    ApiToken(TokenCommand),
    /// Copy the embedded SQLite store to a new file, online (PostgreSQL: use pg_dump or a
    /// base backup; docs/operations.md).
    Backup {
        /// The file to write; it must not exist.
        to: PathBuf,
    },
    /// Put a backup back and reconcile it with what the providers ran since, so that nothing
    /// is launched twice; Slipway must be stopped. Prints what it found.
    Restore {
        /// A file `slipway backup` wrote (the embedded SQLite store).
        #[arg(long, conflicts_with = "in_place", required_unless_present = "in_place", value_name = "FILE")]
        from: Option<PathBuf>,
        /// Reconcile the configured store as it is: after restoring PostgreSQL with its own
        /// tools, or to finish a restore that stopped.
        #[arg(long)]
        in_place: bool,
        /// Ask the providers for jobs created from this time on (RFC 3339): when the backup was
        /// taken, less the clocks' skew. Default: the backup's own record of it, else every job.
        #[arg(long, requires = "in_place", value_name = "TIME")]
        since: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = match cli.command {
        Some(Command::Client(command)) => {
            return ExitCode::from(slipway_cli::run(cli.client, command, Cli::command).code());
        }
        // Serving is never a surprise: a bare `slipway` explains itself, as a usage error.
        None => {
            let _ = Cli::command().print_help();
            return ExitCode::from(slipway_cli::Exit::Usage.code());
        }
        Some(Command::Server(command)) => command,
    };
    // The flag wins over the environment and the file; relative to the working directory.
    let data_dir = cli.data_dir.map(|d| std::path::absolute(&d).unwrap_or(d));
    let env = std::env::vars().chain(data_dir.map(|d| (DATA_DIR_ENV.to_string(), d.display().to_string())));
    let config = match Config::load(cli.config.as_deref(), env) {
        Ok(c) => c,
        // One problem per line, each said by slipway (a file that does not load has several).
        Err(e) => return refused(e.to_string().lines().map(str::to_string).collect()),
    };
    init_logging(config.server.log_format);
    let work = match command {
        ServerCommand::CheckConfig { online } => return check_config(&config, online),
        // Refused as `check-config` refuses it, before anything is opened.
        ServerCommand::Serve => match Plan::from_config(&config) {
            Ok(plan) => Work::Serve(Box::new(plan)),
            Err(problems) => return refused(problems.iter().map(ToString::to_string).collect()),
        },
        ServerCommand::ApiToken(t) => Work::ApiToken(t),
        ServerCommand::Backup { to } => Work::Backup(to),
        ServerCommand::Restore { from, in_place: _, since } => {
            let source = match (from, since) {
                (Some(from), _) => slipway::restore::Source::SqliteFile(from),
                (None, None) => slipway::restore::Source::InPlace { since: None },
                (None, Some(text)) => match slipway_domain::Timestamp::parse_rfc3339(&text) {
                    Some(t) => slipway::restore::Source::InPlace { since: Some(t) },
                    None => {
                        eprintln!("slipway: --since {text:?} is not an RFC 3339 time (2026-12-04T10:00:00Z)");
                        return ExitCode::from(slipway_cli::Exit::Usage.code());
                    }
                },
            };
            match Plan::from_config(&config) {
                Ok(plan) => Work::Restore(Box::new(plan), source),
                Err(problems) => return refused(problems.iter().map(ToString::to_string).collect()),
            }
        }
    };
    if let Err(e) = config.create_data_dir() {
        eprintln!("slipway: {e}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("slipway: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match work {
        Work::Serve(plan) => runtime.block_on(serve(*plan)).map_err(|e| e.to_string()),
        Work::ApiToken(t) => runtime.block_on(api_token(config, t)),
        Work::Backup(to) => runtime.block_on(backup(&config, &to)),
        Work::Restore(plan, source) => runtime.block_on(restore(*plan, source)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slipway: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What runs on the runtime.
enum Work {
    Serve(Box<Plan>),
    ApiToken(TokenCommand),
    Backup(PathBuf),
    Restore(Box<Plan>, slipway::restore::Source),
}

/// `check-config`: every problem, then exit 2; or the summary.
fn check_config(config: &Config, online: bool) -> ExitCode {
    let mut problems = slipway::check::check(config);
    if online && problems.is_empty() {
        match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => problems = rt.block_on(slipway::check::check_online(config)),
            Err(e) => problems.push(format!("starting the runtime: {e}")),
        }
    }
    if problems.is_empty() {
        println!("configuration ok: {} provider(s), {} type(s)", config.providers.len(), config.types.len());
        return ExitCode::SUCCESS;
    }
    refused(problems)
}

/// Prints each problem and how many there were; exit 2.
fn refused(problems: Vec<String>) -> ExitCode {
    for p in &problems {
        eprintln!("slipway: {p}");
    }
    eprintln!("slipway: {} problem(s) in the configuration", problems.len());
    ExitCode::from(2)
}

/// Logs to stderr, filtered by `SLIPWAY_LOG` (default `info`), times as RFC 3339 UTC.
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLIPWAY_LOG").unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init(),
    }
}

async fn serve(plan: Plan) -> Result<(), slipway::app::AppError> {
    // Listened for before the server answers anything: a SIGTERM that follows its first
    // `/readyz` at once must shut it down gracefully, not kill it.
    let signals = ShutdownSignals::install();
    let app = App::start_plan(plan, Arc::new(SystemClock)).await?;
    app.run_until(signals.recv()).await
}

async fn api_token(config: Config, command: TokenCommand) -> Result<(), String> {
    let store = StorePlan::from_config(&config)
        .map_err(|problems| problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))?;
    let store = slipway::app::open_store(&store).await.map_err(|e| e.to_string())?;
    let now = SystemClock.now();
    match command {
        TokenCommand::Create { principal, tenant, groups, description, expires_in_days, subscriptions } => {
            if principal.trim().is_empty() {
                return Err("--principal must not be empty".into());
            }
            let mut confined = Vec::new();
            for s in subscriptions {
                slipway_domain::ids::check_subscription(&s)
                    .map_err(|_| format!("--confine-to '{s}' is not a subscription id (a GUID)"))?;
                confined.push(slipway_domain::SubscriptionId::new(&s));
            }
            if let Some(auth) = &config.auth {
                let issuers = auth.options(&config.base_dir)?.issuers;
                for name in std::iter::once(&principal).chain(&groups) {
                    if let Some(owner) = prefix_owner(&issuers, name) {
                        return Err(format!(
                            "'{name}' carries the prefix of the issuer {owner}: an API token cannot name it"
                        ));
                    }
                }
            }
            let expires_at = expires_in_days.map(|d| now.add(Duration::from_secs(d.saturating_mul(86_400))));
            let description = description.unwrap_or_default();
            let new = NewApiToken { principal, tenant, groups, description, expires_at, subscriptions: confined };
            let logged = operator_activity("write", "create", now);
            let (text, token) =
                api_tokens::create(store.as_ref(), new, now, Some(logged)).await.map_err(|e| e.to_string())?;
            eprintln!("created API token {} for '{}' (shown once; keep it secret)", token.id, token.principal);
            println!("{text}");
        }
        TokenCommand::List => {
            println!("ID\tPRINCIPAL\tTENANT\tGROUPS\tSUBSCRIPTIONS\tCREATED\tEXPIRES\tLAST USED\tDESCRIPTION");
            let or = |text: String, none: &str| if text.is_empty() { none.to_string() } else { text };
            for t in api_tokens::list(store.as_ref()).await.map_err(|e| e.to_string())? {
                let time =
                    |at: Option<slipway_domain::Timestamp>, none: &str| at.map_or(none.to_string(), |a| a.to_rfc3339());
                let subscriptions: Vec<&str> = t.subscriptions.iter().map(|s| s.as_str()).collect();
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    t.id,
                    t.principal,
                    or(t.tenant.clone().unwrap_or_default(), "-"),
                    or(t.groups.join(","), "-"),
                    or(subscriptions.join(","), "any"),
                    t.created_at.to_rfc3339(),
                    time(t.expires_at, "never"),
                    time(t.last_used_at, "never"),
                    t.description
                );
            }
        }
        TokenCommand::Revoke { id } => {
            let logged = operator_activity("delete", &format!("revoke {id}"), now);
            if !api_tokens::revoke(store.as_ref(), &id, Some(logged)).await.map_err(|e| e.to_string())? {
                return Err(format!("no API token with id '{id}'"));
            }
            eprintln!("revoked API token {id}");
        }
    }
    Ok(())
}

/// The platform activity-log entry of an `api-token` command run on the server's host: the
/// operator is the host's user, the client this command.
fn operator_activity(verb: &str, what: &str, now: slipway_domain::Timestamp) -> ActivityEntry {
    let user = std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| "operator".into());
    ActivityEntry {
        time: now,
        subscription: None,
        target: "/providers/Slipway.Authorization/apiTokens".into(),
        operation_name: format!("Slipway.Authorization/apiTokens/{verb}"),
        caller: ActivityCaller { name: user, issuer: String::new(), kind: "Operator".into() },
        request: RequestInfo {
            method: String::new(),
            uri: format!("slipway api-token {what}"),
            user_agent: format!("slipway/{} api-token", env!("CARGO_PKG_VERSION")),
            ..RequestInfo::default()
        },
        status: 0,
        error: None,
        operation_id: None,
        changes: Vec::new(),
        changes_truncated: false,
    }
}

async fn backup(config: &Config, to: &std::path::Path) -> Result<(), String> {
    let store = StorePlan::from_config(config)
        .map_err(|problems| problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))?;
    let now = SystemClock.now();
    slipway::backup::backup(&store, to, now).await.map_err(|e| e.to_string())?;
    eprintln!("backed up to {} (taken {})", to.display(), now.to_rfc3339());
    Ok(())
}

async fn restore(plan: Plan, source: slipway::restore::Source) -> Result<(), String> {
    let providers = slipway::app::build_providers(&plan.providers, &Default::default()).map_err(|e| e.to_string())?;
    let sqlite = match &plan.store {
        StorePlan::Sqlite(options) => Some(options),
        StorePlan::Postgres(_) => None,
    };
    let open = async || slipway::app::open_store(&plan.store).await.map_err(store_error);
    let (report, kept) = slipway::restore::restore(source, sqlite, open, &providers, &plan.policies, SystemClock.now())
        .await
        .map_err(|e| e.to_string())?;
    if let Some(kept) = kept {
        eprintln!("the database it replaced is kept as {}", kept.display());
    }
    for line in report.lines() {
        println!("{line}");
    }
    Ok(())
}

/// The store's own error, as a restore reports it.
fn store_error(e: slipway::app::AppError) -> slipway_store::StoreError {
    match e {
        slipway::app::AppError::Store(e) => e,
        other => slipway_store::StoreError::Internal(other.to_string()),
    }
}

/// SIGTERM and SIGINT, registered when installed (a signal before then would kill the
/// process with the default action).
struct ShutdownSignals(Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>);

impl ShutdownSignals {
    fn install() -> ShutdownSignals {
        use tokio::signal::unix::{SignalKind, signal};
        match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
            (Ok(term), Ok(int)) => ShutdownSignals(Some((term, int))),
            _ => ShutdownSignals(None),
        }
    }

    async fn recv(self) {
        let Some((mut term, mut int)) = self.0 else {
            return std::future::pending::<()>().await;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        }
    }
}
