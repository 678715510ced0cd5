//! The local Ansible provider (docs/providers.md#local-ansible): one `ansible-runner` process per job, run
//! against a private data directory named by the job's idempotency key, so a restarted
//! Slipway finds every job it started.
//!
//! Shape: [`AnsibleOptions`] → [`AnsibleProvider::new`] → [`Provider`].
//!
//! * **Launch** writes `work_dir/<key>/` (extra vars, inventory, runner settings), spawns
//!   `ansible-runner run` in its own process group with output to files, and records the
//!   runner's pid and start time in `job.json`. The runner outlives Slipway: dropping the
//!   provider or restarting never stops a job.
//! * **Status** reads runner's artifacts (`artifacts/run/{status,rc,job_events}`) and the
//!   process table; no in-memory state is needed, so adopted jobs work the same.
//! * **Cancel** sends SIGTERM to the runner and ansible-playbook, then SIGKILLs whatever of
//!   the job is left after a grace period (see [`terminate`] for why not runner's own
//!   cancel).
//! * **Find** adopts the job directory for a key, including a runner that was spawned but
//!   not yet recorded when Slipway crashed.
//! * **List** (`jobs_since`) reads the `job.json` of every job directory, which names the
//!   job's resource and action; the extra vars are never read for it (they carry opened
//!   secrets and are removed once the job is over).
//!
//! Extra vars are written with every string tagged `!unsafe`: Ansible would otherwise
//! evaluate `{{ … }}` in user-supplied properties on this host.
//!
//! A launch cannot create a job after it returned: the runner is spawned in this process, so
//! the provider has no launch-ambiguity window. Launches and finds of one key never
//! interleave: in-process by the launch lock, across processes sharing a work dir by
//! [`keylock`] (a key another process is working on answers "outcome unknown").
//!
//! Modules: `launch` (one job per key, a place under `max_concurrent`), `spawn`, `jobdir`,
//! `observe`, `progress` and `tasks` (a job's progress and its expected task count),
//! `listing`, `retention` (finished job directories removed after `job_retention`),
//! `terminate` over `procfs`, `keylock`, `naming`.

mod jobdir;
mod keylock;
mod launch;
mod listing;
mod naming;
mod observe;
mod procfs;
mod progress;
mod retention;
mod spawn;
mod tasks;
mod terminate;

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use slipway_provider::{
    CancelOutcome, JobHandle, JobStatus, LaunchRequest, Launched, ListedJob, Provider, ProviderError,
};
use tokio::task::JoinSet;

use jobdir::JobDir;
use keylock::KeyLock;

pub use naming::{conventional_playbook, job_dir_name, kebab, playbook_name};

#[derive(Clone, Debug)]
pub struct AnsibleOptions {
    /// Provider instance name.
    pub name: String,
    /// Where playbooks live (runner's `--project-dir`).
    pub playbook_dir: PathBuf,
    /// Per-job private data directories are created here.
    pub work_dir: PathBuf,
    /// The `ansible-runner` executable (a bare name is looked up on `PATH`). Its directory
    /// is put first on the job's `PATH`, since runner needs `ansible-playbook` there.
    pub runner: PathBuf,
    /// Pinned `ansible_python_interpreter`. Empty: the `python` next to the runner (a venv).
    pub python_interpreter: PathBuf,
    /// `Some("slipway")` → `slipway-create-virtual-network.yml`.
    pub playbook_prefix: Option<String>,
    /// Explicit playbook names per kind and job word; they win over the convention.
    pub playbooks: slipway_provider::ExplicitNames,
    /// Runner's `job_timeout`: the job ends as Failed "Job terminated due to timeout".
    pub job_timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL on cancel.
    pub cancel_grace: Duration,
    /// Jobs this provider runs at once; a launch beyond it waits for one to end, at most
    /// `queue_wait`, and is then answered `RateLimited` (the engine asks again shortly).
    pub max_concurrent: usize,
    /// How long a launch over `max_concurrent` waits for a running job to end. Bounded, so
    /// the engine regains the resource (a client may have deleted it meanwhile) every so often.
    pub queue_wait: Duration,
    /// Static extra vars every job gets (e.g. where example playbooks keep state); the
    /// `slipway` envelope wins on a name clash.
    pub extra_vars: serde_json::Map<String, serde_json::Value>,
    /// How long a finished job's directory (its output, its artifacts) is kept.
    pub job_retention: Duration,
}

