//! Tidy tests: the invariants ARCHITECTURE.md states about the source tree itself, checked
//! over every `.rs` file of the workspace so a change that breaks one fails here instead of
//! drifting. Each rule names its exceptions, with the reason, in this file.

mod manifests;

use std::collections::BTreeSet;
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

/// What a rule with an allowlist found: its offences, and the entries that excused a match.
/// An entry that excused nothing no longer applies, and fails the rule too.
#[derive(Default)]
struct Findings {
    offences: Vec<String>,
    used: BTreeSet<usize>,
}

impl Findings {
    /// A match of the rule: excused by allowlist entry `entry`, or an offence.
    fn found(&mut self, entry: Option<usize>, offence: impl FnOnce() -> String) {
        match entry {
            Some(i) => {
                self.used.insert(i);
            }
            None => self.offences.push(offence()),
        }
    }

    /// No offence, and every one of the `len` entries of `list` used (`name` says which).
    fn assert_none(mut self, rule: &str, list: &str, len: usize, name: impl Fn(usize) -> String) {
        let stale = (0..len).filter(|i| !self.used.contains(i));
        self.offences.extend(stale.map(|i| format!("{list}: `{}` no longer applies: unlist it", name(i))));
        assert_none(rule, self.offences);
    }
}

/// Files allowed past 600 lines, and why.
const LONG_FILES: &[(&str, &str)] = &[
    ("crates/aap-sim/src/query.rs", "AWX's query language: one parser and its filters, read together"),
    ("crates/aap-sim/tests/sim_api.rs", "the simulator's API walked endpoint by endpoint against one fixture"),
    ("crates/aap/tests/sim.rs", "the AAP provider against the simulator: one scenario per AWX behaviour"),
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
    let mut findings = Findings::default();
    for (path, text) in sources() {
        if path.starts_with("crates/store/") {
            continue;
        }
        let listed = SQL_OUTSIDE_STORE.iter().position(|(p, _)| *p == path);
        for (n, line) in code_lines(&text) {
            if !statement.is_match(line) {
                continue;
            }
            findings.found(listed, || format!("{path}:{n}: {}", line.trim()));
        }
    }
    findings.assert_none(
        "SQL outside crates/store and its named exceptions",
        "SQL_OUTSIDE_STORE",
        SQL_OUTSIDE_STORE.len(),
        |i| SQL_OUTSIDE_STORE[i].0.into(),
    );
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
    let mut findings = Findings::default();
    for (path, text) in sources() {
        if !is_product(&path) {
            continue;
        }
        let listed = WALL_CLOCK_READERS.iter().position(|(p, _)| *p == path);
        for (n, line) in code_lines(&text) {
            if !line.contains("SystemTime::now") {
                continue;
            }
            findings.found(listed, || format!("{path}:{n}: {}", line.trim()));
        }
    }
    findings.assert_none(
        "SystemTime::now outside the clock and the named edges (pass a Clock in)",
        "WALL_CLOCK_READERS",
        WALL_CLOCK_READERS.len(),
        |i| WALL_CLOCK_READERS[i].0.into(),
    );
}

