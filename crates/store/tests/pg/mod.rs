//! What the PostgreSQL store tests share: the server (`SLIPWAY_TEST_POSTGRES_URL`), a schema
//! of a test's own, stores on it, a plain connection of the test's own, the conformance
//! suite's hooks, and small helpers.

#![allow(dead_code)] // each test file uses its own part of these

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use slipway_domain::admission::Rejection;
use slipway_domain::ids::{OperationId, ResourceKey};
use slipway_store::conformance::{EngineHooks, Harness, Opened, RawResourceRow};
use slipway_store::postgres::{Pooler, PostgresOptions, PostgresStore, redact};
use slipway_store::{ClaimRequest, Store, StoreError};
use tokio_postgres::NoTls;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

pub fn server_url() -> String {
    std::env::var("SLIPWAY_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_URL.to_string())
}

pub fn no_server(url: &str, error: &dyn std::fmt::Display) -> ! {
    panic!(
        "the PostgreSQL store tests need a server, and none answers at {} ({error}).\n\
         Run them through scripts/test.sh (it uses the machine's server or starts a throwaway one, \
         see scripts/postgres-for-tests.sh), start one yourself \
         (e.g. `apt-get install -y postgresql && service postgresql start`, trust auth, database `test`), \
         or point SLIPWAY_TEST_POSTGRES_URL at one.",
        redact(url)
    )
}

/// A schema of its own, dropped (with everything in it) when this goes away.
pub struct Schema {
    pub name: String,
    /// Stores reach the server through this session-mode pooler's URL, when set; the test's
    /// own connections always go straight to the server.
    pub pooler_url: Option<String>,
}

impl Schema {
    pub fn fresh() -> Schema {
        Schema { name: format!("t_{}", uuid::Uuid::new_v4().simple()), pooler_url: None }
    }

    pub fn options(&self) -> PostgresOptions {
        match &self.pooler_url {
            Some(url) => {
                PostgresOptions { pooler: Pooler::Session, ..PostgresOptions::new(url) }.with_schema(&self.name)
            }
            None => PostgresOptions::new(server_url()).with_schema(&self.name),
        }
    }

    /// `table` qualified with this schema.
    pub fn table(&self, table: &str) -> String {
        format!("{}.{table}", self.name)
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, which cannot block on its own work: a thread
        // with a runtime of its own does the dropping.
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || -> Result<(), String> {
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let (client, connection) =
                    tokio_postgres::connect(&server_url(), NoTls).await.map_err(|e| e.to_string())?;
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("SET lock_timeout = '5s'; DROP SCHEMA IF EXISTS {name} CASCADE"))
                    .await
                    .map_err(|e| e.to_string())
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("could not drop test schema {}: {e}", self.name),
            Err(_) => eprintln!("could not drop test schema {}: the dropping thread panicked", self.name),
        }
    }
}

pub async fn open(options: PostgresOptions) -> PostgresStore {
    match PostgresStore::connect(options.clone()).await {
        Ok(store) => store,
        Err(StoreError::Unavailable(e)) => no_server(&options.url, &e),
        Err(e) => panic!("cannot open the PostgreSQL store {options:?}: {e}"),
    }
}

