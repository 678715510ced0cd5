//! The conformance suite against SQLite, plus what only SQLite has: the file, its lock, the
//! migrations, the group-commit writer.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use slipway_domain::admission::Rejection;
use slipway_domain::resource::Schedule;
use slipway_store::conformance::{self, Harness, T0, at, ctx, put, seed, spec, vnet};
use slipway_store::sqlite::{SqliteOptions, SqliteStore, Synchronous};
use slipway_store::{ChangeRequest, ClaimRequest, EntryKind, Expect, Store, StoreError};
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
    Harness::new(Arc::new(store)).keep(dir)
}

slipway_store::conformance_suite!(make());

/// A second, independent connection: sees only what the store committed.
fn spy(dir: &TempDir) -> Connection {
    let conn = Connection::open(db_path(dir)).expect("spy connection");
    conn.busy_timeout(Duration::from_secs(5)).expect("busy timeout");
    conn
}

/// Changes whenever another connection commits a change to the file.
fn data_version(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA data_version", [], |row| row.get(0)).expect("data_version")
}

fn claim_req(owner: &str, now: slipway_domain::Timestamp) -> ClaimRequest {
    ClaimRequest { owner: owner.into(), now, lease_for: Duration::from_secs(30), intent_limit: 10, followup_limit: 10 }
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
    let mode: String = spy(&dir).query_row("PRAGMA journal_mode", [], |r| r.get(0)).expect("journal mode");
    assert_eq!(mode, "wal");
    assert!(dir.path().join("slipway.db.lock").exists());
}

#[tokio::test]
async fn a_change_that_alters_nothing_does_not_write() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir);
    let id = vnet("sub", "rg", "r1");
    put(&store, &id, spec(1), ctx(1, T0)).await;
    let spy = spy(&dir);
    let before = data_version(&spy);

    store.change(ChangeRequest::new(id.key(), at(1)), Box::new(|_| Ok(()))).await.expect("no-op");
    put(&store, &id, spec(1), ctx(2, at(2))).await; // an idempotent replay
    let err = store
        .change(
            ChangeRequest::new(id.key(), at(3)),
            Box::new(|s| {
                s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
                Err(Rejection::NotFound)
            }),
        )
        .await;
    assert_eq!(err, Err(StoreError::Rejected(Rejection::NotFound)));
    assert_eq!(data_version(&spy), before, "nothing reached the file");

    // The spy does notice a real write.
    store
        .change(
            ChangeRequest::new(id.key(), at(4)),
            Box::new(|s| {
                s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
                Ok(())
            }),
        )
        .await
        .expect("change");
    assert_ne!(data_version(&spy), before);
}

#[tokio::test]
async fn reopening_keeps_data_and_migrates_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let id = vnet("sub", "rg", "r1");
    let created = {
        let store = open(&dir);
        put(&store, &id, spec(1), ctx(1, T0)).await.1.resource.expect("created")
    };
    let store = open(&dir);
    assert_eq!(store.get_resource(&id.key()).await, Ok(Some(created)));
    let (count, max): (i64, i64) = spy(&dir)
        .query_row("SELECT COUNT(*), MAX(version) FROM schema_migrations", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("migrations");
    assert_eq!((count, max), (3, 3));
}

/// A database written by a Slipway that predates registry entries and references (schema
/// version 1) gets their tables when it is opened, and keeps what it had.
#[tokio::test]
async fn a_version_1_database_gets_the_entries_table() {
    let dir = tempfile::tempdir().expect("temp dir");
    let id = vnet("sub", "rg", "r1");
    let created = {
        let store = open(&dir);
        put(&store, &id, spec(1), ctx(1, T0)).await.1.resource.expect("created")
    };
    spy(&dir)
        .execute_batch(
            "DROP TABLE entries; DROP TABLE resource_references; DELETE FROM schema_migrations WHERE version > 1",
        )
        .expect("back to version 1");
    let store = open(&dir);
    assert_eq!(store.get_resource(&id.key()).await, Ok(Some(created)));
    let entry = store.put_entry(EntryKind::ApiToken, "t1", "", "{}", Expect::Absent, T0).await.expect("put");
    assert_eq!(store.get_entry(EntryKind::ApiToken, "t1").await, Ok(Some(entry)));
    let max: i64 = spy(&dir).query_row("SELECT MAX(version) FROM schema_migrations", [], |r| r.get(0)).expect("max");
    assert_eq!(max, 3);
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

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    drop(open(&dir));
    spy(&dir).execute("INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)", []).expect("bump version");
    let err = SqliteStore::open(SqliteOptions::new(db_path(&dir))).err().expect("refused");
    assert!(matches!(&err, StoreError::Internal(m) if m.contains("newer")), "{err:?}");
}