impl Default for AnsibleOptions {
    fn default() -> Self {
        AnsibleOptions {
            name: "ansible".into(),
            playbook_dir: PathBuf::from("playbooks"),
            work_dir: PathBuf::from("ansible-jobs"),
            runner: PathBuf::from("ansible-runner"),
            python_interpreter: PathBuf::new(),
            playbook_prefix: None,
            playbooks: HashMap::new(),
            job_timeout: None,
            cancel_grace: Duration::from_secs(10),
            max_concurrent: 8,
            queue_wait: Duration::from_secs(2),
            extra_vars: serde_json::Map::new(),
            job_retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// Why the provider could not be built.
#[derive(Debug, thiserror::Error)]
pub enum AnsibleError {
    #[error("ansible-runner not found or not executable: {0}")]
    RunnerNotFound(PathBuf),
    #[error("python interpreter not found: {0}")]
    PythonNotFound(PathBuf),
    #[error("cannot prepare the ansible work dir {path}: {source}")]
    WorkDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("invalid ansible provider option: {0}")]
    InvalidOption(String),
}

/// How long a launch that waited out `queue_wait` is told to wait before it asks again: short,
/// since it spends most of its turn waiting here, where an ending job frees it at once.
const BUSY_RETRY_AFTER: Duration = Duration::from_millis(250);
/// How often a pending cancellation checks whether the job is gone.
const CANCEL_POLL: Duration = Duration::from_millis(200);
/// Extra time `shutdown` allows beyond the grace period for escalations to finish.
const SHUTDOWN_SLACK: Duration = Duration::from_secs(5);

pub struct AnsibleProvider {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    playbook_dir: PathBuf,
    work_dir: PathBuf,
    runner: PathBuf,
    python: PathBuf,
    path_env: OsString,
    playbook_prefix: Option<String>,
    playbooks: slipway_provider::ExplicitNames,
    job_timeout: Option<Duration>,
    cancel_grace: Duration,
    max_concurrent: usize,
    queue_wait: Duration,
    extra_vars: serde_json::Map<String, serde_json::Value>,
    job_retention: Duration,
    /// Serialises launch and find, so one key never gets two runners from this process.
    launch_lock: tokio::sync::Mutex<()>,
    /// Job dir names believed to be running (launched, or adopted and seen running).
    active: Mutex<HashSet<String>>,
    /// Told whenever a name leaves `active`: launches waiting for a free place.
    place_freed: tokio::sync::Notify,
    /// Where a job's end is told as it happens (the engine's hint, once it runs).
    job_ended: std::sync::OnceLock<slipway_provider::JobEndHint>,
    /// Job dir names with a pending SIGKILL escalation.
    cancelling: Mutex<HashSet<String>>,
    escalations: Mutex<JoinSet<()>>,
    /// Running jobs' progress, read from their events a poll at a time.
    tallies: progress::Tallies,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data behind these locks stays consistent across a panic (plain set inserts).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs blocking file and `/proc` work off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, ProviderError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ProviderError::Transient(format!("ansible provider task failed: {e}")))
}

impl AnsibleProvider {
    pub fn new(options: AnsibleOptions) -> Result<Self, AnsibleError> {
        if options.max_concurrent == 0 {
            return Err(AnsibleError::InvalidOption("max_concurrent must be at least 1".into()));
        }
        let runner =
            resolve_executable(&options.runner).ok_or_else(|| AnsibleError::RunnerNotFound(options.runner.clone()))?;
        let runner_bin = runner.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"));
        let python = if options.python_interpreter.as_os_str().is_empty() {
            runner_bin.join("python")
        } else {
            options.python_interpreter.clone()
        };
        if !is_executable(&python) {
            return Err(AnsibleError::PythonNotFound(python));
        }
        let python_str = python.to_str().unwrap_or_default();
        // It goes into an INI inventory line unquoted.
        if python_str.is_empty() || python_str.contains(char::is_whitespace) {
            return Err(AnsibleError::InvalidOption(format!(
                "python_interpreter must be a UTF-8 path without whitespace: {}",
                python.display()
            )));
        }
        let work_dir_err = |source| AnsibleError::WorkDir { path: options.work_dir.clone(), source };
        jobdir::create_private_dir_all(&options.work_dir).map_err(work_dir_err)?;
        let work_dir = fs::canonicalize(&options.work_dir).map_err(work_dir_err)?;
        if let Ok(meta) = fs::metadata(&work_dir)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                work_dir = %work_dir.display(),
                mode = format!("{:o}", meta.permissions().mode() & 0o777),
                "the work dir is open to other users; job directories inside stay private (0700)"
            );
        }
        // The job dir is matched textually in /proc cmdlines and environments.
        if work_dir.to_str().is_none() {
            return Err(AnsibleError::InvalidOption(format!("work_dir must be valid UTF-8: {}", work_dir.display())));
        }
        let playbook_dir = std::path::absolute(&options.playbook_dir).map_err(|e| {
            AnsibleError::InvalidOption(format!("playbook_dir {}: {e}", options.playbook_dir.display()))
        })?;
        let mut path_env = OsString::from(runner_bin.as_os_str());
        path_env.push(":");
        path_env.push(std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()));
        Ok(AnsibleProvider {
            inner: Arc::new(Inner {
                name: options.name,
                playbook_dir,
                work_dir,
                runner,
                python,
                path_env,
                playbook_prefix: options.playbook_prefix,
                playbooks: options.playbooks,
                job_timeout: options.job_timeout,
                cancel_grace: options.cancel_grace,
                max_concurrent: options.max_concurrent,
                queue_wait: options.queue_wait,
                extra_vars: options.extra_vars,
                job_retention: options.job_retention,
                launch_lock: tokio::sync::Mutex::new(()),
                active: Mutex::new(HashSet::new()),
                place_freed: tokio::sync::Notify::new(),
                job_ended: std::sync::OnceLock::new(),
                cancelling: Mutex::new(HashSet::new()),
                escalations: Mutex::new(JoinSet::new()),
                tallies: progress::Tallies::default(),
            }),
        })
    }

    /// The directory holding job directories.
    pub fn work_dir(&self) -> &Path {
        &self.inner.work_dir
    }
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn resolve_executable(path: &Path) -> Option<PathBuf> {
    let found = if path.components().count() == 1 && !path.is_absolute() {
        let dirs = std::env::var_os("PATH")?;
        std::env::split_paths(&dirs).map(|d| d.join(path)).find(|p| is_executable(p))?
    } else {
        path.to_path_buf()
    };
    if !is_executable(&found) {
        return None;
    }
    // Absolute but not canonical: a venv's bin dir must stay the venv's (its `python`
    // symlink points outside the venv).
    std::path::absolute(found).ok()
}

