//! Slipway installs and runs like a tool: the binary copied out of the build (as `cargo
//! install` would put it) serves a copy of `examples/` from an empty working directory, its
//! files under the data directory and nothing in the working directory; the example
//! configuration checks from the repository root and from a copy; without a runner anywhere,
//! the problem names every path tried.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::{free_port, python_tools, repo};
use serde_json::json;
use slipway_test_support::{eventually, ready_within};

/// `from` copied to `to`, recursively (files and directories only).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// A scratch machine: the binary alone in its own directory, an empty working directory and
/// an empty home, and a `PATH` of only what is given plus the system's.
struct Machine {
    root: tempfile::TempDir,
}

impl Machine {
    fn new() -> Machine {
        let machine = Machine { root: tempfile::tempdir().unwrap() };
        for dir in ["bin", "cwd", "home"] {
            std::fs::create_dir(machine.path(dir)).unwrap();
        }
        // A link opens no descriptor to write: a copy's, inherited by a child another test
        // forks meanwhile, makes exec fail with "text file busy" until that child execs.
        if std::fs::hard_link(env!("CARGO_BIN_EXE_slipway"), machine.binary()).is_err() {
            std::fs::copy(env!("CARGO_BIN_EXE_slipway"), machine.binary()).unwrap();
        }
        machine
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    fn binary(&self) -> PathBuf {
        self.path("bin/slipway")
    }

    /// The installed binary run in `cwd` with `path` first on `PATH`; no `SLIPWAY_*` from the
    /// test's environment, `HOME` the empty home.
    fn command(&self, cwd: &Path, path: &[&Path], args: &[&str]) -> Command {
        let mut dirs: Vec<PathBuf> = path.iter().map(|p| p.to_path_buf()).collect();
        dirs.extend([PathBuf::from("/usr/bin"), PathBuf::from("/bin")]);
        let mut c = Command::new(self.binary());
        c.args(args)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::join_paths(dirs).unwrap())
            .env("HOME", self.path("home"))
            .stdin(Stdio::null());
        c
    }

    fn run(&self, cwd: &Path, path: &[&Path], args: &[&str]) -> Output {
        unbusy(|| self.command(cwd, path, args).output()).expect("run the installed slipway")
    }
}

/// Runs `exec` again while it fails with "text file busy": a copied binary's write
/// descriptor, inherited by a child forked elsewhere in this process, closes when that child
/// execs, within milliseconds.
fn unbusy<T>(mut exec: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    for _ in 0..100 {
        match exec() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(Duration::from_millis(20));
            }
            done => return done,
        }
    }
    exec()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installed_binary_serves_a_copied_config_from_an_empty_directory() {
    let venv_bin = python_tools().join("bin");
    let m = Machine::new();
    copy_dir(&repo().join("examples"), &m.path("conf"));
    let data = m.path("data");
    let (cwd, config) = (m.path("cwd"), m.path("conf/slipway.toml"));
    let config = config.to_str().unwrap();
    let data_arg = data.to_str().unwrap();

    let checked = m.run(&cwd, &[&venv_bin], &["check-config", "--config", config, "--data-dir", data_arg]);
    assert_eq!(checked.status.code(), Some(0), "check-config: {}", text(&checked.stderr));
    assert_eq!(text(&checked.stdout).trim(), "configuration ok: 1 provider(s), 7 type(s)");

    let port = free_port();
    let log = std::fs::File::create(m.path("serve.log")).unwrap();
    let mut serve = unbusy(|| {
        m.command(&cwd, &[&venv_bin], &["serve", "--config", config, "--data-dir", data_arg])
            .env("SLIPWAY_SERVER__LISTEN", format!("127.0.0.1:{port}"))
            .stdout(log.try_clone()?)
            .stderr(log.try_clone()?)
            .spawn()
    })
    .expect("spawn the installed slipway");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    if let Err(e) = ready_within(&http, &base, Duration::from_secs(60)).await {
        let _ = serve.kill();
        panic!("{e}\n{}", std::fs::read_to_string(m.path("serve.log")).unwrap_or_default());
    }

    let vnet = format!(
        "{base}/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/demo/providers/\
         Slipway.Example/virtualNetworks/vnet1?api-version=2025-06-01"
    );
    let body = json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}});
    let r = http.put(&vnet).json(&body).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap_or_default());
    let status_url = r.headers()["azure-asyncoperation"].to_str().unwrap().to_string();
    let ended = eventually("the create to end", Duration::from_secs(120), async || {
        let doc: serde_json::Value = http.get(&status_url).send().await.ok()?.json().await.ok()?;
        matches!(doc["status"].as_str(), Some("Succeeded" | "Failed" | "Canceled")).then_some(doc)
    })
    .await;
    assert_eq!(ended["status"], "Succeeded", "{ended}");

    // Everything Slipway wrote is under the data directory: the database, the job's
    // directory, and the example playbook's state file (told the directory by the job).
    let state = data.join("state/slipway.example_virtualnetworks/vnet1.json");
    let recorded: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(recorded["properties"]["addressSpace"], "10.0.0.0/16");
    assert!(data.join("slipway.db").is_file());
    let jobs: Vec<String> = listing(&data.join("jobs")).into_iter().filter(|n| n != ".locks").collect();
    assert_eq!(jobs.len(), 1, "one job directory: {jobs:?}");
    assert_eq!(listing(&cwd), Vec::<String>::new(), "nothing in the working directory");
    // Ansible keeps its own temporary files in ~/.ansible (ANSIBLE_HOME moves them).
    assert_eq!(listing(&m.path("home")), [".ansible"], "nothing else in the home directory");
    assert_eq!(listing(&m.path("bin")), ["slipway"], "nothing beside the binary");

    let pid = serve.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = serve.wait().unwrap();
    assert!(status.success(), "serve exits 0 on SIGTERM: {status}");
}

