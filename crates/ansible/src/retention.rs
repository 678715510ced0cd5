//! Job directories outlive their jobs for `job_retention` — their output stays readable
//! (`GET …/logs`) and their artifacts inspectable — and are then removed. Only a directory
//! whose end was handled (the `finished` marker) and whose runner has exited is ever removed,
//! under its key's lock, so a running, adopted or half-launched job is never touched. The empty lock files in `.locks/`
//! stay: removing one another process may hold would let two processes hold "the" lock.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::jobdir::JobDir;
use crate::keylock::KeyLock;
use crate::naming;

/// Removes the finished job directories under `work_dir` that ended more than `retention`
/// before `now`; returns how many went. Blocking (file I/O).
pub(crate) fn sweep(work_dir: &Path, retention: Duration, now: SystemTime) -> usize {
    let Ok(entries) = fs::read_dir(work_dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| naming::is_job_dir_name(n)) else { continue };
        let job = JobDir::new(entry.path());
        let expired = job.finished_at().is_some_and(|at| now.duration_since(at).is_ok_and(|age| age >= retention));
        // A runner outlives its results by a moment (it exits after writing them).
        let runner_alive = job.read_record().ok().flatten().is_some_and(|r| {
            crate::procfs::is_alive(crate::procfs::ProcId { pid: r.pid, start_time: r.start_time_ticks })
        });
        if !expired || runner_alive {
            continue;
        }
        // Held elsewhere: someone is looking at this key right now; the next sweep decides.
        let Ok(_key) = KeyLock::try_take(work_dir, name) else { continue };
        match fs::remove_dir_all(&job.dir) {
            Ok(()) => removed += 1,
            Err(e) => tracing::warn!(dir = %job.dir.display(), error = %e, "cannot remove an expired job directory"),
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_finished_directories_past_their_retention_go() {
        let work = tempfile::tempdir().unwrap();
        let finished = JobDir::new(work.path().join("k_done"));
        let running = JobDir::new(work.path().join("k_running"));
        for job in [&finished, &running] {
            fs::create_dir(&job.dir).unwrap();
        }
        fs::write(finished.finished_marker(), b"").unwrap();
        fs::create_dir(work.path().join("not a job")).unwrap();
        let ended = finished.finished_at().unwrap();
        let day = Duration::from_secs(86_400);
        assert_eq!(sweep(work.path(), day, ended + Duration::from_secs(3600)), 0, "within its retention");
        let held = KeyLock::try_take(work.path(), "k_done").unwrap();
        assert_eq!(sweep(work.path(), day, ended + day), 0, "a key held elsewhere waits for the next sweep");
        drop(held);
        assert_eq!(sweep(work.path(), day, ended + day), 1);
        assert!(!finished.dir.exists());
        assert!(running.dir.exists(), "a job whose end was not handled is never removed");
        assert!(work.path().join("not a job").exists());
    }
}
