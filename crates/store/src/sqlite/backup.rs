//! Backing up and restoring the SQLite database file (docs/operations.md#backup-and-restore).
//!
//! A backup reads the database while a Slipway may be serving it: SQLite's own read
//! transaction gives one consistent snapshot (`VACUUM INTO`, which also leaves the copy
//! compacted and without a WAL), so it does not take the store's process lock. A restore
//! replaces the file only while no Slipway holds that lock, and keeps the file it replaced.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use slipway_domain::Timestamp;

use super::{db_error, lock_exclusive, schema};
use crate::StoreError;

/// Writes a consistent copy of the database at `db` to `dest`, which must not exist.
pub fn backup(db: &Path, dest: &Path) -> Result<(), StoreError> {
    if !db.is_file() {
        return Err(StoreError::Internal(format!("no database at {}", db.display())));
    }
    if dest.exists() {
        return Err(StoreError::Internal(format!("{} exists: a backup never overwrites a file", dest.display())));
    }
    let conn = schema::open_reader(db)?;
    let target = dest.to_str().ok_or_else(|| StoreError::Internal(format!("{} is not UTF-8", dest.display())))?;
    conn.execute("VACUUM INTO ?1", [target])
        .map_err(|e| StoreError::Internal(format!("backing up {} to {}: {e}", db.display(), dest.display())))?;
    Ok(())
}

/// Puts the database file `staged` (a backup, already prepared) in the place of `db`, while
/// no Slipway holds `db`. The file it replaces — its WAL checkpointed into it first — is
/// kept beside it as `<db>.replaced-<ms>`; that path is returned when there was one.
pub fn swap_in(db: &Path, staged: &Path, now: Timestamp) -> Result<Option<PathBuf>, StoreError> {
    let _lock = lock_exclusive(db)?;
    let kept = if db.exists() {
        let conn = Connection::open(db).map_err(db_error)?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(db_error)?;
        drop(conn);
        let kept = with_suffix(db, &format!(".replaced-{}", now.as_millis()));
        rename(db, &kept)?;
        Some(kept)
    } else {
        None
    };
    // A WAL left beside the new file would be replayed into it.
    for leftover in [with_suffix(db, "-wal"), with_suffix(db, "-shm")] {
        remove_if_present(&leftover)?;
    }
    rename(staged, db)?;
    for leftover in [with_suffix(staged, "-wal"), with_suffix(staged, "-shm"), with_suffix(staged, ".lock")] {
        remove_if_present(&leftover)?;
    }
    Ok(kept)
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

fn rename(from: &Path, to: &Path) -> Result<(), StoreError> {
    std::fs::rename(from, to)
        .map_err(|e| StoreError::Internal(format!("cannot move {} to {}: {e}", from.display(), to.display())))
}

fn remove_if_present(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::Internal(format!("cannot remove {}: {e}", path.display()))),
    }
}
