//! Status reads: one `GET …/jobs/?id__in=…` (and `workflow_jobs/`) per [`PAGE_SIZE`] handles,
//! following `next` links; the detail (and failure events) of a job that failed, fetched once
//! and remembered; a check-mode job's changed tasks once it ended (`changes`); a long job's
//! progress (`progress`); and a job missing from AAP's list, `Transient` for `purge_grace`,
//! then `NotFound`.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use serde_json::Value;
use slipway_domain::JobState;
use slipway_provider::{JobHandle, JobStatus, ProviderError};
use tokio::time::Instant;

use crate::http::{self, HttpError};
use crate::job::{JobKind, is_check, map_status, parse_handle};
use crate::{AapProvider, lock};

/// Rows per list page (AWX's `MAX_PAGE_SIZE`), and ids per batched status request.
pub const PAGE_SIZE: usize = 200;
/// Longest `error_details` taken from AAP (traceback or explanation).
pub const MAX_DETAILS: usize = 4000;
/// Terminal jobs whose failure details are remembered (so repeated polls do not refetch).
pub(crate) const DETAILS_CACHE: usize = 4096;
/// Jobs whose first "missing from AAP" instant is remembered.
pub(crate) const MISSING_CACHE: usize = 16_384;

/// What a status poll reads of a listed job.
#[derive(Debug, serde::Deserialize)]
struct StatusRow {
    id: u64,
    #[serde(default, deserialize_with = "string_or_null")]
    status: String,
    #[serde(default, deserialize_with = "string_or_null")]
    job_explanation: String,
    /// A job's `set_stats` data (workflow jobs have none).
    #[serde(default)]
    artifacts: Option<Value>,
}

/// AWX sends `null` for some empty texts.
fn string_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(<Option<String> as serde::Deserialize>::deserialize(d)?.unwrap_or_default())
}

/// A map with a size bound; the oldest insertion goes first.
pub(crate) struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    cap: usize,
}

impl<K: Clone + Eq + Hash, V> Bounded<K, V> {
    pub(crate) fn new(cap: usize) -> Self {
        Bounded { map: HashMap::new(), order: VecDeque::new(), cap }
    }

    pub(crate) fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }

    pub(crate) fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
        }
        while self.map.len() > self.cap {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                }
                None => break,
            }
        }
    }

    pub(crate) fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.map.get_mut(k)
    }

    pub(crate) fn remove(&mut self, k: &K) {
        self.take(k);
    }

    pub(crate) fn take(&mut self, k: &K) -> Option<V> {
        let v = self.map.remove(k)?;
        self.order.retain(|o| o != k);
        Some(v)
    }
}

