//! What every scenario needs: a simulator, a Slipway (in-process or as a child process),
//! a client that PUTs and follows operations, and percentiles.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use slipway::app::App;
use slipway::config::Config;
use slipway_domain::SystemClock;

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
{auth}"#
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
    slipway_store::registry::put_subscription(store.as_ref(), &subscription).await.map_err(|e| e.to_string())?;
    let contributor = RoleAssignment {
        id: "00000000-0000-0000-0000-0000000000c0".into(),
        assignee: Assignee::Principal(BENCH_PRINCIPAL.into()),
        tenant: None,
        role: Role::Contributor,
        scope: Scope::subscription_scope(&id),
    };
    slipway_store::registry::put_role_assignment(store.as_ref(), &contributor, now).await.map_err(|e| e.to_string())?;
    let new = slipway_auth::api_tokens::NewApiToken { principal: BENCH_PRINCIPAL.into(), ..Default::default() };
    let (token, _) = slipway_auth::api_tokens::create(store.as_ref(), new, now).await.map_err(|e| e.to_string())?;
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

/// The ARM client side of a scenario.
#[derive(Clone)]
pub struct Client {
    pub base: String,
    pub http: reqwest::Client,
}

/// An accepted PUT.
pub struct Accepted {
    pub name: String,
    pub status_url: String,
    pub latency: Duration,
}

impl Client {
    pub fn new(base: String) -> Client {
        Client { base, http: Self::builder().build().expect("http client") }
    }

    /// A client that sends `token` as its bearer credential with every request.
    pub fn signed_in(base: String, token: &str) -> Result<Client, String> {
        let mut bearer =
            reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|e| e.to_string())?;
        bearer.set_sensitive(true);
        let headers = reqwest::header::HeaderMap::from_iter([(reqwest::header::AUTHORIZATION, bearer)]);
        Ok(Client { base, http: Self::builder().default_headers(headers).build().map_err(|e| e.to_string())? })
    }

    fn builder() -> reqwest::ClientBuilder {
        reqwest::Client::builder().pool_max_idle_per_host(256)
    }

    pub fn resource_url(&self, name: &str) -> String {
        format!(
            "{}/subscriptions/{SUB}/resourceGroups/bench/providers/Slipway.Example/computeInstances/{name}?api-version={API}",
            self.base
        )
    }

    /// PUTs one compute instance; `delay_seconds` sets its simulator job's duration.
    pub async fn put(&self, name: &str, delay_seconds: Option<f64>) -> Result<Accepted, String> {
        let mut properties = json!({"size": "small", "image": "debian"});
        if let Some(d) = delay_seconds {
            properties["delaySeconds"] = json!(d);
        }
        let start = Instant::now();
        let response = self
            .http
            .put(self.resource_url(name))
            .json(&json!({"location": "local", "properties": properties}))
            .send()
            .await
            .map_err(|e| format!("PUT {name}: {e}"))?;
        let latency = start.elapsed();
        if response.status().as_u16() != 201 && response.status().as_u16() != 200 {
            return Err(format!("PUT {name}: {}", response.status()));
        }
        let status_url = response
            .headers()
            .get("azure-asyncoperation")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| format!("PUT {name}: no Azure-AsyncOperation"))?
            .to_string();
        Ok(Accepted { name: name.to_string(), status_url, latency })
    }

    /// PUTs `names` with at most [`PUT_CONCURRENCY`] in flight.
    pub async fn put_all(&self, names: Vec<String>, delay_seconds: Option<f64>) -> Result<Vec<Accepted>, String> {
        let names = Arc::new(std::sync::Mutex::new(names.into_iter().enumerate()));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..PUT_CONCURRENCY {
            let (client, names) = (self.clone(), names.clone());
            tasks.spawn(async move {
                let mut done = Vec::new();
                loop {
                    let next = names.lock().expect("names").next();
                    let Some((i, name)) = next else { return Ok::<_, String>(done) };
                    done.push((i, client.put(&name, delay_seconds).await?));
                }
            });
        }
        let mut all = Vec::new();
        while let Some(done) = tasks.join_next().await {
            all.extend(done.map_err(|e| e.to_string())??);
        }
        all.sort_by_key(|(i, _)| *i);
        Ok(all.into_iter().map(|(_, a)| a).collect())
    }

    /// The operation's status, or an error.
    pub async fn status(&self, status_url: &str) -> Result<String, String> {
        let body = self.operation(status_url).await?;
        body["status"].as_str().map(str::to_string).ok_or_else(|| format!("no status in {body}"))
    }

    /// The operation's whole status document.
    pub async fn operation(&self, status_url: &str) -> Result<Value, String> {
        let response = self.http.get(status_url).send().await.map_err(|e| e.to_string())?;
        response.json().await.map_err(|e| e.to_string())
    }

    /// Waits until every operation Succeeded (in order: one GET per finished operation plus
    /// one per `interval` while the oldest is still running).
    pub async fn wait_succeeded(
        &self,
        status_urls: &[String],
        interval: Duration,
        limit: Duration,
    ) -> Result<(), String> {
        let start = Instant::now();
        for url in status_urls {
            loop {
                match self.status(url).await?.as_str() {
                    "Succeeded" => break,
                    s @ ("Failed" | "Canceled") => return Err(format!("operation ended {s}")),
                    _ => {}
                }
                if start.elapsed() > limit {
                    return Err(format!("operations did not finish within {limit:?}"));
                }
                tokio::time::sleep(interval).await;
            }
        }
        Ok(())
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

/// `p` in 0..=100 of already sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The median (the mean of the middle two of an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => s[n / 2],
        _ => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// p50 and p99 in milliseconds.
pub fn p50_p99_ms(mut samples: Vec<Duration>) -> (f64, f64) {
    let mut ms: Vec<f64> = samples.drain(..).map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    (percentile(&ms, 50.0), percentile(&ms, 99.0))
}

pub fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// Sum of the simulator's request counters.
pub fn total(requests: &BTreeMap<String, u64>) -> u64 {
    requests.values().sum()
}

/// Slipway as a child process (the release `slipway` binary beside this one), so its memory
/// is measured apart from the simulator and the client.
pub struct ChildSlipway {
    pub child: std::process::Child,
    pub client: Client,
}

impl ChildSlipway {
    /// Starts `slipway serve` on a config text written into `dir`; returns once `/readyz`
    /// answers 200, with the time that took.
    pub async fn start(
        dir: &std::path::Path,
        config_text: &str,
        port: u16,
    ) -> Result<(ChildSlipway, Duration), String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("slipway");
        if !exe.exists() {
            return Err(format!("{} not found: build it with `cargo build --release -p slipway`", exe.display()));
        }
        let path = dir.join("slipway.toml");
        std::fs::write(&path, config_text).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let child = std::process::Command::new(exe)
            .args(["serve", "--config"])
            .arg(&path)
            .env("SLIPWAY_LOG", "warn")
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("starting slipway: {e}"))?;
        let slipway = ChildSlipway { child, client: Client::new(format!("http://127.0.0.1:{port}")) };
        let ready = format!("{}/readyz", slipway.client.base);
        loop {
            if let Ok(r) = slipway.client.http.get(&ready).send().await
                && r.status().is_success()
            {
                return Ok((slipway, start.elapsed()));
            }
            if start.elapsed() > Duration::from_secs(120) {
                return Err("slipway did not become ready within 120 s".into());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Resident set size in bytes.
    pub fn rss(&self) -> Result<u64, String> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).map_err(|e| e.to_string())?;
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .ok_or("no VmRSS")?;
        Ok(kb * 1024)
    }

    /// CPU time the child has used so far.
    pub fn cpu_seconds(&self) -> Option<f64> {
        cpu_seconds_of(&std::path::PathBuf::from(format!("/proc/{}/stat", self.child.id()))).map(|(_, s)| s)
    }

    /// CPU time the child and every process it ran and waited for have used so far.
    pub fn cpu_seconds_with_children(&self) -> Option<f64> {
        stat_ticks(&std::path::PathBuf::from(format!("/proc/{}/stat", self.child.id())), &[14, 15, 16, 17])
    }

    /// SIGTERM, then waits for the graceful exit.
    pub fn stop(mut self) -> Result<(), String> {
        let pid = self.child.id().to_string();
        let _ = std::process::Command::new("kill").args(["-TERM", &pid]).status();
        self.child.wait().map_err(|e| e.to_string())?;
        Ok(())
    }
}