/// Arithmetic that grows a number outside `retry.rs`, and why it is not a retry delay: each
/// entry is a file and a snippet of the line.
const GROWTH_OUTSIDE_RETRY: &[(&str, &str, &str)] = &[
    ("crates/aap-sim/src/util.rs", "10i64.pow(", "scales a fraction of a second to microseconds"),
    ("crates/aap-sim/src/util.rs", "(acc << 6)", "decoding base64, six bits a character"),
    ("crates/aap-sim/src/util.rs", "(1 << bits)", "a bit mask while decoding base64"),
    ("crates/aap/src/secret.rs", "(u32::from(b[0]) << 16)", "encoding base64, three bytes at a time"),
    ("crates/ansible/src/jobdir.rs", "MAX_DETAILS * 2", "how much of a failed job's output is read for its message"),
    ("crates/auth/src/api_tokens.rs", "ID_BYTES * 2", "a token id's length in hex digits"),
    ("crates/domain/src/ids/operation.rs", "(time << 16)", "a UUIDv7's bit layout"),
    ("crates/listener/src/lib.rs", "1 << 20", "an open-file limit to ask for (1 Mi descriptors)"),
    ("crates/listener/src/registry.rs", "<< SINCE_SHIFT", "a connection's phase and idle time packed in one word"),
    (
        "crates/notify/src/destination.rs",
        "retry.max().saturating_mul(2)",
        "how long a quiet destination's state is kept",
    ),
    ("crates/notify/src/lib.rs", "request_timeout * 2", "a claim outlives two request timeouts"),
    (
        "crates/slipway/src/plan/server.rs",
        "max_concurrent_requests.saturating_mul(2)",
        "descriptors kept per AAP request",
    ),
    ("crates/store/src/sqlite.rs", "max_batch.saturating_mul(2)", "a queue's capacity: two batches"),
    ("crates/store/src/postgres/schema.rs", "ms.saturating_mul(2)", "a session's idle timeout: twice the statement's"),
    ("crates/store/src/postgres.rs", "t.saturating_mul(2)", "a bound on one whole connection attempt"),
    ("crates/types/src/name_rule.rs", "size_limit(1 << 20)", "a name pattern's compiled size (1 MiB)"),
];

/// Every retry delay is computed by `domain::retry::RetryPolicy`: outside it no
/// exponentiation, no shift and no doubling, whatever the names around it — each that is
/// not a retry delay is listed with what it is.
#[test]
fn retry_delays_are_computed_only_in_retry_rs() {
    let growth = regex::Regex::new(r"\.pow\(|powi\(|_pow\(|<<\s*[A-Za-z_0-9(]|\*=?\s*2\b|_mul\(2\)").unwrap();
    let mut findings = Findings::default();
    for (path, text) in sources() {
        if !is_product(&path) || path == "crates/domain/src/retry.rs" {
            continue;
        }
        for (n, line) in code_lines(&text) {
            if !growth.is_match(line) {
                continue;
            }
            findings
                .found(GROWTH_OUTSIDE_RETRY.iter().position(|(p, what, _)| *p == path && line.contains(what)), || {
                    format!("{path}:{n}: {}", line.trim())
                });
        }
    }
    findings.assert_none(
        "retry arithmetic outside domain/src/retry.rs (use RetryPolicy)",
        "GROWTH_OUTSIDE_RETRY",
        GROWTH_OUTSIDE_RETRY.len(),
        |i| format!("{}: {}", GROWTH_OUTSIDE_RETRY[i].0, GROWTH_OUTSIDE_RETRY[i].1),
    );
}

/// The crate directories under `crates/`.
fn crate_dirs() -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(root().join("crates"))
        .expect("crates/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    dirs
}

/// ARCHITECTURE.md's code map has a paragraph for every crate, opening with its path in
/// bold (`**`crates/x`**`), and none for a crate that is gone.
#[test]
fn every_crate_is_in_the_map() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let opening = regex::Regex::new(r"(?m)^\*\*`crates/([a-z0-9-]+)`\*\*").unwrap();
    let mapped: BTreeSet<String> = opening.captures_iter(&map).map(|c| c[1].to_string()).collect();
    let dirs: BTreeSet<String> = crate_dirs().into_iter().collect();
    let mut offences: Vec<String> =
        dirs.difference(&mapped).map(|d| format!("crates/{d} has no paragraph in the code map")).collect();
    offences.extend(mapped.difference(&dirs).map(|d| format!("the code map describes crates/{d}, which is gone")));
    assert_none("ARCHITECTURE.md's code map and the crates disagree", offences);
}

/// Module detail lives in the module: every source file opens with a `//!` doc saying what
/// it is for (unit-test files, whose module is documented where it is declared, aside).
#[test]
fn every_module_has_a_doc() {
    let offences = sources()
        .into_iter()
        .filter(|(path, _)| is_product(path))
        .filter(|(_, text)| !text.trim_start().starts_with("//!"))
        .map(|(path, _)| format!("{path} does not open with a //! doc"))
        .collect();
    assert_none("modules without a doc", offences);
}

