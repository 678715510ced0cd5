//! The conformance suite against a real PostgreSQL, plus what only PostgreSQL has here: its
//! options, the schema a store works in, group commit. Several replicas on one database are
//! in `postgres_replicas.rs`, a server that goes away in `postgres_faults.rs`, lock order in
//! `postgres_locks.rs`, TLS in `postgres_tls.rs`; what they share is in `pg/`.
//!
//! The server comes from `SLIPWAY_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); `scripts/test.sh` makes sure one answers. Every
//! test works in a schema of its own, dropped at the end, so tests run in parallel.

mod pg;

use std::sync::Arc;
use std::time::Duration;

use pg::{Schema, make, open, server_url};
use slipway_domain::admission::Rejection;
use slipway_store::conformance::{T0, ctx, put, spec, vnet};
use slipway_store::postgres::{PostgresOptions, PostgresStore};
use slipway_store::{ChangeRequest, Store, StoreError};
use tokio::task::JoinSet;

slipway_store::conformance_suite!(make());

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

/// The schema accessor is PostgreSQL's alone (the suite's operation TTL case checks the rest
/// of what a store opened with options reports).
#[tokio::test]
async fn a_store_reports_its_schema() {
    let schema = Schema::fresh();
    let store = open(schema.options()).await;
    assert_eq!(store.schema(), Some(schema.name.as_str()));
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
