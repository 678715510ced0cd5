//! `slipway op …`: an operation by its id (looked up in the subscription's operation list)
//! or by its status URL — show it, wait for it, cancel it, read or stream its job's output,
//! list the subscription's operations.

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::Value;

use super::resource::{OPERATION_COLUMNS, with_status_url};
use crate::Context;
use crate::client::{PLATFORM_API, segment};
use crate::error::{ApiError, ArmError, CliError};
use crate::wait::{self, TimeoutArgs, WaitArgs};

#[derive(Args, Clone, Debug)]
pub struct OpRef {
    /// The operation's id (in the default subscription) or its full status URL.
    #[arg(value_name = "ID|URL")]
    pub operation: String,
}

#[derive(Subcommand, Clone, Debug)]
pub enum OpCommand {
    /// The operation's status document.
    Show(OpRef),
    /// Wait for the operation to end; the exit code tells how it ended.
    Wait {
        #[command(flatten)]
        op: OpRef,
        #[command(flatten)]
        timeout: TimeoutArgs,
    },
    /// Cancel the operation and wait until it has ended.
    Cancel {
        #[command(flatten)]
        op: OpRef,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// What the operation's job printed.
    Logs {
        #[command(flatten)]
        op: OpRef,
        /// Stream the output as the job prints it, until the job ends.
        #[arg(long, short = 'f')]
        follow: bool,
        /// Only the last N lines.
        #[arg(long)]
        tail: Option<u32>,
    },
    /// The subscription's operations, newest first.
    List {
        /// Only operations in this status (`Failed`, `Succeeded`, `Provisioning`, …).
        #[arg(long)]
        status: Option<String>,
    },
}

pub async fn run(ctx: &Context, command: OpCommand) -> Result<(), CliError> {
    match command {
        OpCommand::Show(op) => {
            let url = status_url(ctx, &op.operation).await?;
            let doc = ctx.client.get(&url, PLATFORM_API).await?;
            ctx.out.print(&with_status_url(doc, &url), OPERATION_COLUMNS)
        }
        OpCommand::Wait { op, timeout } => {
            let url = status_url(ctx, &op.operation).await?;
            let doc = wait::follow(&ctx.client, &url, timeout.duration()?).await?;
            ctx.out.print(&with_status_url(doc.clone(), &url), OPERATION_COLUMNS)?;
            wait::outcome(doc).map(drop)
        }
        OpCommand::Cancel { op, wait } => {
            let url = status_url(ctx, &op.operation).await?;
            let cancel = with_suffix(&url, "cancel");
            let reply = ctx.client.call(Method::POST, &cancel, PLATFORM_API, None).await?;
            let doc = if wait.no_wait {
                reply.body
            } else {
                let doc = wait::follow(&ctx.client, &url, wait.timeout.duration()?).await?;
                ctx.out.print(&with_status_url(doc.clone(), &url), OPERATION_COLUMNS)?;
                return wait::outcome(doc).map(drop);
            };
            ctx.out.print(&with_status_url(doc, &url), OPERATION_COLUMNS)
        }
        OpCommand::Logs { op, follow, tail } => {
            let url = status_url(ctx, &op.operation).await?;
            let mut logs = wait::logs_url(&url);
            if let Some(n) = tail {
                logs.push_str(&format!("{}tail={n}", if logs.contains('?') { '&' } else { '?' }));
            }
            if follow { stream(ctx, &logs).await } else { print_text(ctx, &logs).await }
        }
        OpCommand::List { status } => {
            let subscription = segment(ctx.settings.subscription()?);
            let mut target = format!("/subscriptions/{subscription}/operationStatuses");
            if let Some(status) = status {
                target.push_str(&format!("?$filter={}", segment(&format!("status eq '{status}'"))));
            }
            let items = ctx.client.list_all(&target, PLATFORM_API).await?;
            ctx.out.print(&Value::Array(items), OPERATION_COLUMNS)
        }
    }
}

/// `{status URL}/{suffix}`, keeping its query.
pub(crate) fn with_suffix(url: &str, suffix: &str) -> String {
    match url.split_once('?') {
        Some((path, query)) => format!("{path}/{suffix}?{query}"),
        None => format!("{url}/{suffix}"),
    }
}

/// A URL or path is used as it is; an id is found in the subscription's operation list,
/// whose items carry their status path (the namespace and location an id alone lacks).
pub async fn status_url(ctx: &Context, operation: &str) -> Result<String, CliError> {
    if operation.starts_with('/') || operation.contains("://") {
        return Ok(operation.to_string());
    }
    let subscription = segment(ctx.settings.subscription()?);
    let mut next = Some(format!("/subscriptions/{subscription}/operationStatuses?$top=1000"));
    while let Some(page_url) = next.take() {
        let page = ctx.client.get(&page_url, PLATFORM_API).await?;
        let items = page["value"].as_array().map(Vec::as_slice).unwrap_or_default();
        if let Some(found) =
            items.iter().find(|op| op["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(operation)))
        {
            return found["id"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| CliError::Local("the operation list gave no status path".into()));
        }
        next = page["nextLink"].as_str().map(str::to_string);
    }
    Err(CliError::Api(ApiError {
        status: 404,
        error: ArmError {
            code: "ResourceNotFound".into(),
            message: format!("no operation '{operation}' in subscription {subscription} that you may read"),
            ..Default::default()
        },
    }))
}

async fn print_text(ctx: &Context, url: &str) -> Result<(), CliError> {
    let reply = ctx.client.call(Method::GET, url, PLATFORM_API, None).await?;
    match reply.body {
        Value::Null => Ok(()),
        Value::String(text) => {
            print!("{text}");
            Ok(())
        }
        other => ctx.out.print(&other, &[]),
    }
}

/// `?follow=true`: Server-Sent Events, one `data:` line per output line, then an `end`
/// event whose data is the job's state — which sets the exit code as a wait would.
async fn stream(ctx: &Context, url: &str) -> Result<(), CliError> {
    let builder = ctx.client.request(
        Method::GET,
        &format!("{url}{}follow=true", if url.contains('?') { '&' } else { '?' }),
        PLATFORM_API,
    );
    let mut stream = crate::sse::Stream::open(builder).await?;
    while let Some(message) = stream.next().await? {
        match message.event.as_str() {
            "end" => return ended(&message.data),
            _ => println!("{}", message.data),
        }
    }
    Err(CliError::Local("the output stream closed without its end event".into()))
}

fn ended(state: &str) -> Result<(), CliError> {
    let doc = serde_json::json!({"name": "of the job", "status": state});
    match state {
        "Failed" => Err(CliError::OperationFailed(doc)),
        "Canceled" => Err(CliError::Canceled(doc)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_and_logs_hang_off_the_status_url() {
        assert_eq!(with_suffix("http://h/o/1?api-version=v", "cancel"), "http://h/o/1/cancel?api-version=v");
    }
}
