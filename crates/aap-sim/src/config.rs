//! Configuration: what the simulated controller holds (organizations, templates, users, webhook
//! notifications) and how it misbehaves (faults). Deserialized from TOML by the binary; built in
//! code by tests. Every struct has a `Default` and `#[serde(default)]`, so a file or a struct
//! literal only names what it changes.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::awx::Status;

/// The whole simulator configuration. See `examples/aap-sim.toml` for every option.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// `"/api/"` (AWX, AAP ≤ 2.4) or `"/api/controller/"` (the AAP 2.5+ gateway). The API lives
    /// under `{api_prefix}v2/`; the other prefix answers 404.
    pub api_prefix: String,
    /// The accepted bearer token. `None`: no static token (tokens created through
    /// `POST …/v2/tokens/` still work when `users` is non-empty).
    pub token: Option<String>,
    /// Users for basic auth (and for `POST …/v2/tokens/`, which awx.awx uses with basic auth).
    /// With no `token` and no `users`, no authentication is required at all.
    pub users: Vec<SimUser>,
    pub organizations: Vec<SimOrganization>,
    pub job_templates: Vec<SimTemplate>,
    pub workflow_job_templates: Vec<SimTemplate>,
    /// Webhook notification templates attached to every template.
    pub notifications: Vec<SimWebhook>,
    pub faults: Faults,
    /// Lifecycle granularity: jobs change state on ticks of this many milliseconds.
    pub tick_ms: u64,
    /// Retry-After accounting (see [`crate::Violation`]): a request of a client that arrives
    /// before the time a `429` (or a `503` with `Retry-After`) told it to wait for is a
    /// violation, unless it arrived within this many milliseconds after that answer was sent
    /// (it was already in flight).
    pub retry_after_grace_ms: u64,
}

/// A basic-auth user.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimUser {
    pub username: String,
    pub password: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimOrganization {
    pub id: u64,
    pub name: String,
}

/// A job template or a workflow job template, with the timings and outcome of the jobs it
/// launches (both overridable per launch through extra vars, see the crate docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimTemplate {
    /// Unique across job templates and workflow job templates (AWX's unified job templates
    /// share one id space).
    pub id: u64,
    pub name: String,
    /// Organization id; must be one of `organizations`.
    pub organization: u64,
    pub ask_variables_on_launch: bool,
    /// AWX's `job_type` of a job template: `run` (the default) or `check` (Ansible's check
    /// mode: the job reports what it would change and changes nothing). Workflow job
    /// templates have none (ignored for them).
    pub job_type: String,
    /// Whether a launch may set `job_type` (else a launch's `job_type` is ignored and listed
    /// in `ignored_fields`, as AWX does).
    pub ask_job_type_on_launch: bool,
    /// AWX's `diff_mode` of a job template: its jobs report the diff of what they change.
    pub diff_mode: bool,
    /// Whether a launch may set `diff_mode` (else ignored, like `job_type`).
    pub ask_diff_mode_on_launch: bool,
    /// What a successful `run`-mode job of the template does to the resource state the
    /// simulator records (see [`ResourceEffect`]); a `check`-mode job only reports it.
    pub resource_state: ResourceEffect,
    /// Without a survey spec in the simulator, an enabled survey accepts any variable.
    pub survey_enabled: bool,
    /// `false`: a launch while another job of this template is active waits in `pending`.
    pub allow_simultaneous: bool,
    /// Time spent `running`.
    pub duration_seconds: f64,
    /// Tasks the simulated playbook runs one after another over `duration_seconds` (each a
    /// `playbook_on_task_start` event when it starts), before the record task of
    /// `resource_state`. At least 1.
    pub tasks: u32,
    /// Terminal status: `successful`, `failed`, `error` or `canceled`.
    pub outcome: String,
    /// Time spent `pending` + `waiting` (half each) once nothing blocks the job.
    pub pending_seconds: f64,
    /// The `set_stats` data a job that ran to the end (successful or failed) reports as its
    /// `artifacts` (a playbook's `set_stats` in AWX). A string that is exactly `{{ a.b.c }}` is replaced by that path of
    /// the job's extra vars (e.g. `{{ slipway.resource.name }}`), absent paths by `null`.
    pub artifacts: serde_json::Value,
}

