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
//! Modules: `options` (what building the provider checks), `launch` (one job per key, a place
//! under `max_concurrent`), `cancel` (SIGTERM, then SIGKILL after the grace), `spawn`, `jobdir`,
//! `observe`, `progress` and `tasks` (a job's progress and its expected task count),
//! `listing`, `retention` (finished job directories removed after `job_retention`),
//! `terminate` over `procfs`, `keylock`, `naming`.

mod cancel;
mod jobdir;
mod keylock;
mod launch;
mod listing;
mod naming;
mod observe;
mod options;
mod procfs;
mod progress;
mod retention;
mod spawn;
mod tasks;
mod terminate;

use std::collections::HashSet;
use std::ffi::OsString;
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
pub use options::{AnsibleError, AnsibleOptions};

/// How long a launch that waited out `queue_wait` is told to wait before it asks again: short,
/// since it spends most of its turn waiting here, where an ending job frees it at once.
const BUSY_RETRY_AFTER: Duration = Duration::from_millis(250);
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
    /// The directory holding job directories.
    pub fn work_dir(&self) -> &Path {
        &self.inner.work_dir
    }
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
        cancel::cancel(&self.inner, handle).await
    }

    /// Kills every process of the job at once (a forced cancel); the next status reads it
    /// `Canceled` (dead, no result, and the cancel marker written first).
    async fn kill(&self, handle: &JobHandle) -> Result<CancelOutcome, ProviderError> {
        cancel::kill(&self.inner, handle).await
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
