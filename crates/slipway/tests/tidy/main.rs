//! Tidy tests: the invariants ARCHITECTURE.md states about the source tree itself, checked
//! over every `.rs` file of the workspace so a change that breaks one fails here instead of
//! drifting. Each rule names its exceptions, with the reason, in this file.

use std::path::{Path, PathBuf};

/// The workspace root (this crate lives in `crates/slipway`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("workspace root").to_path_buf()
}

/// Every `.rs` file under `crates/`, as (path relative to the root, text), in path order.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = root();
    let mut paths = Vec::new();
    walk(&root.join("crates"), &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read source");
            (p.strip_prefix(&root).expect("under root").to_string_lossy().replace('\\', "/"), text)
        })
        .collect()
}

/// Product code: a crate's `src/`, without its unit-test modules' own files.
fn is_product(path: &str) -> bool {
    path.contains("/src/") && !path.ends_with("/tests.rs") && !path.contains("/tests/")
}

/// Lines that are code, not comments.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim_start().starts_with("//"))
}

fn assert_none(rule: &str, offences: Vec<String>) {
    assert!(offences.is_empty(), "{rule}:\n  {}", offences.join("\n  "));
}

/// Files allowed past 600 lines, and why.
const LONG_FILES: &[(&str, &str)] = &[
    ("crates/aap-sim/src/query.rs", "AWX's query language: one parser and its filters, read together"),
    ("crates/aap-sim/tests/sim_api.rs", "the simulator's API walked endpoint by endpoint against one fixture"),
    ("crates/aap/tests/sim.rs", "the AAP provider against the simulator: one scenario per AWX behaviour"),
    ("crates/slipway/tests/arm_api.rs", "the ARM contract black-box, one test per rule of docs/arm-contract.md"),
];

#[test]
fn no_source_file_passes_600_lines_without_a_reason() {
    let sources = sources();
    let mut offences = Vec::new();
    for (path, text) in &sources {
        let lines = text.lines().count();
        if lines > 600 && !LONG_FILES.iter().any(|(p, _)| p == path) {
            offences.push(format!("{path}: {lines} lines; split it along its seams or list it in LONG_FILES"));
        }
    }
    for (path, _) in LONG_FILES {
        match sources.iter().find(|(p, _)| p == path) {
            None => offences.push(format!("{path} is listed in LONG_FILES but does not exist")),
            Some((_, text)) if text.lines().count() <= 600 => {
                offences.push(format!("{path} is listed in LONG_FILES but is short now: unlist it"))
            }
            Some(_) => {}
        }
    }
    assert_none("files over 600 lines", offences);
}

/// Where SQL may appear outside `crates/store` (ARCHITECTURE.md, "Only `store` knows
/// Slipway's SQL").
const SQL_OUTSIDE_STORE: &[(&str, &str)] = &[
    ("crates/bench/src/soak.rs", "measures the size of its PostgreSQL schema, drops it at the end"),
    ("crates/bench/src/store_ceiling.rs", "the yardstick times raw inserts into a scratch table"),
    (
        "crates/slipway/tests/common/postgres.rs",
        "administers its throwaway clusters: the test database, a synchronous standby",
    ),
    ("crates/slipway/tests/replica_faults.rs", "reads what the replicas stored, drops its test schema"),
    ("crates/slipway/tests/secrets.rs", "scans every row of its test schema for a planted secret"),
    ("crates/slipway/tests/upgrade.rs", "loads the dumps earlier versions wrote into schemas of its own, drops them"),
];

#[test]
fn sql_lives_in_the_store() {
    let statement = regex::Regex::new(
        r#"(?i)"\s*(SELECT\s|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|SCHEMA|INDEX)|DROP\s+(TABLE|SCHEMA)|ALTER\s+TABLE|PRAGMA\s)"#,
    )
    .unwrap();
    let mut offences = Vec::new();
    for (path, text) in sources() {
        if path.starts_with("crates/store/") || SQL_OUTSIDE_STORE.iter().any(|(p, _)| *p == path) {
            continue;
        }
        for (n, line) in code_lines(&text) {
            if statement.is_match(line) {
                offences.push(format!("{path}:{n}: {}", line.trim()));
            }
        }
    }
    assert_none("SQL outside crates/store and its named exceptions", offences);
}