/// Where ARM paths may be taken apart by their keywords (`subscriptions`, `resourceGroups`,
/// `providers`, `locations`, `operationStatuses`): the one grammar, and the API's router,
/// which dispatches every route and hands a resource id's parts to that grammar.
const PATH_GRAMMARS: &[(&str, &str)] = &[
    ("crates/domain/src/ids/mod.rs", "the one grammar: resource ids"),
    ("crates/domain/src/ids/operation.rs", "the one grammar: operation status paths"),
    ("crates/api/src/route.rs", "the router: each route's shape, resource ids checked by `ids`"),
    ("crates/api/src/route/guardrails.rs", "the router's guardrail routes: quota, lock and policy scopes"),
];

/// One resource-id grammar (`slipway_domain::ids`) and one UUIDv7 layout
/// (`OperationId::version7`) for every crate: the CLI, the console and the providers parse
/// ids with it instead of splitting paths of their own.
#[test]
fn one_resource_id_grammar() {
    let keyword = regex::Regex::new(
        r#"(eq_ignore_ascii_case\(|is\(\w+, )"(subscriptions|resourceGroups|providers|locations|operationStatuses)"\)"#,
    )
    .unwrap();
    let uuid_v7 = regex::Regex::new(r"0x7000|new_v7|now_v7").unwrap();
    let mut findings = Findings::default();
    for (path, text) in sources() {
        if !is_product(&path) {
            continue;
        }
        let grammar = PATH_GRAMMARS.iter().position(|(p, _)| *p == path);
        for (n, line) in code_lines(&text) {
            if keyword.is_match(line) {
                findings.found(grammar, || format!("{path}:{n}: a path taken apart by hand: {}", line.trim()));
            }
            if uuid_v7.is_match(line) && path != "crates/domain/src/ids/operation.rs" {
                findings
                    .offences
                    .push(format!("{path}:{n}: a UUIDv7 made outside OperationId::version7: {}", line.trim()));
            }
        }
    }
    findings.assert_none(
        "resource ids parsed outside slipway_domain::ids",
        "PATH_GRAMMARS",
        PATH_GRAMMARS.len(),
        |i| PATH_GRAMMARS[i].0.into(),
    );
}

/// Domain types that derive serde, and why: everything else reaches clients through the API's
/// `wire` and the store through its own documents, converted by hand, so a change to a domain
/// type cannot change a format by accident.
const SERIALISED_DOMAIN_TYPES: &[(&str, &str, &str)] = &[
    (
        "crates/domain/src/names.rs",
        "$name",
        "the string names: job keys and ids are plain strings in job.json and extra vars",
    ),
    ("crates/domain/src/time.rs", "Timestamp", "a field of the API-token body the auth crate stores"),
    ("crates/domain/src/ids/mod.rs", "SubscriptionId", "a field of the API-token body the auth crate stores"),
];

#[test]
fn domain_types_are_serialised_only_where_listed() {
    let derive = regex::Regex::new(r"#\[derive\([^)]*\b(Serialize|Deserialize)\b").unwrap();
    let item = regex::Regex::new(r"pub (?:struct|enum) (\$?\w+)").unwrap();
    let mut findings = Findings::default();
    for (path, text) in sources() {
        if !path.starts_with("crates/domain/src/") {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !derive.is_match(line) {
                continue;
            }
            let name = lines[i..].iter().find_map(|l| item.captures(l)).map(|c| c[1].to_string()).unwrap_or_default();
            findings.found(SERIALISED_DOMAIN_TYPES.iter().position(|(p, n, _)| *p == path && *n == name), || {
                format!("{path}:{}: {name} derives serde", i + 1)
            });
        }
    }
    findings.assert_none(
        "domain types with serde derives that are not listed",
        "SERIALISED_DOMAIN_TYPES",
        SERIALISED_DOMAIN_TYPES.len(),
        |i| format!("{} {}", SERIALISED_DOMAIN_TYPES[i].0, SERIALISED_DOMAIN_TYPES[i].1),
    );
}
