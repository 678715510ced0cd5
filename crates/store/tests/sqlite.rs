//! The conformance suite against SQLite, plus what only SQLite has: the file, its lock, the
//! group-commit writer. The suite reaches behind the store through [`SqliteHooks`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::Connection;
use slipway_domain::ids::{OperationId, ResourceKey};
use slipway_store::conformance::{self, EngineHooks, Harness, Opened, RawResourceRow, T0, ctx, put, spec, vnet};
use slipway_store::sqlite::{SqliteOptions, SqliteStore, Synchronous};
use slipway_store::{ChangeRequest, Store, StoreError};
use tempfile::TempDir;

fn db_path(dir: &TempDir) -> PathBuf {
    dir.path().join("slipway.db")
}

fn open(dir: &TempDir) -> SqliteStore {
    SqliteStore::open(SqliteOptions::new(db_path(dir))).expect("open")
}

async fn make() -> Harness {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir);
    let hooks = SqliteHooks { path: db_path(&dir), spy: Mutex::default() };
    Harness::new(Arc::new(store)).with_hooks(hooks).keep(dir)
}

slipway_store::conformance_suite!(make());

/// A second, independent connection: sees only what the store committed.
fn spy(path: &Path) -> Connection {
    let conn = Connection::open(path).expect("spy connection");
    conn.busy_timeout(Duration::from_secs(5)).expect("busy timeout");
    conn
}

/// The conformance hooks: SQL through one connection of their own, opened at first use.
struct SqliteHooks {
    path: PathBuf,
    spy: Mutex<Option<Connection>>,
}

impl SqliteHooks {
    fn with<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> T {
        let mut conn = self.spy.lock().expect("spy");
        f(conn.get_or_insert_with(|| spy(&self.path))).expect("the hooks' SQL")
    }

    fn execute(&self, sql: &str, params: impl rusqlite::Params) {
        self.with(|c| c.execute(sql, params));
    }
}

#[async_trait]
impl EngineHooks for SqliteHooks {
    async fn open(&self, operation_ttl: Duration) -> Result<Opened, StoreError> {
        let store = SqliteStore::open(SqliteOptions { operation_ttl, ..SqliteOptions::new(&self.path) })?;
        Ok(Opened { operation_ttl: store.operation_ttl(), store: Arc::new(store) })
    }

    /// Changes whenever another connection commits a change to the file.
    async fn write_mark(&self) -> Vec<String> {
        let version: i64 = self.with(|c| c.query_row("PRAGMA data_version", [], |row| row.get(0)));
        vec![version.to_string()]
    }

    async fn migrations(&self) -> Vec<i64> {
        self.with(|c| {
            c.prepare("SELECT version FROM schema_migrations ORDER BY version")?
                .query_map([], |row| row.get(0))?
                .collect()
        })
    }

    async fn back_to_version_1(&self) {
        self.with(|c| {
            c.execute_batch(
                "DROP TABLE entries; DROP TABLE resource_references; DROP TABLE events; DROP TABLE event_cursors;
                 DROP TABLE usage; DROP TABLE activity;
                 DROP INDEX resources_claimable; ALTER TABLE resources DROP COLUMN claimable_at;
                 DROP INDEX resources_drift_due; ALTER TABLE resources DROP COLUMN drift_due;
                 CREATE INDEX resources_due ON resources (intent, next_due) WHERE next_due IS NOT NULL;
                 DELETE FROM schema_migrations WHERE version > 1",
            )
        });
    }

    async fn record_migration(&self, version: i64) {
        self.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?1, 0)", [version]);
    }

    async fn resource_row(&self, key: &ResourceKey) -> RawResourceRow {
        self.with(|c| {
            c.query_row(
                "SELECT subscription, resource_group, type_key, next_due, intent, lease_owner, lease_until,
                        lease_epoch, generation, body FROM resources WHERE key = ?1",
                [key.as_str()],
                |r| {
                    Ok(RawResourceRow {
                        subscription: r.get(0)?,
                        resource_group: r.get(1)?,
                        type_key: r.get(2)?,
                        next_due: r.get(3)?,
                        intent: r.get(4)?,
                        lease_owner: r.get(5)?,
                        lease_until: r.get(6)?,
                        lease_epoch: r.get(7)?,
                        generation: r.get(8)?,
                        body: r.get(9)?,
                    })
                },
            )
        })
    }

    async fn set_resource_body(&self, key: &ResourceKey, body: &str) {
        self.execute("UPDATE resources SET body = ?2 WHERE key = ?1", [key.as_str(), body]);
    }

    async fn set_operation_body(&self, id: &OperationId, body: &str) {
        self.execute("UPDATE operations SET body = ?2 WHERE id = ?1", [id.as_str(), body]);
    }

    async fn set_lease(&self, key: &ResourceKey, owner: Option<&str>, until: Option<i64>, epoch: i64) {
        self.execute(
            "UPDATE resources SET lease_owner = ?2, lease_until = ?3, lease_epoch = ?4 WHERE key = ?1",
            (key.as_str(), owner, until, epoch),
        );
    }

    async fn insert_notification(&self, operation_id: &str) {
        self.execute(
            "INSERT INTO outbox (subscription, operation_id, uri, next_attempt_at, created_at) VALUES ('s', ?1, 'u', 0, 0)",
            [operation_id],
        );
    }
}

