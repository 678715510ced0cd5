//! One ansible-runner private data directory per job: what we write before launching
//! (`inputs`), the `job.json` record that lets a restarted Slipway find the process, and reading the
//! results runner leaves in `artifacts/run/`. A check-mode job is one whose directory holds
//! runner's `env/cmdline` with `--check --diff`, so restarts and adoption still know it; its
//! changed tasks are read from the runner's events once it ends.
//!
//! Everything here is blocking; callers run it on the blocking pool.

mod inputs;

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use slipway_provider::{MAX_TASK_CHANGES, TaskChange};

pub(crate) use inputs::Layout;

/// The `--ident` we run with, so artifacts always land in `artifacts/run/`.
pub const IDENT: &str = "run";

/// Environment variable set on the runner and inherited by every process of the job
/// (ansible-playbook, its workers, modules, their children). Ansible's workers call
/// `setsid()` and can be reparented to init, escaping both the process tree and the
/// process group; this marker still finds them in `/proc/<pid>/environ`.
pub const JOB_MARKER_VAR: &str = "SLIPWAY_ANSIBLE_JOB_DIR";

/// Bound on failure details kept with a job.
pub const MAX_DETAILS: usize = 2000;

/// What we record about a launched runner, written atomically right after spawning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub key: slipway_domain::IdempotencyKey,
    /// The ARM id of the resource the job is for, so the jobs can be listed without reading
    /// the extra vars (they carry opened secrets and are gone once the job ended). Empty in
    /// records written before it was kept.
    #[serde(default)]
    pub resource_id: String,
    /// The job's word (`JobAction::as_str`); empty in records written before it was kept.
    #[serde(default)]
    pub action: String,
    /// The `ansible-runner` process.
    pub pid: i32,
    /// `/proc/<pid>/stat` field 22, so a reused pid is never mistaken for our runner.
    pub start_time_ticks: u64,
    pub playbook: String,
    /// RFC 3339, UTC.
    pub launched_at: String,
}

/// Paths inside one job directory.
#[derive(Clone, Debug)]
pub struct JobDir {
    pub dir: PathBuf,
}

impl JobDir {
    pub fn new(dir: PathBuf) -> Self {
        JobDir { dir }
    }

    pub fn record_path(&self) -> PathBuf {
        self.dir.join("job.json")
    }
    pub fn artifacts(&self) -> PathBuf {
        self.dir.join("artifacts")
    }
    fn run_artifacts(&self) -> PathBuf {
        self.artifacts().join(IDENT)
    }
    pub fn status_path(&self) -> PathBuf {
        self.run_artifacts().join("status")
    }
    pub fn rc_path(&self) -> PathBuf {
        self.run_artifacts().join("rc")
    }
    pub fn events_dir(&self) -> PathBuf {
        self.run_artifacts().join("job_events")
    }
    pub fn playbook_stdout(&self) -> PathBuf {
        self.run_artifacts().join("stdout")
    }
    /// The runner's own stdout/stderr (files, not pipes: a pipe would SIGPIPE the runner
    /// once Slipway exits).
    pub fn runner_stdout(&self) -> PathBuf {
        self.dir.join("runner.out")
    }
    pub fn runner_stderr(&self) -> PathBuf {
        self.dir.join("runner.err")
    }
    /// Written when cancellation is requested: it outlives a Slipway restart and lets a
    /// runner killed before it could record `canceled` still read as canceled.
    pub fn cancel_marker(&self) -> PathBuf {
        self.dir.join("cancel-requested")
    }
    /// ansible-runner's input of extra vars (removed once the job is over).
    pub fn extravars(&self) -> PathBuf {
        self.dir.join("env/extravars")
    }

