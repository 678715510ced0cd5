//! `slipway events`: the event feed (docs/arm-contract.md#event-feed) of the subscription, the
//! resource group, or one resource — read page by page, or followed (`-f`) as it grows.

use clap::Args;
use reqwest::Method;
use serde_json::Value;

use crate::Context;
use crate::address::ResourceArgs;
use crate::client::{PLATFORM_API, segment};
use crate::error::CliError;
use crate::output::Column;

const EVENT_COLUMNS: &[Column] = &[
    ("ID", "id"),
    ("TIME", "time"),
    ("TYPE", "type"),
    ("RESOURCE", "resourceId"),
    ("STATE", "provisioningState"),
    ("OPERATION", "operation.status"),
];

#[derive(Args, Clone, Debug)]
pub struct EventsArgs {
    /// One resource's feed (its own and its children's events); else the resource group's
    /// (the default or `--resource-group`), else the subscription's.
    #[command(flatten)]
    pub resource: ResourceArgs,
    /// Events after this cursor (an event's `ID`, or the cursor printed last time); `latest`
    /// for only what comes next. Default: the oldest kept.
    #[arg(long)]
    pub since: Option<String>,
    /// Keep following: print each event as it is committed, until interrupted.
    #[arg(long, short = 'f')]
    pub follow: bool,
}

pub async fn run(ctx: &Context, args: EventsArgs) -> Result<(), CliError> {
    let (path, api_version) = feed(ctx, &args.resource).await?;
    let mut url = ctx.client.url(&path, &api_version);
    if let Some(since) = &args.since {
        url.push_str(&format!("&since={}", segment(since)));
    }
    if args.follow {
        return follow(ctx, &format!("{url}&follow=true")).await;
    }
    let mut events = Vec::new();
    let mut next = Some(url);
    let mut cursor = String::new();
    while let Some(page_url) = next {
        let page = ctx.client.get(&page_url, &api_version).await?;
        events.extend(page["value"].as_array().into_iter().flatten().cloned());
        cursor = page["cursor"].as_str().unwrap_or_default().to_string();
        next = page["nextLink"].as_str().map(str::to_string);
    }
    ctx.out.print(&Value::Array(events), EVENT_COLUMNS)?;
    eprintln!("cursor {cursor}: go on with --since {cursor}");
    Ok(())
}

/// The feed's path and api-version: a resource's (its type's), else the group's or the
/// subscription's (the platform's).
async fn feed(ctx: &Context, resource: &ResourceArgs) -> Result<(String, String), CliError> {
    if resource.id.is_some() || resource.resource_type.is_some() {
        let at = resource.resolve(&ctx.settings, &ctx.client).await?;
        return Ok((format!("{}/events", at.resource.id), at.api_version));
    }
    let subscription = segment(ctx.settings.subscription()?);
    let scope = match &ctx.settings.resource_group {
        Some(group) => format!("/subscriptions/{subscription}/resourceGroups/{}", segment(group)),
        None => format!("/subscriptions/{subscription}"),
    };
    Ok((format!("{scope}/providers/Slipway.Resources/events"), PLATFORM_API.to_string()))
}

/// One line per event as the server streams it: a table row's fields, or with `-o json`
/// one JSON document per line. A stopping server ends it; events the server no longer keeps
/// end it with the cursor to start again from.
async fn follow(ctx: &Context, url: &str) -> Result<(), CliError> {
    let request = ctx.client.request(Method::GET, url, PLATFORM_API);
    let mut stream = crate::sse::Stream::open(request).await?;
    while let Some(message) = stream.next().await? {
        match message.event.as_str() {
            "end" => return Ok(()),
            "gone" => {
                return Err(CliError::Local(format!(
                    "events this reader had not read are no longer kept: read the resources again, then follow \
                     with --since {}",
                    message.data
                )));
            }
            _ => {
                let event: Value = serde_json::from_str(&message.data).map_err(|e| CliError::Local(e.to_string()))?;
                println!("{}", ctx.out.line(&event, EVENT_COLUMNS)?);
            }
        }
    }
    Ok(())
}