impl Drop for ChildSlipway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time (user + system) of the process or thread whose `/proc/…/stat` is `path`, with
/// its command name: steadier than wall-clock rates on a shared machine, since time spent
/// waiting for a core does not count.
fn cpu_seconds_of(path: &std::path::Path) -> Option<(String, f64)> {
    let (name, fields) = stat_fields(path)?;
    Some((name, ticks_in_seconds(&fields, &[14, 15])?))
}

/// The sum of a `/proc/…/stat`'s `fields` (numbered as proc(5) numbers them: 14 and 15 are
/// the process's own CPU ticks, 16 and 17 those of its children it waited for), in seconds.
pub fn stat_ticks(path: &std::path::Path, fields: &[usize]) -> Option<f64> {
    ticks_in_seconds(&stat_fields(path)?.1, fields)
}

/// The command name and the fields after it, which start at field 3 (the state).
fn stat_fields(path: &std::path::Path) -> Option<(String, Vec<String>)> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name is in parentheses and may hold spaces.
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    Some((name, rest.split_whitespace().map(str::to_string).collect()))
}

/// `/proc` reports CPU in USER_HZ, 100 per second on Linux.
fn ticks_in_seconds(after_name: &[String], fields: &[usize]) -> Option<f64> {
    let mut ticks = 0.0;
    for &i in fields {
        ticks += after_name.get(i.checked_sub(3)?)?.parse::<f64>().ok()?;
    }
    Some(ticks / 100.0)
}

/// CPU time an in-process Slipway has used so far: its runtime's threads and the store's.
pub fn slipway_cpu_seconds() -> Option<f64> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut total = 0.0;
    for task in tasks.flatten() {
        // A thread may end between the listing and the read: it no longer counts either way.
        if let Some((name, seconds)) = cpu_seconds_of(&task.path().join("stat"))
            && name.starts_with("slipway-")
        {
            total += seconds;
        }
    }
    Some(total)
}

/// Milliseconds of CPU per operation between two readings, if both were taken.
pub fn cpu_ms_per_op(before: Option<f64>, after: Option<f64>, ops: usize) -> Option<f64> {
    Some((after? - before?) * 1000.0 / ops.max(1) as f64)
}
