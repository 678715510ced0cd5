//! A resource's history on its page: who changed what and when, from the activity log
//! (docs/governance.md#the-activity-log) — each request with its caller, what it asked, the
//! answer, and the spec's changed properties before and after (a secret by its path alone).

use serde_json::{Value, json};

use crate::Console;
use crate::session::Visit;

/// The newest entries shown.
const HISTORY_ENTRIES: &str = "20";

/// The activity log's version of the API (Azure's); Slipway serves the log at any.
const LOG_API_VERSION: &str = "2015-04-01";

/// The resource's latest activity, newest first; empty when the visitor may not read it.
pub(crate) async fn history(console: &Console, visit: &Visit, subscription: &str, path: &str) -> Vec<Value> {
    let log = format!("/subscriptions/{subscription}/providers/Microsoft.Insights/eventtypes/management/values");
    let filter = format!("resourceUri eq '{}'", path.replace('\'', "''"));
    let query = [("api-version", LOG_API_VERSION), ("$top", HISTORY_ENTRIES), ("$filter", filter.as_str())];
    let entries = console.api.get_with(&visit.visitor, &log, &query).await.unwrap_or_default();
    entries["value"].as_array().into_iter().flatten().map(entry_row).collect()
}

fn entry_row(e: &Value) -> Value {
    let operation = e["operationName"]["value"].as_str().unwrap_or_default();
    // What was asked, in a word: the verb, or the action's name.
    let mut parts = operation.rsplit('/');
    let asked = match (parts.next(), parts.next()) {
        (Some("action"), Some(action)) => action,
        (Some(verb), _) => verb,
        _ => operation,
    };
    let changes: Vec<Value> = e["propertyChanges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let shown = |v: &Value| if c["secret"] == true { "(secret)".to_string() } else { brief(v) };
            json!({
                "path": c["propertyName"], "kind": c["propertyChangeType"],
                "before": shown(&c["beforeValue"]), "after": shown(&c["afterValue"]),
            })
        })
        .collect();
    let error = e["properties"]["statusMessage"]
        .as_str()
        .and_then(|m| serde_json::from_str::<Value>(m).ok())
        .and_then(|m| m["error"]["message"].as_str().map(str::to_string));
    json!({
        "time": e["eventTimestamp"], "caller": e["caller"], "asked": asked, "status": e["status"]["value"],
        "answer": e["subStatus"]["value"], "client": e["properties"]["userAgent"], "error": error,
        "changes": changes, "truncated": e["propertyChangesTruncated"] == true,
    })
}

/// A value as one short line: strings bare, anything else as JSON, absent as `—`.
fn brief(v: &Value) -> String {
    match v {
        Value::Null => "—".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
