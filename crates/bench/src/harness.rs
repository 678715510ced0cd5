//! What every scenario needs: the store to run on, Slipway's config for a run, a simulator
//! with an in-process Slipway wired to it (`Rig`), and small helpers. The ARM client, Slipway
//! as a child process, CPU readings and percentiles live in submodules, re-exported here.

mod child;
mod client;
mod cpu;
mod stats;

use std::collections::BTreeMap;
use std::sync::Arc;

use slipway::app::App;
use slipway::config::Config;
use slipway_domain::SystemClock;

pub use child::ChildSlipway;
pub use client::{Accepted, Client};
pub use cpu::{cpu_ms_per_op, slipway_cpu_seconds, stat_ticks};
pub use stats::{median, p50_p99_ms, percentile};

use crate::runtimes::{OwnRuntime, SimServer, sim_tick_ms, start_sim};

pub const API: &str = "2025-06-01";
pub const SUB: &str = "00000000-0000-0000-0000-0000000000b0";
pub const HOOK_TOKEN: &str = "bench-hook-token";
/// PUTs in flight at once from one scenario's client.
pub const PUT_CONCURRENCY: usize = 64;

pub fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// The stores a scenario can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    SqliteFull,
    SqliteNormal,
    Postgres,
}

impl StoreKind {
    pub const ALL: [StoreKind; 3] = [StoreKind::SqliteFull, StoreKind::SqliteNormal, StoreKind::Postgres];

    pub fn name(self) -> &'static str {
        match self {
            StoreKind::SqliteFull => "sqlite-full",
            StoreKind::SqliteNormal => "sqlite-normal",
            StoreKind::Postgres => "postgres",
        }
    }

    /// The `[store]` section for a fresh database of this kind under `dir`.
    pub fn config(self, dir: &std::path::Path) -> String {
        match self {
            StoreKind::SqliteFull => format!("url = \"sqlite:{}\"\nsynchronous = \"full\"", dir.join("s.db").display()),
            StoreKind::SqliteNormal => {
                format!("url = \"sqlite:{}\"\nsynchronous = \"normal\"", dir.join("s.db").display())
            }
            StoreKind::Postgres => format!("url = \"{}\"\nschema = \"{}\"", postgres_url(), unique_name("bench")),
        }
    }
}

pub fn postgres_url() -> String {
    std::env::var("SLIPWAY_BENCH_POSTGRES_URL")
        .or_else(|_| std::env::var("SLIPWAY_TEST_POSTGRES_URL"))
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

pub fn unique_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("{prefix}_{nanos:x}")
}

/// How Slipway is set up for a run.
#[derive(Clone, Debug)]
pub struct Setup {
    pub store: StoreKind,
    pub poll_seconds: f64,
    pub webhooks: bool,
    /// Most jobs per provider status call (`1`: the seed design's one request per job).
    pub status_batch: usize,
    pub max_concurrent: usize,
    /// `[auth]` on: the client signs in with an API token whose principal is Contributor on
    /// the (registered) subscription, so every request is authenticated and authorized as a
    /// tenant's would be (its rate limit raised out of the way).
    pub auth: bool,
    /// More keys of the one type's table (`drift_check_interval_seconds = 30`).
    pub type_settings: String,
    /// Quota meters of the type in the configuration (`guardrails::quota_config`); the locks
    /// and policies are seeded over the API once the rig runs (`guardrails::seed`).
    pub guardrails: bool,
}

impl Setup {
    pub fn new(store: StoreKind, poll_seconds: f64) -> Setup {
        Setup {
            store,
            poll_seconds,
            webhooks: false,
            status_batch: 200,
            max_concurrent: 4096,
            auth: false,
            type_settings: String::new(),
            guardrails: false,
        }
    }

    /// The seed design: a fixed 30 s poll per job, no batching, no webhooks.
    pub fn seed(store: StoreKind) -> Setup {
        Setup { poll_seconds: 30.0, status_batch: 1, ..Setup::new(store, 30.0) }
    }

    /// A one-type Slipway config: compute instances on the `aap` provider at `sim_url`.
    pub fn config(&self, port: u16, dir: &std::path::Path, sim_url: &str) -> Result<String, String> {
        self.node_config(port, dir, sim_url, &Node { store: self.store.config(dir), name: "bench", engine: "" })
    }

    /// [`Self::config`] for one node of several: replicas share one `[store]` section.
    pub fn node_config(&self, port: u16, dir: &std::path::Path, sim_url: &str, node: &Node) -> Result<String, String> {
        let hook = if self.webhooks {
            let token_file = dir.join("hook-token");
            std::fs::write(&token_file, HOOK_TOKEN).map_err(|e| e.to_string())?;
            format!("webhook_token_file = \"{}\"", token_file.display())
        } else {
            String::new()
        };
        let Setup { poll_seconds, status_batch, max_concurrent, type_settings, .. } = self;
        let Node { store, name, engine } = node;
        let auth = if self.auth { AUTH_TABLES } else { "" };
        let quota = if self.guardrails { crate::guardrails::quota_config() } else { String::new() };
        Ok(format!(
            r#"
[server]
listen = "127.0.0.1:{port}"
retry_after_seconds = 0
[store]
{store}
[engine]
node_name = "{name}"
status_batch = {status_batch}
max_concurrent = {max_concurrent}
{engine}
[[providers]]
name = "aap"
type = "aap"
url = "{sim_url}"
template_prefix = "slipway"
max_concurrent_requests = 16
{hook}
[[types]]
namespace = "Slipway.Example"
type = "computeInstances"
kind = "ComputeInstance"
api_versions = ["{API}"]
provider = "aap"
poll_interval_seconds = {poll_seconds}
{type_settings}
{auth}{quota}"#
        ))
    }
}

