//! What the simulator tests share: templates, a provider on the simulator, requests and the
//! counters read back.

use std::collections::BTreeMap;
use std::time::Duration;

use aap_sim::{Sim, SimConfig, SimTemplate};
use serde_json::{Value, json};
use slipway_aap::{AapOptions, AapProvider};
use slipway_domain::{ArmId, ConfigVersion, OperationId};
use slipway_provider::{JobAction, JobHandle, JobStatus, LaunchRequest, Launched, Provider, ProviderError, RunMode};
use slipway_test_support::eventually;
pub const WAIT: Duration = Duration::from_secs(30);

/// A quick template: prompts for variables, runs 0.2 s, succeeds.
pub fn template(id: u64, name: &str) -> SimTemplate {
    SimTemplate {
        id,
        name: name.into(),
        organization: 1,
        ask_variables_on_launch: true,
        allow_simultaneous: true,
        duration_seconds: 0.2,
        pending_seconds: 0.05,
        ..SimTemplate::default()
    }
}

pub fn config(job_templates: Vec<SimTemplate>, workflow_job_templates: Vec<SimTemplate>) -> SimConfig {
    SimConfig { job_templates, workflow_job_templates, tick_ms: 20, ..SimConfig::default() }
}

pub async fn start(config: SimConfig) -> Sim {
    Sim::start("127.0.0.1:0", config).await.expect("simulator starts")
}

pub fn options(sim: &Sim) -> AapOptions {
    AapOptions {
        name: "aap-test".into(),
        base_url: sim.base_url(),
        template_prefix: Some("slipway".into()),
        request_timeout: Duration::from_secs(10),
        retry_backoff: Duration::from_millis(20),
        max_retry_wait: Duration::from_secs(5),
        ..AapOptions::default()
    }
}

pub fn provider(options: AapOptions) -> AapProvider {
    AapProvider::new(options).expect("provider builds")
}

/// The subscription and operation every test request names.
pub const SUBSCRIPTION: &str = "6f1c2a3e-0000-4000-8000-000000000001";
pub const OPERATION: &str = "0190b6a4-7c1e-7000-8000-000000000001";

pub fn request(kind: &str, action: JobAction, key: &str) -> LaunchRequest {
    LaunchRequest {
        idempotency_key: key.into(),
        action,
        kind: kind.into(),
        resource_type: "slipway.test/things".into(),
        resource_id: ArmId::parse(&format!(
            "/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-1/providers/Slipway.Test/things/{kind}-r"
        ))
        .expect("a valid id"),
        location: Some("local".into()),
        tags: serde_json::Map::new(),
        properties: json!({"size": 1}),
        outputs: serde_json::Map::new(),
        operation_id: OperationId::parse(OPERATION),
        config_version: ConfigVersion::new("cv-1"),
        intended_at: None,
        context: None,
        secrets: Default::default(),
        parent: None,
        references: Default::default(),
        parameters: Value::Null,
        mode: RunMode::Run,
    }
}

pub fn create(kind: &str, key: &str) -> LaunchRequest {
    request(kind, JobAction::Create, key)
}

pub fn with_properties(mut r: LaunchRequest, properties: Value) -> LaunchRequest {
    r.properties = properties;
    r
}

/// Requests the simulator counted under `key` (`"GET /api/v2/jobs/"`).
pub fn count(sim: &Sim, key: &str) -> u64 {
    sim.handle().requests().get(key).copied().unwrap_or(0)
}

pub fn requests(sim: &Sim) -> BTreeMap<String, u64> {
    sim.handle().requests()
}

pub async fn status1(p: &AapProvider, h: &JobHandle) -> Result<JobStatus, ProviderError> {
    let mut v = p.status(std::slice::from_ref(h)).await;
    assert_eq!(v.len(), 1);
    v.pop().unwrap()
}

/// Polls until the job is terminal and answers its status.
pub async fn terminal(p: &AapProvider, h: &JobHandle) -> JobStatus {
    eventually("a terminal status", WAIT, async || match status1(p, h).await {
        Ok(s) if s.state.is_terminal() => Some(s),
        Ok(_) => None,
        Err(e) => panic!("status failed: {e}"),
    })
    .await
}

pub fn key_jobs(sim: &Sim, key: &str) -> Vec<aap_sim::SimJob> {
    sim.handle().jobs().into_iter().filter(|j| slipway_aap::key_of(&j.extra_vars).as_deref() == Some(key)).collect()
}

pub fn id(l: &Launched) -> u64 {
    l.handle.job_id.as_str().parse().unwrap()
}
