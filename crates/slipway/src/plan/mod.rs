//! The wiring plan: every option `serve` runs with, built from a loaded [`Config`] without
//! opening a socket or the database (files are read: schemas, keys, certificates,
//! credentials). It is where a loaded configuration is judged: `serve` runs the plan it
//! built (`app` only opens, binds and spawns), `check-config` prints the problems building it
//! found — all of them, each naming its entry (`types[2] (Contoso.Dns/dnsRecords): …`,
//! `providers[0] (aap): …`, `server.page_size = 5000: …`). A value outside its range is a
//! problem, never quietly raised or lowered into it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use slipway_api::{AccessOptions, ApiOptions, EdgeOptions, RateLimiter};
use slipway_auth::AuthOptions;
use slipway_domain::quota::QuotaBook;
use slipway_domain::{TypeKey, TypePolicy};
use slipway_engine::EngineOptions;
use slipway_listener::ListenerOptions;
use slipway_notify::{CallbackPolicy, NotifierOptions};
use slipway_store::postgres::{Pooler, PostgresOptions};
use slipway_store::sqlite::{SqliteOptions, Synchronous};
use slipway_types::TypeRegistry;

use crate::config::{Config, access_options, rate_limiter};

mod executables;
mod found;
mod guardrails;
mod providers;
mod server;
mod types;

pub(crate) use found::Found;
pub use found::Problem;
pub use providers::{DATA_DIR_VAR, ProviderPlan, explicit_names};
pub use server::MAX_PAGE_SIZE;
pub use types::{job_words, missing_playbooks};

/// The shortest lease: the engine renews leases every third of it.
pub const MIN_LEASE_SECONDS: u64 = 3;

/// Everything `serve` needs, checked.
pub struct Plan {
    /// `server.listen`, for `serve` to bind.
    pub listen: String,
    pub store: StorePlan,
    pub engine: EngineOptions,
    pub api: ApiOptions,
    pub listener: ListenerOptions,
    pub edge: EdgeOptions,
    /// `None`: authentication is off, and only a loopback address may be served.
    pub auth: Option<AuthOptions>,
    /// The issuers whose own login the web console offers.
    pub console_sign_in: Vec<slipway_console::OidcClient>,
    pub access: AccessOptions,
    pub rate_limits: Option<RateLimiter>,
    /// The keys sealing secret properties, when configured.
    pub keyring: Option<Arc<slipway_secrets::Keyring>>,
    /// Its `metrics` are the application's, set once the store is open.
    pub notifier: NotifierOptions,
    /// In configuration order.
    pub providers: Vec<ProviderPlan>,
    /// Webhook tokens by provider name.
    pub hooks: HashMap<String, String>,
    pub types: TypeRegistry,
    pub policies: HashMap<TypeKey, TypePolicy>,
    /// The quota meters and who may set limits.
    pub quotas: QuotaBook,
    /// The admission policies' aliases and the platform's definitions.
    pub admission_policies: slipway_api::PolicyCatalog,
    /// Where the activity log is exported, if anywhere.
    pub activity_sink: Option<crate::activity_sink::SinkTarget>,
    /// What `serve` only logs: playbooks a type's jobs need that are missing (a tenant's job
    /// would fail on one). `check-config` refuses them.
    pub warnings: Vec<Problem>,
}

