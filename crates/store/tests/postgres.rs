//! The conformance suite against a real PostgreSQL, plus what only PostgreSQL has: several
//! replicas (stores with their own pools) on one database, migrations under a lock, a server
//! that goes away and comes back.
//!
//! The server comes from `SLIPWAY_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); `scripts/test.sh` makes sure one answers. Every
//! test works in a schema of its own, dropped at the end, so tests run in parallel.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use slipway_domain::admission::{Admitted, Rejection};
use slipway_domain::ids::ResourceKey;
use slipway_domain::resource::Schedule;
use slipway_store::conformance::{self, Harness, T0, at, ctx, put, seed, spec, vnet};
use slipway_store::postgres::{PostgresOptions, PostgresStore};
use slipway_store::{ChangeRequest, ClaimRequest, EntryKind, Expect, Store, StoreError, change_with};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
mod pg;

use pg::{Schema, no_server, open, replicas, server_url, spy};

async fn make() -> Harness {
    let schema = Schema::fresh();
    let store = open(schema.options()).await;
    Harness::new(Arc::new(store)).keep(schema)
}

slipway_store::conformance_suite!(make());

fn claim_req(owner: &str, now: slipway_domain::Timestamp) -> ClaimRequest {
    ClaimRequest { owner: owner.into(), now, lease_for: Duration::from_secs(30), intent_limit: 10, followup_limit: 10 }
}

