//! The simulated controller's data: jobs and their lifecycle, tokens, the request counter and
//! the fault generator, plus AWX's JSON representations of templates, jobs and events.
//!
//! Everything sits behind one `std::sync::Mutex` (held only for short, non-async sections): the
//! simulator is a test double, and one lock keeps every answer consistent with the lifecycle.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::config::{Faults, SimConfig, SimTemplate};
use crate::throttle::{Clients, FaultCounts, Violation};
use crate::util::{Prng, format_api, format_python, now_micros, python_json_dumps};

pub const AWX_VERSION: &str = "24.6.1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    New,
    Pending,
    Waiting,
    Running,
    Successful,
    Failed,
    Error,
    Canceled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::New => "new",
            Status::Pending => "pending",
            Status::Waiting => "waiting",
            Status::Running => "running",
            Status::Successful => "successful",
            Status::Failed => "failed",
            Status::Error => "error",
            Status::Canceled => "canceled",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "new" => Status::New,
            "pending" => Status::Pending,
            "waiting" => Status::Waiting,
            "running" => Status::Running,
            other => return Status::parse_outcome(other),
        })
    }

    /// A terminal status, as templates and per-launch overrides may name it.
    pub fn parse_outcome(s: &str) -> Option<Status> {
        Some(match s {
            "successful" => Status::Successful,
            "failed" => Status::Failed,
            "error" => Status::Error,
            "canceled" => Status::Canceled,
            _ => return None,
        })
    }

    /// AWX `CAN_CANCEL` / `ACTIVE_STATES`.
    pub fn is_active(self) -> bool {
        matches!(self, Status::New | Status::Pending | Status::Waiting | Status::Running)
    }

    /// `UnifiedJob.save`: `failed = status in ('failed', 'error', 'canceled')`.
    pub fn is_failed(self) -> bool {
        matches!(self, Status::Failed | Status::Error | Status::Canceled)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Job,
    WorkflowJob,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Job => "job",
            Kind::WorkflowJob => "workflow_job",
        }
    }
    pub fn collection(self) -> &'static str {
        match self {
            Kind::Job => "jobs",
            Kind::WorkflowJob => "workflow_jobs",
        }
    }
    pub fn template_collection(self) -> &'static str {
        match self {
            Kind::Job => "job_templates",
            Kind::WorkflowJob => "workflow_job_templates",
        }
    }
    pub fn template_type(self) -> &'static str {
        match self {
            Kind::Job => "job_template",
            Kind::WorkflowJob => "workflow_job_template",
        }
    }
}

/// A user as the API shows it (`launched_by`, `created_by`, `/me/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: u64,
    pub username: String,
}

/// What a job will do: decided at launch from the template and the per-launch overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub pending_seconds: f64,
    pub duration_seconds: f64,
    pub outcome: Status,
    /// Why it fails, when it does: becomes `result_traceback`.
    pub failure: String,
}

#[derive(Debug, Clone)]
pub struct Job {
    pub id: u64,
    pub kind: Kind,
    pub template_id: u64,
    pub template_name: String,
    pub organization: u64,
    pub allow_simultaneous: bool,
    pub status: Status,
    /// The accepted extra vars (an object).
    pub extra_vars: Value,
    pub limit: String,
    pub launched_by: User,
    pub created: i64,
    pub modified: i64,
    pub started: Option<i64>,
    pub finished: Option<i64>,
    pub canceled_on: Option<i64>,
    pub job_explanation: String,
    pub result_traceback: String,
    pub plan: Plan,
    /// When the current lifecycle phase began (monotonic; phases are timed, not the wall clock).
    pub phase_since: Instant,
    pub cancel_requested: bool,
    /// Set by `set_job_status`: the lifecycle stops driving the job (only a cancel still does).
    pub forced: bool,
    pub launch_lost: bool,
}

impl Job {
    /// AWX's `elapsed`: seconds between started and finished (live while running), 3 decimals.
    pub fn elapsed(&self, now: i64) -> f64 {
        let secs = match (self.started, self.finished) {
            (Some(s), Some(f)) => (f - s) as f64 / 1e6,
            (Some(s), None) => (now - s) as f64 / 1e6,
            _ => 0.0,
        };
        (secs.max(0.0) * 1000.0).round() / 1000.0
    }
}