impl Plan {
    /// Every option built, or every problem found.
    pub fn from_config(config: &Config) -> Result<Plan, Vec<Problem>> {
        let mut found = Found::default();
        if let Some(problem) = config.origin_problem() {
            found.add(problem);
            return found.finish(None);
        }
        let owner = providers::node_name(config);
        let listen = server::listen(config, &mut found);
        let callbacks = found.ok(config.notifications.callback_policy());
        let api = server::api(config, callbacks.clone(), &mut found);
        let listener = server::listener(config, &mut found);
        let edge = server::edge(config, &mut found);
        let store = store(config, &mut found);
        let engine = engine(config, owner.clone(), &mut found);
        let notifier = callbacks.map(|c| notifier(config, c, &mut found));
        let auth = match &config.auth {
            Some(a) => found.ok(a.options(&config.base_dir)).map(Some),
            None => Some(None),
        };
        let access = found.ok(access_options(config.auth.as_ref()));
        let rate_limits = found.ok(rate_limiter(config.auth.as_ref()));
        let providers = providers::providers(config, &owner, &mut found);
        let types = types::types(config, &mut found);
        let quotas = types.as_ref().map(|(registry, _)| guardrails::quotas(config, registry, &mut found));
        let admission_policies = types.as_ref().map(|(registry, _)| guardrails::policies(config, registry, &mut found));
        let keyring = types::keyring(config, &mut found);
        let activity_sink = activity_sink(config, &mut found);
        let (
            Some(api),
            Some(listener),
            Some(edge),
            Some(store),
            Some(notifier),
            Some(auth),
            Some(access),
            Some(rate_limits),
            Some((providers, hooks)),
            Some((types, policies)),
            Some(keyring),
            Some(quotas),
            Some(admission_policies),
            Some(activity_sink),
        ) = (
            api,
            listener,
            edge,
            store,
            notifier,
            auth,
            access,
            rate_limits,
            providers,
            types,
            keyring,
            quotas,
            admission_policies,
            activity_sink,
        )
        else {
            return found.finish(None);
        };
        let plan = Plan {
            listen,
            store,
            engine,
            api,
            listener,
            edge,
            auth,
            console_sign_in: config.auth.iter().flat_map(|a| &a.issuers).filter_map(|i| i.console_client()).collect(),
            access,
            rate_limits,
            keyring,
            notifier,
            providers,
            hooks,
            types,
            policies,
            quotas,
            admission_policies,
            activity_sink,
            warnings: missing_playbooks(config),
        };
        found.finish(Some(plan))
    }
}

impl TryFrom<&Config> for Plan {
    type Error = Vec<Problem>;

    fn try_from(config: &Config) -> Result<Plan, Vec<Problem>> {
        Plan::from_config(config)
    }
}

/// The store to open.
#[derive(Debug)]
pub enum StorePlan {
    Sqlite(SqliteOptions),
    Postgres(PostgresOptions),
}

impl StorePlan {
    /// Only `[store]`'s part of the plan (for the subcommands that need only the store).
    pub fn from_config(config: &Config) -> Result<StorePlan, Vec<Problem>> {
        let mut found = Found::default();
        let store = store(config, &mut found);
        found.finish(store)
    }
}

/// `[activity] sink`: `stdout`, or a file in the data directory.
fn activity_sink(config: &Config, found: &mut Found) -> Option<Option<crate::activity_sink::SinkTarget>> {
    use crate::activity_sink::SinkTarget;
    match config.activity.sink.as_deref() {
        None => Some(None),
        Some("stdout") => Some(Some(SinkTarget::Stdout)),
        Some("") => {
            found.add("activity.sink = '': use stdout or a file path");
            None
        }
        Some(path) => found
            .ok(config.in_data_dir(Path::new(path)).map_err(|e| format!("activity.sink = '{path}': {e}")))
            .map(|p| Some(SinkTarget::File(p))),
    }
}

fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