fn bump(s: &mut slipway_domain::resource::Snapshot) -> Result<(), Rejection> {
    s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Options, migrations, data

#[tokio::test]
async fn options_have_sensible_defaults_and_hide_the_password() {
    let options = PostgresOptions::new("postgres://slipway:hunter2@db.example:5433/slipway");
    assert_eq!(options.schema, None);
    assert_eq!(options.pool_size, 16);
    assert_eq!(options.statement_timeout, Duration::from_secs(5));
    assert_eq!(options.operation_ttl, Duration::from_secs(7 * 24 * 3600));
    assert_eq!(options.connect_timeout, Duration::from_secs(5));
    let shown = format!("{options:?}");
    assert!(!shown.contains("hunter2") && shown.contains("slipway:***@db.example:5433"), "{shown}");
}

#[tokio::test]
async fn bad_options_are_refused_before_connecting() {
    let bad_schema = PostgresOptions::new(server_url()).with_schema("Robert'); DROP TABLE students;--");
    let err = PostgresStore::connect(bad_schema).await.err().expect("refused");
    assert!(matches!(&err, StoreError::Internal(m) if m.contains("schema name")), "{err:?}");

    let tls =
        PostgresOptions::new("postgres://u:secret@127.0.0.1:1/x?sslmode=verify-full&sslrootcert=/nonexistent.pem");
    let err = PostgresStore::connect(tls).await.err().expect("refused");
    assert!(matches!(&err, StoreError::Internal(m) if m.contains("/nonexistent.pem: no such file")), "{err:?}");

    let err = PostgresStore::connect(PostgresOptions::new("postgres://u:secret@host:notaport/x")).await.err();
    let err = err.expect("refused");
    assert!(matches!(&err, StoreError::Internal(m) if !m.contains("secret")), "{err:?}");
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    // A port nobody listens on: bound, then released.
    let port = TcpListener::bind("127.0.0.1:0").await.expect("bind").local_addr().expect("addr").port();
    let options = PostgresOptions {
        connect_timeout: Duration::from_secs(2),
        ..PostgresOptions::new(format!("postgres://slipway:secret@127.0.0.1:{port}/slipway"))
    };
    let err = PostgresStore::connect(options).await.err().expect("nothing to connect to");
    let StoreError::Unavailable(message) = &err else {
        panic!("expected Unavailable, got {err:?}");
    };
    assert!(message.contains(&format!("127.0.0.1:{port}/slipway")), "names the server: {message}");
    assert!(!message.contains("secret"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_migrate_once() {
    let schema = Schema::fresh();
    let mut starting = JoinSet::new();
    for _ in 0..6 {
        let options = PostgresOptions { pool_size: 2, ..schema.options() };
        starting.spawn(async move { PostgresStore::connect(options).await });
    }
    let stores: Vec<PostgresStore> =
        starting.join_all().await.into_iter().map(|r| r.expect("every replica starts")).collect();
    let spy = spy().await;
    let row = spy
        .query_one(&format!("SELECT COUNT(*), MAX(version) FROM {}", schema.table("schema_migrations")), &[])
        .await
        .expect("migrations");
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (3, 3), "one row per version");
    for store in &stores {
        store.ping().await.expect("ping");
    }
}

#[tokio::test]
async fn reopening_keeps_data_and_migrates_once() {
    let schema = Schema::fresh();
    let id = vnet("sub", "rg", "r1");
    let created = {
        let store = open(schema.options()).await;
        put(&store, &id, spec(1), ctx(1, T0)).await.1.resource.expect("created")
    };
    let store = open(schema.options()).await;
    assert_eq!(store.get_resource(&id.key()).await, Ok(Some(created)));
    let row = spy()
        .await
        .query_one(&format!("SELECT COUNT(*), MAX(version) FROM {}", schema.table("schema_migrations")), &[])
        .await
        .expect("migrations");
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (3, 3));
}

/// A schema written by a Slipway that predates registry entries and references (schema
/// version 1) gets their tables when a store connects, and keeps what it had.
#[tokio::test]
async fn a_version_1_schema_gets_the_entries_table() {
    let schema = Schema::fresh();
    let id = vnet("sub", "rg", "r1");
    let created = {
        let store = open(schema.options()).await;
        put(&store, &id, spec(1), ctx(1, T0)).await.1.resource.expect("created")
    };
    let spy = spy().await;
    let downgrade = format!(
        "DROP TABLE {}; DROP TABLE {}; DELETE FROM {} WHERE version > 1",
        schema.table("entries"),
        schema.table("resource_references"),
        schema.table("schema_migrations")
    );
    spy.batch_execute(&downgrade).await.expect("back to version 1");
    let store = open(schema.options()).await;
    assert_eq!(store.get_resource(&id.key()).await, Ok(Some(created)));
    let entry = store.put_entry(EntryKind::ApiToken, "t1", "", "{}", Expect::Absent, T0).await.expect("put");
    assert_eq!(store.get_entry(EntryKind::ApiToken, "t1").await, Ok(Some(entry)));
    let row = spy
        .query_one(&format!("SELECT MAX(version) FROM {}", schema.table("schema_migrations")), &[])
        .await
        .expect("migrations");
    assert_eq!(row.get::<_, i64>(0), 3);
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let schema = Schema::fresh();
    drop(open(schema.options()).await);
    spy()
        .await
        .execute(
            &format!("INSERT INTO {} (version, applied_at) VALUES (99, 0)", schema.table("schema_migrations")),
            &[],
        )
        .await
        .expect("bump version");
    let err = PostgresStore::connect(schema.options()).await.err().expect("refused");
    assert!(matches!(&err, StoreError::Internal(m) if m.contains("newer")), "{err:?}");
}

#[tokio::test]
async fn operation_ttl_is_configurable() {
    let schema = Schema::fresh();
    let ttl = Duration::from_secs(3600);
    let store = open(PostgresOptions { operation_ttl: ttl, ..schema.options() }).await;
    assert_eq!(store.operation_ttl(), ttl);
    assert_eq!(store.schema(), Some(schema.name.as_str()));
    let harness = Harness::new(Arc::new(store)).with_operation_ttl(ttl).keep(schema);
    conformance::case_operation_ttl(&harness).await;
    conformance::case_operation_expiry_follows_last_write(&harness).await;
}

/// Row versions: `xmin` changes whenever a row is rewritten.
async fn versions(spy: &tokio_postgres::Client, schema: &Schema) -> Vec<String> {
    let sql = format!(
        "SELECT 'r' || key || xmin::text FROM {} UNION ALL SELECT 'o' || id || xmin::text FROM {}
         UNION ALL SELECT 'n' || id::text || xmin::text FROM {} ORDER BY 1",
        schema.table("resources"),
        schema.table("operations"),
        schema.table("outbox"),
    );
    spy.query(&sql, &[]).await.expect("versions").iter().map(|r| r.get(0)).collect()
}

#[tokio::test]
async fn a_change_that_alters_nothing_does_not_write() {
    let schema = Schema::fresh();
    let store = open(schema.options()).await;
    let id = vnet("sub", "rg", "r1");
    put(&store, &id, spec(1), ctx(1, T0)).await;
    let spy = spy().await;
    let before = versions(&spy, &schema).await;

    store.change(ChangeRequest::new(id.key(), at(1)), Box::new(|_| Ok(()))).await.expect("no-op");
    put(&store, &id, spec(1), ctx(2, at(2))).await; // an idempotent replay
    let err = store
        .change(
            ChangeRequest::new(id.key(), at(3)),
            Box::new(|s| {
                bump(s)?;
                Err(Rejection::NotFound)
            }),
        )
        .await;
    assert_eq!(err, Err(StoreError::Rejected(Rejection::NotFound)));
    assert_eq!(versions(&spy, &schema).await, before, "no row was rewritten");

    store.change(ChangeRequest::new(id.key(), at(4)), Box::new(bump)).await.expect("change");
    assert_ne!(versions(&spy, &schema).await, before, "the spy does notice a real write");
}

#[tokio::test]
async fn corrupt_rows_are_internal_errors_not_panics() {
    let schema = Schema::fresh();
    let store = open(schema.options()).await;
    let id = vnet("sub", "rg", "r1");
    let other = vnet("sub", "rg", "r2");
    put(&store, &id, spec(1), ctx(1, T0)).await;
    put(&store, &other, spec(1), ctx(2, T0)).await;
    let spy = spy().await;
    let resources = schema.table("resources");
    spy.execute(&format!("UPDATE {resources} SET body = '{{not json' WHERE key = $1"), &[&id.key().as_str()])
        .await
        .expect("corrupt");
    spy.execute(
        &format!("UPDATE {} SET body = '[]' WHERE id = $1", schema.table("operations")),
        &[&conformance::op_id(2).as_str()],
    )
    .await
    .expect("corrupt");
    spy.execute(&format!("UPDATE {resources} SET lease_epoch = -1, lease_owner = 'x', lease_until = 0"), &[])
        .await
        .expect("corrupt");

    conformance::check_corrupt_rows_are_internal(&store, &id, &other).await;
    let internal = |r: &StoreError| matches!(r, StoreError::Internal(_));
    assert!(internal(&store.get_resource(&other.key()).await.expect_err("negative epoch")));

    // A body that parses but belongs to another row is corrupt too.
    spy.execute(&format!("UPDATE {resources} SET lease_epoch = 0, lease_owner = NULL, lease_until = NULL"), &[])
        .await
        .expect("repair");
    let foreign: String = spy
        .query_one(&format!("SELECT body FROM {resources} WHERE key = $1"), &[&other.key().as_str()])
        .await
        .expect("body")
        .get(0);
    spy.execute(&format!("UPDATE {resources} SET body = $2 WHERE key = $1"), &[&id.key().as_str(), &foreign])
        .await
        .expect("swap");
    assert!(internal(&store.get_resource(&id.key()).await.expect_err("foreign body")));
    assert!(store.get_resource(&other.key()).await.expect("healthy row").is_some());

    let outbox = schema.table("outbox");
    spy.execute(
        &format!("INSERT INTO {outbox} (subscription, operation_id, uri, next_attempt_at, created_at) VALUES ('s', 'nope', 'u', 0, 0)"),
        &[],
    )
    .await
    .expect("corrupt notification");
    assert!(internal(&store.claim_notifications(at(1), 10, Duration::from_secs(1)).await.expect_err("bad id")));
    store.ping().await.expect("the store survives");
}

#[tokio::test]
async fn columns_follow_the_record() {
    let schema = Schema::fresh();
    let store = open(schema.options()).await;
    let id = vnet("Sub-Cols", "RG-Cols", "R1");
    let key = seed(&store, &id, 1, Schedule { next_due: Some(at(5)), intent: true }).await;
    let spy = spy().await;
    let sql = format!(
        "SELECT subscription, resource_group, type_key, next_due, intent, lease_owner, lease_until,
                lease_epoch, generation, body FROM {} WHERE key = $1",
        schema.table("resources")
    );
    type Cols = (String, String, String, Option<i64>, bool, Option<String>, Option<i64>, i64, i64, String);
    let cols = async || -> Cols {
        let r = spy.query_one(&sql, &[&key.as_str()]).await.expect("row");
        (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5), r.get(6), r.get(7), r.get(8), r.get(9))
    };
    let c = cols().await;
    assert_eq!((c.0.as_str(), c.1.as_str(), c.2.as_str()), ("sub-cols", "rg-cols", "slipway.example/virtualnetworks"));
    assert_eq!((c.3, c.4, c.5, c.6, c.7, c.8), (Some(at(5).as_millis()), true, None, None, 0, 1));

    store.claim(&claim_req("engine-a", at(10))).await.expect("claim");
    let c = cols().await;
    assert_eq!(
        (c.3, c.4, c.5.as_deref(), c.6, c.7),
        (Some(at(5).as_millis()), false, Some("engine-a"), Some(at(30_010).as_millis()), 1)
    );
    let body: serde_json::Value = serde_json::from_str(&c.9).expect("json body");
    assert!(body.get("lease").is_none(), "the lease lives in columns only: {body}");

    // A client write that keeps the lease, then a release: the epoch survives both.
    let generation = |s: &mut slipway_domain::resource::Snapshot| -> Result<(), Rejection> {
        s.resource.as_mut().ok_or(Rejection::NotFound)?.generation += 1;
        Ok(())
    };
    store.change(ChangeRequest::new(key.clone(), at(20)), Box::new(generation)).await.expect("change");
    let c = cols().await;
    assert_eq!((c.5.as_deref(), c.7, c.8), (Some("engine-a"), 1, 2));
    store.release_leases("engine-a").await.expect("release");
    store.change(ChangeRequest::new(key.clone(), at(30)), Box::new(generation)).await.expect("change");
    let c = cols().await;
    assert_eq!((c.5, c.6, c.7, c.8), (None, None, 1, 3));
}

/// Changes that arrive together are committed together (group commit), each still seeing
/// its own resource's latest state: 200 concurrent creates of distinct resources plus a
/// chain of PATCH-like edits of one resource all land, in far fewer transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_changes_share_transactions() {
    let schema = Schema::fresh();
    let store: Arc<dyn Store> = Arc::new(open(PostgresOptions { pool_size: 4, ..schema.options() }).await);
    let shared = vnet("sub", "rg", "shared");
    put(store.as_ref(), &shared, spec(1), ctx(1, T0)).await;
    let before = store.stats();
    let mut tasks = JoinSet::new();
    for i in 0..200u64 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let id = vnet("sub", "rg", &format!("r{i}"));
            put(store.as_ref(), &id, spec(1), ctx(10 + i, T0)).await;
        });
    }
    for _ in 0..20 {
        let (store, key) = (Arc::clone(&store), shared.key());
        tasks.spawn(async move {
            store
                .change(
                    ChangeRequest::new(key, T0),
                    Box::new(|s| {
                        s.resource.as_mut().ok_or(Rejection::NotFound)?.generation += 1;
                        Ok(())
                    }),
                )
                .await
                .expect("edit");
        });
    }
    tasks.join_all().await;
    let after = store.stats();
    assert_eq!(after.write_calls - before.write_calls, 220);
    let commits = after.commits - before.commits;
    assert!(commits <= 110, "220 concurrent changes took {commits} transactions");
    for i in 0..200u64 {
        let id = vnet("sub", "rg", &format!("r{i}"));
        assert!(store.get_resource(&id.key()).await.expect("get").is_some(), "r{i}");
    }
    let edited = store.get_resource(&shared.key()).await.expect("get").expect("shared");
    let created = put(store.as_ref(), &vnet("sub", "rg", "probe"), spec(1), ctx(999, T0)).await.1;
    let base = created.resource.expect("probe").generation;
    assert_eq!(edited.generation, base + 20, "every edit of one key applied on the one before");
}

