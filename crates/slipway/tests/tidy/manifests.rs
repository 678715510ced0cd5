//! The dependency rules ARCHITECTURE.md states, read from `cargo metadata`: what each crate
//! may link, so a new dependency that breaks a layer fails here, not in review.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use super::{Findings, assert_none};

/// The workspace as `cargo metadata` resolves it for this machine's platform (offline: the
/// test build already fetched all of that; other platforms' crates are never fetched).
struct Workspace {
    /// Package id → name, for every package in the resolved graph.
    names: BTreeMap<String, String>,
    /// Package id → the ids of its normal (non-dev, non-build) dependencies.
    normal: BTreeMap<String, Vec<String>>,
    /// Workspace members' manifests as declared (`dependencies` with kind, optional, features).
    members: Vec<Value>,
}

impl Workspace {
    fn read() -> &'static Workspace {
        static READ: OnceLock<Workspace> = OnceLock::new();
        READ.get_or_init(Workspace::load)
    }

    fn load() -> Workspace {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        // Slipway builds for Linux with glibc only (systemd, ansible-runner).
        let platform = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
        let out = Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--offline", "--filter-platform", &platform, "--manifest-path"])
            .arg(super::root().join("Cargo.toml"))
            .output()
            .expect("cargo metadata runs");
        assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
        let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
        let packages = meta["packages"].as_array().expect("packages");
        let names = packages
            .iter()
            .map(|p| (p["id"].as_str().unwrap().to_string(), p["name"].as_str().unwrap().to_string()))
            .collect();
        let member_ids: BTreeSet<&str> =
            meta["workspace_members"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
        let members = packages.iter().filter(|p| member_ids.contains(p["id"].as_str().unwrap())).cloned().collect();
        let mut normal = BTreeMap::new();
        for node in meta["resolve"]["nodes"].as_array().expect("resolve nodes") {
            let deps = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()))
                .map(|d| d["pkg"].as_str().unwrap().to_string())
                .collect();
            normal.insert(node["id"].as_str().unwrap().to_string(), deps);
        }
        Workspace { names, normal, members }
    }

    fn id_of(&self, name: &str) -> &str {
        self.names.iter().find(|(_, n)| *n == name).map(|(id, _)| id.as_str()).unwrap_or_else(|| panic!("{name}"))
    }

    /// Every package `name` links in a normal build, itself excluded, by name. The test
    /// support crate is not followed: it reaches the store only through the store's test-only
    /// `conformance` feature, which the graph shows because features are unified across the
    /// workspace (`test_support_is_only_for_tests` keeps it that way).
    fn links(&self, name: &str) -> BTreeSet<String> {
        let test_support = self.id_of("slipway-test-support");
        let mut seen = BTreeSet::new();
        let mut todo = vec![self.id_of(name).to_string()];
        while let Some(id) = todo.pop() {
            for dep in self.normal.get(&id).into_iter().flatten().filter(|d| *d != test_support) {
                if seen.insert(dep.clone()) {
                    todo.push(dep.clone());
                }
            }
        }
        seen.iter().map(|id| self.names[id].clone()).collect()
    }

    /// Each member's declared dependencies: (member, dependency, kind, optional).
    fn declared(&self) -> Vec<(String, String, String, bool)> {
        let mut out = Vec::new();
        for m in &self.members {
            for d in m["dependencies"].as_array().unwrap() {
                out.push((
                    m["name"].as_str().unwrap().to_string(),
                    d["name"].as_str().unwrap().to_string(),
                    d["kind"].as_str().unwrap_or("normal").to_string(),
                    d["optional"].as_bool().unwrap_or(false),
                ));
            }
        }
        out
    }
}

/// The crates of the pure core and the engine around it: none of them speaks HTTP.
const CORE: &[&str] = &["slipway-domain", "slipway-store", "slipway-engine", "slipway-provider"];
const HTTP: &[&str] = &["axum", "hyper", "hyper-util", "reqwest", "tower", "tower-http", "h2"];

#[test]
fn http_stays_out_of_the_core() {
    let ws = Workspace::read();
    let mut offences = Vec::new();
    for krate in CORE {
        let links = ws.links(krate);
        for http in HTTP.iter().filter(|h| links.contains(**h)) {
            offences.push(format!("{krate} links {http}"));
        }
    }
    assert_none("HTTP crates in the core (only the edges speak HTTP)", offences);
}

const DATABASE_DRIVERS: &[&str] = &["rusqlite", "tokio-postgres", "deadpool-postgres", "tokio-postgres-rustls"];

/// Normal dependencies on a database driver outside the store, and why.
const DRIVERS_OUTSIDE_STORE: &[(&str, &str, &str)] = &[
    ("slipway-bench", "rusqlite", "the yardstick times raw inserts into a scratch SQLite table"),
    ("slipway-bench", "tokio-postgres", "the yardstick's raw inserts on PostgreSQL; the soak's schema size"),
];

#[test]
fn database_drivers_only_in_the_store() {
    let ws = Workspace::read();
    let mut findings = Findings::default();
    for (member, dep, kind, _) in ws.declared() {
        if member == "slipway-store" || kind != "normal" || !DATABASE_DRIVERS.contains(&dep.as_str()) {
            continue;
        }
        findings.found(DRIVERS_OUTSIDE_STORE.iter().position(|(m, d, _)| *m == member && *d == dep), || {
            format!("{member} depends on {dep}")
        });
    }
    findings.assert_none(
        "database drivers outside slipway-store",
        "DRIVERS_OUTSIDE_STORE",
        DRIVERS_OUTSIDE_STORE.len(),
        |i| format!("{} on {}", DRIVERS_OUTSIDE_STORE[i].0, DRIVERS_OUTSIDE_STORE[i].1),
    );
}

#[test]
fn the_console_never_reads_the_store() {
    let links = Workspace::read().links("slipway-console");
    let offences = ["slipway-store", "slipway-engine"]
        .iter()
        .filter(|c| links.contains(**c))
        .map(|c| format!("slipway-console links {c}"))
        .collect();
    assert_none("the console reaches the store (it must go through the API)", offences);
}

#[test]
fn test_support_is_only_for_tests() {
    let ws = Workspace::read();
    let mut offences = Vec::new();
    for (member, dep, kind, optional) in ws.declared() {
        if dep != "slipway-test-support" || kind == "dev" {
            continue;
        }
        // The store's conformance suite is a test-only feature other crates' tests enable.
        let behind_conformance = member == "slipway-store" && optional && {
            let store = ws.members.iter().find(|m| m["name"] == "slipway-store").unwrap();
            store["features"]["conformance"].as_array().unwrap().iter().any(|f| f == "dep:slipway-test-support")
        };
        if !behind_conformance {
            offences.push(format!("{member} has slipway-test-support as a {kind} dependency"));
        }
    }
    assert_none("slipway-test-support outside dev-dependencies", offences);
}
