//! The client subcommands, one module per noun; `run` dispatches.

pub mod activity;
mod approval;
pub mod body;
pub mod events;
pub mod generate;
pub mod group;
pub mod guardrails;
pub mod inspect;
pub mod op;
pub mod platform;
pub mod profiles;
pub mod resource;
pub mod tag;

use clap::Subcommand;

use crate::Context;
use crate::address::ResourceArgs;
use crate::error::CliError;

#[derive(Subcommand, Clone, Debug)]
pub enum ClientCommand {
    /// Create, change, read, list, delete resources and run their actions.
    #[command(subcommand)]
    Resource(resource::ResourceCommand),
    /// A subscription's resource groups.
    #[command(subcommand)]
    Group(group::GroupCommand),
    /// A resource's or a group's tags, changed at once and without a job.
    #[command(subcommand)]
    Tag(tag::TagCommand),
    /// Quota meters: usage beside limits, and setting a limit.
    #[command(subcommand)]
    Quota(guardrails::QuotaCommand),
    /// Management locks at a subscription, a resource group or a resource.
    #[command(subcommand)]
    Lock(guardrails::LockCommand),
    /// Admission policy: definitions, assignments, exemptions, and what they found.
    #[command(subcommand)]
    Policy(guardrails::PolicyCommand),
    /// Follow, cancel and read the output of operations.
    #[command(subcommand)]
    Op(op::OpCommand),
    /// Requests held for approval: list, show, approve, deny.
    #[command(subcommand)]
    Approval(approval::ApprovalCommand),
    /// A resource's job history: what ran for it and why it is where it is.
    Jobs {
        #[command(flatten)]
        resource: ResourceArgs,
    },
    /// The event feed: what changed, in order, from a cursor; `-f` follows it.
    Events(events::EventsArgs),
    /// The activity log: who changed what and what was refused; `-f` follows it.
    Activity(activity::ActivityArgs),
    /// A resource at a glance: spec, outputs, state, its latest jobs and errors, its children.
    Describe {
        #[command(flatten)]
        resource: ResourceArgs,
    },
    /// API tokens over the API (`api-token` manages them offline, in the store).
    #[command(subcommand)]
    Token(platform::TokenCommand),
    /// The subscription registry.
    #[command(subcommand)]
    Subscription(platform::SubscriptionCommand),
    /// Role assignments at a scope.
    #[command(subcommand)]
    RoleAssignment(platform::RoleAssignmentCommand),
    /// Connection profiles (server URL, token, default subscription and resource group).
    #[command(subcommand, name = "config")]
    Profiles(profiles::ProfileCommand),
    /// Print a shell completion script.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write man pages, one per command, into a directory.
    Man {
        #[arg(long, default_value = ".")]
        dir: std::path::PathBuf,
    },
}

impl ClientCommand {
    /// Whether it sends requests (and so needs a credential); profiles, completions and man
    /// pages are local.
    pub fn speaks_to_a_server(&self) -> bool {
        !matches!(self, ClientCommand::Profiles(_) | ClientCommand::Completions { .. } | ClientCommand::Man { .. })
    }
}

pub async fn run(mut ctx: Context, command: ClientCommand, cli: fn() -> clap::Command) -> Result<(), CliError> {
    match command {
        ClientCommand::Resource(c) => resource::run(&ctx, c).await,
        ClientCommand::Group(c) => group::run(&ctx, c).await,
        ClientCommand::Tag(c) => tag::run(&ctx, c).await,
        ClientCommand::Quota(c) => guardrails::quota(&ctx, c).await,
        ClientCommand::Lock(c) => guardrails::lock(&ctx, c).await,
        ClientCommand::Policy(c) => guardrails::policy(&ctx, c).await,
        ClientCommand::Op(c) => op::run(&ctx, c).await,
        ClientCommand::Approval(c) => approval::run(&ctx, c).await,
        ClientCommand::Events(args) => events::run(&ctx, args).await,
        ClientCommand::Activity(args) => activity::run(&ctx, args).await,
        ClientCommand::Jobs { resource } => inspect::jobs(&ctx, &resource).await,
        ClientCommand::Describe { resource } => inspect::describe(&ctx, &resource).await,
        ClientCommand::Token(c) => platform::token(&ctx, c).await,
        ClientCommand::Subscription(c) => platform::subscription(&ctx, c).await,
        ClientCommand::RoleAssignment(c) => platform::role_assignment(&ctx, c).await,
        ClientCommand::Profiles(c) => profiles::run(&mut ctx, c),
        ClientCommand::Completions { shell } => generate::completions(shell, cli()),
        ClientCommand::Man { dir } => generate::man(&dir, cli()),
    }
}