#[tokio::test]
async fn corrupt_rows_are_internal_errors_not_panics() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir);
    let id = vnet("sub", "rg", "r1");
    let other = vnet("sub", "rg", "r2");
    put(&store, &id, spec(1), ctx(1, T0)).await;
    put(&store, &other, spec(1), ctx(2, T0)).await;
    let spy = spy(&dir);
    spy.execute("UPDATE resources SET body = '{not json' WHERE key = ?1", [id.key().as_str()]).expect("corrupt");
    spy.execute("UPDATE operations SET body = '[]' WHERE id = ?1", [conformance::op_id(2).as_str()]).expect("corrupt");

    conformance::check_corrupt_rows_are_internal(&store, &id, &other).await;
    let internal = |r: &StoreError| matches!(r, StoreError::Internal(_));

    // A body that parses but belongs to another row is corrupt too.
    let foreign: String =
        spy.query_row("SELECT body FROM resources WHERE key = ?1", [other.key().as_str()], |r| r.get(0)).expect("body");
    spy.execute("UPDATE resources SET body = ?2 WHERE key = ?1", [id.key().as_str(), foreign.as_str()]).expect("swap");
    assert!(internal(&store.get_resource(&id.key()).await.expect_err("foreign body")));
    store.ping().await.expect("the store survives");
}

#[tokio::test]
async fn columns_follow_the_record() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir);
    let id = vnet("Sub-Cols", "RG-Cols", "R1");
    let key = seed(&store, &id, 1, Schedule { next_due: Some(at(5)), intent: true }).await;
    let spy = spy(&dir);
    type Cols = (String, String, String, Option<i64>, bool, Option<String>, Option<i64>, i64, i64, String);
    let cols = || -> Cols {
        spy.query_row(
            "SELECT subscription, resource_group, type_key, next_due, intent, lease_owner, lease_until,
                    lease_epoch, generation, body FROM resources WHERE key = ?1",
            [key.as_str()],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                ))
            },
        )
        .expect("row")
    };
    let c = cols();
    assert_eq!((c.0.as_str(), c.1.as_str(), c.2.as_str()), ("sub-cols", "rg-cols", "slipway.example/virtualnetworks"));
    assert_eq!((c.3, c.4, c.5, c.6, c.7, c.8), (Some(at(5).as_millis()), true, None, None, 0, 1));

    store.claim(&claim_req("engine-a", at(10))).await.expect("claim");
    let c = cols();
    assert_eq!(
        (c.3, c.4, c.5.as_deref(), c.6, c.7),
        (Some(at(5).as_millis()), false, Some("engine-a"), Some(at(30_010).as_millis()), 1)
    );
    let body: serde_json::Value = serde_json::from_str(&c.9).expect("json body");
    assert!(body.get("lease").is_none(), "the lease lives in columns only: {body}");

    // A client write that keeps the lease, then a release: the epoch survives both.
    store
        .change(
            ChangeRequest::new(key.clone(), at(20)),
            Box::new(|s| {
                s.resource.as_mut().ok_or(Rejection::NotFound)?.generation += 1;
                Ok(())
            }),
        )
        .await
        .expect("change");
    let c = cols();
    assert_eq!((c.5.as_deref(), c.7, c.8), (Some("engine-a"), 1, 2));
    store.release_leases("engine-a").await.expect("release");
    store
        .change(
            ChangeRequest::new(key.clone(), at(30)),
            Box::new(|s| {
                s.resource.as_mut().ok_or(Rejection::NotFound)?.generation += 1;
                Ok(())
            }),
        )
        .await
        .expect("change");
    let c = cols();
    assert_eq!((c.5, c.6, c.7, c.8), (None, None, 1, 3));
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

#[tokio::test]
async fn operation_ttl_is_configurable() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ttl = Duration::from_secs(3600);
    let store =
        SqliteStore::open(SqliteOptions { operation_ttl: ttl, ..SqliteOptions::new(db_path(&dir)) }).expect("open");
    assert_eq!(store.operation_ttl(), ttl);
    let harness = Harness::new(Arc::new(store)).with_operation_ttl(ttl).keep(dir);
    conformance::case_operation_ttl(&harness).await;
    conformance::case_operation_expiry_follows_last_write(&harness).await;
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