fn store(config: &Config, found: &mut Found) -> Option<StorePlan> {
    let s = &config.store;
    let url = s.url.as_str();
    let operation_ttl = Duration::from_secs(s.operation_ttl_seconds);
    let event_retention =
        Duration::from_secs(found.at_least("store.event_retention_seconds", s.event_retention_seconds, 60));
    let activity_retention = Duration::from_secs(
        found.at_least("store.activity_retention_days", s.activity_retention_days, 1).saturating_mul(86_400),
    );
    let tls = found.ok(config.store_tls());
    if is_postgres(url) {
        let mut options = PostgresOptions::new(url);
        options.schema = s.schema.clone();
        options.pool_size = found.at_least("store.pool_size", s.pool_size, 1);
        options.statement_timeout = Duration::from_secs(s.statement_timeout_seconds);
        options.operation_ttl = operation_ttl;
        options.event_retention = event_retention;
        options.activity_retention = activity_retention;
        options.pooler = match s.pooler.as_str() {
            "none" => Pooler::None,
            "session" => Pooler::Session,
            "transaction" => {
                found.add(
                    "store.pooler = 'transaction': transaction pooling is not supported (Slipway keeps prepared \
                     statements and settings on its sessions); give it a session-mode pool (pgbouncer: pool_mode = \
                     session) with pooler = 'session'",
                );
                return None;
            }
            other => {
                found.add(format!("store.pooler = '{other}': use none or session"));
                return None;
            }
        };
        (options.ssl_mode, options.ssl_root_cert) = tls?;
        return Some(StorePlan::Postgres(options));
    }
    if s.pooler != "none" {
        found.add(format!("store.pooler = '{}' applies to PostgreSQL only", s.pooler));
    }
    if url.contains("://") && !url.starts_with("sqlite://") {
        found.add(format!("store.url = '{url}': use sqlite:PATH or postgres://…"));
        return None;
    }
    let synchronous = s.synchronous.parse::<Synchronous>();
    let synchronous =
        found.ok(synchronous.map_err(|_| format!("store.synchronous = '{}': use full or normal", s.synchronous)));
    let path = s.sqlite_path().unwrap_or(url);
    let path = found.ok(config.in_data_dir(Path::new(path)).map_err(|e| format!("store.url = '{url}': {e}")));
    let mut options = SqliteOptions::new(path?);
    options.synchronous = synchronous?;
    options.operation_ttl = operation_ttl;
    options.event_retention = event_retention;
    tls?;
    Some(StorePlan::Sqlite(options))
}

fn engine(config: &Config, owner: String, found: &mut Found) -> EngineOptions {
    let e = &config.engine;
    let lease_seconds = found.at_least("engine.lease_seconds", e.lease_seconds, MIN_LEASE_SECONDS);
    EngineOptions {
        owner: owner.into(),
        lease_for: Duration::from_secs(lease_seconds),
        max_concurrent: found.at_least("engine.max_concurrent", e.max_concurrent, 1),
        shutdown_grace: Duration::from_secs(e.shutdown_grace_seconds),
        status_batch: found.at_least("engine.status_batch", e.status_batch, 1),
        max_drift_checks: found.at_least("engine.max_drift_checks", e.max_drift_checks, 1),
        drift_share: found.between("engine.drift_share", e.drift_share, 0.001, 1.0),
        ..EngineOptions::default()
    }
}

/// The notifier's options, but for its metrics.
fn notifier(config: &Config, callbacks: CallbackPolicy, found: &mut Found) -> NotifierOptions {
    let n = &config.notifications;
    let mut at_least_one = |key: &str, value: u64| found.at_least(&format!("notifications.{key}"), value, 1);
    let request_timeout = Duration::from_secs(at_least_one("request_timeout_seconds", n.request_timeout_seconds));
    let connect_timeout = Duration::from_secs(at_least_one("connect_timeout_seconds", n.connect_timeout_seconds));
    let max_backoff = Duration::from_secs(at_least_one("max_backoff_seconds", n.max_backoff_seconds));
    let max_attempts = found.at_least("notifications.max_attempts", n.max_attempts, 1);
    let max_concurrent = found.at_least("notifications.max_concurrent", n.max_concurrent, 1);
    let max_per_destination = found.at_least("notifications.max_per_destination", n.max_per_destination, 1);
    // The notifier would quietly lower either; a configuration that asks for it is a mistake.
    if connect_timeout > request_timeout {
        found.add(format!(
            "notifications.connect_timeout_seconds = {} is longer than request_timeout_seconds = {}, which includes connecting",
            n.connect_timeout_seconds, n.request_timeout_seconds
        ));
    }
    if max_per_destination > max_concurrent {
        found.add(format!(
            "notifications.max_per_destination = {max_per_destination} is more than max_concurrent = {max_concurrent}, the deliveries in flight to all destinations together"
        ));
    }
    NotifierOptions {
        request_timeout,
        connect_timeout,
        max_concurrent,
        max_per_destination,
        max_attempts,
        max_backoff,
        shutdown_grace: Duration::from_secs(config.engine.shutdown_grace_seconds),
        callbacks,
        ..NotifierOptions::default()
    }
}

#[cfg(test)]
mod tests;
