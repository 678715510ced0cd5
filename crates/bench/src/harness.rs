//! What every scenario needs: a simulator, a Slipway in-process, and a burst of creates.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use slipway::app::App;
use slipway::config::Config;
use slipway_domain::SystemClock;

pub const API: &str = "2025-06-01";
pub const SUB: &str = "00000000-0000-0000-0000-0000000000b0";

pub fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// A one-type Slipway config: compute instances on the `aap` provider at `sim_url`.
pub fn aap_config(port: u16, store: &str, sim_url: &str, poll_seconds: f64, provider_extra: &str) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:{port}"
retry_after_seconds = 0
[store]
{store}
[engine]
node_name = "bench"
[[providers]]
name = "aap"
type = "aap"
url = "{sim_url}"
template_prefix = "slipway"
max_concurrent_requests = 16
{provider_extra}
[[types]]
namespace = "Slipway.Example"
type = "computeInstances"
kind = "ComputeInstance"
api_versions = ["{API}"]
provider = "aap"
poll_interval_seconds = {poll_seconds}
"#
    )
}

/// Starts Slipway from a config text written into `dir`.
pub async fn start_slipway(dir: &std::path::Path, config_text: &str) -> Result<App, String> {
    let path = dir.join("slipway.toml");
    std::fs::write(&path, config_text).map_err(|e| e.to_string())?;
    let config = Config::load(Some(&path), []).map_err(|e| e.to_string())?;
    App::start(config, Arc::new(SystemClock)).await.map_err(|e| e.to_string())
}

/// PUTs `ops` compute instances at once and waits until every operation Succeeded;
/// returns the time from the first PUT to the last success.
pub async fn create_and_wait(base: &str, ops: usize) -> Result<Duration, String> {
    let http = reqwest::Client::new();
    let start = Instant::now();
    let mut puts = Vec::new();
    for i in 0..ops {
        let http = http.clone();
        let url = format!(
            "{base}/subscriptions/{SUB}/resourceGroups/bench/providers/Slipway.Example/computeInstances/vm{i}?api-version={API}"
        );
        puts.push(tokio::spawn(async move {
            let r = http.put(&url).json(&json!({"properties": {"size": "small", "image": "debian"}})).send().await;
            r.ok()
                .and_then(|r| r.headers().get("azure-asyncoperation").and_then(|v| v.to_str().ok()).map(str::to_string))
        }));
    }
    let mut status_urls = Vec::new();
    for p in puts {
        status_urls.push(p.await.map_err(|e| e.to_string())?.ok_or("a PUT was not accepted")?);
    }
    for url in &status_urls {
        loop {
            let body: Value =
                http.get(url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
            match body["status"].as_str() {
                Some("Succeeded") => break,
                Some("Failed" | "Canceled") => return Err(format!("operation ended {body}")),
                _ => {}
            }
            if start.elapsed() > Duration::from_secs(600) {
                return Err("operations did not finish within 10 minutes".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(start.elapsed())
}
