//! `slipway jobs` and `slipway describe`: what the API tells about one resource, gathered
//! so a person sees its state and why in one place.

use serde_json::{Map, Value, json};

use crate::Context;
use crate::address::{self, Address, ResourceArgs};
use crate::client::{PLATFORM_API, segment};
use crate::error::CliError;
use crate::output::{Column, Format, at};

const JOB_COLUMNS: &[Column] = &[
    ("TYPE", "type"),
    ("STATE", "state"),
    ("JOB", "jobId"),
    ("OPERATION", "operationId"),
    ("STARTED", "startTime"),
    ("ENDED", "endTime"),
    ("MESSAGE", "message"),
];

/// How many of the newest jobs `describe` shows, with their operations.
const RECENT_JOBS: usize = 5;

pub async fn jobs(ctx: &Context, resource: &ResourceArgs) -> Result<(), CliError> {
    let at = resource.resolve(&ctx.settings, &ctx.client).await?;
    let history = ctx.client.get(&format!("{}/jobs", at.resource.id), &at.api_version).await?;
    if ctx.out.output == Format::Table && ctx.out.query.is_none() {
        ctx.out.print(&history["value"], JOB_COLUMNS)?;
        print_retry(&history);
        return Ok(());
    }
    ctx.out.print(&history, JOB_COLUMNS)
}

fn print_retry(history: &Value) {
    if let Some(n) = history["failedAttempts"].as_u64() {
        let next = history["nextRetryTime"].as_str().unwrap_or("none planned");
        println!("\nfailed attempts: {n}; next retry: {next}");
    }
}

pub async fn describe(ctx: &Context, resource: &ResourceArgs) -> Result<(), CliError> {
    let at = resource.resolve(&ctx.settings, &ctx.client).await?;
    let body = ctx.client.get(&at.resource.id, &at.api_version).await?;
    let history = ctx.client.get(&format!("{}/jobs", at.resource.id), &at.api_version).await?;
    let recent: Vec<Value> =
        history["value"].as_array().map(|jobs| jobs.iter().take(RECENT_JOBS).cloned().collect()).unwrap_or_default();
    let operations = operations_of(ctx, &at, &body, &recent).await;
    let children = children_of(ctx, &at).await?;
    let referrers = referrers_of(ctx, &at).await?;
    let mut properties = body["properties"].as_object().cloned().unwrap_or_default();
    let state = properties.remove("provisioningState").unwrap_or(Value::Null);
    let outputs = properties.remove("outputs").unwrap_or(Value::Null);
    let summary = json!({
        "id": body["id"],
        "name": body["name"],
        "type": body["type"],
        "location": body["location"],
        "tags": body["tags"],
        "provisioningState": state,
        "spec": Value::Object(properties),
        "outputs": outputs,
        "failedAttempts": history["failedAttempts"],
        "nextRetryTime": history["nextRetryTime"],
        "recentJobs": recent,
        "recentOperations": operations,
        "children": children,
        "referencedBy": referrers,
    });
    if ctx.out.output != Format::Table || ctx.out.query.is_some() {
        return ctx.out.print(&summary, &[]);
    }
    print!("{}", human(&summary));
    Ok(())
}

/// The ids of the resources that reference this one (the overview list's
/// `referencedResourceId` filter; at most a page of them).
async fn referrers_of(ctx: &Context, at: &Address) -> Result<Vec<Value>, CliError> {
    let filter = format!("referencedResourceId eq '{}'", at.resource.id.replace('\'', "''"));
    let target = format!(
        "/subscriptions/{}/resources?$top=1000&$filter={}",
        segment(&at.resource.arm.subscription),
        segment(&filter)
    );
    let listed = ctx.client.get(&target, PLATFORM_API).await?;
    Ok(listed["value"].as_array().into_iter().flatten().map(|r| r["id"].clone()).collect())
}

