//! Connections, pragmas and the embedded migrations.

use std::path::Path;
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use slipway_domain::Timestamp;

use super::{Synchronous, db_error};
use crate::StoreError;

/// Only reached when something outside this process touches the file (an operator's
/// `sqlite3` shell, a backup): long enough to ride that out, short enough to surface.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Applied in order, each exactly once, recorded in `schema_migrations`. Append only: a
/// migration that has shipped is never edited.
const MIGRATIONS: &[&str] = &[
    // 1. Everything. Resource and operation bodies are the serde JSON of the domain types;
    // the other columns exist to be indexed and are always derived from the body's record
    // (lease and schedule live only in columns: claims change them without a body rewrite).
    "
    CREATE TABLE resources (
        key            TEXT PRIMARY KEY NOT NULL,
        subscription   TEXT NOT NULL,
        resource_group TEXT NOT NULL,
        type_key       TEXT NOT NULL,
        next_due       INTEGER,
        intent         INTEGER NOT NULL DEFAULT 0,
        lease_owner    TEXT,
        lease_until    INTEGER,
        lease_epoch    INTEGER NOT NULL DEFAULT 0,
        generation     INTEGER NOT NULL,
        body           TEXT NOT NULL
    );
    CREATE INDEX resources_by_group ON resources (type_key, subscription, resource_group, key);
    CREATE INDEX resources_by_subscription ON resources (type_key, subscription, key);
    CREATE INDEX resources_due ON resources (intent, next_due) WHERE next_due IS NOT NULL;
    CREATE INDEX resources_by_lease_owner ON resources (lease_owner) WHERE lease_owner IS NOT NULL;

    CREATE TABLE operations (
        subscription TEXT NOT NULL,
        id           TEXT NOT NULL,
        resource_key TEXT NOT NULL,
        status       TEXT NOT NULL,
        terminal     INTEGER NOT NULL,
        expires_at   INTEGER NOT NULL,
        body         TEXT NOT NULL,
        PRIMARY KEY (subscription, id)
    );
    CREATE INDEX operations_active ON operations (resource_key) WHERE terminal = 0;
    CREATE INDEX operations_expiry ON operations (expires_at);

    CREATE TABLE outbox (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        subscription    TEXT NOT NULL,
        operation_id    TEXT NOT NULL,
        uri             TEXT NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        created_at      INTEGER NOT NULL,
        state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'dead')),
        last_error      TEXT
    );
    CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE state = 'pending';
    ",
    // 2. Registry entries (`crate::entries`): small platform records that are not resources,
    // by kind tag and exact id; `partition` is the subscription they belong to ('' for
    // platform-wide ones); `version` is the optimistic-concurrency counter, 1 at insert.
    "
    CREATE TABLE entries (
        kind       TEXT NOT NULL,
        id         TEXT NOT NULL,
        partition  TEXT NOT NULL,
        body       TEXT NOT NULL,
        version    INTEGER NOT NULL CHECK (version >= 1),
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (kind, id)
    );
    CREATE INDEX entries_by_partition ON entries (kind, partition, id);
    ",
    // 3. References between resources (`slipway_domain::reference`): one row per referrer
    // and referenced resource, by lowercased key; written with the referrer's row.
    "
    CREATE TABLE resource_references (
        to_key   TEXT NOT NULL,
        from_key TEXT NOT NULL,
        PRIMARY KEY (to_key, from_key)
    );
    CREATE INDEX resource_references_by_referrer ON resource_references (from_key);
    ",
    // 4. When a resource can next be claimed: a resource held under a lease and not asked
    // for by a client is nobody else's before its lease runs out, whatever its `next_due`
    // (which stays at the admission time while a job runs). Indexed, a claim reads only the
    // rows it may take; on `next_due` alone it stepped over every held resource, each
    // claim — most of the writer's time with ten thousand operations in flight.
    "
    ALTER TABLE resources ADD COLUMN claimable_at INTEGER GENERATED ALWAYS AS (
        CASE WHEN intent = 0 AND lease_owner IS NOT NULL AND lease_until > next_due
             THEN lease_until ELSE next_due END
    ) VIRTUAL;
    CREATE INDEX resources_claimable ON resources (intent, claimable_at) WHERE next_due IS NOT NULL;
    DROP INDEX resources_due;
    ",
    // 5. The event feed (`slipway_domain::event`): every change's events, written in its
    // transaction, numbered per subscription by `event_cursors.last_seq` so a subscription's
    // positions are dense and follow commit order; pruned once `expires_at` passed.
    "
    CREATE TABLE event_cursors (
        subscription TEXT PRIMARY KEY NOT NULL,
        last_seq     INTEGER NOT NULL
    );
    CREATE TABLE events (
        subscription TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        resource_key TEXT NOT NULL,
        kind         TEXT NOT NULL,
        at           INTEGER NOT NULL,
        expires_at   INTEGER NOT NULL,
        body         TEXT NOT NULL,
        PRIMARY KEY (subscription, seq)
    ) WITHOUT ROWID;
    CREATE INDEX events_expiry ON events (expires_at);
    ",
    // 6. The drift lane (`Schedule::drift_due`): when a resource's next drift check is due.
    // Claimed only while nothing else is due for it, after the other two lanes.
    "
    ALTER TABLE resources ADD COLUMN drift_due INTEGER;
    CREATE INDEX resources_drift_due ON resources (drift_due) WHERE drift_due IS NOT NULL;
    ",
    // 7. Quota usage (`crate::usage`): per subscription, meter and resource group, the sum of
    // what the stored resources consume, moved by every change in its transaction.
    "
    CREATE TABLE usage (
        subscription   TEXT NOT NULL,
        meter          TEXT NOT NULL,
        resource_group TEXT NOT NULL,
        value          INTEGER NOT NULL,
        PRIMARY KEY (subscription, meter, resource_group)
    ) WITHOUT ROWID;
    ",
    // 8. The activity log (`crate::activity`): one row per request that changed something or
    // was refused, newest first by position; the platform's own entries have subscription ''.
    // Read by time too (an export tails it, `activity_by_time`); pruned once `expires_at`
    // passed.
    "
    CREATE TABLE activity (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        subscription   TEXT NOT NULL,
        at             INTEGER NOT NULL,
        target_key     TEXT NOT NULL,
        resource_group TEXT NOT NULL,
        correlation_id TEXT NOT NULL,
        caller         TEXT NOT NULL,
        status         TEXT NOT NULL,
        expires_at     INTEGER NOT NULL,
        body           TEXT NOT NULL
    );
    CREATE INDEX activity_by_subscription ON activity (subscription, id);
    CREATE INDEX activity_expiry ON activity (expires_at);
    CREATE INDEX activity_by_time ON activity (at);
    ",
];