impl Inner {
    fn job_dir(&self, name: &str) -> JobDir {
        JobDir::new(self.work_dir.join(name))
    }

    /// The explicit playbook of the kind and action (a blank one counts as not given), else
    /// the conventional `{prefix}-{action}-{kebab(kind)}.yml`.
    fn playbook_name(&self, r: &LaunchRequest) -> String {
        naming::playbook_name(&self.playbooks, self.playbook_prefix.as_deref(), &r.kind, &r.action)
    }

    /// The job's playbook, which must exist. The error a tenant sees names the playbook, not
    /// where this server keeps it; the log says that.
    fn resolve_playbook(&self, r: &LaunchRequest) -> Result<String, ProviderError> {
        let name = self.playbook_name(r);
        if self.playbook_dir.join(&name).is_file() {
            return Ok(name);
        }
        tracing::warn!(playbook = %name, dir = %self.playbook_dir.display(), kind = %r.kind,
            "playbook not found; slipway check-config lists every missing one");
        Err(ProviderError::Permanent(format!("the playbook {name} is not installed on this server")))
    }

    fn dir_name(key: &str) -> Result<String, ProviderError> {
        job_dir_name(key).ok_or_else(|| {
            ProviderError::Permanent(format!(
                "idempotency key {key:?} cannot name a job directory (empty or over {} characters)",
                naming::MAX_KEY_CHARS
            ))
        })
    }

