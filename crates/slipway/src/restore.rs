//! `slipway restore`: a store put back from a backup, then reconciled with what the
//! providers ran since, before anything serves it (docs/operations.md#backup-and-restore).
//!
//! The backup is older than the providers' state. Every job a provider still holds that
//! carries a Slipway key is listed ([`Provider::jobs_since`], from the backup's time less a
//! margin for the clocks) and each restored resource is told about the jobs its history
//! lacks (`slipway_domain::reconcile::restore`): a job its operation in flight launched
//! after the backup is adopted — looked up by key and followed, never launched again — and
//! jobs of operations the backup does not know are reported. Jobs of resources the backup
//! does not have at all are reported as possible orphans.
//!
//! Until the reconciliation has finished, the store carries a `restore-pending` entry and
//! `serve` refuses it; `slipway restore --in-place` finishes (or starts, after a PostgreSQL
//! restore done with its own tools) the reconciliation.

use slipway_store::PutEntry;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use slipway_domain::reconcile::restore::{self as domain, Finding};
use slipway_domain::{ArmId, ResourceKey, Timestamp, TypeKey, TypePolicy};
use slipway_engine::Providers;
use slipway_store::entries::{BACKUP_TAKEN, EntryKind, Expect, RESTORE_PENDING};
use slipway_store::sqlite::{SqliteOptions, SqliteStore};
use slipway_store::{ChangeRequest, Store, StoreError, change_with};

/// How far a provider's clock may be behind ours: its jobs created that long before the
/// backup's time are listed too (a job the history holds is passed over anyway).
pub const CLOCK_MARGIN: Duration = Duration::from_secs(600);

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("provider '{provider}' could not list its jobs: {message}")]
    Provider { provider: String, message: String },
    #[error("{0}")]
    Refused(String),
}

/// What the reconciliation found, one line per job, by what it meant.
#[derive(Debug, Default)]
pub struct Report {
    /// The bound the providers were asked from; `None`: every job they hold.
    pub since: Option<Timestamp>,
    pub listed: usize,
    pub adopted: Vec<String>,
    pub superseded: Vec<String>,
    pub deleted_after_backup: Vec<String>,
    pub changed_after_backup: Vec<String>,
    pub orphans: Vec<String>,
}

impl Report {
    /// The report as text: a summary line, then a line per job that needs a look.
    pub fn lines(&self) -> Vec<String> {
        let since = self.since.map_or("ever".to_string(), |t| t.to_rfc3339());
        let mut out = vec![format!(
            "restore: {} job(s) with Slipway keys listed since {since}: {} adopted, {} superseded, {} deletes and {} \
             other changes the backup does not know, {} possible orphan(s)",
            self.listed,
            self.adopted.len(),
            self.superseded.len(),
            self.deleted_after_backup.len(),
            self.changed_after_backup.len(),
            self.orphans.len()
        )];
        let groups = [
            ("adopted (launched after the backup; followed, not launched again)", &self.adopted),
            ("superseded (an earlier job of an operation in flight)", &self.superseded),
            ("deleted after the backup (the store still shows the resource)", &self.deleted_after_backup),
            ("changed after the backup (the store shows the resource as it was)", &self.changed_after_backup),
            ("possible orphan (a resource the backup does not have)", &self.orphans),
        ];
        for (what, lines) in groups {
            out.extend(lines.iter().map(|l| format!("{what}: {l}")));
        }
        out
    }
}

/// Where a restore starts from.
pub enum Source {
    /// A backup file of the embedded SQLite store, put in place of the configured database.
    SqliteFile(PathBuf),
    /// The configured store as it is: restored with the database's own tools (PostgreSQL's
    /// `pg_restore`, PITR), or a restore whose reconciliation did not finish.
    InPlace { since: Option<Timestamp> },
}

/// Restores per `source` into the store `open` opens, reconciles it with `providers`, and
/// clears the pending mark. `sqlite`: the configured SQLite options, when that is the store.
pub async fn restore<F, Fut>(
    source: Source,
    sqlite: Option<&SqliteOptions>,
    open: F,
    providers: &Providers,
    policies: &HashMap<TypeKey, TypePolicy>,
    now: Timestamp,
) -> Result<(Report, Option<PathBuf>), RestoreError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<Arc<dyn Store>, StoreError>>,
{
    let (kept, since_hint) = match source {
        Source::SqliteFile(from) => {
            let options = sqlite.ok_or_else(|| {
                RestoreError::Refused(
                    "restoring from a file is for the embedded SQLite store; restore PostgreSQL with its own tools, \
                     then run `slipway restore --in-place`"
                        .into(),
                )
            })?;
            // The bound is in the copy's pending mark.
            (put_back(&from, options, now).await?, None)
        }
        Source::InPlace { since } => (None, since),
    };
    let store = open().await?;
    let since = pending_since(store.as_ref(), since_hint, now).await?;
    let report = reconcile(store.as_ref(), providers, policies, since, now).await?;
    store.delete_entry(EntryKind::Backup, RESTORE_PENDING, Expect::Any, None).await?;
    Ok((report, kept))
}

