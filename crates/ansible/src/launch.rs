//! A launch: at most one job per key (an earlier launch, maybe before a restart, is
//! returned), a place under `max_concurrent` (waited for at most `queue_wait`, handed over the
//! moment a job ends), then the job directory written, the runner spawned and recorded, and
//! a reaper that tells the job's end.

use std::fs;
use std::io;
use std::sync::Arc;
use std::time::SystemTime;

use slipway_domain::{JobId, JobState, Timestamp};
use slipway_provider::{LaunchRequest, Launched, ProviderError};

use crate::jobdir::{JobDir, JobRecord};
use crate::keylock::KeyLock;
use crate::procfs::{self, ProcId};
use crate::{BUSY_RETRY_AFTER, Inner, blocking, lock};

/// Starts the job for `request`'s key, or returns the one it already has.
pub(crate) async fn launch(inner: &Arc<Inner>, request: &LaunchRequest) -> Result<Launched, ProviderError> {
    let playbook = inner.resolve_playbook(request)?;
    let name = Inner::dir_name(request.idempotency_key.as_str())?;
    let job = inner.job_dir(&name);
    let queued_until = tokio::time::Instant::now() + inner.queue_wait;
    let (_launching, _key) = loop {
        // Listening before the capacity check, so a place freed right after it counts.
        let freed = inner.place_freed.notified();
        let mut freed = std::pin::pin!(freed);
        freed.as_mut().enable();
        let launching = inner.launch_lock.lock().await;
        let key = {
            let (work_dir, name) = (inner.work_dir.clone(), name.clone());
            blocking(move || KeyLock::try_take(&work_dir, &name)).await??
        };

        // At most one job per key: an earlier launch (maybe before a restart) is returned.
        let existing = {
            let (inner, name, request) = (inner.clone(), name.clone(), request.clone());
            blocking(move || inner.find_existing(&name, &request)).await??
        };
        if let Some(launched) = existing {
            tracing::info!(job = %name, "launch found an existing job for the key");
            return Ok(launched);
        }
        let capacity = {
            let inner = inner.clone();
            blocking(move || inner.check_capacity()).await?
        };
        match capacity {
            Ok(()) => break (launching, key),
            Err(busy) => {
                drop((launching, key));
                if tokio::time::timeout_at(queued_until, freed).await.is_err() {
                    return Err(busy);
                }
            }
        }
    };
    {
        let (inner, job, request) = (inner.clone(), job.clone(), request.clone());
        blocking(move || inner.prepare(&job, &request))
            .await?
            .map_err(|e| ProviderError::Transient(format!("cannot prepare job dir for {name}: {e}")))?;
    }

    let spawned = inner.command(&job, &playbook).and_then(|mut cmd| cmd.spawn());
    let child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let _ = fs::remove_dir_all(&job.dir);
            let msg = format!("cannot start {}: {e}", inner.runner.display());
            return Err(match e.kind() {
                io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => ProviderError::Permanent(msg),
                _ => ProviderError::Transient(msg),
            });
        }
    };
    // From here on the job runs: report success whatever else fails (find would adopt
    // it from the process table).
    let pid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    // The child is unreaped until the reaper below runs, so its /proc entry is ours.
    match procfs::identify(pid) {
        Some(id) => {
            let record = JobRecord {
                key: request.idempotency_key.clone(),
                resource_id: request.resource_id.to_string(),
                action: request.action.as_str().to_owned(),
                pid,
                start_time_ticks: id.start_time,
                playbook: playbook.clone(),
                launched_at: Timestamp::from_system(SystemTime::now()).to_rfc3339(),
            };
            let job2 = job.clone();
            if let Err(e) = blocking(move || job2.write_record(&record))
                .await
                .and_then(|r| r.map_err(|e| ProviderError::Transient(e.to_string())))
            {
                tracing::warn!(job = %name, error = %e, "cannot write job.json; the job runs unrecorded");
            }
        }
        None => tracing::warn!(job = %name, pid, "runner exited before it could be recorded"),
    }
    lock(&inner.active).insert(name.clone());
    tracing::info!(job = %name, pid, playbook = %playbook, "launched ansible-runner");

    reap(inner.clone(), child, name.clone(), job.clone());

    Ok(Launched { handle: inner.handle(&name, &job), state: JobState::Running, template: playbook })
}