    /// Written once the job's end was handled (leftovers swept, tmp removed).
    pub fn finished_marker(&self) -> PathBuf {
        self.dir.join("finished")
    }
    /// `TMPDIR`, `ANSIBLE_LOCAL_TEMP` and `ANSIBLE_REMOTE_TEMP` point here, so the files
    /// a cancelled run leaves behind (module payloads, AnsiballZ's `ansible_*_payload_*`
    /// dirs) stay inside the job dir, where they are removed once the job is over.
    pub fn tmp(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    /// The `SLIPWAY_ANSIBLE_JOB_DIR=<dir>` environment entry of this job's processes.
    pub fn marker_entry(&self) -> Vec<u8> {
        format!("{JOB_MARKER_VAR}={}", self.dir.display()).into_bytes()
    }

    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    /// Extra `ansible-playbook` arguments runner reads; written only for a check-mode job,
    /// so its presence is what says the job is one (across restarts and adoption).
    fn cmdline(&self) -> PathBuf {
        self.dir.join("env/cmdline")
    }

    pub fn is_check(&self) -> bool {
        self.cmdline().is_file()
    }

    pub fn write_record(&self, record: &JobRecord) -> io::Result<()> {
        let body = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
        let tmp = self.dir.join("job.json.tmp");
        write_private(&tmp, &body)?;
        // Rename is atomic: a reader sees no record or a whole one.
        fs::rename(&tmp, self.record_path())
    }

    /// `Ok(None)` when there is no record; a corrupt record is an error.
    pub fn read_record(&self) -> io::Result<Option<JobRecord>> {
        match fs::read(self.record_path()) {
            Ok(raw) => {
                serde_json::from_slice(&raw).map(Some).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Runner's final status word, once it has written one.
    pub fn runner_status(&self) -> Option<String> {
        let s = fs::read_to_string(self.status_path()).ok()?;
        let s = s.trim();
        (!s.is_empty()).then(|| s.to_owned())
    }

    /// When the job's end was handled, if it was.
    pub fn finished_at(&self) -> Option<std::time::SystemTime> {
        fs::metadata(self.finished_marker()).and_then(|m| m.modified()).ok()
    }

    /// The playbook's output from byte `offset` on (at most a chunk, ANSI colour codes
    /// removed); nothing yet before the runner created it.
    pub fn read_output(&self, offset: u64) -> io::Result<slipway_provider::JobOutput> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = match fs::File::open(self.playbook_stdout()) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(slipway_provider::JobOutput { text: String::new(), next_offset: offset });
            }
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(offset.min(len)))?;
        let mut bytes = Vec::new();
        file.take(slipway_provider::OUTPUT_CHUNK_BYTES as u64).read_to_end(&mut bytes)?;
        let more = offset.min(len) + (bytes.len() as u64) < len;
        let mut out = slipway_provider::JobOutput::of(&bytes, offset.min(len), more);
        out.text = strip_ansi(&out.text);
        Ok(out)
    }

    pub fn has_rc(&self) -> bool {
        fs::read_to_string(self.rc_path()).is_ok_and(|s| !s.trim().is_empty())
    }

    /// Event files in `counter` order (`<counter>-<uuid>.json`).
    fn event_files(&self) -> Vec<PathBuf> {
        self.event_files_after(0).into_iter().map(|(_, p)| p).collect()
    }

    /// Event files whose counter is above `counter` (counters start at 1), with their
    /// counters, in counter order.
    pub fn event_files_after(&self, counter: u64) -> Vec<(u64, PathBuf)> {
        let Ok(entries) = fs::read_dir(self.events_dir()) else {
            return Vec::new();
        };
        let mut files: Vec<(u64, PathBuf)> = entries
            .filter_map(|e| {
                let path = e.ok()?.path();
                let name = path.file_name()?.to_str()?;
                if !name.ends_with(".json") {
                    return None; // runner writes `*.json.tmp` first and renames
                }
                let n: u64 = name.split('-').next()?.parse().ok()?;
                (n > counter).then_some((n, path))
            })
            .collect();
        files.sort();
        files
    }

    /// The ansible-playbook pid, as recorded in the first event.
    pub fn playbook_pid(&self) -> Option<i32> {
        let first = self.event_files().into_iter().next()?;
        let ev: Value = serde_json::from_slice(&fs::read(first).ok()?).ok()?;
        ev.get("pid")?.as_i64().and_then(|p| i32::try_from(p).ok())
    }

    /// What the playbook reported with `set_stats`: the `artifact_data` of the final
    /// `playbook_on_stats` event (looked for from the end).
    pub fn stats(&self) -> Option<Value> {
        let stats = self.event_files().into_iter().rev().find_map(|path| {
            let ev: Value = serde_json::from_slice(&fs::read(path).ok()?).ok()?;
            (ev.get("event").and_then(Value::as_str) == Some("playbook_on_stats")).then_some(ev)
        })?;
        slipway_provider::stats_in(stats.get("event_data")?.get("artifact_data"))
    }

    /// Every task that reported a change (a check-mode job's prediction), in the order they
    /// ran, at most [`MAX_TASK_CHANGES`].
    pub fn changes(&self) -> Vec<TaskChange> {
        self.event_files()
            .into_iter()
            .filter_map(|path| {
                let ev: Value = serde_json::from_slice(&fs::read(path).ok()?).ok()?;
                TaskChange::from_event(ev.get("event")?.as_str()?, ev.get("event_data")?)
            })
            .take(MAX_TASK_CHANGES)
            .collect()
    }

    /// Why the job failed, for `error_details`: the failed tasks' messages, else the tail
    /// of the playbook output, else the tail of the runner's own stderr.
    pub fn failure_details(&self) -> String {
        let mut out = String::new();
        for path in self.event_files() {
            let Ok(raw) = fs::read(&path) else { continue };
            let Ok(ev) = serde_json::from_slice::<Value>(&raw) else {
                continue;
            };
            if let Some(line) = failed_task_line(&ev) {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&line);
                if out.len() >= MAX_DETAILS {
                    break;
                }
            }
        }
        if out.is_empty() {
            out = tail(&self.playbook_stdout());
        }
        if out.is_empty() {
            out = tail(&self.runner_stderr());
        }
        bound(out)
    }
}