/// One job or workflow job as the Rust handle and `GET /_sim/jobs` report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimJob {
    pub id: u64,
    /// `job` or `workflow_job`.
    pub kind: String,
    pub template_id: u64,
    pub template_name: String,
    pub status: String,
    /// The extra vars the job received (after prompts were applied), as an object.
    pub extra_vars: Value,
    pub created: String,
    pub finished: Option<String>,
    /// The launch was performed but its response was dropped by fault injection.
    pub launch_lost: bool,
    pub started: Option<String>,
    pub cancel_requested: bool,
}

/// A webhook event AWX would notify about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyEvent {
    Started,
    Success,
    Error,
}

impl NotifyEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::Started => "started",
            NotifyEvent::Success => "success",
            NotifyEvent::Error => "error",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Notice {
    pub event: NotifyEvent,
    pub body: Value,
}

#[derive(Debug, Clone)]
pub struct Token {
    pub token: String,
    pub user: User,
    pub created: i64,
}

/// Which serializer shapes a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// `JobDetailSerializer` / `WorkflowJobSerializer` (detail).
    Detail,
    /// `JobSerializer` as the launch response uses it.
    Launch,
}

pub struct State {
    pub config: SimConfig,
    /// Scheme and authority of the simulator, for UI links in notifications.
    pub base_url: String,
    /// When the simulator started: templates' `created`.
    pub boot: i64,
    pub jobs: BTreeMap<u64, Job>,
    next_job_id: u64,
    pub tokens: BTreeMap<u64, Token>,
    next_token_id: u64,
    pub requests: BTreeMap<String, u64>,
    pub faults: Faults,
    pub rng: Prng,
    /// API requests since the faults were set (for `rate_limit_every`).
    pub api_requests: u64,
    /// When the faults were set (the first rate-limit burst starts then).
    pub faults_since: Instant,
    /// Faults injected, by kind.
    pub injected: FaultCounts,
    /// Requests and Retry-After blocks per client (`User-Agent`).
    pub clients: Clients,
    pub violations: Vec<Violation>,
}

impl State {
    pub fn new(config: SimConfig, base_url: String) -> State {
        let faults = config.faults.clone();
        State {
            rng: Prng::new(faults.seed),
            faults,
            config,
            base_url,
            boot: now_micros(),
            jobs: BTreeMap::new(),
            next_job_id: 1,
            tokens: BTreeMap::new(),
            next_token_id: 1,
            requests: BTreeMap::new(),
            api_requests: 0,
            faults_since: Instant::now(),
            injected: FaultCounts::default(),
            clients: Clients::default(),
            violations: Vec::new(),
        }
    }

    pub fn set_faults(&mut self, faults: Faults) {
        self.rng = Prng::new(faults.seed);
        self.faults = faults;
        self.api_requests = 0;
        self.faults_since = Instant::now();
    }

    /// Clears the request counters (per endpoint and per client) and the injected-fault counts.
    /// Retry-After blocks and violations stay.
    pub fn reset_counters(&mut self) {
        self.requests.clear();
        self.clients.reset_requests();
        self.injected = FaultCounts::default();
    }

    /// `{prefix}v2/{rel}`.
    pub fn api(&self, rel: &str) -> String {
        format!("{}v2/{}", self.config.api_prefix, rel)
    }

    pub fn template(&self, kind: Kind, id: u64) -> Option<&SimTemplate> {
        self.templates(kind).iter().find(|t| t.id == id)
    }

    pub fn templates(&self, kind: Kind) -> &[SimTemplate] {
        match kind {
            Kind::Job => &self.config.job_templates,
            Kind::WorkflowJob => &self.config.workflow_job_templates,
        }
    }

    pub fn organization_name(&self, id: u64) -> String {
        self.config.organizations.iter().find(|o| o.id == id).map(|o| o.name.clone()).unwrap_or_default()
    }

    /// The user a static token or an unauthenticated simulator acts as: the first configured
    /// user, else `admin` (id 1).
    pub fn default_user(&self) -> User {
        match self.config.users.first() {
            Some(u) => User { id: 1, username: u.username.clone() },
            None => User { id: 1, username: "admin".into() },
        }
    }

    pub fn user_named(&self, username: &str) -> Option<User> {
        self.config
            .users
            .iter()
            .position(|u| u.username == username)
            .map(|i| User { id: i as u64 + 1, username: username.to_string() })
    }

    pub fn create_token(&mut self, user: User) -> (u64, Token) {
        let id = self.next_token_id;
        self.next_token_id += 1;
        // Unpredictable enough for a test double, and distinct per simulator run.
        let secret = format!(
            "{:016x}{:016x}",
            self.boot as u64 ^ 0x5EED_0000_0000_0000 ^ id,
            id.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        );
        let token = Token { token: format!("aapsim{secret}"), user, created: now_micros() };
        self.tokens.insert(id, token.clone());
        (id, token)
    }