/// What a template's playbook does with the resource a job is launched for, modelled on
/// Slipway's example playbooks, which record the resource as a JSON state file: the
/// simulator keeps, per resource id (the launch's `slipway.resource.id`, compared
/// case-insensitively), the JSON text a job "wrote" — `{"location", "properties", "tags"}` of
/// `slipway.resource`, pretty-printed with sorted keys, as `to_nice_json` writes it. A job
/// that runs to success reports the task with `changed` and (in diff mode) its diff, and in
/// `run` mode applies it; a `check`-mode job only reports it. Jobs without
/// `slipway.resource.id` in their extra vars touch nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceEffect {
    /// By the template's name: a word `create` → [`ResourceEffect::Record`], `delete` →
    /// [`ResourceEffect::Remove`], else [`ResourceEffect::None`] (words split at anything
    /// but letters and digits: `slipway-create-subnet` records).
    #[default]
    Auto,
    /// Task "Record the resource": writes the resource's state.
    Record,
    /// Task "Remove the recorded resource": removes it.
    Remove,
    /// Touches no recorded state (validate, actions).
    None,
}

impl ResourceEffect {
    /// The effect of a template named `name` (resolving [`ResourceEffect::Auto`]).
    pub fn of(self, name: &str) -> ResourceEffect {
        if self != ResourceEffect::Auto {
            return self;
        }
        let has = |word: &str| name.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w.eq_ignore_ascii_case(word));
        if has("create") {
            ResourceEffect::Record
        } else if has("delete") {
            ResourceEffect::Remove
        } else {
            ResourceEffect::None
        }
    }
}

/// A webhook notification template (AWX `notification_type: webhook`, default message bodies).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimWebhook {
    pub url: String,
    /// Any of `started` (job → running), `success` (→ successful), `error` (→ failed, error or
    /// canceled). Default: all three.
    pub events: Vec<String>,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
}

/// Fault injection, applied to API requests (not to `/_sim/` admin endpoints), in this order:
/// latency, rate limiting (bursts, then every Nth), 5xx, dropped connection; a launch can
/// additionally lose its response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Added before every API answer.
    pub latency_ms: u64,
    /// 0 = off; otherwise every Nth API request (counted since the faults were set) is answered
    /// `429` with `Retry-After`.
    pub rate_limit_every: u64,
    /// `Retry-After` of those 429s (default 1).
    pub retry_after_seconds: u64,
    /// Periodic windows (the first starts when the faults are set) during which every API
    /// request is answered `429`, with a `Retry-After` reaching the end of the window.
    pub rate_limit_burst: Option<RateLimitBurst>,
    /// Percentage of API requests answered `503`.
    pub error_5xx_percent: u8,
    /// `Retry-After` (seconds) on those 503s, as a gateway in maintenance sends it; 0 = none.
    pub error_5xx_retry_after_seconds: u64,
    /// Percentage of API requests whose connection is closed without any response.
    pub drop_percent: u8,
    /// Percentage of launches that happen (the job is created and runs) but whose response is
    /// lost: the connection is closed instead.
    pub lose_launch_response_percent: u8,
    /// Launch requests are processed (the job created) this long after they arrive, plus up
    /// to `launch_delay_jitter_ms`; a client that gives up or disconnects meanwhile does not
    /// stop it, as with AWX.
    pub launch_delay_ms: u64,
    pub launch_delay_jitter_ms: u64,
    /// How long after a job ended AWX's callback receiver is still saving its events: until
    /// then the job shows `event_processing_finished: false` and lists only the events of
    /// its start (AWX marks a job finished when its playbook ends, and its events arrive
    /// through a queue). 0: at once.
    pub event_processing_delay_ms: u64,
    /// Seed of the deterministic generator behind the percentages.
    pub seed: u64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            latency_ms: 0,
            rate_limit_every: 0,
            retry_after_seconds: 1,
            rate_limit_burst: None,
            error_5xx_percent: 0,
            error_5xx_retry_after_seconds: 0,
            drop_percent: 0,
            lose_launch_response_percent: 0,
            launch_delay_ms: 0,
            launch_delay_jitter_ms: 0,
            event_processing_delay_ms: 0,
            seed: 0,
        }
    }
}