/// The status documents of the operations the recent jobs ran for: the status path needs
/// the namespace (known) and a location (any is read).
async fn operations_of(ctx: &Context, at: &Address, body: &Value, jobs: &[Value]) -> Vec<Value> {
    let location = body["location"].as_str().filter(|l| !l.is_empty()).unwrap_or("global");
    let mut seen = Vec::new();
    let mut documents = Vec::new();
    for id in jobs.iter().filter_map(|j| j["operationId"].as_str()) {
        if seen.contains(&id) {
            continue;
        }
        seen.push(id);
        let path = format!(
            "/subscriptions/{}/providers/{}/locations/{}/operationStatuses/{}",
            segment(&at.resource.arm.subscription),
            segment(at.resource.namespace()),
            segment(location),
            segment(id)
        );
        // An expired operation is simply no longer there: show what remains.
        if let Ok(doc) = ctx.client.get(&path, PLATFORM_API).await {
            documents.push(doc);
        }
    }
    documents
}

/// Each child type discovery lists under this one, with the names of its resources here.
async fn children_of(ctx: &Context, at: &Address) -> Result<Value, CliError> {
    let doc = address::discovery(&ctx.client, at.resource.namespace()).await?;
    let prefix = format!("{}/", at.resource.type_path().to_ascii_lowercase());
    let mut children = Map::new();
    for entry in doc["resourceTypes"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let Some(full) = entry["resourceType"].as_str() else { continue };
        let Some(child) = full.to_ascii_lowercase().strip_prefix(&prefix).map(|_| &full[prefix.len()..]) else {
            continue;
        };
        if child.contains('/') {
            continue;
        }
        let api_version = entry["apiVersions"].as_array().and_then(|v| v.first()?.as_str()).unwrap_or(&at.api_version);
        let items = ctx.client.list_all(&format!("{}/{}", at.resource.id, segment(child)), api_version).await?;
        let names: Vec<Value> = items.iter().map(|i| i["name"].clone()).collect();
        children.insert(child.to_string(), Value::Array(names));
    }
    Ok(Value::Object(children))
}

fn human(s: &Value) -> String {
    let text = |v: &Value| match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out = String::new();
    out.push_str(&format!("{}\n", text(&s["id"])));
    out.push_str(&format!("  state:     {}\n", text(&s["provisioningState"])));
    out.push_str(&format!("  location:  {}\n", text(&s["location"])));
    out.push_str(&format!("  tags:      {}\n", text(&s["tags"])));
    out.push_str(&format!("  spec:      {}\n", text(&s["spec"])));
    out.push_str(&format!("  outputs:   {}\n", text(&s["outputs"])));
    if !s["failedAttempts"].is_null() {
        out.push_str(&format!(
            "  failed attempts: {}, next retry: {}\n",
            text(&s["failedAttempts"]),
            text(&s["nextRetryTime"])
        ));
    }
    out.push_str("operations (newest first):\n");
    for op in s["recentOperations"].as_array().map(Vec::as_slice).unwrap_or_default() {
        out.push_str(&format!("  {}  {}  {}\n", text(&op["name"]), text(&op["status"]), text(&op["startTime"])));
        if let Some(error) = crate::error::ArmError::from_value(&op["error"]) {
            error.render(2, &mut out);
        }
    }
    out.push_str("jobs (newest first):\n");
    for job in s["recentJobs"].as_array().map(Vec::as_slice).unwrap_or_default() {
        out.push_str(&format!(
            "  {} {}  {}  {}\n",
            text(at(job, "type")),
            text(at(job, "state")),
            text(at(job, "startTime")),
            text(at(job, "message"))
        ));
    }
    out.push_str("children:\n");
    for (child, names) in s["children"].as_object().into_iter().flatten() {
        out.push_str(&format!(
            "  {child}: {}\n",
            names.as_array().map(|n| n.iter().map(text).collect::<Vec<_>>().join(", ")).unwrap_or_default()
        ));
    }
    out.push_str("referenced by:\n");
    for id in s["referencedBy"].as_array().into_iter().flatten() {
        out.push_str(&format!("  {}\n", text(id)));
    }
    out
}