    /// Creates a job the way a launch does (status `pending`, as `signal_start` leaves it
    /// before the response is serialized) and returns its id.
    pub fn launch(
        &mut self,
        kind: Kind,
        template: &SimTemplate,
        extra_vars: Value,
        limit: String,
        plan: Plan,
        user: User,
    ) -> u64 {
        let id = self.next_job_id;
        self.next_job_id += 1;
        let now = now_micros();
        self.jobs.insert(
            id,
            Job {
                id,
                kind,
                template_id: template.id,
                template_name: template.name.clone(),
                organization: template.organization,
                allow_simultaneous: template.allow_simultaneous,
                status: Status::Pending,
                extra_vars,
                limit,
                launched_by: user,
                created: now,
                modified: now,
                started: None,
                finished: None,
                canceled_on: None,
                job_explanation: String::new(),
                result_traceback: String::new(),
                plan,
                phase_since: Instant::now(),
                cancel_requested: false,
                forced: false,
                launch_lost: false,
            },
        );
        id
    }

    /// `POST …/cancel/` on an active job: AWX sets `cancel_flag` and `canceled_on` at once;
    /// the status becomes `canceled` when the job's cleanup runs (the next tick here).
    pub fn request_cancel(&mut self, id: u64) -> bool {
        let Some(job) = self.jobs.get_mut(&id) else { return false };
        if !job.status.is_active() {
            return false;
        }
        job.cancel_requested = true;
        if job.canceled_on.is_none() {
            let now = now_micros();
            job.canceled_on = Some(now);
            job.modified = now;
        }
        true
    }

    /// Advances every active job; returns the notifications the transitions trigger.
    pub fn tick(&mut self, now: Instant) -> Vec<Notice> {
        let wall = now_micros();
        let active: Vec<u64> = self.jobs.values().filter(|j| j.status.is_active()).map(|j| j.id).collect();
        let mut notices = Vec::new();
        for id in active {
            // A job may cross several phases in one tick when its timings are shorter than one.
            loop {
                let blocked = self.is_blocked(id);
                let job = self.jobs.get_mut(&id).expect("active job exists");
                let in_phase = now.saturating_duration_since(job.phase_since).as_secs_f64();
                let half_pending = job.plan.pending_seconds / 2.0;
                let event = if job.cancel_requested {
                    finish(job, Status::Canceled, wall);
                    Some(NotifyEvent::Error)
                } else if job.forced {
                    break;
                } else {
                    match job.status {
                        Status::New => {
                            job.status = Status::Pending;
                            job.phase_since = now;
                            None
                        }
                        Status::Pending if blocked => {
                            // The task manager keeps it pending; its own wait starts once unblocked.
                            job.phase_since = now;
                            break;
                        }
                        Status::Pending if in_phase >= half_pending => {
                            job.status = Status::Waiting;
                            job.modified = wall;
                            job.phase_since = now;
                            None
                        }
                        Status::Waiting if in_phase >= half_pending => {
                            job.status = Status::Running;
                            job.started = Some(wall);
                            job.modified = wall;
                            job.phase_since = now;
                            Some(NotifyEvent::Started)
                        }
                        Status::Running if in_phase >= job.plan.duration_seconds => {
                            let outcome = job.plan.outcome;
                            finish(job, outcome, wall);
                            Some(if outcome == Status::Successful { NotifyEvent::Success } else { NotifyEvent::Error })
                        }
                        _ => break,
                    }
                };
                let done = !self.jobs[&id].status.is_active();
                if let Some(event) = event {
                    notices.push(Notice { event, body: self.notification_body(&self.jobs[&id]) });
                }
                if done {
                    break;
                }
            }
        }
        notices
    }

    /// `allow_simultaneous = false`: an older active job of the same template blocks this one.
    fn is_blocked(&self, id: u64) -> bool {
        let job = &self.jobs[&id];
        job.status == Status::Pending
            && !job.allow_simultaneous
            && self
                .jobs
                .range(..id)
                .any(|(_, o)| o.kind == job.kind && o.template_id == job.template_id && o.status.is_active())
    }