/// The one read-write connection, migrated and ready for the writer thread.
/// The database file is Slipway's alone: created `0600` (SQLite gives its `-wal` and `-shm`
/// files the database's mode), and an existing one open to others is closed down to it.
fn make_private(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::metadata(path) {
        Ok(meta) if meta.permissions().mode() & 0o077 != 0 => {
            tracing::warn!(path = %path.display(), mode = format!("{:o}", meta.permissions().mode() & 0o777), "database file was readable by others: now 0600");
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|e| cannot_open(path, e))
        }
        Ok(_) => Ok(()),
        Err(_) => std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map(drop)
            .map_err(|e| cannot_open(path, e)),
    }
}

pub(super) fn open_writer(path: &Path, synchronous: Synchronous) -> Result<Connection, StoreError> {
    make_private(path)?;
    let mut conn = Connection::open(path).map_err(|e| cannot_open(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(db_error)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)).map_err(db_error)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Internal(format!("{}: cannot switch to WAL (journal_mode is {mode})", path.display())));
    }
    conn.pragma_update(None, "synchronous", synchronous.as_str()).map_err(db_error)?;
    conn.pragma_update(None, "foreign_keys", "ON").map_err(db_error)?;
    // Checkpoints run on their own thread (`checkpointer`), never inside a commit.
    conn.pragma_update(None, "wal_autocheckpoint", 0).map_err(db_error)?;
    // Every statement the writer runs stays prepared.
    conn.set_prepared_statement_cache_capacity(64);
    migrate(&mut conn, path)?;
    Ok(conn)
}

/// A connection that only checkpoints the WAL.
pub(super) fn open_checkpointer(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(|e| cannot_open(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(db_error)?;
    Ok(conn)
}

pub(super) fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| cannot_open(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(db_error)?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

fn cannot_open(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("cannot open database {}: {e}", path.display()))
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_error)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    INTEGER PRIMARY KEY,
            applied_at INTEGER NOT NULL
        )",
    )
    .map_err(db_error)?;
    let current: i64 = tx
        .query_row("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", [], |row| row.get(0))
        .map_err(db_error)?;
    let known = MIGRATIONS.len() as i64;
    if current > known {
        // Running an older binary on a newer schema could silently drop what it does not know.
        return Err(StoreError::Internal(format!(
            "database {} has schema version {current}, newer than this Slipway understands ({known})",
            path.display()
        )));
    }
    let applied_at = Timestamp::from_system(SystemTime::now()).as_millis();
    let done = usize::try_from(current)
        .map_err(|_| StoreError::Internal(format!("database {}: bad schema version {current}", path.display())))?;
    for (version, sql) in (1_i64..).zip(MIGRATIONS).skip(done) {
        tx.execute_batch(sql).map_err(|e| StoreError::Internal(format!("migration {version} failed: {e}")))?;
        tx.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)", (version, applied_at))
            .map_err(db_error)?;
        tracing::info!(version, "applied SQLite migration");
    }
    tx.commit().map_err(db_error)
}