// ---------------------------------------------------------------------------------------
// Replicas: two stores, two pools, one schema

/// Seeds `n` due resources, every third in the intent lane, due times spread over a second.
async fn seed_due(store: &Arc<dyn Store>, n: u64) -> BTreeSet<ResourceKey> {
    let mut tasks = JoinSet::new();
    for i in 0..n {
        let store = Arc::clone(store);
        tasks.spawn(async move {
            let schedule = Schedule { next_due: Some(at((i * 7 % 1000) as i64)), intent: i % 3 == 0 };
            seed(&*store, &vnet("sub-replicas", "rg", &format!("r{i:03}")), 1 + i, schedule).await
        });
    }
    tasks.join_all().await.into_iter().collect()
}

type Claimed = Arc<Mutex<Vec<(ResourceKey, String, u64)>>>;

/// Claims from `store` as `owner` until `total` resources were claimed by everyone together.
async fn claim_until(store: Arc<dyn Store>, owner: String, now: slipway_domain::Timestamp, total: usize, log: Claimed) {
    for _ in 0..100_000 {
        if log.lock().expect("log").len() >= total {
            return;
        }
        let req = ClaimRequest {
            owner: owner.clone(),
            now,
            lease_for: Duration::from_secs(30),
            intent_limit: 3,
            followup_limit: 4,
        };
        let got = store.claim(&req).await.expect("claim");
        assert!(got.len() <= 7, "at most the room asked for");
        assert!(got.iter().all(|r| !r.schedule.intent), "claiming clears intent");
        if got.is_empty() {
            tokio::task::yield_now().await;
            continue;
        }
        let mut log = log.lock().expect("log");
        for rec in got {
            let lease = rec.lease.clone().expect("leased");
            assert_eq!(lease.owner, owner);
            log.push((rec.key(), lease.owner, lease.epoch));
        }
    }
    panic!("{owner}: the claims never finished");
}

