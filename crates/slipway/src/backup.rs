//! `slipway backup`: an online copy of the embedded SQLite store that says when it was
//! taken, which `slipway restore` needs to ask the providers what ran since
//! (docs/operations.md#backup-and-restore). PostgreSQL is backed up with its own tools.

use slipway_store::PutEntry;
use std::path::Path;

use serde_json::json;
use slipway_domain::Timestamp;
use slipway_store::entries::{BACKUP_TAKEN, EntryKind, Expect};
use slipway_store::sqlite::{SqliteOptions, SqliteStore};
use slipway_store::{Store, StoreError};

use crate::plan::StorePlan;

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error(
        "`slipway backup` copies the embedded SQLite store; back up PostgreSQL with its own tools (pg_dump, or a \
         base backup with WAL archiving for point-in-time recovery) — docs/operations.md#backup-and-restore"
    )]
    Postgres,
}

/// Copies the configured store to `to` (a new file) while Slipway may be serving it. `now`
/// is read before the copy starts, so every job launched after the copy's snapshot is
/// younger than what the copy records.
pub async fn backup(plan: &StorePlan, to: &Path, now: Timestamp) -> Result<(), BackupError> {
    let StorePlan::Sqlite(options) = plan else { return Err(BackupError::Postgres) };
    let (db, dest) = (options.path.clone(), to.to_path_buf());
    tokio::task::spawn_blocking(move || slipway_store::sqlite::backup::backup(&db, &dest))
        .await
        .map_err(|e| StoreError::Internal(format!("backup task: {e}")))??;
    let copy = SqliteStore::open(SqliteOptions { path: to.to_path_buf(), ..options.clone() })?;
    let body = json!({ "takenAt": now.0 }).to_string();
    copy.put_entry(PutEntry {
        kind: EntryKind::Backup,
        id: BACKUP_TAKEN.to_string(),
        partition: String::new(),
        body: body.to_string(),
        expect: Expect::Any,
        now,
        activity: None,
    })
    .await?;
    drop(copy);
    // The copy's own process lock: a restore takes the lock of the database it replaces.
    let mut lock = to.as_os_str().to_owned();
    lock.push(".lock");
    let _ = std::fs::remove_file(lock);
    Ok(())
}
