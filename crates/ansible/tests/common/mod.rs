//! Shared helpers for the real-ansible tests: the venv, a playbook dir, requests, and
//! the process table.

#![allow(dead_code)] // each test file uses its own part of these

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use slipway_ansible::{AnsibleOptions, AnsibleProvider};
use slipway_domain::{ArmId, ConfigVersion, OperationId};
use slipway_provider::{JobAction, JobHandle, JobStatus, LaunchRequest, Provider, RunMode};
pub use slipway_test_support::eventually;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The venv's bin dir, created once per test binary (the script is idempotent).
pub fn venv_bin() -> PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY
        .get_or_init(|| {
            let root = repo_root();
            let status = std::process::Command::new(root.join("scripts/setup-python.sh"))
                .status()
                .expect("run scripts/setup-python.sh");
            assert!(status.success(), "setup-python.sh failed: {status}");
            root.join(".venv/bin")
        })
        .clone()
}

/// A playbook dir and a work dir that live as long as the fixture.
pub struct Fixture {
    pub playbooks: tempfile::TempDir,
    pub work: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        Fixture { playbooks: tempfile::tempdir().unwrap(), work: tempfile::tempdir().unwrap() }
    }

    /// Writes playbook `file` running `tasks` (YAML list items, indented 4) on localhost.
    pub fn playbook(&self, file: &str, tasks: &str) {
        let body = format!("- hosts: localhost\n  gather_facts: false\n  tasks:\n{tasks}");
        std::fs::write(self.playbooks.path().join(file), body).unwrap();
    }

    pub fn options(&self) -> AnsibleOptions {
        let bin = venv_bin();
        AnsibleOptions {
            playbook_dir: self.playbooks.path().to_path_buf(),
            work_dir: self.work.path().to_path_buf(),
            runner: bin.join("ansible-runner"),
            python_interpreter: bin.join("python"),
            cancel_grace: Duration::from_secs(3),
            ..AnsibleOptions::default()
        }
    }

    pub fn provider(&self) -> AnsibleProvider {
        AnsibleProvider::new(self.options()).unwrap()
    }
}

/// The subscription and operation every test request names.
pub const SUBSCRIPTION: &str = "6f1c2a3e-0000-4000-8000-000000000001";
pub const OPERATION: &str = "0190b6a4-7c1e-7000-8000-000000000001";

/// A create of the thing named `kind` (its id's last segment), of kind `kind`.
pub fn request(key: &str, kind: &str, properties: Value) -> LaunchRequest {
    LaunchRequest {
        idempotency_key: key.into(),
        action: JobAction::Create,
        kind: kind.into(),
        resource_type: "slipway.test/things".into(),
        resource_id: ArmId::parse(&format!(
            "/subscriptions/{SUBSCRIPTION}/resourceGroups/g/providers/Slipway.Test/things/{kind}"
        ))
        .expect("a valid id"),
        location: Some("local".into()),
        tags: json!({"env": "test"}).as_object().unwrap().clone(),
        properties,
        outputs: Default::default(),
        operation_id: OperationId::parse(OPERATION),
        config_version: ConfigVersion::new("cv-1"),
        intended_at: None,
        context: None,
        secrets: Default::default(),
        parent: None,
        references: Default::default(),
        parameters: Value::Null,
        mode: RunMode::Run,
    }
}

/// Polls status until the job is terminal.
pub async fn terminal(p: &impl Provider, h: &JobHandle, timeout: Duration) -> JobStatus {
    eventually("a terminal job state", timeout, async || {
        let st = p.status(std::slice::from_ref(h)).await.remove(0).unwrap();
        st.state.is_terminal().then_some(st)
    })
    .await
}

/// Pids of running (non-zombie) processes whose argv is exactly `argv`.
pub fn processes_with_argv(argv: &[&str]) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = raw.split(|b| *b == 0).filter(|a| !a.is_empty()).collect();
        if args.len() != argv.len() || args.iter().zip(argv).any(|(a, b)| *a != b.as_bytes()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let state = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next());
        if state != Some("Z") && state != Some("X") {
            out.push(pid);
        }
    }
    out
}

/// A `sleep` argument unique to this test binary and `n` (`sleep` takes decimals).
pub fn sleep_marker(n: u32) -> String {
    format!("{}.{}", 300 + n, std::process::id())
}