async fn claim_everything(
    a: &Arc<dyn Store>,
    b: &Arc<dyn Store>,
    now: slipway_domain::Timestamp,
    total: usize,
) -> Vec<(ResourceKey, String, u64)> {
    let log: Claimed = Arc::default();
    let mut claimers = JoinSet::new();
    for i in 0..3 {
        for (name, store) in [("a", a), ("b", b)] {
            let owner = format!("{name}{i}-{}", now.as_millis());
            claimers.spawn(claim_until(Arc::clone(store), owner, now, total, Arc::clone(&log)));
        }
    }
    claimers.join_all().await;
    log.lock().expect("log").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_claim_the_same_resource() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    let all = seed_due(&a, 200).await;
    let spy = spy().await;
    let leases = format!("SELECT key, lease_owner, lease_epoch FROM {}", schema.table("resources"));

    // Everything is due; six claimers in two replicas take it all, each resource once.
    // Then every lease runs out and they take it all over again, at the next epoch.
    for (round, now) in [(1, at(1_000)), (2, at(40_000))] {
        let log = claim_everything(&a, &b, now, all.len()).await;
        assert_eq!(log.len(), all.len(), "round {round}: nothing claimed twice");
        let claimed: BTreeMap<ResourceKey, (String, u64)> =
            log.into_iter().map(|(key, owner, epoch)| (key, (owner, epoch))).collect();
        assert_eq!(claimed.keys().cloned().collect::<BTreeSet<_>>(), all, "round {round}: everything claimed");
        assert!(claimed.values().all(|(_, epoch)| *epoch == round), "round {round}: epochs move on together");
        let owners: BTreeSet<&str> = claimed.values().map(|(owner, _)| owner.as_str()).collect();
        assert!(owners.len() > 1, "round {round}: work was shared ({owners:?})");
        for row in spy.query(&leases, &[]).await.expect("leases") {
            let key = ResourceKey(row.get(0));
            let stored: (String, u64) = (row.get(1), row.get::<_, i64>(2) as u64);
            assert_eq!(Some(&stored), claimed.get(&key), "round {round}: the row records its claimer");
        }
    }
}