/// A plain connection of the test's own: sees only what stores committed.
pub async fn spy() -> tokio_postgres::Client {
    let url = server_url();
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap_or_else(|e| no_server(&url, &e));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

pub async fn replicas(schema: &Schema, pool_size: usize) -> (Arc<dyn Store>, Arc<dyn Store>) {
    let a = open(PostgresOptions { pool_size, ..schema.options() }).await;
    let b = open(PostgresOptions { pool_size, ..schema.options() }).await;
    (Arc::new(a), Arc::new(b))
}

pub const SECOND: i64 = 1_000;

pub fn claim_req(owner: &str, now: slipway_domain::Timestamp) -> ClaimRequest {
    ClaimRequest {
        owner: owner.into(),
        now,
        lease_for: Duration::from_secs(30),
        intent_limit: 10,
        followup_limit: 10,
        drift_limit: 0,
    }
}

/// A change that bumps the resource's job sequence.
pub fn bump(s: &mut slipway_domain::resource::Snapshot) -> Result<(), Rejection> {
    s.resource.as_mut().ok_or(Rejection::NotFound)?.job_seq += 1;
    Ok(())
}

/// A fresh schema and a store on it, with the conformance hooks.
pub async fn make() -> Harness {
    make_on(Schema::fresh()).await
}

/// [`make`], the store reaching the server through a session-mode pooler at `url`.
pub async fn make_via_pooler(url: &str) -> Harness {
    let mut schema = Schema::fresh();
    schema.pooler_url = Some(url.to_string());
    make_on(schema).await
}

async fn make_on(schema: Schema) -> Harness {
    let store = open(schema.options()).await;
    Harness::new(Arc::new(store)).with_hooks(PgHooks { schema })
}

/// The conformance hooks: SQL on the harness's schema through the test's own connections.
/// They own the schema, so it is dropped after the store.
pub struct PgHooks {
    pub schema: Schema,
}

impl PgHooks {
    async fn execute(&self, sql: &str, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]) {
        spy().await.execute(sql, params).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

#[async_trait]
impl EngineHooks for PgHooks {
    async fn open(&self, operation_ttl: Duration) -> Result<Opened, StoreError> {
        let store = PostgresStore::connect(PostgresOptions { operation_ttl, ..self.schema.options() }).await?;
        Ok(Opened { operation_ttl: store.operation_ttl(), store: Arc::new(store) })
    }

    /// Row versions: `xmin` changes whenever a row is rewritten.
    async fn write_mark(&self) -> Vec<String> {
        let schema = &self.schema;
        let sql = format!(
            "SELECT 'r' || key || xmin::text FROM {} UNION ALL SELECT 'o' || id || xmin::text FROM {}
             UNION ALL SELECT 'n' || id::text || xmin::text FROM {} ORDER BY 1",
            schema.table("resources"),
            schema.table("operations"),
            schema.table("outbox"),
        );
        spy().await.query(&sql, &[]).await.expect("versions").iter().map(|r| r.get(0)).collect()
    }

    async fn migrations(&self) -> Vec<i64> {
        let sql = format!("SELECT version FROM {} ORDER BY version", self.schema.table("schema_migrations"));
        spy().await.query(&sql, &[]).await.expect("migrations").iter().map(|r| r.get(0)).collect()
    }

    async fn back_to_version_1(&self) {
        let schema = &self.schema;
        let downgrade = format!(
            "DROP TABLE {entries}; DROP TABLE {references}; DROP TABLE {events}; DROP TABLE {cursors};
             DROP TABLE {usage}; DROP TABLE {activity};
             ALTER TABLE {resources} DROP COLUMN claimable_at; ALTER TABLE {resources} DROP COLUMN drift_due;
             CREATE INDEX resources_due ON {resources} (intent, next_due, seq) WHERE next_due IS NOT NULL;
             DELETE FROM {migrations} WHERE version > 1",
            entries = schema.table("entries"),
            references = schema.table("resource_references"),
            events = schema.table("events"),
            cursors = schema.table("event_cursors"),
            usage = schema.table("usage"),
            activity = schema.table("activity"),
            resources = schema.table("resources"),
            migrations = schema.table("schema_migrations")
        );
        spy().await.batch_execute(&downgrade).await.expect("back to version 1");
    }

    async fn record_migration(&self, version: i64) {
        let sql =
            format!("INSERT INTO {} (version, applied_at) VALUES ($1, 0)", self.schema.table("schema_migrations"));
        self.execute(&sql, &[&version]).await;
    }

    async fn resource_row(&self, key: &ResourceKey) -> RawResourceRow {
        let sql = format!(
            "SELECT subscription, resource_group, type_key, next_due, intent, lease_owner, lease_until,
                    lease_epoch, generation, body FROM {} WHERE key = $1",
            self.schema.table("resources")
        );
        let r = spy().await.query_one(&sql, &[&key.as_str()]).await.expect("row");
        RawResourceRow {
            subscription: r.get(0),
            resource_group: r.get(1),
            type_key: r.get(2),
            next_due: r.get(3),
            intent: r.get(4),
            lease_owner: r.get(5),
            lease_until: r.get(6),
            lease_epoch: r.get(7),
            generation: r.get(8),
            body: r.get(9),
        }
    }

    async fn set_resource_body(&self, key: &ResourceKey, body: &str) {
        let sql = format!("UPDATE {} SET body = $2 WHERE key = $1", self.schema.table("resources"));
        self.execute(&sql, &[&key.as_str(), &body]).await;
    }

    async fn set_operation_body(&self, id: &OperationId, body: &str) {
        let sql = format!("UPDATE {} SET body = $2 WHERE id = $1", self.schema.table("operations"));
        self.execute(&sql, &[&id.as_str(), &body]).await;
    }

    async fn set_lease(&self, key: &ResourceKey, owner: Option<&str>, until: Option<i64>, epoch: i64) {
        let sql = format!(
            "UPDATE {} SET lease_owner = $2, lease_until = $3, lease_epoch = $4 WHERE key = $1",
            self.schema.table("resources")
        );
        self.execute(&sql, &[&key.as_str(), &owner, &until, &epoch]).await;
    }

    async fn insert_notification(&self, operation_id: &str) {
        let sql = format!(
            "INSERT INTO {} (subscription, operation_id, uri, next_attempt_at, created_at) VALUES ('s', $1, 'u', 0, 0)",
            self.schema.table("outbox")
        );
        self.execute(&sql, &[&operation_id]).await;
    }
}
