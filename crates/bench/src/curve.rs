//! How cost grows: the `memory` run (with a latency probe) at each count of operations in
//! flight, and the `scale` run at each count of stored resources; a table per sweep and one
//! SVG of panels per sweep (`plot`), drawn on a logarithmic axis — flat or straight lines
//! there mean flat or logarithmic growth.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::memory::{self, Memory, PROBE_GET_RATE, PROBE_PUT_RATE, Probe};
use crate::plot::{self, Panel};
use crate::scale::{self, Scale};

#[derive(clap::Args)]
pub struct Args {
    /// Operations in flight at each point of the first sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
    pub in_flight: Vec<usize>,
    /// Stored resources at each point of the second sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
    pub resources: Vec<usize>,
    /// Resources created through the API at most; the rest are copied in the store (see
    /// `scale`).
    #[arg(long, default_value_t = 100_000)]
    pub through_http: usize,
    /// The poll interval of the operations in flight.
    #[arg(long, default_value_t = 5.0)]
    pub poll_seconds: f64,
    /// Where the SVG files go.
    #[arg(long, default_value = "docs/bench")]
    pub plots: PathBuf,
}

pub async fn run(args: Args) -> Result<(), String> {
    let mut in_flight = Vec::new();
    for &n in &args.in_flight {
        let (mem, probe) = memory::measure_probed(n, args.poll_seconds, 0.0, true).await?;
        in_flight.push((mem, probe.ok_or("no probe")?));
    }
    print_in_flight(&in_flight);
    let mut stored = Vec::new();
    for &n in &args.resources {
        stored.push(scale::measure(n, args.through_http.min(n)).await?);
    }
    print_stored(&stored);
    std::fs::create_dir_all(&args.plots).map_err(|e| e.to_string())?;
    let flight_svg = args.plots.join("curve-in-flight.svg");
    plot::panels(
        &flight_svg,
        &format!("Operations in flight (poll {} s; {PROBE_PUT_RATE} PUT/s, {PROBE_GET_RATE} GET/s)", args.poll_seconds),
        "operations in flight",
        &[
            Panel { title: "accept p99, ms", points: points(&in_flight, |(_, p)| p.accept_ms.1) },
            Panel { title: "status GET p99, ms", points: points(&in_flight, |(_, p)| p.get_ms.1) },
            Panel { title: "RSS per operation, bytes", points: points(&in_flight, |(m, _)| m.per_op_bytes()) },
            Panel {
                title: "CPU per operation (PUT → launched), ms",
                points: points(&in_flight, |(m, _)| m.cpu_ms_per_op.unwrap_or(0.0)),
            },
        ],
    )?;
    let stored_svg = args.plots.join("curve-stored.svg");
    plot::panels(
        &stored_svg,
        "Stored resources (SQLite FULL)",
        "resources stored",
        &[
            Panel { title: "start → ready, ms (median of 5)", points: points(&stored, |s| s.startup_ms) },
            Panel { title: "list page p99 walking every page, ms", points: points(&stored, |s| s.deep_page_ms.1) },
            Panel { title: "RSS, MiB", points: points(&stored, |s| s.rss_bytes as f64 / 1_048_576.0) },
            Panel { title: "database bytes per resource", points: points(&stored, Scale::store_bytes_per_resource) },
        ],
    )?;
    println!("plots: {} {}", flight_svg.display(), stored_svg.display());
    let mut all: Vec<Value> = in_flight.iter().map(in_flight_json).collect();
    all.extend(stored.iter().map(|s| {
        let mut record = s.json();
        record["scenario"] = json!("curve");
        record["setup"] = json!(format!("stored {}", s.resources));
        record
    }));
    println!("{}", Value::Array(all));
    Ok(())
}

/// Each point's scale (the x axis) and `figure`.
fn points<T: Scaled>(rows: &[T], figure: impl Fn(&T) -> f64) -> Vec<(f64, f64)> {
    rows.iter().map(|r| (r.scale() as f64, figure(r))).collect()
}

trait Scaled {
    fn scale(&self) -> usize;
}

impl Scaled for (Memory, Probe) {
    fn scale(&self) -> usize {
        self.0.in_flight
    }
}

impl Scaled for Scale {
    fn scale(&self) -> usize {
        self.resources
    }
}

fn in_flight_json((m, p): &(Memory, Probe)) -> Value {
    json!({"scenario": "curve", "setup": format!("in flight {}", m.in_flight),
           "accept_p50_ms": p.accept_ms.0, "accept_p99_ms": p.accept_ms.1,
           "get_p50_ms": p.get_ms.0, "get_p99_ms": p.get_ms.1,
           "bytes_per_in_flight_op": m.per_op_bytes(), "cpu_ms_per_op": m.cpu_ms_per_op,
           "waiting_cores": m.waiting_cores})
}

fn print_in_flight(rows: &[(Memory, Probe)]) {
    println!(
        "curve: operations in flight (child process, SQLite FULL; probe {PROBE_PUT_RATE} PUT/s and {PROBE_GET_RATE} GET/s)"
    );
    println!(
        "{:>10} {:>18} {:>18} {:>13} {:>10} {:>13}",
        "in flight", "accept p50/p99 ms", "GET p50/p99 ms", "bytes per op", "cpu ms/op", "waiting cores"
    );
    for (m, p) in rows {
        println!(
            "{:>10} {:>18} {:>18} {:>13.0} {:>10} {:>13}",
            m.in_flight,
            format!("{:.1} / {:.1}", p.accept_ms.0, p.accept_ms.1),
            format!("{:.1} / {:.1}", p.get_ms.0, p.get_ms.1),
            m.per_op_bytes(),
            m.cpu_ms_per_op.map_or("-".into(), |v| format!("{v:.3}")),
            m.waiting_cores.map_or("-".into(), |v| format!("{v:.3}")),
        );
    }
}

fn print_stored(rows: &[Scale]) {
    println!("curve: resources stored (a fresh child process, SQLite FULL)");
    println!(
        "{:>10} {:>12} {:>11} {:>19} {:>9} {:>11}",
        "resources", "through API", "startup ms", "page walk p50/p99", "RSS MiB", "DB B/res"
    );
    for s in rows {
        println!(
            "{:>10} {:>12} {:>11.1} {:>19} {:>9.1} {:>11.0}",
            s.resources,
            s.through_http,
            s.startup_ms,
            format!("{:.1} / {:.1}", s.deep_page_ms.0, s.deep_page_ms.1),
            s.rss_bytes as f64 / 1_048_576.0,
            s.store_bytes_per_resource()
        );
    }
}