/// A child created through one replica while another removes its parent: one loses, cleanly
/// (the child's change holds its parent's advisory lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_leave_a_child_under_no_parent() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    slipway_store::conformance::check_children_never_outlive_a_removed_parent(&a, &b).await;
}

/// A reference written through one replica while another deletes its target: one loses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_reference_a_resource_being_deleted() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    slipway_store::conformance::check_a_reference_and_its_targets_delete_never_both_win(&a, &b).await;
}

/// Two replicas each close one end of a reference cycle at the same time: one is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_close_a_reference_cycle_from_both_ends() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    slipway_store::conformance::check_a_reference_cycle_is_never_closed_from_both_ends(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_claim_the_same_notification() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    let total = 300_i64;
    spy()
        .await
        .execute(
            &format!(
                "INSERT INTO {} (subscription, operation_id, uri, next_attempt_at, created_at)
                 SELECT 'sub', '00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'), 'https://cb.example/' || g, g, g
                 FROM generate_series(1, $1::BIGINT) g",
                schema.table("outbox")
            ),
            &[&total],
        )
        .await
        .expect("seed the outbox");
    let hold = Duration::from_secs(60);
    let now = at(0);
    let log: Arc<Mutex<Vec<i64>>> = Arc::default();
    let mut notifiers = JoinSet::new();
    for store in [&a, &b, &a, &b] {
        let store = Arc::clone(store);
        let log = Arc::clone(&log);
        notifiers.spawn(async move {
            for _ in 0..100_000 {
                if log.lock().expect("log").len() >= total as usize {
                    return;
                }
                let got = store.claim_notifications(now, 7, hold).await.expect("claim");
                assert!(got.windows(2).all(|w| (w[0].next_attempt_at, w[0].id) < (w[1].next_attempt_at, w[1].id)));
                if got.is_empty() {
                    tokio::task::yield_now().await;
                }
                log.lock().expect("log").extend(got.iter().map(|n| n.id));
            }
            panic!("the notification claims never finished");
        });
    }
    notifiers.join_all().await;
    let log = log.lock().expect("log").clone();
    let distinct: BTreeSet<i64> = log.iter().copied().collect();
    assert_eq!(log.len(), distinct.len(), "no notification handed out twice");
    assert_eq!(distinct.len(), total as usize, "every notification handed out");
    assert_eq!(a.claim_notifications(now.add(hold).sub(Duration::from_millis(1)), 1000, hold).await, Ok(vec![]));
    assert_eq!(b.claim_notifications(now.add(hold), 1000, hold).await.expect("claim").len(), total as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_creating_one_absent_resource_create_it_once() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 4).await;
    let id = vnet("sub-race", "rg", "contested");
    let mut tasks = JoinSet::new();
    for i in 0..24u64 {
        let store = Arc::clone(if i % 2 == 0 { &a } else { &b });
        let target = id.clone();
        tasks.spawn(async move {
            let c = ctx(100 + i, T0);
            change_with(&*store, ChangeRequest::new(target.key(), T0), move |s| {
                slipway_domain::admission::admit_put(s, &target, conformance::KIND, spec(1), &c)
            })
            .await
            .expect("put")
        });
    }
    let outcomes = tasks.join_all().await;
    let created: Vec<_> = outcomes
        .iter()
        .filter_map(|(admitted, _)| match admitted {
            Admitted::Accepted { operation, created: true } => Some(operation.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(created.len(), 1, "exactly one create: {outcomes:?}");
    for (admitted, _) in &outcomes {
        match admitted {
            Admitted::Accepted { created: true, .. } => {}
            Admitted::InProgress { operation } => assert_eq!(operation, &created[0], "the others see the create"),
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    let rows = spy()
        .await
        .query_one(&format!("SELECT COUNT(*) FROM {}", schema.table("operations")), &[])
        .await
        .expect("count")
        .get::<_, i64>(0);
    assert_eq!(rows, 1, "one operation was recorded");

    // And concurrent updates from both replicas lose nothing.
    let mut tasks = JoinSet::new();
    for i in 0..40 {
        let store = Arc::clone(if i % 2 == 0 { &a } else { &b });
        let key = id.key();
        tasks.spawn(async move {
            let snap = store.change(ChangeRequest::new(key, at(i)), Box::new(bump)).await.expect("change");
            snap.resource.expect("resource").job_seq
        });
    }
    let mut seen = tasks.join_all().await;
    seen.sort_unstable();
    assert_eq!(seen, (1..=40).collect::<Vec<u64>>(), "every change saw the one before it");
}

/// A change holding a resource keeps claims off it without making them wait, and a lease
/// taken over by another replica fences the first one out.
#[tokio::test]
async fn claims_skip_what_a_transaction_holds_and_takeovers_fence() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 2).await;
    let busy = seed(&*a, &vnet("sub", "rg", "busy"), 1, Schedule::now(T0)).await;
    let free = seed(&*a, &vnet("sub", "rg", "free"), 2, Schedule::now(at(1))).await;

    let mut spy = spy().await;
    let tx = spy.transaction().await.expect("begin");
    tx.execute(&format!("SELECT 1 FROM {} WHERE key = $1 FOR UPDATE", schema.table("resources")), &[&busy.as_str()])
        .await
        .expect("lock the row");
    let got = b.claim(&claim_req("engine-b", at(SECOND))).await.expect("claim");
    assert_eq!(got.iter().map(|r| r.key()).collect::<Vec<_>>(), vec![free.clone()], "the held row is skipped");
    tx.commit().await.expect("release the row");
    let got = a.claim(&claim_req("engine-a", at(SECOND))).await.expect("claim");
    assert_eq!(got.iter().map(|r| r.key()).collect::<Vec<_>>(), vec![busy.clone()]);

    // engine-a's lease runs out; engine-b takes over and engine-a is fenced out.
    let taken = b.claim(&claim_req("engine-b", at(32 * SECOND))).await.expect("takeover");
    let keys: BTreeSet<_> = taken.iter().map(|r| r.key()).collect();
    assert_eq!(keys, BTreeSet::from([busy.clone(), free.clone()]));
    assert!(taken.iter().all(|r| r.lease.as_ref().is_some_and(|l| l.epoch == 2 && l.owner == "engine-b")));
    let stale = slipway_store::Fence { owner: "engine-a".into(), epoch: 1 };
    let err = a.change(ChangeRequest::new(busy.clone(), at(33 * SECOND)).fenced(stale), Box::new(bump)).await;
    assert_eq!(err, Err(StoreError::LeaseLost));
    let fresh = slipway_store::Fence { owner: "engine-b".into(), epoch: 2 };
    b.change(ChangeRequest::new(busy, at(33 * SECOND)).fenced(fresh), Box::new(bump)).await.expect("holder writes");
}

const SECOND: i64 = 1_000;

/// While a change is between its read and its write, another replica's claim skips the
/// resource (without waiting) and a lease renewal waits: neither is lost when the change
/// writes the resource back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_in_progress_keeps_claims_and_renewals_from_interleaving() {
    let schema = Schema::fresh();
    let (a, b) = replicas(&schema, 2).await;
    let key = seed(&*a, &vnet("sub", "rg", "r1"), 1, Schedule::now(T0)).await;

    // A client write (engine-b holds no lease yet), stopped inside its transaction.
    let paused = |key: ResourceKey, now| {
        let (inside, entered) = tokio::sync::oneshot::channel::<()>();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let store = Arc::clone(&a);
        let change = tokio::spawn(async move {
            store
                .change(
                    ChangeRequest::new(key, now),
                    Box::new(move |s| {
                        let _ = inside.send(());
                        wait.recv().expect("go");
                        s.resource.as_mut().ok_or(Rejection::NotFound)?.generation += 1;
                        Ok(())
                    }),
                )
                .await
        });
        (entered, go, change)
    };
    let (entered, go, change) = paused(key.clone(), at(SECOND));
    entered.await.expect("the change is inside its transaction");
    assert_eq!(b.claim(&claim_req("engine-b", at(SECOND))).await, Ok(vec![]), "skipped while held");
    go.send(()).expect("go");
    change.await.expect("task").expect("change");
    let got = b.claim(&claim_req("engine-b", at(SECOND))).await.expect("claim");
    assert_eq!(got.len(), 1);
    assert_eq!(a.get_resource(&key).await.expect("get").as_ref(), got.first(), "the claim stands");

    // Now a renewal arrives while a change of the leased resource is in progress.
    let (entered, go, change) = paused(key.clone(), at(2 * SECOND));
    entered.await.expect("the change is inside its transaction");
    let renewer = Arc::clone(&b);
    let renewed = key.clone();
    let renew =
        tokio::spawn(
            async move { renewer.renew_leases("engine-b", std::slice::from_ref(&renewed), at(90 * SECOND)).await },
        );
    // The renewal reached the server and waits for the change's row lock: had it gone
    // through now, the change would write the old lease back over it.
    let spy = spy().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = spy
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE state = 'active' AND wait_event_type = 'Lock' AND query LIKE '%SET lease_until%'",
                &[],
            )
            .await
            .expect("pg_stat_activity")
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(!renew.is_finished(), "the renewal went through while the change held the resource");
        assert!(std::time::Instant::now() < deadline, "the renewal never reached the server");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!renew.is_finished(), "the renewal waits");
    go.send(()).expect("go");
    change.await.expect("task").expect("change");
    assert_eq!(renew.await.expect("task"), Ok(1));
    let lease = a.get_resource(&key).await.expect("get").expect("resource").lease.expect("leased");
    assert_eq!((lease.owner.as_str(), lease.until, lease.epoch), ("engine-b", at(90 * SECOND), 1), "renewal kept");
}