#[tokio::test]
async fn options_default_to_full_sync_and_a_week_of_ttl() {
    let options = SqliteOptions::new("x.db");
    assert_eq!(options.synchronous, Synchronous::Full);
    assert_eq!(options.operation_ttl, Duration::from_secs(7 * 24 * 3600));
    assert_eq!((options.readers, options.max_batch), (4, 256));

    let dir = tempfile::tempdir().expect("temp dir");
    let store =
        SqliteStore::open(SqliteOptions { synchronous: Synchronous::Normal, ..SqliteOptions::new(db_path(&dir)) })
            .expect("open");
    assert_eq!(store.synchronous(), Synchronous::Normal);
    assert_eq!(store.synchronous().to_string(), "NORMAL");
    assert_eq!("normal".parse(), Ok(Synchronous::Normal));
    assert_eq!("FULL".parse(), Ok(Synchronous::Full));
    assert!("off".parse::<Synchronous>().is_err());
    let mode: String = spy(&db_path(&dir)).query_row("PRAGMA journal_mode", [], |r| r.get(0)).expect("journal mode");
    assert_eq!(mode, "wal");
    assert!(dir.path().join("slipway.db.lock").exists());
}

#[tokio::test]
async fn a_second_open_is_refused_while_the_first_lives() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = open(&dir);
    let err = SqliteStore::open(SqliteOptions::new(db_path(&dir))).err().expect("refused");
    let StoreError::Unavailable(message) = err else {
        panic!("expected Unavailable, got {err:?}");
    };
    assert!(message.contains("is in use by another Slipway process"), "{message}");
    drop(first);
    open(&dir).ping().await.expect("free again once the first is dropped");
}

/// Batches cut short by `max_batch` isolate their requests as the default ones do (the
/// suite runs the case with the default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_batches_isolate_each_request() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(SqliteOptions { max_batch: 3, ..SqliteOptions::new(db_path(&dir)) }).expect("open");
    let harness = Harness::new(Arc::new(store)).keep(dir);
    conformance::case_a_failing_change_undoes_only_its_own_writes(&harness).await;
}

/// A guardrail setting written while a change that read the settings is deciding waits for
/// it (the writer thread runs one request at a time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setting_write_waits_for_the_change_that_read_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn slipway_store::Store> = Arc::new(open(&dir));
    conformance::check_a_setting_write_waits_for_the_change_that_read_it(&store, &store).await;
}

#[test]
fn open_does_not_need_a_runtime_and_reports_bad_paths() {
    let err = SqliteStore::open(SqliteOptions::new(Path::new("/nonexistent/dir/slipway.db"))).err().expect("bad path");
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    let dir = tempfile::tempdir().expect("temp dir");
    drop(open(&dir));
}

/// A request that fails after it has already written (here: a duplicate operation id on the
/// second insert) must take back its first writes, and only its own.
#[tokio::test]
async fn a_request_failing_midway_undoes_its_partial_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir);
    let neighbour = vnet("sub", "rg", "neighbour");
    let id = vnet("sub", "rg", "r1");
    let target = id.clone();
    let c = ctx(7, T0);
    let (good, bad) = tokio::join!(
        put(&store, &neighbour, spec(1), ctx(1, T0)),
        store.change(
            ChangeRequest::new(id.key(), T0),
            Box::new(move |s| {
                slipway_domain::admission::admit_put(s, &target, conformance::KIND, spec(1), &c)?;
                let twin = s.operations[0].clone();
                s.operations.push(twin);
                Ok(())
            }),
        ),
    );
    assert!(matches!(bad, Err(StoreError::Internal(_))), "{bad:?}");
    assert_eq!(store.get_resource(&id.key()).await, Ok(None), "the resource insert was undone");
    assert_eq!(store.get_operation(&"sub".into(), &conformance::op_id(7), T0).await, Ok(None));
    assert_eq!(store.get_resource(&neighbour.key()).await, Ok(good.1.resource));
}

/// The database, its WAL and its lock file are readable by Slipway's user only, and a file
/// left open to others is closed down.
#[test]
fn database_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let db = db_path(&dir);
    for suffix in ["", "-wal", ".lock"] {
        let path = std::path::PathBuf::from(format!("{}{suffix}", db.display()));
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
    drop(store);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(open(&dir));
    assert_eq!(mode(&db), 0o600);
}
