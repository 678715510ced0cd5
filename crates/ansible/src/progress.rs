//! A job's progress read from its runner events: the `playbook_on_task_start` events it has
//! written (`artifacts/run/job_events/<counter>-<uuid>.json`), the last one's task name, and
//! the playbook's task count (`tasks`). A running job's tally is kept between polls, so each
//! poll reads only the events written since the last (a long job writes thousands); it is
//! dropped when the job ends. A restarted Slipway starts the tally over from the files.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::sync::Mutex;

use serde_json::Value;
use slipway_provider::JobProgress;

use crate::jobdir::JobDir;
use crate::lock;

#[derive(Clone, Debug, Default)]
struct Tally {
    /// The highest event counter read.
    read_through: u64,
    progress: JobProgress,
}

/// Every running job's tally, by job dir name.
#[derive(Debug, Default)]
pub(crate) struct Tallies(Mutex<HashMap<String, Tally>>);

impl Tallies {
    /// The progress of job `name` so far, reading its new events; `playbook` (under
    /// `project`) is counted on the first read. Blocking.
    pub(crate) fn read(&self, name: &str, job: &JobDir, project: &Path, playbook: Option<&str>) -> JobProgress {
        // Files are read outside the lock, so jobs are read side by side; two reads of one job
        // at once read the same files and agree.
        let known = lock(&self.0).get(name).cloned();
        let mut tally = known.unwrap_or_else(|| Tally {
            read_through: 0,
            progress: JobProgress {
                expected_tasks: playbook.and_then(|p| crate::tasks::count_playbook(project, p)),
                ..JobProgress::default()
            },
        });
        // Events are written in counter order, each renamed into place whole; one that lands
        // late out of order is missed, which costs one task of an estimate.
        for (counter, path) in job.event_files_after(tally.read_through) {
            tally.read_through = counter;
            if let Some(task) = task_started(&path) {
                tally.progress.tasks_started += 1;
                tally.progress.current_task = task;
            }
        }
        let progress = tally.progress.clone();
        let mut tallies = lock(&self.0);
        if tallies.get(name).is_none_or(|t| t.read_through < tally.read_through) {
            tallies.insert(name.to_owned(), tally);
        }
        progress
    }

    /// Drops the tally of a job that ended.
    pub(crate) fn forget(&self, name: &str) {
        lock(&self.0).remove(name);
    }
}

/// The task name of a `playbook_on_task_start` event file; `None` for any other event.
fn task_started(path: &Path) -> Option<String> {
    let ev: Value = serde_json::from_slice(&fs::read(path).ok()?).ok()?;
    if ev.get("event")?.as_str()? != "playbook_on_task_start" {
        return None;
    }
    let data = ev.get("event_data");
    let name = ["task", "name"].iter().find_map(|k| data?.get(*k)?.as_str().filter(|s| !s.is_empty()));
    Some(name.unwrap_or_default().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(job: &JobDir, counter: u64, event: &str, task: &str) {
        let dir = job.events_dir();
        fs::create_dir_all(&dir).unwrap();
        let body = serde_json::json!({"counter": counter, "event": event, "event_data": {"task": task}});
        fs::write(dir.join(format!("{counter}-{counter:08x}.json")), body.to_string()).unwrap();
    }

    #[test]
    fn counts_task_starts_reading_each_event_once() {
        let d = tempfile::tempdir().unwrap();
        let job = JobDir::new(d.path().join("job"));
        let tallies = Tallies::default();
        event(&job, 1, "playbook_on_start", "");
        event(&job, 2, "playbook_on_task_start", "first");
        event(&job, 3, "runner_on_ok", "first");
        let p = tallies.read("job", &job, d.path(), None);
        assert_eq!((p.tasks_started, p.current_task.as_str(), p.expected_tasks), (1, "first", None));
        event(&job, 4, "playbook_on_task_start", "second");
        // A file already read is not read again: replacing it changes nothing.
        event(&job, 2, "playbook_on_task_start", "rewritten");
        let p = tallies.read("job", &job, d.path(), None);
        assert_eq!((p.tasks_started, p.current_task.as_str()), (2, "second"));
        tallies.forget("job");
        assert_eq!(tallies.read("job", &job, d.path(), None).tasks_started, 2, "read anew from the files");
    }
}
