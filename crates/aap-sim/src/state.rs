//! The simulated controller's data: its configuration, jobs (driven by `lifecycle`), the
//! resource state its playbooks keep (`resources`: a job that ends successfully settles its
//! record task here), tokens, the request counters, the fault settings and generator, and the per-client Retry-After
//! accounting. AWX's JSON views of it are in `views`.
//!
//! Everything sits behind one `std::sync::Mutex` (held only for short, non-async sections): the
//! simulator is a test double, and one lock keeps every answer consistent with the lifecycle.

use std::collections::BTreeMap;
use tokio::time::Instant;

use crate::awx::{Kind, Status, User};
use crate::config::{Faults, SimConfig, SimTemplate};
use crate::lifecycle::{Jobs, NotifyEvent};
use crate::resources::{Record, Resources, target};
use crate::throttle::{Clients, FaultCounts, Violation};
use crate::util::{Prng, now_micros};
use crate::webhook::{Notice, notification_body};

#[derive(Debug, Clone)]
pub struct Token {
    pub token: String,
    pub user: User,
    pub created: i64,
}

pub struct State {
    pub config: SimConfig,
    /// Scheme and authority of the simulator, for UI links in notifications.
    pub base_url: String,
    /// When the simulator started: templates' `created`.
    pub boot: i64,
    pub jobs: Jobs,
    /// What the simulated playbooks recorded, per resource.
    pub resources: Resources,
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
            jobs: Jobs::default(),
            resources: Resources::default(),
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

    /// Advances every active job; returns the notifications the transitions trigger.
    pub fn tick(&mut self, now: Instant) -> Vec<Notice> {
        let mut notices = Vec::new();
        let mut succeeded = Vec::new();
        let base_url = &self.base_url;
        self.jobs.tick(now, |event, job| {
            if event == NotifyEvent::Success {
                succeeded.push(job.id);
            }
            notices.push(Notice { event, body: notification_body(base_url, job) });
        });
        for id in succeeded {
            self.settle(id);
        }
        notices
    }

    /// Forces a status (test hook; see [`Jobs::force_status`]); returns the notifications.
    /// A job forced to succeed after it started settles its record task like one that ran.
    pub fn force_status(&mut self, id: u64, status: Status) -> Vec<Notice> {
        let events = self.jobs.force_status(id, status);
        if events.contains(&NotifyEvent::Success) {
            self.settle(id);
        }
        let Some(job) = self.jobs.get(&id) else { return Vec::new() };
        events.into_iter().map(|event| Notice { event, body: notification_body(&self.base_url, job) }).collect()
    }

    /// A job that ran to success: its record task compares what it writes with what is
    /// recorded and, in `run` mode, writes it (`check` mode only reports). Once per job.
    fn settle(&mut self, id: u64) {
        let Some(job) = self.jobs.get(&id) else { return };
        if job.status != Status::Successful || job.started.is_none() || job.record.is_some() {
            return;
        }
        let Some(t) = target(job.effect, &job.extra_vars) else { return };
        let before = self.resources.get(&t.id).unwrap_or_default().to_owned();
        let record = Record { task: t.task, path: t.path, before, after: t.proposed.unwrap_or_default() };
        if !job.plan.check && record.changed() {
            self.resources.set(&t.id, record.after.clone());
        }
        if let Some(job) = self.jobs.get_mut(&id) {
            job.record = Some(record);
        }
    }
}