    /// Forces a status (test hook). The job leaves the automatic lifecycle.
    pub fn force_status(&mut self, id: u64, status: Status) -> Vec<Notice> {
        let wall = now_micros();
        let Some(job) = self.jobs.get_mut(&id) else { return Vec::new() };
        let before = job.status;
        job.forced = true;
        job.modified = wall;
        job.phase_since = Instant::now();
        let mut events = Vec::new();
        if status.is_active() {
            job.status = status;
            job.finished = None;
            if status == Status::Running && job.started.is_none() {
                job.started = Some(wall);
            }
            if status == Status::Running && before != Status::Running {
                events.push(NotifyEvent::Started);
            }
        } else {
            job.finished = None;
            finish(job, status, wall);
            if before.is_active() {
                events.push(if status == Status::Successful { NotifyEvent::Success } else { NotifyEvent::Error });
            }
        }
        let job = &self.jobs[&id];
        events.into_iter().map(|event| Notice { event, body: self.notification_body(job) }).collect()
    }

    pub fn sim_job(&self, job: &Job) -> SimJob {
        SimJob {
            id: job.id,
            kind: job.kind.as_str().into(),
            template_id: job.template_id,
            template_name: job.template_name.clone(),
            status: job.status.as_str().into(),
            extra_vars: job.extra_vars.clone(),
            created: format_api(job.created),
            finished: job.finished.map(format_api),
            launch_lost: job.launch_lost,
            started: job.started.map(format_api),
            cancel_requested: job.cancel_requested,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Representations.

    fn organization_summary(&self, id: u64) -> Value {
        json!({"id": id, "name": self.organization_name(id), "description": ""})
    }

    fn user_summary(&self, user: &User) -> Value {
        json!({"id": user.id, "username": user.username, "first_name": "", "last_name": ""})
    }

    pub fn user_json(&self, user: &User) -> Value {
        json!({
            "id": user.id, "type": "user", "url": self.api(&format!("users/{}/", user.id)),
            "related": {}, "summary_fields": {}, "created": format_api(self.boot), "modified": format_api(self.boot),
            "username": user.username, "first_name": "", "last_name": "", "email": "",
            "is_superuser": true, "is_system_auditor": false, "password": "$encrypted$",
            "ldap_dn": "", "last_login": Value::Null, "external_account": Value::Null,
        })
    }

    pub fn organization_json(&self, id: u64) -> Value {
        let prefix = format!("organizations/{id}/");
        json!({
            "id": id, "type": "organization", "url": self.api(&prefix),
            "related": {
                "job_templates": self.api(&format!("{prefix}job_templates/")),
                "workflow_job_templates": self.api(&format!("{prefix}workflow_job_templates/")),
            },
            "summary_fields": {}, "created": format_api(self.boot), "modified": format_api(self.boot),
            "name": self.organization_name(id), "description": "", "max_hosts": 0,
            "custom_virtualenv": Value::Null, "default_environment": Value::Null,
        })
    }

    /// `status`, `last_job_run`, `last_job_failed` and the last job of a template, as AWX
    /// keeps them (`_get_current_status`).
    fn template_job_summary(&self, kind: Kind, template_id: u64) -> (String, Option<i64>, bool, Value) {
        let mine = || self.jobs.values().rev().filter(|j| j.kind == kind && j.template_id == template_id);
        let current = mine().find(|j| j.status.is_active());
        let last = mine().find(|j| !j.status.is_active());
        let status = match (current, last) {
            (Some(c), _) => c.status.as_str().to_string(),
            (None, None) => "never updated".into(),
            (None, Some(l)) if l.status.is_failed() => "failed".into(),
            (None, Some(_)) => "successful".into(),
        };
        let last_job = last.map(|l| {
            json!({"id": l.id, "name": l.template_name, "description": "", "finished": l.finished.map(format_api),
                   "status": l.status.as_str(), "failed": l.status.is_failed()})
        });
        (
            status,
            last.and_then(|l| l.finished),
            last.is_some_and(|l| l.status.is_failed()),
            last_job.unwrap_or(Value::Null),
        )
    }

    pub fn template_json(&self, kind: Kind, t: &SimTemplate) -> Value {
        let base = format!("{}/{}/", kind.template_collection(), t.id);
        let (status, last_run, last_failed, last_job) = self.template_job_summary(kind, t.id);
        let mut summary = json!({
            "organization": self.organization_summary(t.organization),
            "user_capabilities": {"edit": true, "delete": true, "start": true, "schedule": true, "copy": true},
            "labels": {"count": 0, "results": []},
            "recent_jobs": self.jobs.values().rev()
                .filter(|j| j.kind == kind && j.template_id == t.id).take(10)
                .map(|j| json!({"id": j.id, "status": j.status.as_str(), "finished": j.finished.map(format_api),
                                "canceled_on": j.canceled_on.map(format_api), "type": kind.as_str()}))
                .collect::<Vec<_>>(),
        });
        if !last_job.is_null() {
            summary["last_job"] = last_job;
        }
        let mut v = json!({
            "id": t.id,
            "type": kind.template_type(),
            "url": self.api(&base),
            "summary_fields": summary,
            "created": format_api(self.boot),
            "modified": format_api(self.boot),
            "name": t.name,
            "description": "",
            "last_job_run": last_run.map(format_api),
            "last_job_failed": last_failed,
            "next_job_run": Value::Null,
            "status": status,
            "organization": t.organization,
            "survey_enabled": t.survey_enabled,
            "allow_simultaneous": t.allow_simultaneous,
            "ask_variables_on_launch": t.ask_variables_on_launch,
            "ask_inventory_on_launch": false,
            "ask_scm_branch_on_launch": false,
            "ask_limit_on_launch": false,
            "ask_labels_on_launch": false,
            "ask_tags_on_launch": false,
            "ask_skip_tags_on_launch": false,
            "extra_vars": "",
            "webhook_service": "",
            "webhook_credential": Value::Null,
        });
        let m = v.as_object_mut().expect("object");
        match kind {
            Kind::Job => {
                m.insert(
                    "related".into(),
                    json!({
                        "launch": self.api(&format!("{base}launch/")),
                        "jobs": self.api(&format!("{base}jobs/")),
                        "organization": self.api(&format!("organizations/{}/", t.organization)),
                        "notification_templates_started": self.api(&format!("{base}notification_templates_started/")),
                        "notification_templates_success": self.api(&format!("{base}notification_templates_success/")),
                        "notification_templates_error": self.api(&format!("{base}notification_templates_error/")),
                        "labels": self.api(&format!("{base}labels/")),
                        "survey_spec": self.api(&format!("{base}survey_spec/")),
                    }),
                );
                for (k, val) in [
                    ("job_type", json!("run")),
                    ("inventory", Value::Null),
                    ("project", Value::Null),
                    ("playbook", json!(format!("{}.yml", t.name))),
                    ("scm_branch", json!("")),
                    ("forks", json!(0)),
                    ("limit", json!("")),
                    ("verbosity", json!(0)),
                    ("job_tags", json!("")),
                    ("force_handlers", json!(false)),
                    ("skip_tags", json!("")),
                    ("start_at_task", json!("")),
                    ("timeout", json!(0)),
                    ("use_fact_cache", json!(false)),
                    ("execution_environment", Value::Null),
                    ("host_config_key", json!("")),
                    ("ask_diff_mode_on_launch", json!(false)),
                    ("ask_job_type_on_launch", json!(false)),
                    ("ask_verbosity_on_launch", json!(false)),
                    ("ask_credential_on_launch", json!(false)),
                    ("ask_execution_environment_on_launch", json!(false)),
                    ("ask_forks_on_launch", json!(false)),
                    ("ask_job_slice_count_on_launch", json!(false)),
                    ("ask_timeout_on_launch", json!(false)),
                    ("ask_instance_groups_on_launch", json!(false)),
                    ("become_enabled", json!(false)),
                    ("diff_mode", json!(false)),
                    ("custom_virtualenv", Value::Null),
                    ("job_slice_count", json!(1)),
                    ("prevent_instance_group_fallback", json!(false)),
                ] {
                    m.insert(k.into(), val);
                }
            }
            Kind::WorkflowJob => {
                m.insert(
                    "related".into(),
                    json!({
                        "launch": self.api(&format!("{base}launch/")),
                        "workflow_jobs": self.api(&format!("{base}workflow_jobs/")),
                        "workflow_nodes": self.api(&format!("{base}workflow_nodes/")),
                        "organization": self.api(&format!("organizations/{}/", t.organization)),
                        "notification_templates_started": self.api(&format!("{base}notification_templates_started/")),
                        "notification_templates_success": self.api(&format!("{base}notification_templates_success/")),
                        "notification_templates_error": self.api(&format!("{base}notification_templates_error/")),
                        "notification_templates_approvals": self.api(&format!("{base}notification_templates_approvals/")),
                        "labels": self.api(&format!("{base}labels/")),
                        "survey_spec": self.api(&format!("{base}survey_spec/")),
                    }),
                );
                for (k, val) in [
                    ("inventory", Value::Null),
                    ("limit", Value::Null),
                    ("scm_branch", Value::Null),
                    ("job_tags", Value::Null),
                    ("skip_tags", Value::Null),
                ] {
                    m.insert(k.into(), val);
                }
            }
        }
        v
    }

    /// A job or workflow job, with every field of the detail serializer. List views drop some
    /// of them (`query::Model::list_omits`).
    pub fn job_json(&self, job: &Job, view: View) -> Value {
        let now = now_micros();
        let id = job.id;
        let base = format!("{}/{id}/", job.kind.collection());
        let template_url = self.api(&format!("{}/{}/", job.kind.template_collection(), job.template_id));
        let template_summary = json!({"id": job.template_id, "name": job.template_name, "description": ""});
        let user_url = self.api(&format!("users/{}/", job.launched_by.id));
        let terminal = !job.status.is_active();
        let mut v = json!({
            "id": id,
            "type": job.kind.as_str(),
            "url": self.api(&base),
            "created": format_api(job.created),
            "modified": format_api(job.modified),
            "name": job.template_name,
            "description": "",
            "unified_job_template": job.template_id,
            "launch_type": "manual",
            "status": job.status.as_str(),
            "failed": job.status.is_failed(),
            "started": job.started.map(format_api),
            "finished": job.finished.map(format_api),
            "canceled_on": job.canceled_on.map(format_api),
            "elapsed": job.elapsed(now),
            "job_args": "",
            "job_cwd": "",
            "job_env": {},
            "job_explanation": job.job_explanation,
            "result_traceback": job.result_traceback,
            "launched_by": {"id": job.launched_by.id, "name": job.launched_by.username, "type": "user", "url": user_url},
            "work_unit_id": Value::Null,
            "extra_vars": python_json_dumps(&job.extra_vars),
            "allow_simultaneous": job.allow_simultaneous,
            "webhook_service": "",
            "webhook_credential": Value::Null,
            "webhook_guid": "",
        });
        let mut summary = json!({
            "organization": self.organization_summary(job.organization),
            "unified_job_template": {"id": job.template_id, "name": job.template_name, "description": "",
                                     "unified_job_type": job.kind.as_str()},
            "created_by": self.user_summary(&job.launched_by),
            "user_capabilities": {"delete": terminal, "start": true},
            "labels": {"count": 0, "results": []},
        });
        let m = v.as_object_mut().expect("object");
        match job.kind {
            Kind::Job => {
                summary["job_template"] = template_summary;
                summary["credentials"] = json!([]);
                m.insert(
                    "related".into(),
                    json!({
                        "created_by": user_url,
                        "labels": self.api(&format!("{base}labels/")),
                        "organization": self.api(&format!("organizations/{}/", job.organization)),
                        "credentials": self.api(&format!("{base}credentials/")),
                        "unified_job_template": template_url,
                        "stdout": self.api(&format!("{base}stdout/")),
                        "job_events": self.api(&format!("{base}job_events/")),
                        "job_host_summaries": self.api(&format!("{base}job_host_summaries/")),
                        "activity_stream": self.api(&format!("{base}activity_stream/")),
                        "notifications": self.api(&format!("{base}notifications/")),
                        "job_template": template_url,
                        "cancel": self.api(&format!("{base}cancel/")),
                        "relaunch": self.api(&format!("{base}relaunch/")),
                    }),
                );
                let played = job.started.is_some();
                for (k, val) in [
                    ("job_type", json!("run")),
                    ("inventory", Value::Null),
                    ("project", Value::Null),
                    ("playbook", json!(format!("{}.yml", job.template_name))),
                    ("scm_branch", json!("")),
                    ("forks", json!(0)),
                    ("limit", json!(job.limit)),
                    ("verbosity", json!(0)),
                    ("job_tags", json!("")),
                    ("force_handlers", json!(false)),
                    ("skip_tags", json!("")),
                    ("start_at_task", json!("")),
                    ("timeout", json!(0)),
                    ("use_fact_cache", json!(false)),
                    ("organization", json!(job.organization)),
                    ("execution_environment", Value::Null),
                    ("execution_node", json!(if played { "aap-sim" } else { "" })),
                    ("controller_node", json!(if played { "aap-sim" } else { "" })),
                    ("event_processing_finished", json!(terminal)),
                    ("job_template", json!(job.template_id)),
                    ("passwords_needed_to_start", json!([])),
                    ("artifacts", json!({})),
                    ("scm_revision", json!("")),
                    ("instance_group", Value::Null),
                    ("diff_mode", json!(false)),
                    ("job_slice_number", json!(0)),
                    ("job_slice_count", json!(1)),
                ] {
                    m.insert(k.into(), val);
                }
                if view == View::Detail {
                    let stats = self.host_stats(job);
                    m.insert(
                        "host_status_counts".into(),
                        match stats {
                            Some((_, true)) => json!({"failures": 1}),
                            Some(_) => json!({"ok": 1}),
                            None => json!({}),
                        },
                    );
                    m.insert(
                        "playbook_counts".into(),
                        json!({"play_count": u64::from(played), "task_count": u64::from(played)}),
                    );
                    m.insert("custom_virtualenv".into(), Value::Null);
                }
            }
            Kind::WorkflowJob => {
                summary["workflow_job_template"] = template_summary;
                m.insert(
                    "related".into(),
                    json!({
                        "created_by": user_url,
                        "labels": self.api(&format!("{base}labels/")),
                        "unified_job_template": template_url,
                        "workflow_job_template": template_url,
                        "workflow_nodes": self.api(&format!("{base}workflow_nodes/")),
                        "notifications": self.api(&format!("{base}notifications/")),
                        "activity_stream": self.api(&format!("{base}activity_stream/")),
                        "relaunch": self.api(&format!("{base}relaunch/")),
                        "cancel": self.api(&format!("{base}cancel/")),
                    }),
                );
                for (k, val) in [
                    ("workflow_job_template", json!(job.template_id)),
                    ("job_template", Value::Null),
                    ("is_sliced_job", json!(false)),
                    ("inventory", Value::Null),
                    ("limit", if job.limit.is_empty() { Value::Null } else { json!(job.limit) }),
                    ("scm_branch", Value::Null),
                    ("skip_tags", Value::Null),
                    ("job_tags", Value::Null),
                ] {
                    m.insert(k.into(), val);
                }
            }
        }
        m.insert("summary_fields".into(), summary);
        v
    }

    /// `(hosts ok, failed)` once the play ran to an outcome; `None` before.
    fn host_stats(&self, job: &Job) -> Option<(u64, bool)> {
        if job.started.is_none() || job.status.is_active() || job.status == Status::Canceled {
            return None;
        }
        let failed = matches!(job.status, Status::Failed | Status::Error);
        Some((u64::from(!failed), failed))
    }

    /// The minimal event stream of a job: `playbook_on_start` once it runs, then a runner
    /// event and `playbook_on_stats` once the play has an outcome.
    pub fn job_events(&self, job: &Job) -> Vec<Value> {
        if job.kind != Kind::Job {
            return Vec::new();
        }
        let Some(started) = job.started else { return Vec::new() };
        let playbook = format!("{}.yml", job.template_name);
        let job_url = self.api(&format!("jobs/{}/", job.id));
        let summary_job = json!({"id": job.id, "name": job.template_name, "description": "", "status": job.status.as_str(),
            "failed": job.status.is_failed(), "elapsed": job.elapsed(now_micros()), "type": "job",
            "job_template_id": job.template_id, "job_template_name": job.template_name});
        let uuid = |counter: u64| format!("{:08x}-0000-4000-8000-{:012x}", job.id, counter);
        let event = |counter: u64,
                     name: &str,
                     display: &str,
                     at: i64,
                     level: u64,
                     host: &str,
                     failed: bool,
                     stdout: String,
                     data: Value| {
            let id = job.id * 100 + counter;
            json!({
                "id": id, "type": "job_event", "url": self.api(&format!("job_events/{id}/")),
                "related": {"job": job_url, "children": self.api(&format!("job_events/{id}/children/"))},
                "summary_fields": {"job": summary_job},
                "created": format_api(at), "modified": format_api(at),
                "job": job.id, "event": name, "counter": counter, "event_display": display,
                "event_data": data, "event_level": level, "failed": failed, "changed": false,
                "uuid": uuid(counter), "parent_uuid": if counter == 1 { String::new() } else { uuid(1) },
                "host": Value::Null, "host_name": host, "playbook": playbook,
                "play": if counter == 1 { "" } else { "aap-sim" }, "task": if level == 3 { "simulated task" } else { "" },
                "role": "", "stdout": stdout, "start_line": counter - 1, "end_line": counter, "verbosity": 0,
            })
        };
        let mut out = vec![event(
            1,
            "playbook_on_start",
            "Playbook Started",
            started,
            0,
            "",
            false,
            String::new(),
            json!({"playbook": playbook}),
        )];
        if let (Some((_, failed)), Some(finished)) = (self.host_stats(job), job.finished) {
            let (name, display, res) = if failed {
                (
                    "runner_on_failed",
                    "Host Failed",
                    json!({"failed": true, "msg": job.result_traceback, "changed": false}),
                )
            } else {
                ("runner_on_ok", "Host OK", json!({"changed": false, "msg": "ok"}))
            };
            let stdout = if failed {
                format!(
                    "fatal: [localhost]: FAILED! => {{\"msg\": {}}}",
                    serde_json::to_string(&job.result_traceback).unwrap_or_default()
                )
            } else {
                "ok: [localhost]".to_string()
            };
            out.push(event(
                2,
                name,
                display,
                finished,
                3,
                "localhost",
                failed,
                stdout,
                json!({"host": "localhost", "task": "simulated task", "res": res}),
            ));
            let f = u64::from(failed);
            let stats = json!({"ok": {"localhost": 1 - f}, "failures": {"localhost": f}, "changed": {}, "dark": {},
                               "skipped": {}, "processed": {"localhost": 1}, "rescued": {}, "ignored": {}, "artifact_data": {}});
            let recap = format!("PLAY RECAP *********\nlocalhost : ok={} changed=0 unreachable=0 failed={f}", 1 - f);
            out.push(event(3, "playbook_on_stats", "Playbook Complete", finished, 0, "", false, recap, stats));
        }
        out
    }

    /// AWX's default webhook body: `json.dumps(job.notification_data())`.
    pub fn notification_body(&self, job: &Job) -> Value {
        let ui_kind = match job.kind {
            Kind::Job => "playbook",
            Kind::WorkflowJob => "workflow",
        };
        let mut body = Map::new();
        body.insert("id".into(), json!(job.id));
        body.insert("name".into(), json!(job.template_name));
        body.insert("url".into(), json!(format!("{}/#/jobs/{ui_kind}/{}", self.base_url, job.id)));
        body.insert("created_by".into(), json!(job.launched_by.username));
        body.insert("started".into(), json!(job.started.map(format_python)));
        body.insert("finished".into(), json!(job.finished.map(format_python)));
        body.insert("status".into(), json!(job.status.as_str()));
        body.insert("traceback".into(), json!(job.result_traceback));
        let extra_vars = python_json_dumps(&job.extra_vars);
        match job.kind {
            Kind::Job => {
                let hosts = match self.host_stats(job) {
                    Some((ok, failed)) => json!({"localhost": {
                        "failed": failed, "changed": 0, "dark": 0, "failures": u64::from(failed), "ok": ok,
                        "processed": 1, "skipped": 0, "rescued": 0, "ignored": 0}}),
                    None => json!({}),
                };
                body.insert("inventory".into(), Value::Null);
                body.insert("project".into(), Value::Null);
                body.insert("playbook".into(), json!(format!("{}.yml", job.template_name)));
                body.insert("credential".into(), Value::Null);
                body.insert("limit".into(), json!(job.limit));
                body.insert("extra_vars".into(), json!(extra_vars));
                body.insert("hosts".into(), hosts);
            }
            Kind::WorkflowJob => {
                body.insert("body".into(), json!("Workflow job summary:\n"));
                body.insert("inventory".into(), Value::Null);
                body.insert("limit".into(), if job.limit.is_empty() { Value::Null } else { json!(job.limit) });
                body.insert("extra_vars".into(), json!(extra_vars));
            }
        }
        Value::Object(body)
    }
}

/// Ends a job with `status` at `wall`, filling the fields AWX fills for it.
fn finish(job: &mut Job, status: Status, wall: i64) {
    job.status = status;
    job.modified = wall;
    if job.finished.is_none() {
        job.finished = Some(wall);
    }
    match status {
        Status::Failed => {
            job.result_traceback = job.plan.failure.clone();
            job.job_explanation = format!("Job failed: {}", job.plan.failure);
        }
        Status::Error => {
            job.result_traceback = job.plan.failure.clone();
            job.job_explanation = "Job terminated due to error".into();
        }
        Status::Canceled if !job.cancel_requested => {
            // A configured `canceled` outcome: canceled by "someone else" while running.
            job.canceled_on.get_or_insert(wall);
        }
        _ => {}
    }
}
