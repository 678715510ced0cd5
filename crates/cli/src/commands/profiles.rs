//! `slipway config …`: the connection profiles file. Tokens are stored but never shown.

use clap::Subcommand;
use serde_json::json;

use crate::Context;
use crate::error::CliError;

#[derive(Subcommand, Clone, Debug)]
pub enum ProfileCommand {
    /// Create or change a profile; only the given settings change. `--token` may instead
    /// come from SLIPWAY_TOKEN, to keep it out of the process list.
    SetProfile {
        name: String,
        #[arg(long = "server", value_name = "URL")]
        url: Option<String>,
        /// Store the token SLIPWAY_TOKEN holds.
        #[arg(long)]
        token_from_env: bool,
        #[arg(long = "default-subscription", value_name = "ID")]
        subscription: Option<String>,
        #[arg(long = "default-resource-group", value_name = "NAME")]
        resource_group: Option<String>,
    },
    /// Make a profile the current one.
    Use { name: String },
    /// The settings in force (where the file is, which profile, its values; never the token).
    Show,
}

pub fn run(ctx: &mut Context, command: ProfileCommand) -> Result<(), CliError> {
    match command {
        ProfileCommand::SetProfile { name, url, token_from_env, subscription, resource_group } => {
            let profile = ctx.profiles.profiles.entry(name.clone()).or_default();
            if url.is_some() {
                profile.url = url;
            }
            if token_from_env {
                let token = std::env::var("SLIPWAY_TOKEN")
                    .ok()
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| CliError::Usage("--token-from-env: SLIPWAY_TOKEN is not set".into()))?;
                profile.token = Some(token);
            }
            if subscription.is_some() {
                profile.subscription = subscription;
            }
            if resource_group.is_some() {
                profile.resource_group = resource_group;
            }
            if ctx.profiles.current.is_none() {
                ctx.profiles.current = Some(name.clone());
            }
            ctx.profiles.save(&ctx.profile_path)?;
            eprintln!("saved profile '{name}' in {}", ctx.profile_path.display());
            Ok(())
        }
        ProfileCommand::Use { name } => {
            if !ctx.profiles.profiles.contains_key(&name) {
                return Err(CliError::Usage(format!("no profile named '{name}'")));
            }
            ctx.profiles.current = Some(name.clone());
            ctx.profiles.save(&ctx.profile_path)?;
            eprintln!("now using profile '{name}'");
            Ok(())
        }
        ProfileCommand::Show => {
            let s = &ctx.settings;
            let shown = json!({
                "file": ctx.profile_path.display().to_string(),
                "profile": s.profile,
                "profiles": ctx.profiles.profiles.keys().collect::<Vec<_>>(),
                "url": s.url,
                "token": if s.token.is_some() { "(set)" } else { "(none)" },
                "subscription": s.subscription,
                "resourceGroup": s.resource_group,
            });
            ctx.out.print(&shown, &[])
        }
    }
}
