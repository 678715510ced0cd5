//! Builders shared by the scenario tests: fixed ids and times, request contexts, and a
//! `World` that drives a snapshot through admission and `decide`/`apply` like the API and
//! the engine do (each call is one committed transaction).

#![allow(dead_code)]

pub mod poll_wait;

use std::time::Duration;

use serde_json::{Value, json};
use slipway_domain::admission::{self, Admitted, Rejection, RequestContext};
use slipway_domain::reconcile::{self, Effect, Failure, FailureKind, JobStart, Observation, Outcome};
use slipway_domain::resource::NewNotification;
use slipway_domain::{
    ArmId, CloudError, ConfigVersion, IdempotencyKey, Initiator, Job, JobState, JobType, Operation, OperationId,
    ResourceRecord, Snapshot, Spec, Timestamp, TypePolicy,
};

/// 2023-11-14T22:13:20Z: an arbitrary, realistic epoch for every scenario.
pub const T0: Timestamp = Timestamp(1_700_000_000_000);

pub const RESOURCE_ID: &str = "/subscriptions/AB000000-0000-0000-0000-000000000001/resourceGroups/My-RG/providers/Slipway.Example/virtualNetworks/VNet1";

pub const CALLBACK: &str = "https://arm.example/cb/1";

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub fn mins(n: u64) -> Duration {
    Duration::from_secs(n * 60)
}

/// `T0 + s` seconds.
pub fn at(s: i64) -> Timestamp {
    Timestamp(T0.0 + s * 1000)
}

pub fn arm_id() -> ArmId {
    ArmId::parse(RESOURCE_ID).expect("valid id")
}

/// Operation id number `n` (a valid lowercase UUID).
pub fn op_id(n: u32) -> OperationId {
    OperationId::parse(&format!("00000000-0000-4000-8000-{n:012x}")).expect("valid uuid")
}

/// The idempotency key of launch `seq` of operation `n`.
pub fn key(op: u32, seq: u64) -> IdempotencyKey {
    format!("{}:{seq}", op_id(op)).into()
}

pub fn spec(properties: Value) -> Spec {
    Spec { location: Some("westeurope".into()), tags: [("env".to_string(), "test".to_string())].into(), properties }
}

pub fn v1() -> Value {
    json!({"addressSpace": "10.0.0.0/16"})
}

pub fn v2() -> Value {
    json!({"addressSpace": "10.1.0.0/16"})
}

pub fn ctx(op: u32, now: Timestamp) -> RequestContext {
    RequestContext {
        operation_id: op_id(op),
        now,
        initiator: Initiator {
            tenant_id: "T1".into(),
            client_id: "O1".into(),
            client_request_id: String::new(),
            correlation_request_id: "corr-1".into(),
        },
        notification_uri: None,
        api_version: "2025-01-01".into(),
        actor: "alice@example.com".into(),
        actor_type: "User".into(),
        job_context: Some(job_context("alice@example.com")),
    }
}

/// A job context naming `who` in tenant T1, whose subscription has a storage class.
pub fn job_context(who: &str) -> slipway_domain::JobContext {
    slipway_domain::JobContext {
        requested_by: slipway_domain::RequestedBy {
            name: who.into(),
            tenant: Some("T1".into()),
            groups: vec!["ops".into()],
        },
        tenant: Some(slipway_domain::TenantContext {
            tenant_id: "T1".into(),
            display_name: "Tenant one".into(),
            attributes: json!({"storageClass": "gold"}).as_object().cloned().unwrap_or_default(),
        }),
    }
}

pub fn started(job_id: &str, state: JobState) -> JobStart {
    JobStart {
        job_id: job_id.into(),
        handle: json!({"kind": "job", "id": job_id}),
        state,
        template: "osac-create-virtual-network".into(),
    }
}

pub fn launched(job_id: &str) -> Outcome {
    Outcome::Launched(started(job_id, JobState::Pending))
}

pub fn observed(state: JobState, message: &str, details: &str) -> Outcome {
    Outcome::Observed(Observation {
        state,
        message: message.into(),
        error_details: details.into(),
        stats: None,
        changes: None,
        progress: None,
    })
}

pub fn failed(kind: FailureKind, message: &str) -> Outcome {
    Outcome::Failed(Failure { kind, message: message.into() })
}

pub fn err(code: &str, message: &str) -> CloudError {
    CloudError::new(code, message)
}

pub fn notification(op: u32) -> NewNotification {
    NewNotification {
        subscription: "ab000000-0000-0000-0000-000000000001".into(),
        operation_id: op_id(op),
        uri: CALLBACK.into(),
    }
}

pub fn conflict(message: &str) -> Rejection {
    Rejection::Conflict { message: message.into(), target: RESOURCE_ID.into() }
}

/// A snapshot plus the clock and policy, driven the way the API and the engine drive it.
pub struct World {
    pub snap: Snapshot,
    pub policy: TypePolicy,
    pub now: Timestamp,
    /// `Azure-AsyncNotificationUri` sent with client requests.
    pub notify: bool,
}

impl Default for World {
    fn default() -> Self {
        World::new()
    }
}

impl World {
    pub fn new() -> Self {
        World { snap: Snapshot::default(), policy: TypePolicy::default(), now: T0, notify: false }
    }