/// Reaps the runner so it never lingers as a zombie, then tidies up after it and tells its
/// end (the engine's hint, `Provider::on_job_end`).
fn reap(inner: Arc<Inner>, mut child: tokio::process::Child, name: String, job: JobDir) {
    let id = JobId::from(name.as_str());
    tokio::spawn(async move {
        match child.wait().await {
            Ok(status) => tracing::debug!(job = %name, %status, "ansible-runner exited"),
            Err(e) => tracing::warn!(job = %name, error = %e, "waiting for ansible-runner"),
        }
        let tidied = inner.clone();
        let _ = blocking(move || {
            let ended_normally = matches!(job.runner_status().as_deref(), Some("successful" | "failed"));
            tidied.finished(&name, &job, ended_normally, None);
        })
        .await;
        if let Some(hint) = inner.job_ended.get() {
            hint(&id);
        }
    });
}

impl Inner {
    /// The job already started for this request's key, if any. Blocking.
    pub(crate) fn find_existing(&self, name: &str, r: &LaunchRequest) -> Result<Option<Launched>, ProviderError> {
        let job = self.job_dir(name);
        if !job.exists() {
            return Ok(None);
        }
        let record = job.read_record().map_err(|e| {
            // A record is written atomically after a spawn: an unreadable one still means
            // a job was started, so "none" would be a lie.
            ProviderError::Indeterminate(format!("job record in {} is unreadable: {e}", job.dir.display()))
        })?;
        let template = match record {
            Some(rec) if rec.key != r.idempotency_key => {
                return Err(ProviderError::Permanent(format!(
                    "job dir {} belongs to key {:?}, not {:?}",
                    job.dir.display(),
                    rec.key,
                    r.idempotency_key
                )));
            }
            Some(rec) => rec.playbook,
            None => match Self::find_unrecorded_runner(&job) {
                Some((id, playbook)) => {
                    let playbook = playbook.unwrap_or_else(|| self.playbook_name(r));
                    let rec = JobRecord {
                        key: r.idempotency_key.clone(),
                        resource_id: r.resource_id.to_string(),
                        action: r.action.as_str().to_owned(),
                        pid: id.pid,
                        start_time_ticks: id.start_time,
                        playbook: playbook.clone(),
                        launched_at: Timestamp::from_system(SystemTime::now()).to_rfc3339(),
                    };
                    if let Err(e) = job.write_record(&rec) {
                        tracing::warn!(dir = %job.dir.display(), error = %e, "cannot record adopted runner");
                    }
                    tracing::info!(dir = %job.dir.display(), pid = id.pid, "adopted an unrecorded runner");
                    playbook
                }
                // Runner creates artifacts/ first thing: with them, a run happened.
                None if job.artifacts().exists() => self.playbook_name(r),
                // Created but never started (crash before spawn): safe to launch anew.
                None => return Ok(None),
            },
        };
        Ok(Some(self.launched(name, &job, template)))
    }

    /// The job in `job` as a launch or a listing returns it: its handle and current state.
    /// Blocking.
    pub(crate) fn launched(&self, name: &str, job: &JobDir, template: String) -> Launched {
        let obs = self.observe(name, job);
        Launched { handle: self.handle(name, job), state: obs.status.state, template }
    }

    /// `RateLimited` when `max_concurrent` jobs run. Blocking.
    fn check_capacity(&self) -> Result<(), ProviderError> {
        let names: Vec<String> = lock(&self.active).iter().cloned().collect();
        if names.len() < self.max_concurrent {
            return Ok(());
        }
        // Adopted jobs leave the set only when observed finished: recheck before refusing.
        for name in names {
            let job = self.job_dir(&name);
            let alive = job
                .read_record()
                .ok()
                .flatten()
                .is_some_and(|r| procfs::is_alive(ProcId { pid: r.pid, start_time: r.start_time_ticks }));
            if !alive {
                lock(&self.active).remove(&name);
            }
        }
        let running = lock(&self.active).len();
        if running < self.max_concurrent {
            Ok(())
        } else {
            Err(ProviderError::RateLimited {
                retry_after: BUSY_RETRY_AFTER,
                message: format!("{running} ansible jobs running (max_concurrent)"),
            })
        }
    }
}
