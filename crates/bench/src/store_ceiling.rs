//! The yardstick: how many single-row transactions the store commits per second, one after
//! another on one connection, with a payload the size of a stored resource. Every other
//! scenario's store figures are read against this, measured in the same run.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{StoreKind, p50_p99_ms, postgres_url, unique_name};

/// Bytes per committed row: about one stored resource with its operation.
pub const PAYLOAD_BYTES: usize = 1024;

#[derive(Clone, Debug)]
pub struct Ceiling {
    pub store: StoreKind,
    pub commits_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl Ceiling {
    pub fn json(&self) -> Value {
        json!({"scenario": "store-ceiling", "store": self.store.name(), "payload_bytes": PAYLOAD_BYTES,
               "commits_per_second": self.commits_per_second, "commit_p50_ms": self.p50_ms,
               "commit_p99_ms": self.p99_ms})
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// The stores to measure, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "sqlite-full,sqlite-normal,postgres")]
    pub stores: Vec<StoreKind>,
    /// How long to commit for, per store.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
}

pub async fn run(args: Args) -> Result<(), String> {
    let mut rows = Vec::new();
    for store in args.stores {
        rows.push(measure(store, Duration::from_secs_f64(args.seconds)).await?);
    }
    print(&rows);
    Ok(())
}

pub fn print(rows: &[Ceiling]) {
    println!("store ceiling: sequential single-row commits, {PAYLOAD_BYTES}-byte payload, one connection");
    println!("{:<14} {:>12} {:>10} {:>10}", "store", "commits/s", "p50 ms", "p99 ms");
    for c in rows {
        println!("{:<14} {:>12.0} {:>10.3} {:>10.3}", c.store.name(), c.commits_per_second, c.p50_ms, c.p99_ms);
    }
    println!("{}", Value::Array(rows.iter().map(Ceiling::json).collect()));
}

pub async fn measure(store: StoreKind, duration: Duration) -> Result<Ceiling, String> {
    let latencies = match store {
        StoreKind::SqliteFull | StoreKind::SqliteNormal => {
            tokio::task::spawn_blocking(move || sqlite(store == StoreKind::SqliteFull, duration))
                .await
                .map_err(|e| e.to_string())??
        }
        StoreKind::Postgres => postgres(duration).await?,
    };
    let total: Duration = latencies.iter().sum();
    let commits_per_second = latencies.len() as f64 / total.as_secs_f64();
    let (p50_ms, p99_ms) = p50_p99_ms(latencies);
    Ok(Ceiling { store, commits_per_second, p50_ms, p99_ms })
}

fn sqlite(full: bool, duration: Duration) -> Result<Vec<Duration>, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let conn = rusqlite::Connection::open(dir.path().join("ceiling.db")).map_err(|e| e.to_string())?;
    let sync = if full { "FULL" } else { "NORMAL" };
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {sync};
         CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL);"
    ))
    .map_err(|e| e.to_string())?;
    let payload = vec![0x5a_u8; PAYLOAD_BYTES];
    let mut insert = conn.prepare("INSERT INTO rows (body) VALUES (?1)").map_err(|e| e.to_string())?;
    let mut latencies = Vec::new();
    let start = Instant::now();
    while start.elapsed() < duration {
        let t = Instant::now();
        // Autocommit: each INSERT is its own transaction, as an ungrouped store would commit.
        insert.execute([&payload]).map_err(|e| e.to_string())?;
        latencies.push(t.elapsed());
    }
    Ok(latencies)
}

async fn postgres(duration: Duration) -> Result<Vec<Duration>, String> {
    let url = postgres_url();
    let (client, connection) =
        tokio_postgres::connect(&url, tokio_postgres::NoTls).await.map_err(|e| format!("PostgreSQL at {url}: {e}"))?;
    let driver = tokio::spawn(connection);
    let schema = unique_name("ceiling");
    client
        .batch_execute(&format!(
            "CREATE SCHEMA {schema}; CREATE TABLE {schema}.rows (id BIGSERIAL PRIMARY KEY, body BYTEA NOT NULL);"
        ))
        .await
        .map_err(|e| e.to_string())?;
    let insert =
        client.prepare(&format!("INSERT INTO {schema}.rows (body) VALUES ($1)")).await.map_err(|e| e.to_string())?;
    let payload = vec![0x5a_u8; PAYLOAD_BYTES];
    let mut latencies = Vec::new();
    let start = Instant::now();
    while start.elapsed() < duration {
        let t = Instant::now();
        client.execute(&insert, &[&payload]).await.map_err(|e| e.to_string())?;
        latencies.push(t.elapsed());
    }
    client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.map_err(|e| e.to_string())?;
    drop(client);
    let _ = driver.await;
    Ok(latencies)
}