/// What tells one node's config from another's.
pub struct Node<'a> {
    /// The `[store]` section's keys.
    pub store: String,
    pub name: &'a str,
    /// More `[engine]` keys.
    pub engine: &'a str,
}

/// The principal of the benchmark's API token.
const BENCH_PRINCIPAL: &str = "bench";

const AUTH_TABLES: &str = r#"
[auth]
api_tokens = true
[[auth.rate_limits.overrides]]
principal = "bench"
requests_per_second = 1000000
burst = 1000000
"#;

/// With `[auth]`: registers the subscription, makes the benchmark's principal Contributor on
/// it and returns its API token, all straight in the store (as an admin would through the API).
async fn sign_in(app: &App) -> Result<String, String> {
    use slipway_domain::access::{Assignee, Role, RoleAssignment, Scope};
    use slipway_domain::subscription::{Subscription, SubscriptionState};
    use slipway_domain::{Clock, SubscriptionId};
    let store = app.store();
    let now = SystemClock.now();
    let id = SubscriptionId::new(SUB);
    let subscription = Subscription {
        id: id.clone(),
        tenant_id: "bench".into(),
        display_name: "bench".into(),
        state: SubscriptionState::Registered,
        attributes: Default::default(),
        registered_at: now,
        updated_at: now,
    };
    slipway_store::registry::put_subscription(store.as_ref(), &subscription, None).await.map_err(|e| e.to_string())?;
    let contributor = RoleAssignment {
        id: "00000000-0000-0000-0000-0000000000c0".into(),
        assignee: Assignee::Principal(BENCH_PRINCIPAL.into()),
        tenant: None,
        role: Role::Contributor,
        scope: Scope::subscription_scope(&id),
    };
    slipway_store::registry::put_role_assignment(store.as_ref(), &contributor, now, None)
        .await
        .map_err(|e| e.to_string())?;
    let new = slipway_auth::api_tokens::NewApiToken { principal: BENCH_PRINCIPAL.into(), ..Default::default() };
    let (token, _) =
        slipway_auth::api_tokens::create(store.as_ref(), new, now, None).await.map_err(|e| e.to_string())?;
    Ok(token)
}

/// A simulator and an in-process Slipway wired to it.
pub struct Rig {
    pub sim: SimServer,
    pub app: App,
    pub client: Client,
    runtime: OwnRuntime,
    /// The temporary directory the rig made for itself (removed with it), if any.
    own_dir: Option<tempfile::TempDir>,
}

impl Rig {
    pub async fn start(setup: &Setup, job_seconds: f64) -> Result<Rig, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut rig = Rig::start_in(setup, job_seconds, dir.path()).await?;
        rig.own_dir = Some(dir);
        Ok(rig)
    }

    /// With the database (and config) in `dir`, which outlives the rig.
    pub async fn start_in(setup: &Setup, job_seconds: f64, dir: &std::path::Path) -> Result<Rig, String> {
        let port = free_port()?;
        let base = format!("http://127.0.0.1:{port}");
        let sim = start_sim(job_seconds, sim_tick_ms(job_seconds), setup.webhooks.then_some(base.as_str())).await?;
        let path = dir.join("slipway.toml");
        std::fs::write(&path, setup.config(port, dir, &sim.base_url())?).map_err(|e| e.to_string())?;
        let config = Config::load(Some(&path), []).map_err(|e| e.to_string())?;
        let runtime = OwnRuntime::slipway()?;
        let app = runtime.run(App::start(config, Arc::new(SystemClock))).await?.map_err(|e| e.to_string())?;
        let client = if setup.auth { Client::signed_in(base, &sign_in(&app).await?)? } else { Client::new(base) };
        Ok(Rig { sim, app, client, runtime, own_dir: None })
    }

    pub async fn stop(self) -> Result<(), String> {
        self.stop_app().await?.shutdown().await;
        Ok(())
    }

    /// Stops Slipway and hands back the simulator, still running.
    pub async fn stop_app(self) -> Result<SimServer, String> {
        let Rig { sim, app, runtime, .. } = self;
        runtime.run(app.shutdown()).await?.map_err(|e| e.to_string())?;
        Ok(sim)
    }
}

/// Every resource of the benchmark's subscription in `store`, read a page at a time.
pub async fn all_records(store: &dyn slipway_store::Store) -> Result<Vec<slipway_domain::ResourceRecord>, String> {
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let query = slipway_store::ListQuery {
            subscription: slipway_domain::SubscriptionId::new(SUB),
            resource_group: None,
            type_key: None,
            under: None,
            after,
            limit: 1000,
        };
        let page = store.list_resources(&query).await.map_err(|e| e.to_string())?;
        all.extend(page.items);
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(all),
        }
    }
}

pub fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// Sum of the simulator's request counters.
pub fn total(requests: &BTreeMap<String, u64>) -> u64 {
    requests.values().sum()
}