/// Where product code may read the wall clock: the clock itself, and edges whose time is
/// not Slipway's decision (a migration's stamp, a job's launch stamp in the provider's own
/// files, the simulator standing in for AWX, the benchmark).
const WALL_CLOCK_READERS: &[(&str, &str)] = &[
    ("crates/domain/src/time.rs", "SystemClock: the one clock the engine and the API are given"),
    ("crates/store/src/sqlite/schema.rs", "when a migration was applied, recorded beside it"),
    ("crates/store/src/postgres/schema.rs", "when a migration was applied, recorded beside it"),
    ("crates/ansible/src/launch.rs", "the launch stamp in a job's own directory"),
    ("crates/ansible/src/lib.rs", "the retention sweep's now"),
    ("crates/aap-sim/src/util.rs", "the simulator keeps AWX's own clock"),
    ("crates/bench/src/steady.rs", "the benchmark's wall-clock stamps"),
    ("crates/bench/src/harness.rs", "a unique name for a benchmark run"),
    ("crates/cli/src/oidc.rs", "the client's own token cache: when a cached token expires"),
    ("crates/test-support/src/callback.rs", "a callback's arrival, compared with a real server's endTime"),
];

#[test]
fn the_wall_clock_is_read_only_at_the_edges() {
    let mut offences = Vec::new();
    for (path, text) in sources() {
        if !is_product(&path) || WALL_CLOCK_READERS.iter().any(|(p, _)| *p == path) {
            continue;
        }
        for (n, line) in code_lines(&text) {
            if line.contains("SystemTime::now") {
                offences.push(format!("{path}:{n}: {}", line.trim()));
            }
        }
    }
    assert_none("SystemTime::now outside the clock and the named edges (pass a Clock in)", offences);
}

/// Arithmetic that grows a number outside `retry.rs`, and why it is not a retry delay.
const GROWTH_OUTSIDE_RETRY: &[(&str, &str, &str)] = &[
    ("crates/aap-sim/src/util.rs", "10i64.pow(", "scales a fraction of a second to microseconds"),
    ("crates/aap-sim/src/util.rs", "(1 << bits)", "a bit mask while decoding base64"),
    (
        "crates/notify/src/destination.rs",
        "retry.max().saturating_mul(2)",
        "how long a quiet destination's state is kept",
    ),
    ("crates/store/src/postgres.rs", "t.saturating_mul(2)", "a bound on one whole connection attempt"),
];

/// Every retry delay is computed by `domain::retry::RetryPolicy`: outside it no
/// exponentiation, no doubling in place and no doubling of a delay.
#[test]
fn retry_delays_are_computed_only_in_retry_rs() {
    let growth = regex::Regex::new(r"\.pow\(|powi\(|_pow\(|<<\s*[a-z_]|\*=\s*2\b").unwrap();
    let doubled_delay =
        regex::Regex::new(r"(?i)(delay|backoff|wait|retry|sleep|interval).*(\*\s*2\b|_mul\(2\))").unwrap();
    let mut offences = Vec::new();
    for (path, text) in sources() {
        if !is_product(&path) || path == "crates/domain/src/retry.rs" {
            continue;
        }
        for (n, line) in code_lines(&text) {
            let excepted = GROWTH_OUTSIDE_RETRY.iter().any(|(p, what, _)| *p == path && line.contains(what));
            if !excepted && (growth.is_match(line) || doubled_delay.is_match(line)) {
                offences.push(format!("{path}:{n}: {}", line.trim()));
            }
        }
    }
    assert_none("retry arithmetic outside domain/src/retry.rs (use RetryPolicy)", offences);
}

#[test]
fn the_code_map_names_every_module() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut offences = Vec::new();
    for (path, _) in sources() {
        if !is_product(&path) {
            continue;
        }
        let file = Path::new(&path);
        let name = match file.file_stem().and_then(|s| s.to_str()) {
            Some("lib" | "main") => continue,
            Some("mod") => file.parent().and_then(Path::file_name).and_then(|s| s.to_str()).unwrap_or_default(),
            Some(stem) => stem,
            None => continue,
        };
        let named = [
            format!("`{name}`"),
            format!("::{name}`"),
            format!("::{name}::"),
            format!("`{name}::"),
            format!("{name}.rs"),
        ]
        .iter()
        .any(|spelling| map.contains(spelling.as_str()));
        if !named {
            offences.push(format!("{path}: module `{name}`"));
        }
    }
    assert_none("modules ARCHITECTURE.md's code map does not name", offences);
}
