//! `compare BASE NEW [--rounds R] [--scenario 'NAME OPTIONS']...`: an A/B in one command.
//! BASE and NEW are two `slipway-bench` binaries (each built with its own Slipway, with the
//! `slipway` binary beside it for the scenarios that start one as a child). Each
//! `--scenario` is a scenario with its own options (`--scenario 'burn-down --ops 5000'`), all
//! checked before anything runs. Each round runs every scenario with BASE, then with NEW, so
//! both see the same machine at the same time;
//! every number a scenario prints in its JSON line becomes a metric. The table gives each
//! metric's median and every run, the ratio NEW ÷ BASE of the medians, and a verdict: `better`
//! or `worse` only when the two sides' ranges do not overlap and the medians differ by more
//! than either side's own spread and by at least [`SMALLEST_CHANGE`], else `within noise`.
//!
//! Ranges apart alone is too weak a test: with three runs a side, two sets of runs of one
//! build have disjoint ranges one time in ten, and a comparison reads dozens of metrics.
//! An A/A comparison (the same binary on both sides, three rounds, 26 metrics) called
//! one metric `worse` by ranges alone (accept p50 3.41 against 3.71 ms, spreads 5 % and
//! 12 %); a difference must also outgrow the noise each side shows.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use clap::Parser;
use serde_json::Value;

use crate::harness::median;

#[derive(clap::Args)]
pub struct Args {
    /// The `slipway-bench` binary of the build to compare against.
    pub base: PathBuf,
    /// The `slipway-bench` binary of the build under test.
    pub new: PathBuf,
    /// Rounds; each runs every scenario with BASE, then NEW.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// A scenario to run, with its own options; repeat for more.
    #[arg(long = "scenario", default_values = ["burn-down", "steady", "memory"])]
    pub scenarios: Vec<String>,
}

/// One scenario of the comparison: its name and the arguments it is run with.
struct Planned {
    name: String,
    args: Vec<String>,
}

/// The scenarios, each checked against this binary's own argument parser (both builds are
/// expected to take the same options).
fn plan(items: &[String]) -> Result<Vec<Planned>, String> {
    let mut out = Vec::new();
    for item in items {
        let args: Vec<String> = item.split_whitespace().map(str::to_string).collect();
        if args.is_empty() {
            continue;
        }
        crate::Cli::try_parse_from(std::iter::once("slipway-bench".to_string()).chain(args.iter().cloned()))
            .map_err(|e| format!("--scenario '{item}': {e}"))?;
        if args[0] == "compare" {
            return Err("compare cannot compare itself".into());
        }
        out.push(Planned { name: args[0].clone(), args });
    }
    if out.is_empty() {
        return Err("no --scenario to run".into());
    }
    Ok(out)
}

/// Runs of one metric, per side.
type Runs = BTreeMap<String, [Vec<f64>; 2]>;

/// Whether a larger value of a metric is better (`Some(true)`), worse, or neither is known.
fn higher_is_better(metric: &str) -> Option<bool> {
    let name = metric.rsplit('/').next().unwrap_or(metric);
    // Requests to the controller are load Slipway puts on it, whatever the unit.
    if name.starts_with("aap_") {
        return Some(false);
    }
    if name.ends_with("per_second") || name.starts_with("ratio") {
        return Some(true);
    }
    let costs = ["_ms", "bytes", "seconds", "per_op", "rss", "cores"];
    costs.iter().any(|c| name.contains(c)).then_some(false)
}

/// The JSON line a scenario prints last, flattened to `label/metric → value`; a record's
/// `setup` and `store` name it.
fn metrics(scenario: &str, stdout: &str) -> Result<BTreeMap<String, f64>, String> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('[') || l.starts_with('{'))
        .ok_or_else(|| format!("{scenario} printed no JSON line"))?;
    let parsed: Value = serde_json::from_str(line).map_err(|e| format!("{scenario}'s JSON line: {e}"))?;
    let records = match parsed {
        Value::Array(items) => items,
        one => vec![one],
    };
    let mut out = BTreeMap::new();
    for r in &records {
        let label: Vec<&str> = ["setup", "store"].iter().filter_map(|k| r[*k].as_str()).collect();
        let prefix = if label.is_empty() { scenario.to_string() } else { format!("{scenario}/{}", label.join("/")) };
        for (k, v) in r.as_object().into_iter().flatten() {
            // Settings the run was given (`ops`, `in_flight`, rates) are not results.
            if let Some(x) = v.as_f64().filter(|_| !is_setting(k)) {
                out.insert(format!("{prefix}/{k}"), x);
            }
        }
    }
    Ok(out)
}

fn is_setting(key: &str) -> bool {
    [
        "ops",
        "in_flight",
        "aged_seconds",
        "put_rate",
        "get_rate",
        "job_seconds",
        "poll_seconds",
        "resources",
        "payload_bytes",
        "jobs",
        "concurrency",
        "replicas",
        "lease_seconds",
        "launch_ambiguity_seconds",
    ]
    .contains(&key)
}