/// `Task 'x' failed on host: msg` for a failure event; `None` for anything else,
/// including failures the playbook chose to ignore.
fn failed_task_line(ev: &Value) -> Option<String> {
    let kind = ev.get("event")?.as_str()?;
    let verb = match kind {
        "runner_on_failed" => "failed",
        "runner_on_unreachable" => "unreachable",
        _ => return None,
    };
    let data = ev.get("event_data")?;
    if data.get("ignore_errors").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let task = data.get("task").and_then(Value::as_str).unwrap_or("?");
    let host = data.get("host").and_then(Value::as_str).unwrap_or("?");
    let msg = slipway_provider::task_failure_message(data.get("res"));
    let what = if verb == "failed" { "failed on" } else { "could not reach" };
    Some(format!("Task '{task}' {what} {host}: {msg}"))
}

/// The last [`MAX_DETAILS`] characters of a text file, with ANSI escapes removed.
fn tail(path: &Path) -> String {
    let Ok(raw) = fs::read(path) else {
        return String::new();
    };
    let start = raw.len().saturating_sub(MAX_DETAILS * 2);
    let text = strip_ansi(&String::from_utf8_lossy(&raw[start..]));
    let text = text.trim();
    let skip = text.chars().count().saturating_sub(MAX_DETAILS);
    text.chars().skip(skip).collect()
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // CSI: parameters and intermediates, then one final byte in '@'..='~'.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Truncates to [`MAX_DETAILS`] characters on a character boundary.
pub fn bound(s: String) -> String {
    if s.chars().count() <= MAX_DETAILS {
        return s;
    }
    let mut out: String = s.chars().take(MAX_DETAILS - 1).collect();
    out.push('…');
    out
}

fn write_private(path: &Path, body: &[u8]) -> io::Result<()> {
    // Extra vars carry the resource's properties: readable by the owner only.
    let mut f = create_private(path)?;
    f.write_all(body)?;
    f.sync_all()
}

/// Creates (or truncates) `path` readable and writable by the owner only (`0600`). Every
/// file the provider writes goes through here: job files carry properties and output.
pub(crate) fn create_private(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)
}

/// Creates `dir` and any missing parents as `0700` (owner only); an existing directory is
/// left as it is.
pub(crate) fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn records_of_earlier_versions_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobDir::new(dir.path().to_path_buf());
        let old = r#"{"key": "k:1", "pid": 42, "start_time_ticks": 7, "playbook": "create-subnet.yml",
            "launched_at": "2026-01-02T03:04:05.678Z"}"#;
        fs::write(job.record_path(), old).unwrap();
        let rec = job.read_record().unwrap().expect("a record");
        assert_eq!((rec.key.as_str(), rec.pid, rec.playbook.as_str()), ("k:1", 42, "create-subnet.yml"));
        assert_eq!((rec.resource_id.as_str(), rec.action.as_str()), ("", ""));

        let now = JobRecord { resource_id: "/subscriptions/s/x".into(), action: "delete".into(), ..rec };
        job.write_record(&now).unwrap();
        assert_eq!(job.read_record().unwrap(), Some(now));
    }

    #[test]
    fn failed_task_lines() {
        let ev = json!({"event": "runner_on_failed", "event_data": {
            "task": "fail", "host": "localhost", "res": {"msg": "boom"}}});
        assert_eq!(failed_task_line(&ev).unwrap(), "Task 'fail' failed on localhost: boom");
        let ignored = json!({"event": "runner_on_failed", "event_data": {
            "task": "t", "host": "h", "ignore_errors": true, "res": {"msg": "x"}}});
        assert_eq!(failed_task_line(&ignored), None);
        let ok = json!({"event": "runner_on_ok", "event_data": {}});
        assert_eq!(failed_task_line(&ok), None);
    }

    #[test]
    fn strips_ansi_and_bounds() {
        assert_eq!(strip_ansi("\u{1b}[0;31mred\u{1b}[0m ok"), "red ok");
        let long = "é".repeat(MAX_DETAILS + 10);
        let b = bound(long);
        assert_eq!(b.chars().count(), MAX_DETAILS);
        assert!(b.ends_with('…'));
    }
}