#[test]
fn the_example_config_checks_from_the_repository_root_from_a_copy_and_built_in() {
    // The runner is found through the venv beside the configuration or above it, not PATH.
    python_tools();
    let m = Machine::new();
    let data = m.path("data");
    let data_arg = data.to_str().unwrap();
    let ok = |out: Output, what: &str| {
        assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout).trim(), "configuration ok: 1 provider(s), 7 type(s)", "{what}");
    };
    ok(
        m.run(&repo(), &[], &["check-config", "-c", "examples/slipway.toml", "--data-dir", data_arg]),
        "from the repository root",
    );
    // The built-in default: its paths are the checkout's examples/, wherever it runs.
    ok(m.run(&m.path("cwd"), &[], &["check-config", "--data-dir", data_arg]), "the built-in default");

    // A copy elsewhere, named relative to the working directory, its venv beside it.
    copy_dir(&repo().join("examples"), &m.path("copy"));
    std::os::unix::fs::symlink(repo().join(".venv"), m.path("copy/.venv")).unwrap();
    ok(m.run(m.root.path(), &[], &["check-config", "-c", "copy/slipway.toml", "--data-dir", data_arg]), "a copy");
    // The data directory, from SLIPWAY_SERVER__DATA_DIR as from the flag.
    let from_env = unbusy(|| {
        m.command(m.root.path(), &[], &["check-config", "-c", "copy/slipway.toml"])
            .env("SLIPWAY_SERVER__DATA_DIR", m.path("data2"))
            .output()
    })
    .unwrap();
    ok(from_env, "the data directory from the environment");
    assert_eq!(listing(&m.path("data2")), ["jobs"]);
    assert_eq!(listing(&m.path("cwd")), Vec::<String>::new());
    assert_eq!(listing(&m.path("home")), Vec::<String>::new());
}

#[test]
fn without_a_runner_anywhere_the_problem_names_every_path_tried() {
    let m = Machine::new();
    copy_dir(&repo().join("examples"), &m.path("conf"));
    std::fs::create_dir(m.path("empty-bin")).unwrap();
    let data = m.path("data");
    let (config, data_arg) = (m.path("conf/slipway.toml"), data.display().to_string());
    for command in ["check-config", "serve"] {
        let args = [command, "--config", config.to_str().unwrap(), "--data-dir", &data_arg];
        let out = m.run(&m.path("cwd"), &[&m.path("empty-bin")], &args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr
                .contains("slipway: providers[0] (ansible): runner = \"ansible-runner\": no executable found; tried "),
            "{command}: {stderr}"
        );
        for tried in [
            m.path("conf/.venv/bin/ansible-runner"),
            m.path(".venv/bin/ansible-runner"),
            m.path("empty-bin/ansible-runner"),
            PathBuf::from("/usr/bin/ansible-runner"),
        ] {
            assert!(stderr.contains(&format!("{}", tried.display())), "{command}: {tried:?} not named: {stderr}");
        }
        assert!(stderr.ends_with("slipway: 1 problem(s) in the configuration\n"), "{command}: {stderr}");
    }
    // Refused before anything was opened: no database, nothing in the working directory.
    assert!(!data.join("slipway.db").exists());
    assert_eq!(listing(&m.path("cwd")), Vec::<String>::new());
}