    /// A world whose resource was created by operation 1 with spec `v1` at `T0`.
    pub fn created() -> Self {
        let mut w = World::new();
        w.put(1, v1()).expect("create admitted");
        w
    }

    pub fn ctx(&self, op: u32) -> RequestContext {
        let mut c = ctx(op, self.now);
        if self.notify {
            c.notification_uri = Some(CALLBACK.into());
        }
        c
    }

    pub fn put(&mut self, op: u32, properties: Value) -> Result<Admitted, Rejection> {
        let c = self.ctx(op);
        admission::admit_put(&mut self.snap, &arm_id(), "VirtualNetwork", spec(properties), &c)
    }

    pub fn delete(&mut self, op: u32) -> Result<Admitted, Rejection> {
        let c = self.ctx(op);
        admission::admit_delete(&mut self.snap, &c)
    }

    pub fn cancel(&mut self, op: u32) -> Result<Operation, Rejection> {
        admission::admit_cancel(&mut self.snap, &op_id(op), self.now)
    }

    pub fn decide(&mut self) -> Effect {
        reconcile::decide(&mut self.snap, &self.policy, self.now)
    }

    pub fn apply(&mut self, effect: &Effect, outcome: Outcome) -> Option<Timestamp> {
        reconcile::apply(&mut self.snap, effect, outcome, &self.policy, self.now)
    }

    pub fn advance(&mut self, d: Duration) {
        self.now = self.now.add(d);
    }

    pub fn set_now(&mut self, t: Timestamp) {
        self.now = t;
    }

    pub fn res(&self) -> &ResourceRecord {
        self.snap.resource.as_ref().expect("resource exists")
    }

    pub fn res_mut(&mut self) -> &mut ResourceRecord {
        self.snap.resource.as_mut().expect("resource exists")
    }

    pub fn op(&self, n: u32) -> &Operation {
        self.snap.operation(&op_id(n)).expect("operation exists")
    }

    pub fn job(&self, key: &IdempotencyKey) -> &Job {
        self.res().jobs.iter().find(|j| j.idempotency_key == *key).unwrap_or_else(|| panic!("job {key} in history"))
    }

    /// A world whose create operation succeeded with job `1001` (key `op1:1`) at `T0`.
    pub fn provisioned() -> Self {
        let mut w = World::created();
        w.launch(&key(1, 1), "1001");
        assert_eq!(w.poll(&key(1, 1), observed(JobState::Succeeded, "successful", "")), None);
        assert_eq!(w.decide(), Effect::Sleep { until: None });
        assert_eq!(w.op(1).status, slipway_domain::ProvisioningState::Succeeded);
        w
    }

    /// Expects `decide` to launch `key`, and reports the launch as accepted with `job_id`.
    pub fn launch(&mut self, key: &IdempotencyKey, job_id: &str) {
        let effect = self.decide();
        assert_eq!(effect, Effect::Launch { key: key.clone() }, "expected a launch");
        let hold = self.apply(&effect, launched(job_id));
        assert_eq!(hold, Some(self.now.add(self.policy.poll_interval)));
    }

    /// Expects `decide` to poll `key`, and reports `outcome`; returns `apply`'s hold.
    pub fn poll(&mut self, key: &IdempotencyKey, outcome: Outcome) -> Option<Timestamp> {
        let effect = self.decide();
        assert_eq!(effect, Effect::Poll { key: key.clone() }, "expected a poll");
        self.apply(&effect, outcome)
    }

    /// Expects `decide` to ask for cancellation of `key`, and reports `outcome`.
    pub fn cancel_job(&mut self, key: &IdempotencyKey, outcome: Outcome) -> Option<Timestamp> {
        let effect = self.decide();
        assert_eq!(effect, Effect::Cancel { key: key.clone() }, "expected a cancel");
        self.apply(&effect, outcome)
    }
}

// ---------------------------------------------------------------------------------------
// Steps of the reconcile scenarios (reconcile.rs, exactly_once.rs, cancel_delete.rs)
// ---------------------------------------------------------------------------------------

pub const POLL: Duration = Duration::from_secs(2);

pub fn sleep_until(t: Timestamp) -> Effect {
    Effect::Sleep { until: Some(t) }
}

pub const SLEEP: Effect = Effect::Sleep { until: None };

pub fn provisioning_failed(message: &str) -> Option<CloudError> {
    Some(err("ProvisioningFailed", message))
}

/// The intent entry `begin_launch` records.
pub fn intent(key: &IdempotencyKey, job_type: JobType, op: Option<u32>, version: ConfigVersion, now: Timestamp) -> Job {
    let mut j = Job::new(job_type, JobState::Launching, now);
    j.idempotency_key = key.clone();
    j.provider = "ansible".into();
    j.operation_id = op.map(op_id);
    j.config_version = version;
    j
}

pub fn desired(w: &World) -> ConfigVersion {
    w.res().desired_config_version.clone()
}

/// `intent` as `decide` leaves it when it hands the launch request to the engine.
pub fn sent(mut j: Job) -> Job {
    j.launch_sent_at = Some(j.timestamp);
    j.launch_sends = 1;
    j
}
