//! The same burst of create operations through one Slipway on SQLite and on PostgreSQL,
//! with zero-duration simulator jobs, measured in one run.

use serde_json::{Value, json};

use aap_sim::{Sim, SimConfig};

use crate::harness::{aap_config, create_and_wait, free_port, start_slipway};

pub async fn run(args: &[String]) -> Result<(), String> {
    let ops: usize = crate::arg(args, "--ops", 300)?;
    let pg = std::env::var("SLIPWAY_BENCH_POSTGRES_URL")
        .or_else(|_| std::env::var("SLIPWAY_TEST_POSTGRES_URL"))
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let mut rows = Vec::new();
    for engine in ["sqlite-full", "sqlite-normal", "postgres"] {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let store = match engine {
            "sqlite-full" => format!("url = \"sqlite:{}\"\nsynchronous = \"full\"", dir.path().join("s.db").display()),
            "sqlite-normal" => {
                format!("url = \"sqlite:{}\"\nsynchronous = \"normal\"", dir.path().join("s.db").display())
            }
            _ => {
                let nanos =
                    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?;
                format!("url = \"{pg}\"\nschema = \"bench_{:x}\"", nanos.as_nanos())
            }
        };
        let mut sim_config = SimConfig { tick_ms: 10, ..SimConfig::default() };
        for t in &mut sim_config.job_templates {
            t.duration_seconds = 0.0;
            t.pending_seconds = 0.0;
        }
        let sim = Sim::start("127.0.0.1:0", sim_config).await.map_err(|e| format!("aap-sim: {e}"))?;
        let port = free_port()?;
        let app = start_slipway(dir.path(), &aap_config(port, &store, &sim.base_url(), 0.2, "")).await?;
        let elapsed = create_and_wait(&format!("http://127.0.0.1:{port}"), ops).await?;
        app.shutdown().await.map_err(|e| e.to_string())?;
        sim.shutdown().await;
        rows.push((engine, elapsed.as_secs_f64()));
    }
    println!("{ops} create operations (accepted → Succeeded, zero-duration AAP-simulator jobs), one replica");
    println!("{:<14} {:>10} {:>10}", "store", "seconds", "ops/s");
    for (engine, secs) in &rows {
        println!("{engine:<14} {secs:>10.2} {:>10.1}", ops as f64 / secs);
    }
    let json: Vec<Value> = rows
        .iter()
        .map(|(e, s)| json!({"scenario": "store-compare", "store": e, "ops": ops, "seconds": s, "ops_per_second": ops as f64 / s}))
        .collect();
    println!("{}", Value::Array(json));
    Ok(())
}