// ---------------------------------------------------------------------------------------
// Losing the server

/// A statement that waits too long (here: for the key's lock, held elsewhere) is
/// `Unavailable`; other keys are not held up.
#[tokio::test]
async fn a_statement_timeout_is_unavailable() {
    let schema = Schema::fresh();
    let store =
        open(PostgresOptions { statement_timeout: Duration::from_millis(300), pool_size: 2, ..schema.options() }).await;
    let id = vnet("sub", "rg", "r1");
    put(&store, &id, spec(1), ctx(1, T0)).await;
    let spy = spy().await;
    let key = id.key();
    spy.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", &[&key.as_str()]).await.expect("lock");

    let err = store.change(ChangeRequest::new(key.clone(), at(1)), Box::new(bump)).await;
    assert!(matches!(&err, Err(StoreError::Unavailable(m)) if m.contains("57014")), "{err:?}");
    put(&store, &vnet("sub", "rg", "r2"), spec(1), ctx(2, T0)).await;

    spy.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", &[&key.as_str()]).await.expect("unlock");
    let snap = store.change(ChangeRequest::new(key, at(2)), Box::new(bump)).await.expect("change");
    assert_eq!(snap.resource.expect("resource").job_seq, 1, "the timed-out change wrote nothing");
}

/// The server ends every session of the store (a restart, a failover, an operator): the
/// next calls reconnect by themselves, none fails.
#[tokio::test]
async fn terminated_connections_are_replaced() {
    let schema = Schema::fresh();
    let app = schema.name.clone();
    let url = server_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    let store =
        open(PostgresOptions { url: format!("{url}{sep}application_name={app}"), pool_size: 4, ..schema.options() })
            .await;
    let id = vnet("sub", "rg", "r1");
    put(&store, &id, spec(1), ctx(1, T0)).await;
    // Several connections in the pool.
    let key = id.key();
    let (r1, r2, r3) = tokio::join!(store.get_resource(&key), store.ping(), store.get_resource(&key));
    r1.expect("read");
    r2.expect("ping");
    r3.expect("read");

    let spy = spy().await;
    let killed: Vec<i32> = spy
        .query(
            // In the select list: evaluated only for the rows the WHERE clause kept.
            "SELECT pid, pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .expect("terminate")
        .iter()
        .map(|r| {
            assert!(r.get::<_, bool>(1), "terminated");
            r.get(0)
        })
        .collect();
    assert!(!killed.is_empty(), "the store had connections");

    store.ping().await.expect("ping reconnects");
    let snap = store.change(ChangeRequest::new(id.key(), at(1)), Box::new(bump)).await.expect("change reconnects");
    assert_eq!(snap.resource.expect("resource").job_seq, 1);
    let claim = claim_req("engine", at(2));
    let (r1, r2, r3) = tokio::join!(
        store.get_resource(&key),
        store.claim(&claim),
        store.claim_notifications(at(2), 10, Duration::from_secs(1))
    );
    assert_eq!(r1.expect("read").expect("resource").job_seq, 1);
    assert_eq!(r2.expect("claim").len(), 1);
    r3.expect("notifications");

    let now: Vec<i32> = spy
        .query("SELECT pid FROM pg_stat_activity WHERE application_name = $1", &[&app])
        .await
        .expect("activity")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!now.is_empty() && now.iter().all(|pid| !killed.contains(pid)), "new sessions: {killed:?} → {now:?}");
}