fn run(bench: &PathBuf, scenario: &str, args: &[String]) -> Result<BTreeMap<String, f64>, String> {
    let out = Command::new(bench).args(args).output().map_err(|e| format!("running {}: {e}", bench.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{} {scenario} failed: {}", bench.display(), err.trim()));
    }
    metrics(scenario, &String::from_utf8_lossy(&out.stdout))
}

/// A difference of medians below this share of the base's is no change, however tight the
/// ranges (4.03 against 4.04 store writes per operation is rounding, not a regression).
const SMALLEST_CHANGE: f64 = 0.02;

fn verdict(metric: &str, base: &[f64], new: &[f64]) -> &'static str {
    let (bmin, bmax) = (base.iter().copied().fold(f64::MAX, f64::min), base.iter().copied().fold(f64::MIN, f64::max));
    let (nmin, nmax) = (new.iter().copied().fold(f64::MAX, f64::min), new.iter().copied().fold(f64::MIN, f64::max));
    let (mb, mn) = (median(base), median(new));
    let noise = (SMALLEST_CHANGE * mb.abs()).max(bmax - bmin).max(nmax - nmin).max(f64::MIN_POSITIVE);
    let changed = (mn - mb).abs() > noise;
    let above = changed && nmin > bmax;
    let below = changed && nmax < bmin;
    match (higher_is_better(metric), above, below) {
        (_, false, false) => "within noise",
        (Some(true), true, _) | (Some(false), _, true) => "better",
        (Some(_), _, _) => "worse",
        (None, true, _) => "higher",
        (None, _, _) => "lower",
    }
}

fn short(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

pub async fn run_compare(a: Args) -> Result<(), String> {
    let scenarios = plan(&a.scenarios)?;
    for bench in [&a.base, &a.new] {
        if !bench.is_file() {
            return Err(format!("{}: no such slipway-bench binary", bench.display()));
        }
    }
    let rounds = a.rounds.max(1);
    let mut runs = Runs::new();
    for round in 1..=rounds {
        for scenario in &scenarios {
            for (side, bench) in [&a.base, &a.new].into_iter().enumerate() {
                eprintln!("round {round}/{rounds}: {} with {}", scenario.args.join(" "), bench.display());
                let bench = bench.clone();
                let (scenario_name, args) = (scenario.name.clone(), scenario.args.clone());
                let measured = tokio::task::spawn_blocking(move || run(&bench, &scenario_name, &args))
                    .await
                    .map_err(|e| e.to_string())??;
                for (metric, value) in measured {
                    runs.entry(metric).or_default()[side].push(value);
                }
            }
        }
    }
    println!("{:<62} {:>10} {:>10} {:>6}  verdict", "metric", "base", "new", "ratio");
    let mut json = Vec::new();
    for (metric, [b, n]) in &runs {
        if b.is_empty() || n.is_empty() {
            continue;
        }
        let (mb, mn) = (median(b), median(n));
        let ratio = if mb == 0.0 { f64::NAN } else { mn / mb };
        let word = verdict(metric, b, n);
        println!("{metric:<62} {:>10} {:>10} {ratio:>6.2}  {word}", short(mb), short(mn));
        let list = |v: &[f64]| v.iter().map(|x| short(*x)).collect::<Vec<_>>().join(" · ");
        println!("{:<62} {:>21}", "", format!("[{}] vs [{}]", list(b), list(n)));
        json.push(serde_json::json!({"metric": metric, "base": b, "new": n, "ratio": ratio, "verdict": word}));
    }
    println!("{}", Value::Array(json));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_needs_the_ranges_apart_and_knows_which_way_is_better() {
        assert_eq!(
            verdict("burn-down/slipway/sqlite-full/ops_per_second", &[900.0, 1000.0], &[1100.0, 1200.0]),
            "better"
        );
        assert_eq!(
            verdict("burn-down/slipway/sqlite-full/ops_per_second", &[900.0, 1000.0], &[950.0, 1200.0]),
            "within noise"
        );
        assert_eq!(verdict("steady/webhooks/accept_p99_ms", &[100.0, 120.0], &[130.0, 140.0]), "worse");
        assert_eq!(verdict("memory/bytes_per_in_flight_op", &[9000.0], &[8000.0]), "better");
        assert_eq!(verdict("x/unknown", &[1.0], &[2.0]), "higher");
        assert_eq!(verdict("steady/polling/aap_requests_per_second", &[100.0], &[50.0]), "better");
        assert_eq!(verdict("burn-down/x/write_calls_per_op", &[4.03, 4.03], &[4.04, 4.04]), "within noise");
        // Ranges apart, but the difference (0.30) is smaller than the new side's spread (0.45).
        assert_eq!(verdict("steady/polling/accept_p50_ms", &[3.33, 3.41, 3.49], &[3.53, 3.98, 3.71]), "within noise");
        assert_eq!(verdict("steady/polling/accept_p50_ms", &[3.33, 3.41, 3.49], &[1.9, 2.0, 2.1]), "better");
    }

    #[test]
    fn a_scenarios_json_line_becomes_labelled_metrics() {
        let out = "table\n[{\"setup\":\"slipway\",\"store\":\"postgres\",\"ops\":10,\"ops_per_second\":5.5}]\n";
        let m = metrics("burn-down", out).unwrap();
        assert_eq!(m.get("burn-down/slipway/postgres/ops_per_second"), Some(&5.5));
        assert!(!m.contains_key("burn-down/slipway/postgres/ops"), "a setting, not a result");
        let m = metrics("memory", "{\"bytes_per_in_flight_op\": 8000}").unwrap();
        assert_eq!(m.get("memory/bytes_per_in_flight_op"), Some(&8000.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert!(metrics("x", "no json").is_err());
    }

    #[test]
    fn each_scenario_of_the_list_is_checked_with_its_own_options() {
        let items = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let planned = plan(&items(&["burn-down --ops 500 --stores sqlite-full,postgres", "memory"])).unwrap();
        assert_eq!(planned.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), vec!["burn-down", "memory"]);
        assert_eq!(planned[0].args, vec!["burn-down", "--ops", "500", "--stores", "sqlite-full,postgres"]);
        assert!(plan(&items(&["steady --ops 5"])).is_err(), "steady takes no --ops");
        assert!(plan(&items(&["burn-down --stores mysql"])).is_err());
        assert!(plan(&items(&["nonsense"])).is_err());
        assert!(plan(&items(&["compare a b"])).is_err());
        assert!(plan(&items(&[" "])).is_err());
    }
}
