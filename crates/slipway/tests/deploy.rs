//! What `deploy/` ships: the systemd unit passes `systemd-analyze verify` and stays within its
//! exposure budget (`systemd-analyze security`), and the Containerfile's structure holds
//! together — every file it copies exists, the build stage's binary is the one the runtime
//! stage takes, and the configuration it runs has its schemas and playbooks beside it. (No
//! container engine runs here, so the image itself is not built.)

use std::path::Path;
use std::process::Command;

use crate::common::repo;

/// `systemd-analyze` with `args`, failing the test with a way out when it is not installed.
fn systemd_analyze(args: &[&str], unit: &Path) -> std::process::Output {
    Command::new("systemd-analyze").args(args).arg(unit).output().unwrap_or_else(|e| {
        panic!("systemd-analyze: {e} (scripts/test.sh installs it; Debian: apt-get install -y systemd)")
    })
}

#[test]
fn the_systemd_unit_verifies_and_keeps_its_exposure_low() {
    let text = std::fs::read_to_string(repo().join("deploy/slipway.service")).unwrap();
    // verify checks that each command exists: the binary under test stands in for the
    // installed one.
    assert!(text.contains("ExecStart=/usr/local/bin/slipway serve --config /etc/slipway/slipway.toml\n"));
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("slipway.service");
    std::fs::write(&unit, text.replace("/usr/local/bin/slipway", env!("CARGO_BIN_EXE_slipway"))).unwrap();

    let verified = systemd_analyze(&["verify"], &unit);
    let complaints = String::from_utf8_lossy(&verified.stderr);
    assert!(verified.status.success(), "systemd-analyze verify: {complaints}");
    // An unknown or misspelt key is only a warning to verify: none at all.
    assert!(complaints.trim().is_empty(), "systemd-analyze verify warned: {complaints}");

    // The exposure score, from 0 (locked down) to 10; "OK" is below 2.
    let security = systemd_analyze(&["security", "--offline=true", "--threshold=20", "--no-pager"], &unit);
    let report = String::from_utf8_lossy(&security.stdout);
    let overall = report.lines().find(|l| l.contains("Overall exposure level")).unwrap_or_default();
    assert!(security.status.success(), "exposure above 2.0: {overall}\n{report}");

    // Slipway's data directory is the unit's state directory, and that is all it may write.
    for line in [
        "StateDirectory=slipway",
        "Environment=SLIPWAY_SERVER__DATA_DIR=%S/slipway",
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "NoNewPrivileges=yes",
    ] {
        assert!(text.lines().any(|l| l == line), "the unit lacks {line}");
    }
}

/// The Containerfile's instructions, continuation lines joined, comments dropped.
fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#') && !l.is_empty()) {
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

#[test]
fn the_containerfile_copies_what_exists_and_runs_the_configuration_it_ships() {
    let text = std::fs::read_to_string(repo().join("deploy/Containerfile")).unwrap();
    let lines = instructions(&text);
    let froms: Vec<&String> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "a build stage and a runtime stage: {froms:?}");
    assert!(froms[0].ends_with(" AS build"), "{}", froms[0]);

    let build_stage: Vec<&String> =
        lines.iter().skip_while(|l| *l != froms[0]).take_while(|l| *l != froms[1]).collect();
    assert!(build_stage.iter().any(|l| *l == "WORKDIR /src"));
    assert!(build_stage.iter().any(|l| l.starts_with("RUN cargo build --release") && l.ends_with("-p slipway")));

    let mut copied = Vec::new();
    for line in &lines {
        let Some(args) = line.strip_prefix("COPY ") else { continue };
        let words: Vec<&str> = args.split_whitespace().collect();
        let (sources, destination) = words.split_at(words.len() - 1);
        match sources {
            ["--from=build", "/src/target/release/slipway"] => {
                assert_eq!(destination, ["/usr/local/bin/slipway"]);
            }
            [".", ..] => {}
            _ => {
                for source in sources {
                    assert!(repo().join(source).exists(), "COPY {source}: not in the repository");
                }
                copied.push((sources.to_vec(), destination[0]));
            }
        }
    }

    // The configuration it runs is the example's, with its relative paths copied beside it.
    assert!(lines.iter().any(|l| l == r#"CMD ["serve", "--config", "/etc/slipway/slipway.toml"]"#), "{lines:#?}");
    assert!(copied.contains(&(vec!["examples/slipway.toml"], "/etc/slipway/slipway.toml")));
    let config =
        toml::from_str::<toml::Table>(&std::fs::read_to_string(repo().join("examples/slipway.toml")).unwrap()).unwrap();
    let mut relative: Vec<String> = Vec::new();
    for provider in config["providers"].as_array().unwrap() {
        relative.push(provider["playbook_dir"].as_str().unwrap().to_string());
    }
    for ty in config["types"].as_array().unwrap() {
        if let Some(schema) = ty.get("schema").and_then(|s| s.as_str()) {
            relative.push(schema.to_string());
        }
    }
    for path in relative {
        let top = path.split('/').next().unwrap();
        let shipped = format!("/etc/slipway/{top}");
        assert!(copied.iter().any(|(_, to)| *to == shipped), "{path} needs {shipped} in the image");
    }

    // The runner is found on PATH, from the venv built from the running requirements.
    assert!(copied.contains(&(vec!["scripts/requirements.txt"], "/opt/slipway/requirements.txt")));
    assert!(lines.iter().any(|l| l.starts_with("ENV PATH=/opt/slipway/venv/bin:")), "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains("SLIPWAY_SERVER__DATA_DIR=/var/lib/slipway")));
    assert!(lines.iter().any(|l| l == "VOLUME /var/lib/slipway"));
    let ignored = std::fs::read_to_string(repo().join(".dockerignore")).unwrap();
    for excluded in ["target/", ".venv/"] {
        assert!(ignored.lines().any(|l| l == excluded), ".dockerignore keeps {excluded} out of the build context");
    }
}