    /// A check-mode job's handle says so (`"check": true`), as the provider contract asks;
    /// the job directory itself is what `status` goes by.
    fn handle(&self, name: &str, job: &JobDir) -> JobHandle {
        let mut data = json!({ "dir": job.dir.display().to_string() });
        if job.is_check() {
            data["check"] = json!(true);
        }
        JobHandle { job_id: name.into(), data }
    }

    /// The job directory a handle refers to. `data.dir` is preferred, so jobs stay
    /// reachable if the configured work dir changes.
    fn job_for_handle(&self, h: &JobHandle) -> Result<(String, JobDir), ProviderError> {
        if !naming::is_job_dir_name(h.job_id.as_str()) {
            return Err(ProviderError::Permanent(format!("invalid ansible job id {:?}", h.job_id)));
        }
        let dir = match h.data.get("dir").and_then(|d| d.as_str()) {
            Some(d) if Path::new(d).file_name() == Some(std::ffi::OsStr::new(h.job_id.as_str())) => PathBuf::from(d),
            Some(d) => {
                return Err(ProviderError::Permanent(format!("ansible job {} has a mismatched dir {d}", h.job_id)));
            }
            None => self.work_dir.join(h.job_id.as_str()),
        };
        Ok((h.job_id.to_string(), JobDir::new(dir)))
    }
}

