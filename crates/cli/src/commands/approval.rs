//! `slipway approval …`: requests an admission policy holds for approval — the ones you may
//! decide (or, with `--all`, every one you can read), one with what it would change, and the
//! decision itself with a comment.

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Value, json};

use super::op::{OpRef, status_url, with_suffix};
use super::resource::{WHAT_IF_COLUMNS, what_if_rows, with_status_url};
use crate::Context;
use crate::client::{PLATFORM_API, segment};
use crate::error::CliError;
use crate::output::Column;

const APPROVAL_COLUMNS: &[Column] = &[
    ("OPERATION", "name"),
    ("REQUEST", "properties.approval.request"),
    ("RESOURCE", "properties.approval.resourceId"),
    ("REQUESTED BY", "properties.approval.requestedBy"),
    ("APPROVER", "properties.approval.approverRole"),
    ("STATE", "properties.approval.state"),
    ("EXPIRES", "properties.approval.expiresAt"),
];

#[derive(Args, Clone, Debug)]
pub struct DecisionArgs {
    #[command(flatten)]
    pub op: OpRef,
    /// Why: shown on the operation, in the activity log and to the requester.
    #[arg(long, short = 'm')]
    pub comment: Option<String>,
}

#[derive(Subcommand, Clone, Debug)]
pub enum ApprovalCommand {
    /// Requests waiting for a decision you may make (`--all`: every waiting one you can read).
    List {
        #[arg(long)]
        all: bool,
    },
    /// A request's approval: who asked, who may decide, until when, and what it would change.
    Show(OpRef),
    /// Approve a request: its job runs now.
    Approve(DecisionArgs),
    /// Deny a request: nothing runs and nothing of it is left.
    Deny(DecisionArgs),
}

pub async fn run(ctx: &Context, command: ApprovalCommand) -> Result<(), CliError> {
    match command {
        ApprovalCommand::List { all } => {
            let subscription = segment(ctx.settings.subscription()?);
            let filter = if all { "status eq 'WaitingForApproval'" } else { "approver eq 'me'" };
            let target = format!("/subscriptions/{subscription}/operationStatuses?$filter={}", segment(filter));
            let items = ctx.client.list_all(&target, PLATFORM_API).await?;
            ctx.out.print(&Value::Array(items), APPROVAL_COLUMNS)
        }
        ApprovalCommand::Show(op) => {
            let url = status_url(ctx, &op.operation).await?;
            let doc = ctx.client.get(&url, PLATFORM_API).await?;
            if !ctx.out.shows_table() {
                return ctx.out.print(&with_status_url(doc, &url), &[]);
            }
            if doc["properties"]["approval"].is_null() {
                return Err(CliError::Local(format!("operation {} was never held for approval", op.operation)));
            }
            ctx.out.print(&doc, APPROVAL_COLUMNS)?;
            let approval = &doc["properties"]["approval"];
            println!("\nWhy: {}", approval["reason"].as_str().unwrap_or_default());
            if let Some(d) = approval.get("decision") {
                let comment = d["comment"].as_str().map(|c| format!(": {c}")).unwrap_or_default();
                println!(
                    "Decision: {} by {} at {}{comment}",
                    d["verdict"].as_str().unwrap_or("?"),
                    d["by"].as_str().unwrap_or("?"),
                    d["at"].as_str().unwrap_or("?")
                );
            }
            println!();
            ctx.out.print(&what_if_rows(&json!({"properties": approval["whatIf"]})), WHAT_IF_COLUMNS)
        }
        ApprovalCommand::Approve(args) => decide(ctx, args, "approve").await,
        ApprovalCommand::Deny(args) => decide(ctx, args, "deny").await,
    }
}

async fn decide(ctx: &Context, args: DecisionArgs, verb: &str) -> Result<(), CliError> {
    let url = status_url(ctx, &args.op.operation).await?;
    let body = json!({"comment": args.comment});
    let reply = ctx.client.call(Method::POST, &with_suffix(&url, verb), PLATFORM_API, Some(&body)).await?;
    ctx.out.print(&with_status_url(reply.body, &url), APPROVAL_COLUMNS)
}
