//! What the PostgreSQL store tests share: the server (`SLIPWAY_TEST_POSTGRES_URL`), a schema
//! of a test's own, stores on it, and a plain connection of the test's own.

#![allow(dead_code)] // each test file uses its own part of these

use std::sync::Arc;

use slipway_store::postgres::{PostgresOptions, PostgresStore, redact};
use slipway_store::{Store, StoreError};
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
}

impl Schema {
    pub fn fresh() -> Schema {
        Schema { name: format!("t_{}", uuid::Uuid::new_v4().simple()) }
    }

    pub fn options(&self) -> PostgresOptions {
        PostgresOptions::new(server_url()).with_schema(&self.name)
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