#[async_trait]
impl Provider for AnsibleProvider {
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// A runner's exit is seen as it happens (the reaper waits on it).
    fn on_job_end(&self, hint: slipway_provider::JobEndHint) {
        let _ = self.inner.job_ended.set(hint);
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, ProviderError> {
        launch::launch(&self.inner, request).await
    }

    async fn status(&self, handles: &[JobHandle]) -> Vec<Result<JobStatus, ProviderError>> {
        let inner = self.inner.clone();
        let handles = handles.to_vec();
        let count = handles.len();
        let result = blocking(move || {
            handles
                .iter()
                .map(|h| {
                    let (name, job) = inner.job_for_handle(h)?;
                    if !job.exists() {
                        return Err(ProviderError::NotFound(format!(
                            "ansible job dir {} does not exist",
                            job.dir.display()
                        )));
                    }
                    Ok(inner.observe(&name, &job).status)
                })
                .collect()
        })
        .await;
        result.unwrap_or_else(|e| vec![Err(e); count])
    }

    async fn cancel(&self, handle: &JobHandle) -> Result<CancelOutcome, ProviderError> {
        let inner = self.inner.clone();
        let (name, job) = inner.job_for_handle(handle)?;
        let requested = {
            let (inner, name, job) = (inner.clone(), name.clone(), job.clone());
            blocking(move || -> Result<_, ProviderError> {
                if !job.exists() {
                    return Err(ProviderError::NotFound(format!(
                        "ansible job dir {} does not exist",
                        job.dir.display()
                    )));
                }
                let obs = inner.observe(&name, &job);
                let Some(runner) = obs.runner.filter(|_| !obs.status.state.is_terminal()) else {
                    return Ok(None);
                };
                if let Err(e) = jobdir::create_private(&job.cancel_marker()) {
                    tracing::warn!(job = %name, error = %e, "cannot record the cancel request");
                }
                if !lock(&inner.cancelling).insert(name.clone()) {
                    // Already signalled; its escalation is pending.
                    return Ok(Some(None));
                }
                tracing::info!(job = %name, pid = runner.pid, "cancelling ansible job");
                let collected = terminate::request_cancel(&job, runner);
                Ok(Some(Some((runner, collected))))
            })
            .await??
        };
        let (runner, collected) = match requested {
            None => return Ok(CancelOutcome::AlreadyFinished),
            Some(None) => return Ok(CancelOutcome::Requested),
            Some(Some(plan)) => plan,
        };

        let grace = inner.cancel_grace;
        let task_inner = inner.clone();
        let escalation = async move {
            let deadline = tokio::time::Instant::now() + grace;
            loop {
                let now = tokio::time::Instant::now();
                tokio::time::sleep(CANCEL_POLL.min(deadline.saturating_duration_since(now))).await;
                let (job2, known) = (job.clone(), collected.clone());
                let left = blocking(move || terminate::remaining(&job2, Some(runner), &known))
                    .await
                    .map(|s| s.len())
                    .unwrap_or(1);
                if left == 0 {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    let (job2, known) = (job.clone(), collected.clone());
                    let _ = blocking(move || terminate::kill_all(&job2, Some(runner), &known)).await;
                    break;
                }
            }
            lock(&task_inner.cancelling).remove(&name);
        };
        let mut tasks = lock(&inner.escalations);
        while tasks.try_join_next().is_some() {}
        tasks.spawn(escalation);
        Ok(CancelOutcome::Requested)
    }

    /// Kills every process of the job at once (a forced cancel); the next status reads it
    /// `Canceled` (dead, no result, and the cancel marker written first).
    async fn kill(&self, handle: &JobHandle) -> Result<CancelOutcome, ProviderError> {
        let inner = self.inner.clone();
        let (name, job) = inner.job_for_handle(handle)?;
        blocking(move || {
            if !job.exists() {
                return Err(ProviderError::NotFound(format!("ansible job dir {} does not exist", job.dir.display())));
            }
            let obs = inner.observe(&name, &job);
            let Some(runner) = obs.runner.filter(|_| !obs.status.state.is_terminal()) else {
                return Ok(CancelOutcome::AlreadyFinished);
            };
            if let Err(e) = jobdir::create_private(&job.cancel_marker()) {
                tracing::warn!(job = %name, error = %e, "cannot record the cancel request");
            }
            tracing::warn!(job = %name, pid = runner.pid, "killing ansible job at once (forced cancel)");
            terminate::kill_all(&job, Some(runner), &terminate::job_processes(&job, Some(runner)));
            Ok(CancelOutcome::Requested)
        })
        .await?
    }

    /// At most one: the job directory named by the key is the job.
    async fn find(&self, request: &LaunchRequest) -> Result<Vec<Launched>, ProviderError> {
        // A key that cannot name a directory was never launched.
        let Some(name) = job_dir_name(request.idempotency_key.as_str()) else {
            return Ok(Vec::new());
        };
        let _launching = self.inner.launch_lock.lock().await;
        let (inner, request) = (self.inner.clone(), request.clone());
        let found = blocking(move || {
            let _key = KeyLock::try_take(&inner.work_dir, &name)?;
            inner.find_existing(&name, &request)
        })
        .await??;
        Ok(found.into_iter().collect())
    }

    /// By this host's clock; jobs recorded by an earlier version, which do not say their
    /// resource, are left out (`find` by key still returns them).
    async fn jobs_since(&self, since: Option<slipway_domain::Timestamp>) -> Result<Vec<ListedJob>, ProviderError> {
        let inner = self.inner.clone();
        blocking(move || inner.jobs_since(since)).await?
    }

    async fn output(&self, handle: &JobHandle, offset: u64) -> Result<slipway_provider::JobOutput, ProviderError> {
        let (_, job) = self.inner.job_for_handle(handle)?;
        blocking(move || {
            if !job.exists() {
                return Err(ProviderError::NotFound(
                    "the job's directory is gone (removed after its retention)".to_string(),
                ));
            }
            job.read_output(offset).map_err(|e| ProviderError::Transient(format!("reading the job's output: {e}")))
        })
        .await?
    }

    async fn sweep(&self) -> usize {
        let inner = self.inner.clone();
        let removed =
            blocking(move || retention::sweep(&inner.work_dir, inner.job_retention, std::time::SystemTime::now()))
                .await
                .unwrap_or(0);
        if removed > 0 {
            tracing::info!(provider = %self.inner.name, removed, "removed job directories past their retention");
        }
        removed
    }

    async fn shutdown(&self) {
        let mut tasks = std::mem::take(&mut *lock(&self.inner.escalations));
        let bound = self.inner.cancel_grace + SHUTDOWN_SLACK;
        let drained = tokio::time::timeout(bound, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(pending = tasks.len(), "cancel escalations still pending at shutdown");
            // Dropping the set would abort them; let them finish if the runtime lives on.
            tasks.detach_all();
        }
    }
}