/// A rate-limit burst schedule: windows of `length_ms` starting every `every_ms` (the first
/// when the faults are set). Inside a window every API request is answered `429` with
/// `Retry-After` = the rest of the window in seconds, rounded up (at least 1). `every_ms` 0 or
/// `length_ms` 0: off; `length_ms >= every_ms`: always.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitBurst {
    pub every_ms: u64,
    pub length_ms: u64,
}

impl Default for SimTemplate {
    fn default() -> Self {
        SimTemplate {
            id: 0,
            name: String::new(),
            organization: 1,
            ask_variables_on_launch: false,
            job_type: "run".into(),
            ask_job_type_on_launch: false,
            diff_mode: false,
            ask_diff_mode_on_launch: false,
            resource_state: ResourceEffect::Auto,
            survey_enabled: false,
            allow_simultaneous: false,
            duration_seconds: 2.0,
            tasks: 1,
            outcome: "successful".into(),
            pending_seconds: 0.1,
            artifacts: serde_json::Value::Null,
        }
    }
}

impl Default for SimWebhook {
    fn default() -> Self {
        SimWebhook {
            url: String::new(),
            events: vec!["started".into(), "success".into(), "error".into()],
            headers: BTreeMap::new(),
        }
    }
}

/// The example kinds Slipway ships, as template name suffixes (`slipway-{verb}-{kind}`).
const SLIPWAY_KINDS: [&str; 4] = ["virtual-network", "subnet", "security-group", "compute-instance"];

/// The example kinds added with child types, preflight checks and actions, and every job
/// word (`create`, `delete`, `validate`, an action) each has a template for.
const COMPOSITE_TEMPLATES: [(&str, &[&str]); 4] = [
    ("cluster", &["create", "delete", "validate", "upgrade"]),
    ("node-pool", &["create", "delete"]),
    ("external-auth", &["create", "delete"]),
    ("compute-instance", &["restart", "stop", "start"]),
];

/// What the example templates report (`set_stats`), as the local example playbooks do.
fn example_artifacts(kind: &str, verb: &str) -> serde_json::Value {
    use serde_json::json;
    match (kind, verb) {
        ("compute-instance", "create") => json!({"slipway_outputs": {
            "ipAddress": "10.0.0.4",
            "hostName": "{{ slipway.resource.name }}",
            "powerState": "Running",
        }}),
        ("compute-instance", "stop") => json!({"slipway_outputs": {"powerState": "Stopped"}}),
        ("compute-instance", _) => json!({"slipway_outputs": {"powerState": "Running"}}),
        ("cluster", "create") => json!({"slipway_outputs": {
            "apiUrl": "https://api.cluster.example:6443",
            "currentVersion": "{{ slipway.resource.properties.version }}",
        }}),
        ("cluster", "validate") => json!({"slipway_checks": [
            {"name": "version", "passed": true},
            {"name": "capacity", "passed": true},
        ]}),
        ("cluster", "upgrade") => json!({"slipway_outputs": {"currentVersion": "{{ slipway.parameters.version }}"}}),
        ("node-pool", "create") => {
            json!({"slipway_outputs": {"readyReplicas": "{{ slipway.resource.properties.replicas }}"}})
        }
        _ => serde_json::Value::Null,
    }
}

impl Default for SimConfig {
    /// Prefix `/api/`, one organization (1, `Default`), no authentication, the templates of
    /// Slipway's example types ([`SimConfig::slipway_templates`]), no notifications, no faults,
    /// 50 ms ticks, a 100 ms Retry-After grace. A struct literal or a TOML file that names a
    /// template list replaces it entirely (ids must stay unique across both lists: set both when
    /// in doubt).
    fn default() -> Self {
        let (job_templates, workflow_job_templates) = SimConfig::slipway_templates();
        SimConfig {
            api_prefix: "/api/".into(),
            token: None,
            users: Vec::new(),
            organizations: vec![SimOrganization { id: 1, name: "Default".into() }],
            job_templates,
            workflow_job_templates,
            notifications: Vec::new(),
            faults: Faults::default(),
            tick_ms: 50,
            retry_after_grace_ms: 100,
        }
    }
}

