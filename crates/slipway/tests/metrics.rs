//! `GET /metrics` black-box: real playbooks drive operations, and the counters and gauges an
//! operator alerts on move as they must — the stuck-operation gauge included. The Grafana
//! dashboard in `examples/grafana/` queries only metrics Slipway exports.

use std::time::Duration;

use crate::common::{TestServer, header, repo, rid};
use serde_json::json;
use slipway_test_support::{eventually, jump};

const WAIT: Duration = Duration::from_secs(60);

/// The value of the sample `name{labels}` (labels as exported, in order), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

async fn scrape(s: &TestServer) -> String {
    let r = s.http.get(format!("{}/metrics", s.base)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type").as_deref(), Some(slipway_metrics::CONTENT_TYPE));
    r.text().await.unwrap()
}

/// Scrapes until `f` holds (a counter moves after the request that caused it answered).
async fn scrape_until(s: &TestServer, what: &str, f: impl Fn(&str) -> bool) -> String {
    eventually(what, WAIT, async || {
        let text = scrape(s).await;
        if f(&text) { Ok(text) } else { Err(format!("scrape:\n{text}")) }
    })
    .await
}

// The current-thread runtime: the test moves the clock with `jump`.
#[tokio::test]
async fn counters_and_gauges_follow_operations_and_jobs() {
    let mut s = TestServer::start().await;
    let vnet = "slipway.example/virtualnetworks";
    // Before any operation, what dashboards and alerts read is there, at zero.
    let quiet = scrape(&s).await;
    for series in [
        format!(r#"slipway_operations_active{{type="{vnet}",status="Accepted"}}"#),
        format!(r#"slipway_operation_oldest_active_age_seconds{{type="{vnet}"}}"#),
        format!(r#"slipway_operations_ended_total{{type="{vnet}",request="create",status="Failed"}}"#),
        r#"slipway_job_requests_total{provider="ansible",request="launch",outcome="ok"}"#.to_string(),
    ] {
        assert_eq!(sample(&quiet, &series), Some(0.0), "{series}:\n{quiet}");
    }
    let id = rid("virtualNetworks", "measured");
    let r = s.put(&id, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    assert_eq!(r.status(), 201);
    let op = header(&r, "azure-asyncoperation").unwrap();
    assert_eq!(s.wait_terminal(&op, WAIT).await["status"], "Succeeded");

    let text = scrape_until(&s, "the create's job end is counted", |t| {
        sample(t, r#"slipway_jobs_ended_total{provider="ansible",type="provision",state="Succeeded"}"#) == Some(1.0)
    })
    .await;
    let accepted = format!(r#"slipway_operations_accepted_total{{type="{vnet}",request="create"}}"#);
    assert_eq!(sample(&text, &accepted), Some(1.0), "{text}");
    let ended = format!(r#"slipway_operations_ended_total{{type="{vnet}",request="create",status="Succeeded"}}"#);
    assert_eq!(sample(&text, &ended), Some(1.0), "{text}");
    let launched = r#"slipway_job_requests_total{provider="ansible",request="launch",outcome="ok"}"#;
    assert_eq!(sample(&text, launched), Some(1.0), "{text}");
    // Requests by route template, in the casing the type was declared with, never by id.
    let put = r#"slipway_http_requests_total{route="/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Slipway.Example/virtualNetworks/{name}",method="PUT",status="201"}"#;
    assert_eq!(sample(&text, put), Some(1.0), "{text}");
    assert!(text.contains("slipway_http_request_duration_seconds_bucket{"), "{text}");
    assert!(!text.contains("measured"), "no resource name in any label: {text}");
    // Made-up types do not become label values.
    let bogus = s.http.get(s.url(&rid("noSuchThings", "x"))).send().await.unwrap();
    assert_eq!(bogus.status(), 404);
    let text = scrape(&s).await;
    assert!(!text.contains("noSuchThings"), "{text}");
    assert!(text.contains(r#"route="unmatched",method="GET",status="404""#), "{text}");
    assert_eq!(
        sample(&text, r#"slipway_operation_oldest_active_age_seconds{type="slipway.example/virtualnetworks"}"#),
        Some(0.0),
        "nothing in flight: zero, not a frozen age"
    );

    // A job that does not finish: its operation stays in flight, and the oldest-operation
    // gauge grows with the time it has been running.
    let slow = rid("computeInstances", "slow");
    let body = json!({"location": "local", "properties": {"size": "small", "image": "x", "delaySeconds": 300}});
    let r = s.put(&slow, body).await;
    let stuck = header(&r, "azure-asyncoperation").unwrap();
    let compute = "slipway.example/computeinstances";
    let active = format!(r#"slipway_operations_active{{type="{compute}",status="Provisioning"}}"#);
    scrape_until(&s, "the slow create is in flight", |t| sample(t, &active) == Some(1.0)).await;
    jump(Duration::from_secs(1800)).await;
    let oldest = format!(r#"slipway_operation_oldest_active_age_seconds{{type="{compute}"}}"#);
    let text = scrape(&s).await;
    let age = sample(&text, &oldest).unwrap_or_else(|| panic!("no oldest-operation gauge: {text}"));
    assert!((1800.0..1900.0).contains(&age), "half an hour in flight, the gauge says {age}: {text}");
    // Half an hour of paused time passes at once: the slow create's claim may lapse in the
    // jump and be taken again, so its worker is awaited rather than read once.
    scrape_until(&s, "a worker drives the slow create", |t| sample(t, "slipway_engine_workers") == Some(1.0)).await;

    let cancel = stuck.replace("?api-version", "/cancel?api-version");
    assert_eq!(s.http.post(&cancel).send().await.unwrap().status(), 202);
    assert_eq!(s.wait_terminal(&stuck, WAIT).await["status"], "Canceled");
    let canceled = format!(r#"slipway_operations_ended_total{{type="{compute}",request="create",status="Canceled"}}"#);
    let text = scrape_until(&s, "the canceled create is counted and nothing is left in flight", |t| {
        sample(t, &canceled) == Some(1.0) && sample(t, &oldest) == Some(0.0)
    })
    .await;
    assert_eq!(sample(&text, &active), Some(0.0), "{text}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_require_a_token_or_be_off() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("metrics.token");
    std::fs::write(&token, "scrape-me\n").unwrap();
    let mut s =
        TestServer::start_with_server(&format!("metrics = \"token\"\nmetrics_token_file = \"{}\"", token.display()))
            .await;
    let url = format!("{}/metrics", s.base);
    let r = s.http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(header(&r, "www-authenticate").as_deref(), Some("Bearer realm=\"metrics\""));
    let r = s.http.get(&url).bearer_auth("wrong").send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = s.http.get(&url).bearer_auth("scrape-me").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().ends_with("# EOF\n"));
    s.stop().await;

    let mut s = TestServer::start_with_server("metrics = \"off\"").await;
    let r = s.http.get(format!("{}/metrics", s.base)).send().await.unwrap();
    assert_eq!(r.status(), 404);
    s.stop().await;
}

#[test]
fn the_dashboard_queries_only_exported_metrics() {
    let text = std::fs::read_to_string(repo().join("examples/grafana/slipway.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let metrics = slipway_metrics::Metrics::default();
    let known = metrics.names();
    let mut queried = Vec::new();
    let mut panels = vec![&dashboard];
    while let Some(node) = panels.pop() {
        match node {
            serde_json::Value::Object(map) => {
                if let Some(expr) = map.get("expr").and_then(|e| e.as_str()) {
                    queried.push(expr.to_string());
                }
                panels.extend(map.values());
            }
            serde_json::Value::Array(items) => panels.extend(items),
            _ => {}
        }
    }
    assert!(queried.len() >= 10, "the dashboard has its panels: {queried:?}");
    let names = regex::Regex::new(r"slipway_[a-z_]+").unwrap();
    for expr in &queried {
        for name in names.find_iter(expr) {
            assert!(
                known.iter().any(|k| k == name.as_str()),
                "the dashboard queries {}, which Slipway does not export (in {expr})",
                name.as_str()
            );
        }
    }
    // Every family an operator alerts on has a panel.
    for family in
        ["slipway_operation_oldest_active_age_seconds", "slipway_notification_outbox", "slipway_engine_due_resources"]
    {
        assert!(queried.iter().any(|e| e.contains(family)), "no panel shows {family}");
    }
}
