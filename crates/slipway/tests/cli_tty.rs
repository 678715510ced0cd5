//! The client CLI on a terminal: `slipway resource put` run under a pseudo-terminal (a tmux
//! pane) draws its live progress line — the operation's status and the seconds waited —
//! while the job runs, ends it with the outcome, and exits 0. (Without a terminal it prints
//! plain lines instead: `cli.rs`.)

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::{SUB, TestServer};
use slipway_test_support::eventually;

/// A tmux server of this test's own (its socket in a temp dir), killed when dropped.
struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux is installed (scripts/test.sh installs it; Debian: apt-get install -y tmux)")
    }

    /// What the pane shows now.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "cli"]).stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// A script that runs `args` with `env` and writes the exit code to `code`, then keeps the
/// pane open (reading the terminal) so its last screen can be read.
fn script(dir: &Path, env: &[(&str, &str)], args: &[&str], code: &Path) -> std::path::PathBuf {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let exports: String = env.iter().map(|(k, v)| format!("export {k}={}\n", quote(v))).collect();
    let command: Vec<String> =
        std::iter::once(env!("CARGO_BIN_EXE_slipway")).chain(args.iter().copied()).map(quote).collect();
    let path = dir.join("run.sh");
    let text = format!(
        "{exports}{command}\necho $? > {code}.tmp && mv {code}.tmp {code}\nread _\n",
        command = command.join(" "),
        code = quote(&code.display().to_string())
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_put_on_a_terminal_shows_a_live_progress_line_and_exits_0() {
    let s = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let code = dir.path().join("code");
    let profile = dir.path().join("profiles.toml");
    let env = [
        ("SLIPWAY_URL", s.base.as_str()),
        ("SLIPWAY_SUBSCRIPTION", SUB),
        ("SLIPWAY_RESOURCE_GROUP", "rg1"),
        ("SLIPWAY_CONFIG", profile.to_str().unwrap()),
    ];
    // The job runs for a few seconds: long enough for the live line to be seen.
    let put = [
        "resource",
        "put",
        "-t",
        "Slipway.Example/virtualNetworks",
        "-n",
        "tty1",
        "--set",
        "addressSpace=10.0.0.0/16",
        "--set",
        "delaySeconds=3",
    ];
    let script = script(dir.path(), &env, &put, &code);
    let tmux = Tmux { socket: dir.path().join("tmux.sock") };
    let started =
        tmux.run(&["new-session", "-d", "-s", "cli", "-x", "160", "-y", "40", "sh", script.to_str().unwrap()]);
    assert!(started.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&started.stderr));

    // While the job runs: the status and the seconds waited, redrawn in place.
    let live = regex::Regex::new(r"(Accepted|Provisioning|Creating|Updating)\s+\d+s").unwrap();
    let line = eventually("the live progress line", Duration::from_secs(60), async || {
        let screen = tmux.screen();
        match live.find(&screen) {
            Some(m) => Ok(m.as_str().to_string()),
            None => Err(screen),
        }
    })
    .await;
    assert!(!code.exists(), "the command was still waiting when its live line showed: {line}");

    let exit = eventually("the command to end", Duration::from_secs(120), async || {
        std::fs::read_to_string(&code).ok().map(|c| c.trim().to_string())
    })
    .await;
    let screen = tmux.screen();
    assert_eq!(exit, "0", "exit code; the screen:\n{screen}");
    let ended = regex::Regex::new(r"Succeeded after \d+s").unwrap();
    assert!(ended.is_match(&screen), "the line ends with the outcome; the screen:\n{screen}");
}
