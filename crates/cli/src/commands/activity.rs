//! `slipway activity`: the activity log (docs/governance.md#the-activity-log) — who changed
//! what, and what was refused — of the subscription, a resource group or a resource, newest
//! first; or followed (`-f`) as entries are recorded, oldest first, one line each (`-o json`:
//! one `EventData` document per line, for a SIEM).

use std::collections::BTreeSet;
use std::time::Duration;

use clap::Args;
use serde_json::Value;
use slipway_domain::{Clock, SystemClock, Timestamp};

use crate::Context;
use crate::client::segment;
use crate::error::CliError;
use crate::output::Column;

/// Azure's Activity Log api-version; Slipway serves the log at any.
const LOG_API: &str = "2015-04-01";
/// How far back a follower reads again each poll: an entry's time is its request's arrival,
/// and a slow upload, lock waits or the refusal recorder's queue commit it later.
const FOLLOW_LAG: Duration = Duration::from_secs(120);
const FOLLOW_POLL: Duration = Duration::from_secs(2);

const ACTIVITY_COLUMNS: &[Column] = &[
    ("TIME", "eventTimestamp"),
    ("CALLER", "caller"),
    ("OPERATION", "operationName.value"),
    ("STATUS", "status.value"),
    ("ANSWER", "subStatus.value"),
    ("TARGET", "resourceId"),
];

#[derive(Args, Clone, Debug)]
pub struct ActivityArgs {
    /// One resource's entries, and those of what is under it (its full id); else the resource
    /// group's (`--resource-group`, or the profile's), else the subscription's.
    #[arg(long)]
    pub resource: Option<String>,
    /// Only entries at or after this time: RFC 3339, or an age (`30m`, `12h`, `7d`).
    #[arg(long)]
    pub since: Option<String>,
    /// Only this caller's entries (a principal name).
    #[arg(long)]
    pub caller: Option<String>,
    /// Only entries of this status: Accepted, Succeeded or Failed (refused).
    #[arg(long)]
    pub status: Option<String>,
    /// Only the entries of one request chain (`x-ms-correlation-request-id`).
    #[arg(long)]
    pub correlation_id: Option<String>,
    /// The platform's own entries (API tokens) instead of a subscription's: the Admin's.
    #[arg(long, conflicts_with_all = ["resource"])]
    pub platform: bool,
    /// Keep following: print each entry as it is recorded, until interrupted.
    #[arg(long, short = 'f')]
    pub follow: bool,
}

pub async fn run(ctx: &Context, args: ActivityArgs) -> Result<(), CliError> {
    let path = if args.platform {
        "/providers/Microsoft.Insights/eventtypes/management/values".to_string()
    } else {
        format!(
            "/subscriptions/{}/providers/Microsoft.Insights/eventtypes/management/values",
            segment(ctx.settings.subscription()?)
        )
    };
    let now = SystemClock.now();
    let since = args.since.as_deref().map(|s| parse_since(s, now)).transpose()?;
    let mut clauses = Vec::new();
    if let Some(resource) = &args.resource {
        clauses.push(format!("resourceUri eq '{}'", quoted(resource)));
    } else if let (false, Some(group)) = (args.platform, &ctx.settings.resource_group) {
        clauses.push(format!("resourceGroupName eq '{}'", quoted(group)));
    }
    for (field, value) in [("caller", &args.caller), ("status", &args.status), ("correlationId", &args.correlation_id)]
    {
        if let Some(v) = value {
            clauses.push(format!("{field} eq '{}'", quoted(v)));
        }
    }
    if args.follow {
        return follow(ctx, &path, clauses, since.unwrap_or(now)).await;
    }
    if let Some(t) = since {
        clauses.push(format!("eventTimestamp ge '{}'", t.to_rfc3339()));
    }
    let entries = ctx.client.list_all(&with_filter(&path, &clauses), LOG_API).await?;
    ctx.out.print(&Value::Array(entries), ACTIVITY_COLUMNS)
}

/// Polls for entries at or after `from`, reading the last [`FOLLOW_LAG`] again each time and
/// printing only what it has not printed, oldest first.
async fn follow(ctx: &Context, path: &str, clauses: Vec<String>, from: Timestamp) -> Result<(), CliError> {
    let mut printed: BTreeSet<(String, String)> = BTreeSet::new();
    let mut newest = from;
    loop {
        let window = newest.sub(FOLLOW_LAG).max(from);
        let mut asked = clauses.clone();
        asked.push(format!("eventTimestamp ge '{}'", window.to_rfc3339()));
        let mut entries = ctx.client.list_all(&with_filter(path, &asked), LOG_API).await?;
        entries.reverse();
        for entry in entries {
            let time = entry["eventTimestamp"].as_str().unwrap_or_default().to_string();
            let key = (time.clone(), entry["eventDataId"].as_str().unwrap_or_default().to_string());
            if printed.contains(&key) {
                continue;
            }
            println!("{}", ctx.out.line(&entry, ACTIVITY_COLUMNS)?);
            newest = newest.max(Timestamp::parse_rfc3339(&time).unwrap_or(newest));
            printed.insert(key);
        }
        let oldest_kept = newest.sub(FOLLOW_LAG).to_rfc3339();
        printed.retain(|(time, _)| *time >= oldest_kept);
        tokio::time::sleep(FOLLOW_POLL).await;
    }
}

fn with_filter(path: &str, clauses: &[String]) -> String {
    if clauses.is_empty() {
        return path.to_string();
    }
    format!("{path}?$filter={}", segment(&clauses.join(" and ")))
}

/// A value inside a filter's quotes: a quote doubled.
fn quoted(value: &str) -> String {
    value.replace('\'', "''")
}

/// `--since`: an RFC 3339 time, or an age before `now` (`90s`, `30m`, `12h`, `7d`).
fn parse_since(text: &str, now: Timestamp) -> Result<Timestamp, CliError> {
    if let Some(t) = Timestamp::parse_rfc3339(text) {
        return Ok(t);
    }
    let age = [('s', 1_u64), ('m', 60), ('h', 3_600), ('d', 86_400)]
        .into_iter()
        .find_map(|(unit, seconds)| Some(text.strip_suffix(unit)?.parse::<u64>().ok()?.saturating_mul(seconds)));
    age.map(|secs| now.sub(Duration::from_secs(secs))).ok_or_else(|| {
        CliError::Usage(format!("--since {text}: give an RFC 3339 time or an age such as 30m, 12h or 7d"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_time_or_an_age() {
        let now = Timestamp::parse_rfc3339("2026-12-07T12:00:00Z").unwrap();
        assert_eq!(parse_since("2026-12-01T00:00:00Z", now).unwrap().to_rfc3339(), "2026-12-01T00:00:00.000Z");
        assert_eq!(parse_since("90m", now).unwrap().to_rfc3339(), "2026-12-07T10:30:00.000Z");
        assert_eq!(parse_since("7d", now).unwrap().to_rfc3339(), "2026-11-30T12:00:00.000Z");
        assert!(parse_since("yesterday", now).is_err());
        assert!(parse_since("5w", now).is_err());
        assert!(parse_since("5é", now).is_err(), "a multi-byte unit is refused, not a panic");
    }

    #[test]
    fn filters_quote_their_values() {
        let clauses = vec!["caller eq 'o''brien'".to_string()];
        assert!(with_filter("/x", &clauses).starts_with("/x?$filter=caller"));
        assert_eq!(quoted("o'brien"), "o''brien");
    }
}