impl AapProvider {
    /// The status of every handle, in order (see the module doc).
    pub(crate) async fn statuses(&self, handles: &[JobHandle]) -> Vec<Result<JobStatus, ProviderError>> {
        let parsed: Vec<Result<(JobKind, u64), ProviderError>> = handles.iter().map(parse_handle).collect();
        let mut rows: HashMap<(JobKind, u64), Result<StatusRow, ProviderError>> = HashMap::new();
        for kind in [JobKind::Job, JobKind::WorkflowJob] {
            let mut ids: Vec<u64> =
                parsed.iter().filter_map(|p| p.as_ref().ok()).filter(|(k, _)| *k == kind).map(|(_, id)| *id).collect();
            ids.sort_unstable();
            ids.dedup();
            for chunk in ids.chunks(PAGE_SIZE) {
                match self.list_jobs(kind, chunk).await {
                    Ok(mut found) => {
                        for id in chunk {
                            if let Some(row) = found.remove(id) {
                                rows.insert((kind, *id), Ok(row));
                            }
                        }
                    }
                    Err(e) => {
                        for id in chunk {
                            rows.insert((kind, *id), Err(e.clone()));
                        }
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(handles.len());
        for (p, h) in parsed.into_iter().zip(handles) {
            let result = match p {
                Err(e) => Err(e),
                Ok((kind, id)) => match rows.get(&(kind, id)) {
                    Some(Ok(row)) => self.observe(kind, id, is_check(h), row).await,
                    Some(Err(e)) => Err(e.clone()),
                    None => Err(self.missing(kind, id)),
                },
            };
            out.push(result);
        }
        out
    }

    /// Status rows for `ids` (one kind), keyed by id; ids absent from AAP are absent.
    async fn list_jobs(&self, kind: JobKind, ids: &[u64]) -> Result<HashMap<u64, StatusRow>, ProviderError> {
        let mut url = self.http.url(kind.jobs_path());
        let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        url.query_pairs_mut()
            .append_pair("id__in", &list)
            .append_pair("order_by", "id")
            .append_pair("page_size", &self.page_size);
        let mut rows = HashMap::new();
        self.http
            .walk(url, |row: StatusRow| {
                rows.insert(row.id, row);
                false
            })
            .await
            .map_err(HttpError::into_provider)?;
        Ok(rows)
    }

    /// The status of a job AAP listed; a check-mode job's (`check`) that ended carries its
    /// changed tasks, and stays `Running` until AAP has saved its events.
    async fn observe(&self, kind: JobKind, id: u64, check: bool, row: &StatusRow) -> Result<JobStatus, ProviderError> {
        lock(&self.missing).remove(&(kind, id));
        let word = row.status.as_str();
        let state = map_status(word);
        let explanation = row.job_explanation.trim();
        let word_text = if word.is_empty() { "unknown" } else { word };
        let message = if explanation.is_empty() {
            word_text.to_owned()
        } else {
            format!("{word_text}: {}", first_line(explanation))
        };
        let changes = if check && state.is_terminal() {
            match self.check_changes(kind, id).await? {
                Some(changes) => Some(changes),
                None => {
                    let waiting = format!("{message} (AAP is still saving the job's events)");
                    return Ok(JobStatus::new(JobState::Running, waiting));
                }
            }
        } else {
            None
        };
        let error_details =
            if state == JobState::Failed { self.failure_details(kind, id, explanation).await } else { String::new() };
        // A failed job's report counts too: a preflight job fails with its checks.
        let stats = slipway_provider::stats_in(row.artifacts.as_ref());
        let progress = self.progress(kind, id, state).await;
        Ok(JobStatus { state, message, error_details, stats, changes, progress })
    }

    /// Why a job failed: its `result_traceback` (detail view), else its failed tasks (job
    /// events), else its `job_explanation`. Fetched once per job, bounded to [`MAX_DETAILS`].
    async fn failure_details(&self, kind: JobKind, id: u64, explanation: &str) -> String {
        if let Some(d) = lock(&self.details).get(&(kind, id)) {
            return d.clone();
        }
        let url = self.http.url(&format!("{}{id}/", kind.jobs_path()));
        match self.http.get_json::<Value>(&url).await {
            Ok(detail) => {
                let text = |f: &str| detail.get(f).and_then(Value::as_str).map(str::trim).unwrap_or("").to_owned();
                let traceback = text("result_traceback");
                let details = if !traceback.is_empty() {
                    traceback
                } else if let Some(tasks) = self.failed_tasks(kind, id).await.filter(|t| !t.is_empty()) {
                    tasks
                } else if !text("job_explanation").is_empty() {
                    text("job_explanation")
                } else {
                    explanation.to_owned()
                };
                let details = http::bound(details, MAX_DETAILS);
                lock(&self.details).insert((kind, id), details.clone());
                details
            }
            Err(e) => {
                // Not cached: a later poll may get them; the state is known regardless.
                tracing::debug!(provider = %self.name, job = id, error = %e.message(), "no AAP job detail");
                http::bound(explanation.to_owned(), MAX_DETAILS)
            }
        }
    }

    /// `Task 'x' failed on host: msg` lines of a playbook job's failure events (where AAP
    /// keeps why an ordinary playbook failed: `result_traceback` is only for crashes).
    /// `None` when they cannot be read.
    async fn failed_tasks(&self, kind: JobKind, id: u64) -> Option<String> {
        if kind != JobKind::Job {
            return None;
        }
        let mut url = self.http.url(&format!("{}{id}/job_events/", kind.jobs_path()));
        url.query_pairs_mut()
            .append_pair("event__in", "runner_on_failed,runner_on_unreachable")
            .append_pair("order_by", "counter")
            .append_pair("page_size", "20");
        let page: Value = self.http.get_json(&url).await.ok()?;
        let lines: Vec<String> = page.get("results")?.as_array()?.iter().filter_map(failed_task_line).collect();
        Some(lines.join("\n"))
    }

    /// A job AAP did not list: `Transient` during the grace period, then `NotFound`.
    pub(crate) fn missing(&self, kind: JobKind, id: u64) -> ProviderError {
        let now = Instant::now();
        let first = {
            let mut missing = lock(&self.missing);
            match missing.get(&(kind, id)) {
                Some(first) => *first,
                None => {
                    missing.insert((kind, id), now);
                    now
                }
            }
        };
        if now.duration_since(first) >= self.purge_grace {
            ProviderError::NotFound(format!("AAP {} {id} no longer exists (purged from AAP?)", kind.noun()))
        } else {
            ProviderError::Transient(format!(
                "AAP {} {id} not found at AAP; it is reported gone if still missing after {:?}",
                kind.noun(),
                self.purge_grace
            ))
        }
    }
}

/// `Task 'x' failed on host: msg` for an AWX failure event (`runner_on_failed`,
/// `runner_on_unreachable`); `None` for other events and for ignored failures.
fn failed_task_line(ev: &Value) -> Option<String> {
    let what = match ev.get("event")?.as_str()? {
        "runner_on_failed" => "failed on",
        "runner_on_unreachable" => "could not reach",
        _ => return None,
    };
    let data = ev.get("event_data");
    if data.and_then(|d| d.get("ignore_errors")).and_then(Value::as_bool) == Some(true) {
        return None;
    }
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
    }
    let task = text(ev.get("task")).or_else(|| text(data.and_then(|d| d.get("task")))).unwrap_or("?");
    let host = text(ev.get("host_name")).or_else(|| text(data.and_then(|d| d.get("host")))).unwrap_or("?");
    let msg = slipway_provider::task_failure_message(data.and_then(|d| d.get("res")));
    Some(format!("Task '{task}' {what} {host}: {msg}"))
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("").trim()
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use std::time::Duration;

    use super::*;
    use crate::AapOptions;

    #[test]
    fn failure_event_lines() {
        let ev = json!({"event": "runner_on_failed", "task": "create vnet", "host_name": "localhost",
            "event_data": {"task": "create vnet", "host": "localhost", "res": {"msg": "quota exceeded"}}});
        assert_eq!(failed_task_line(&ev).unwrap(), "Task 'create vnet' failed on localhost: quota exceeded");
        let ev = json!({"event": "runner_on_unreachable", "event_data": {"host": "h1", "task": "t", "res": {"msg": {"a": 1}}}});
        assert_eq!(failed_task_line(&ev).unwrap(), "Task 't' could not reach h1: {\"a\":1}");
        let ignored = json!({"event": "runner_on_failed", "event_data": {"ignore_errors": true, "res": {"msg": "x"}}});
        assert_eq!(failed_task_line(&ignored), None);
        assert_eq!(failed_task_line(&json!({"event": "runner_on_ok"})), None);
        assert_eq!(failed_task_line(&json!({"event": "runner_on_failed"})).unwrap(), "Task '?' failed on ?: ");
    }

    #[test]
    fn bounded_map_evicts_oldest() {
        let mut b = Bounded::new(2);
        b.insert(1, "a");
        b.insert(2, "b");
        b.insert(1, "a2");
        b.insert(3, "c");
        assert_eq!(b.get(&1), None);
        assert_eq!(b.get(&2), Some(&"b"));
        assert_eq!(b.get(&3), Some(&"c"));
        b.remove(&2);
        b.insert(4, "d");
        assert_eq!(b.get(&3), Some(&"c"));
        assert_eq!(b.get(&4), Some(&"d"));
    }

    #[test]
    fn missing_jobs_become_not_found_after_the_grace() {
        let p = AapProvider::new(AapOptions {
            base_url: "http://127.0.0.1:1".into(),
            purge_grace: Duration::ZERO,
            ..Default::default()
        })
        .unwrap();
        assert!(matches!(p.missing(JobKind::Job, 1), ProviderError::NotFound(_)));
        let p = AapProvider::new(AapOptions {
            base_url: "http://127.0.0.1:1".into(),
            purge_grace: Duration::from_secs(3600),
            ..Default::default()
        })
        .unwrap();
        let first = p.missing(JobKind::WorkflowJob, 2);
        assert!(matches!(&first, ProviderError::Transient(m) if m.contains("workflow job 2")), "{first:?}");
        // Stable text: the engine writes a changed message only.
        assert_eq!(p.missing(JobKind::WorkflowJob, 2), first);
    }

    /// The grace runs on tokio's clock: paused, it passes only when the test says so.
    #[tokio::test(start_paused = true)]
    async fn the_purge_grace_runs_on_tokios_clock() {
        let grace = Duration::from_secs(300);
        let p = AapProvider::new(AapOptions {
            base_url: "http://127.0.0.1:1".into(),
            purge_grace: grace,
            ..Default::default()
        })
        .unwrap();
        assert!(matches!(p.missing(JobKind::Job, 3), ProviderError::Transient(_)));
        tokio::time::advance(grace - Duration::from_millis(1)).await;
        assert!(matches!(p.missing(JobKind::Job, 3), ProviderError::Transient(_)));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(matches!(p.missing(JobKind::Job, 3), ProviderError::NotFound(_)));
    }
}
