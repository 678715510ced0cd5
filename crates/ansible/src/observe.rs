//! What a look at a job directory finds — the runner alive or not, its final status word as
//! a job state, the failure details — and the bookkeeping once a job is over (orphans
//! killed, temporary files and the opened extra vars removed, the `finished` marker).

use std::collections::HashSet;
use std::fs;
use std::io;

use slipway_domain::JobState;
use slipway_provider::JobStatus;

use crate::jobdir::{self, JobDir};
use crate::procfs::{self, ProcId};
use crate::{Inner, lock, terminate};

/// What a look at a job directory found.
pub(crate) struct Observation {
    /// The runner, if it is still running.
    pub(crate) runner: Option<ProcId>,
    pub(crate) status: JobStatus,
}

impl Inner {
    /// A runner process for `job` found in the process table (used when Slipway crashed
    /// between spawning it and writing `job.json`): its identity and `-p` playbook.
    pub(crate) fn find_unrecorded_runner(job: &JobDir) -> Option<(ProcId, Option<String>)> {
        let dir = job.dir.to_str()?;
        let procs = procfs::snapshot();
        let matches: Vec<(procfs::ProcStat, Vec<String>)> = procs
            .iter()
            .filter(|p| p.is_running())
            .filter_map(|p| {
                let argv = procfs::cmdline(p.pid)?;
                argv.iter().any(|a| a == dir).then_some((*p, argv))
            })
            .collect();
        // A forked-but-not-yet-exec'd child carries its parent's cmdline: take the root.
        let pids: HashSet<i32> = matches.iter().map(|(p, _)| p.pid).collect();
        let (stat, argv) = matches.into_iter().find(|(p, _)| !pids.contains(&p.ppid))?;
        let playbook = argv.iter().position(|a| a == "-p" || a == "--playbook").and_then(|i| argv.get(i + 1).cloned());
        Some((stat.id(), playbook))
    }

    /// Looks at a job directory and maps what runner recorded. Blocking.
    pub(crate) fn observe(&self, name: &str, job: &JobDir) -> Observation {
        let record = match job.read_record() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(dir = %job.dir.display(), error = %e, "unreadable job.json");
                None
            }
        };
        let runner = match &record {
            Some(r) => Some(ProcId { pid: r.pid, start_time: r.start_time_ticks }),
            None => Self::find_unrecorded_runner(job).map(|(id, _)| id),
        };
        let alive = runner.filter(|r| procfs::is_alive(*r));
        // Results are read only after the liveness check: a runner seen dead has already
        // written everything it ever will, so "dead and no status" really means no result.
        let word = job.runner_status();
        let terminal_word = word.filter(|_| alive.is_none() || job.has_rc());
        let playbook = record.as_ref().map(|r| r.playbook.as_str());
        let status = match terminal_word {
            Some(word) => {
                let (state, message) = map_runner_status(&word);
                let error_details = if state == JobState::Failed { job.failure_details() } else { String::new() };
                // A failed job's report counts too: a preflight job fails with its checks.
                let stats = job.stats();
                let changes = job.is_check().then(|| job.changes());
                let progress = Some(self.tallies.read(name, job, &self.playbook_dir, playbook));
                let ended_normally = state == JobState::Succeeded || word == "failed";
                self.finished(name, job, ended_normally, alive);
                JobStatus { state, message, error_details, stats, changes, progress }
            }
            None if alive.is_some() => {
                lock(&self.active).insert(name.to_owned());
                JobStatus {
                    progress: Some(self.tallies.read(name, job, &self.playbook_dir, playbook)),
                    ..JobStatus::new(JobState::Running, "running")
                }
            }
            None => {
                self.finished(name, job, false, None);
                if job.cancel_marker().exists() {
                    JobStatus::new(JobState::Canceled, "canceled before the runner recorded a result")
                } else {
                    JobStatus {
                        error_details: job.failure_details(),
                        ..JobStatus::new(JobState::Failed, "the runner exited without recording a result")
                    }
                }
            }
        };
        Observation { runner: alive, status }
    }

    /// Bookkeeping once a job is over. A job that ended normally (the playbook finished,
    /// successfully or not) is left alone; one that was cancelled, timed out or whose
    /// runner died may have orphaned workers, which are killed here; `runner` (still
    /// alive when its results are already written) is spared, it exits by itself.
    /// Blocking.
    pub(crate) fn finished(&self, name: &str, job: &JobDir, ended_normally: bool, runner: Option<ProcId>) {
        self.tallies.forget(name);
        if lock(&self.active).remove(name) {
            self.place_freed.notify_waiters();
        }
        // A file, not memory: done once per job, across restarts, without growing state.
        let done = job.finished_marker();
        if done.exists() {
            return;
        }
        if !ended_normally {
            terminate::sweep(job, runner);
        }
        // Module payloads of interrupted tasks; nothing reads them.
        if let Err(e) = fs::remove_dir_all(job.tmp())
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::debug!(dir = %job.dir.display(), error = %e, "could not remove job tmp");
        }
        // The extra vars carry opened secret properties: they exist only while the job runs.
        if let Err(e) = fs::remove_file(job.extravars())
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %job.dir.display(), error = %e, "could not remove the job's extra vars");
        }
        if let Err(e) = jobdir::create_private(&done) {
            tracing::debug!(dir = %job.dir.display(), error = %e, "could not mark job finished");
        }
    }
}

/// Runner's final status word → job state and message (AWX's mapping).
pub(crate) fn map_runner_status(word: &str) -> (JobState, String) {
    match word {
        "successful" => (JobState::Succeeded, word.into()),
        "failed" => (JobState::Failed, word.into()),
        "canceled" => (JobState::Canceled, word.into()),
        "timeout" => (JobState::Failed, "Job terminated due to timeout".into()),
        "error" => (JobState::Failed, "Job terminated due to error".into()),
        other => (JobState::Failed, format!("the runner ended with unexpected status {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_status_mapping() {
        assert_eq!(map_runner_status("successful").0, JobState::Succeeded);
        assert_eq!(map_runner_status("failed").0, JobState::Failed);
        assert_eq!(map_runner_status("canceled").0, JobState::Canceled);
        assert_eq!(map_runner_status("timeout"), (JobState::Failed, "Job terminated due to timeout".into()));
        assert_eq!(map_runner_status("error"), (JobState::Failed, "Job terminated due to error".into()));
        assert_eq!(map_runner_status("weird").0, JobState::Failed);
    }
}