impl SimConfig {
    /// The templates Slipway's example types map to: `slipway-create-virtual-network` (id 1),
    /// `slipway-delete-virtual-network` (2), … subnet (3, 4), security-group (5, 6),
    /// compute-instance (7, 8), all prompting for variables and allowing simultaneous jobs (one
    /// job per resource, many resources per type); the workflow `slipway-workflow-demo` (9);
    /// then (10 on) the cluster's, node pool's and external auth's, the cluster's
    /// `slipway-validate-cluster` and `slipway-upgrade-cluster`, and the compute instance's
    /// `restart`, `stop` and `start`.
    pub fn slipway_templates() -> (Vec<SimTemplate>, Vec<SimTemplate>) {
        let template = |id: usize, kind: &str, verb: &str| SimTemplate {
            id: id as u64,
            name: format!("slipway-{verb}-{kind}"),
            ask_variables_on_launch: true,
            ask_job_type_on_launch: true,
            ask_diff_mode_on_launch: true,
            allow_simultaneous: true,
            artifacts: example_artifacts(kind, verb),
            ..SimTemplate::default()
        };
        let mut jts = Vec::new();
        for kind in SLIPWAY_KINDS {
            for verb in ["create", "delete"] {
                jts.push(template(jts.len() + 1, kind, verb));
            }
        }
        let wf = SimTemplate {
            id: jts.len() as u64 + 1,
            name: "slipway-workflow-demo".into(),
            ask_variables_on_launch: true,
            allow_simultaneous: true,
            ..SimTemplate::default()
        };
        for (kind, verbs) in COMPOSITE_TEMPLATES {
            for verb in verbs {
                jts.push(template(jts.len() + 2, kind, verb));
            }
        }
        (jts, vec![wf])
    }

    /// Reads a TOML file; absent keys take their defaults.
    pub fn load(path: &Path) -> Result<SimConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read(path.display().to_string(), e))?;
        Self::from_toml(&text)
    }

    pub fn from_toml(text: &str) -> Result<SimConfig, ConfigError> {
        let config: SimConfig = toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        config.validated()
    }

    /// Normalises the prefix and rejects what the simulator cannot serve faithfully.
    pub fn validated(mut self) -> Result<SimConfig, ConfigError> {
        let invalid = |m: String| Err(ConfigError::Invalid(m));
        if !self.api_prefix.starts_with('/') {
            self.api_prefix.insert(0, '/');
        }
        if !self.api_prefix.ends_with('/') {
            self.api_prefix.push('/');
        }
        if self.api_prefix == "/" || self.api_prefix.starts_with("/_sim/") {
            return invalid(format!("api_prefix {:?} would shadow other routes", self.api_prefix));
        }
        if self.tick_ms == 0 {
            return invalid("tick_ms must be at least 1".into());
        }
        let mut org_ids = std::collections::BTreeSet::new();
        for org in &self.organizations {
            if !org_ids.insert(org.id) {
                return invalid(format!("duplicate organization id {}", org.id));
            }
        }
        let mut template_ids = std::collections::BTreeSet::new();
        for t in self.job_templates.iter().chain(&self.workflow_job_templates) {
            if !template_ids.insert(t.id) {
                return invalid(format!("duplicate template id {} (job and workflow templates share ids)", t.id));
            }
            if t.id == 0 {
                return invalid(format!("template {:?} needs an id ≥ 1", t.name));
            }
            if !org_ids.contains(&t.organization) {
                return invalid(format!("template {:?}: organization {} is not configured", t.name, t.organization));
            }
            if Status::parse_outcome(&t.outcome).is_none() {
                return invalid(format!(
                    "template {:?}: outcome {:?} is not one of successful, failed, error, canceled",
                    t.name, t.outcome
                ));
            }
            if !matches!(t.job_type.as_str(), "run" | "check") {
                return invalid(format!("template {:?}: job_type {:?} is not one of run, check", t.name, t.job_type));
            }
            if t.tasks == 0 {
                return invalid(format!("template {:?}: tasks must be at least 1", t.name));
            }
            if !(t.duration_seconds >= 0.0 && t.pending_seconds >= 0.0) {
                return invalid(format!("template {:?}: durations must be ≥ 0", t.name));
            }
        }
        for n in &self.notifications {
            if let Some(e) = n.events.iter().find(|e| !matches!(e.as_str(), "started" | "success" | "error")) {
                return invalid(format!("notification {:?}: unknown event {e:?}", n.url));
            }
        }
        Ok(self)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {0}: {1}")]
    Read(String, std::io::Error),
    #[error("parsing the configuration: {0}")]
    Parse(String),
    #[error("invalid configuration: {0}")]
    Invalid(String),
}
