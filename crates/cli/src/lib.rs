//! `slipway`'s client side: the commands that speak the ARM API of a running Slipway —
//! resources, operations, jobs, tokens, subscriptions, role assignments — with connection
//! profiles, output formats and operation waits. The binary embeds [`ClientCommand`] beside
//! its server commands and calls [`run`].

pub mod address;
pub mod client;
pub mod commands;
pub mod error;
pub mod exit;
pub mod oidc;
pub mod output;
pub mod profile;
pub mod sse;
pub mod wait;

use clap::Args;

pub use commands::ClientCommand;
pub use exit::{EXIT_CODES_HELP, Exit};

use crate::client::Client;
use crate::error::CliError;
use crate::output::OutputArgs;
use crate::profile::{Overrides, ProfileFile, Settings};

/// The connection and output flags every client command takes.
#[derive(Args, Clone, Debug, Default)]
pub struct GlobalArgs {
    /// The connection profile to use (else SLIPWAY_PROFILE, else the file's current one).
    #[arg(long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    /// The server's base URL (else SLIPWAY_URL, else the profile's).
    #[arg(long, global = true)]
    pub url: Option<String>,
    /// The bearer token (else SLIPWAY_TOKEN, else the profile's). Prefer the environment: a
    /// flag shows in the process list.
    #[arg(long, global = true)]
    pub token: Option<String>,
    /// The default subscription (else SLIPWAY_SUBSCRIPTION, else the profile's).
    // Its id is `api-token create`'s: that offline command keeps its own repeatable
    // `--subscription`, which a global of another id would collide with.
    #[arg(id = "subscriptions", long = "subscription", short = 's', global = true, value_name = "ID")]
    pub subscription: Option<String>,
    /// The default resource group (else SLIPWAY_RESOURCE_GROUP, else the profile's).
    #[arg(long, short = 'g', global = true)]
    pub resource_group: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// What every command runs with.
pub struct Context {
    pub settings: Settings,
    pub client: Client,
    pub out: OutputArgs,
    /// The profile file and where it lives (`config` commands change it).
    pub profile_path: std::path::PathBuf,
    pub profiles: ProfileFile,
}

/// Runs one client command and reports any failure on stderr; the exit code to end with.
/// `cli` builds the whole command tree, for completions and man pages.
pub fn run(global: GlobalArgs, command: ClientCommand, cli: fn() -> clap::Command) -> Exit {
    let result = run_inner(global, command, cli);
    if let Err(e) = &result {
        eprintln!("slipway: {e}");
    }
    Exit::of(&result)
}

fn run_inner(global: GlobalArgs, command: ClientCommand, cli: fn() -> clap::Command) -> Result<(), CliError> {
    let env = |name: &str| std::env::var(name).ok();
    let profile_path = profile::path(&env)?;
    let profiles = ProfileFile::load(&profile_path)?;
    let overrides = Overrides {
        profile: global.profile,
        url: global.url,
        token: global.token,
        subscription: global.subscription,
        resource_group: global.resource_group,
    };
    let mut settings = Settings::resolve(&overrides, &env, &profiles)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Local(format!("starting the runtime: {e}")))?;
    if settings.token.is_none()
        && command.speaks_to_a_server()
        && let Some(provider) = &settings.oidc
    {
        let secret = env("SLIPWAY_CLIENT_SECRET").filter(|s| !s.is_empty());
        settings.token = Some(runtime.block_on(oidc::bearer(&settings.profile, provider, secret))?);
    }
    let client = Client::new(&settings)?;
    let ctx = Context { settings, client, out: global.output, profile_path, profiles };
    runtime.block_on(commands::run(ctx, command, cli))
}