/// Copies the backup beside the database, marks the copy pending with the backup's time
/// less the clock margin (migrating it if it is of an older schema), and swaps it in; the
/// file it replaced.
async fn put_back(from: &Path, options: &SqliteOptions, now: Timestamp) -> Result<Option<PathBuf>, RestoreError> {
    let mut staged_name = options.path.clone().into_os_string();
    staged_name.push(".restoring");
    let staged = PathBuf::from(staged_name);
    let _ = std::fs::remove_file(&staged);
    std::fs::copy(from, &staged)
        .map_err(|e| RestoreError::Refused(format!("cannot copy {} to {}: {e}", from.display(), staged.display())))?;
    let copy = SqliteStore::open(SqliteOptions { path: staged.clone(), ..options.clone() })?;
    let taken = taken_at(&copy).await?;
    if taken.is_none() {
        tracing::warn!(backup = %from.display(), "the backup does not say when it was taken: every job the providers hold is listed");
    }
    let since = taken.map(|t| t.sub(CLOCK_MARGIN));
    mark_pending(&copy, since, now).await?;
    drop(copy);
    let options = options.clone();
    let kept = tokio::task::spawn_blocking(move || slipway_store::sqlite::backup::swap_in(&options.path, &staged, now))
        .await
        .map_err(|e| RestoreError::Refused(format!("swapping the database in: {e}")))??;
    Ok(kept)
}

async fn taken_at(store: &dyn Store) -> Result<Option<Timestamp>, StoreError> {
    let entry = store.get_entry(EntryKind::Backup, BACKUP_TAKEN).await?;
    Ok(entry
        .and_then(|e| serde_json::from_str::<serde_json::Value>(&e.body).ok())
        .and_then(|b| b["takenAt"].as_i64())
        .map(Timestamp))
}

async fn mark_pending(store: &dyn Store, since: Option<Timestamp>, now: Timestamp) -> Result<(), StoreError> {
    let body = json!({ "since": since.map(|t| t.0) }).to_string();
    store
        .put_entry(PutEntry {
            kind: EntryKind::Backup,
            id: RESTORE_PENDING.to_string(),
            partition: String::new(),
            body: body.to_string(),
            expect: Expect::Any,
            now,
            activity: None,
        })
        .await
        .map(|_| ())
}

/// The bound of a restore already marked pending, else `asked` (or the backup's own time,
/// for a store restored in place from a `slipway backup` file), recorded as pending.
async fn pending_since(
    store: &dyn Store,
    asked: Option<Timestamp>,
    now: Timestamp,
) -> Result<Option<Timestamp>, StoreError> {
    if let Some(entry) = store.get_entry(EntryKind::Backup, RESTORE_PENDING).await? {
        let body: serde_json::Value = serde_json::from_str(&entry.body).unwrap_or_default();
        return Ok(asked.or(body["since"].as_i64().map(Timestamp)));
    }
    let since = match asked {
        Some(t) => Some(t),
        None => taken_at(store).await?.map(|t| t.sub(CLOCK_MARGIN)),
    };
    mark_pending(store, since, now).await?;
    Ok(since)
}

/// Lists every provider's keyed jobs since `since` and tells each restored resource about
/// its own (see the module doc).
pub async fn reconcile(
    store: &dyn Store,
    providers: &Providers,
    policies: &HashMap<TypeKey, TypePolicy>,
    since: Option<Timestamp>,
    now: Timestamp,
) -> Result<Report, RestoreError> {
    let mut report = Report { since, ..Report::default() };
    let mut by_resource: BTreeMap<ResourceKey, (String, Vec<slipway_provider::ListedJob>)> = BTreeMap::new();
    let mut names: Vec<_> = providers.keys().collect();
    names.sort();
    for name in names {
        let listed = providers[name]
            .jobs_since(since)
            .await
            .map_err(|e| RestoreError::Provider { provider: name.to_string(), message: e.to_string() })?;
        report.listed += listed.len();
        for job in listed {
            match ArmId::read_stored(&job.resource_id) {
                Some(id) => {
                    by_resource.entry(id.key()).or_insert_with(|| (job.resource_id.clone(), Vec::new())).1.push(job)
                }
                None => report.orphans.push(describe(&job.resource_id, &job)),
            }
        }
    }
    for (key, (id, jobs)) in by_resource {
        let Some(record) = store.get_resource(&key).await? else {
            report.orphans.extend(jobs.iter().map(|j| describe(&id, j)));
            continue;
        };
        let policy = policies.get(&record.id.type_key()).cloned().unwrap_or_default();
        let listed: Vec<domain::ListedJob> = jobs
            .iter()
            .map(|j| domain::ListedJob {
                key: j.key.clone(),
                action: j.action.clone(),
                job_id: j.job.handle.job_id.clone(),
                state: j.job.state,
            })
            .collect();
        let (findings, _) = change_with(store, ChangeRequest::new(key, now), move |snap| {
            Ok(domain::reconcile_restored(snap, &policy, &listed, now))
        })
        .await?;
        for finding in findings {
            let (list, line) = match &finding {
                Finding::Adopted { key, job_id } => (&mut report.adopted, format!("{id} job {job_id} (key {key})")),
                Finding::Superseded { key, job_id } => {
                    (&mut report.superseded, format!("{id} job {job_id} (key {key})"))
                }
                Finding::DeletedAfterBackup { key, job_id, state } => {
                    (&mut report.deleted_after_backup, format!("{id} job {job_id} (key {key}, {})", state.as_str()))
                }
                Finding::ChangedAfterBackup { key, job_id, action, state } => (
                    &mut report.changed_after_backup,
                    format!("{id} {action} job {job_id} (key {key}, {})", state.as_str()),
                ),
            };
            tracing::warn!(resource = %id, "{}", line);
            list.push(line);
        }
    }
    for line in &report.orphans {
        tracing::warn!("possible orphan after a restore: {line}");
    }
    Ok(report)
}

fn describe(id: &str, job: &slipway_provider::ListedJob) -> String {
    format!("{id} {} job {} (key {}, {})", job.action, job.job.handle.job_id, job.key, job.job.state.as_str())
}