/// What a TCP proxy in front of the server lets through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Up,
    /// Every connection is cut and new ones are closed at once (the server is down).
    Down,
    /// Connections stay open but no byte gets through (a network partition).
    Stalled,
}

struct Proxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (mode, watching) = watch::channel(Mode::Up);
        let accept = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                if *watching.borrow() == Mode::Down {
                    continue; // dropped: closed at once
                }
                tokio::spawn(forward(socket, upstream, watching.clone()));
            }
        });
        Proxy { addr, mode, accept }
    }

    fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.set(Mode::Down);
    }
}

async fn forward(client: TcpStream, upstream: SocketAddr, mut mode: watch::Receiver<Mode>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let (up, down) = (mode.clone(), mode.clone());
    let cut = async {
        while *mode.borrow_and_update() != Mode::Down {
            if mode.changed().await.is_err() {
                return;
            }
        }
    };
    // Whichever ends first, both sockets close with the halves.
    tokio::select! {
        () = pump(client_read, server_write, up) => {}
        () = pump(server_read, client_write, down) => {}
        () = cut => {}
    }
}

async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut mode: watch::Receiver<Mode>) {
    let mut buf = vec![0; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        loop {
            match *mode.borrow_and_update() {
                Mode::Up => break,
                Mode::Down => return,
                Mode::Stalled => {}
            }
            if mode.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The test server's address and a URL for the same database through `proxy`.
async fn through_proxy() -> (Proxy, String) {
    let url = server_url();
    let config: tokio_postgres::Config = url.parse().expect("test URL");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        other => panic!("the proxy tests need a TCP server address, not {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let upstream = tokio::net::lookup_host((host.as_str(), port))
        .await
        .ok()
        .and_then(|mut addrs| addrs.next())
        .unwrap_or_else(|| no_server(&url, &"cannot resolve its host"));
    let proxy = Proxy::start(upstream).await;
    let user = config.get_user().unwrap_or("postgres");
    let password = match config.get_password() {
        Some(p) => format!(":{}", String::from_utf8_lossy(p)),
        None => String::new(),
    };
    let db = config.get_dbname().unwrap_or(user);
    let proxied = format!("postgres://{user}{password}@{}/{db}", proxy.addr);
    (proxy, proxied)
}

/// Everything a replica does while its database is unreachable: `Unavailable`, never
/// `Internal`, never a hang; and back to normal once the database is.
#[tokio::test]
async fn a_server_going_away_is_unavailable_until_it_is_back() {
    let schema = Schema::fresh();
    let (proxy, url) = through_proxy().await;
    let options = PostgresOptions {
        url,
        pool_size: 3,
        connect_timeout: Duration::from_secs(2),
        statement_timeout: Duration::from_secs(2),
        ..schema.options()
    };
    let store = open(options.clone()).await;
    let id = vnet("sub", "rg", "r1");
    put(&store, &id, spec(1), ctx(1, T0)).await;
    store.ping().await.expect("ping");

    proxy.set(Mode::Down);
    let unavailable = |what: &str, err: Option<StoreError>| {
        assert!(matches!(err, Some(StoreError::Unavailable(_))), "{what}: {err:?}");
    };
    unavailable("ping", store.ping().await.err());
    unavailable("change", store.change(ChangeRequest::new(id.key(), at(1)), Box::new(bump)).await.err());
    unavailable("get", store.get_resource(&id.key()).await.err());
    unavailable("claim", store.claim(&claim_req("engine", at(1))).await.err());
    unavailable("notifications", store.claim_notifications(at(1), 10, Duration::from_secs(1)).await.err());
    unavailable("renew", store.renew_leases("engine", &[], at(2)).await.err());
    let again = PostgresStore::connect(PostgresOptions { connect_timeout: Duration::from_secs(2), ..options }).await;
    unavailable("connect", again.err());

    proxy.set(Mode::Up);
    store.ping().await.expect("ping once the server is back");
    let snap = store.change(ChangeRequest::new(id.key(), at(3)), Box::new(bump)).await.expect("change");
    assert_eq!(snap.resource.expect("resource").job_seq, 1, "nothing was half-written meanwhile");
}

/// A server that stops answering without closing anything (a partition) must not hang its
/// callers: they get `Unavailable` within the client-side limits, and the hung connections
/// are not reused once it answers again.
#[tokio::test]
async fn a_silent_server_is_unavailable_within_the_limits() {
    let schema = Schema::fresh();
    let (proxy, url) = through_proxy().await;
    let limit = Duration::from_millis(400);
    let store = open(PostgresOptions {
        url,
        pool_size: 2,
        connect_timeout: limit,
        statement_timeout: limit,
        ..schema.options()
    })
    .await;
    let id = vnet("sub", "rg", "r1");
    put(&store, &id, spec(1), ctx(1, T0)).await;

    proxy.set(Mode::Stalled);
    let started = Instant::now();
    let err = store.ping().await;
    assert!(matches!(err, Err(StoreError::Unavailable(_))), "{err:?}");
    let err = store.change(ChangeRequest::new(id.key(), at(1)), Box::new(bump)).await;
    assert!(matches!(err, Err(StoreError::Unavailable(_))), "{err:?}");
    let err = store.get_resource(&id.key()).await;
    assert!(matches!(err, Err(StoreError::Unavailable(_))), "{err:?}");
    // Each call is bounded by about 2 × statement timeout + connect timeout.
    assert!(started.elapsed() < limit * 20, "took {:?}", started.elapsed());

    proxy.set(Mode::Up);
    store.ping().await.expect("ping once the server answers");
    let snap = store.change(ChangeRequest::new(id.key(), at(2)), Box::new(bump)).await.expect("change");
    assert_eq!(snap.resource.expect("resource").job_seq, 1);
}
