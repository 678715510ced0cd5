//! Slipway as a child process, started on a config of the scenario's and stopped with
//! SIGTERM, so its memory and CPU are measured apart from the simulator and the client.

use std::time::{Duration, Instant};

use super::client::Client;
use super::cpu::{cpu_seconds_of, stat_ticks};

/// Slipway as a child process (the release `slipway` binary beside this one), so its memory
/// is measured apart from the simulator and the client.
pub struct ChildSlipway {
    pub child: std::process::Child,
    pub client: Client,
}

impl ChildSlipway {
    /// Starts `slipway serve` on a config text written into `dir`; returns once `/readyz`
    /// answers 200, with the time that took.
    pub async fn start(
        dir: &std::path::Path,
        config_text: &str,
        port: u16,
    ) -> Result<(ChildSlipway, Duration), String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("slipway");
        if !exe.exists() {
            return Err(format!("{} not found: build it with `cargo build --release -p slipway`", exe.display()));
        }
        let path = dir.join("slipway.toml");
        std::fs::write(&path, config_text).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let child = std::process::Command::new(exe)
            .args(["serve", "--config"])
            .arg(&path)
            .env("SLIPWAY_LOG", "warn")
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("starting slipway: {e}"))?;
        let slipway = ChildSlipway { child, client: Client::new(format!("http://127.0.0.1:{port}")) };
        let ready = format!("{}/readyz", slipway.client.base);
        loop {
            if let Ok(r) = slipway.client.http.get(&ready).send().await
                && r.status().is_success()
            {
                return Ok((slipway, start.elapsed()));
            }
            if start.elapsed() > Duration::from_secs(120) {
                return Err("slipway did not become ready within 120 s".into());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Resident set size in bytes.
    pub fn rss(&self) -> Result<u64, String> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).map_err(|e| e.to_string())?;
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .ok_or("no VmRSS")?;
        Ok(kb * 1024)
    }

    /// CPU time the child has used so far.
    pub fn cpu_seconds(&self) -> Option<f64> {
        cpu_seconds_of(&std::path::PathBuf::from(format!("/proc/{}/stat", self.child.id()))).map(|(_, s)| s)
    }

    /// CPU time the child and every process it ran and waited for have used so far.
    pub fn cpu_seconds_with_children(&self) -> Option<f64> {
        stat_ticks(&std::path::PathBuf::from(format!("/proc/{}/stat", self.child.id())), &[14, 15, 16, 17])
    }

    /// SIGTERM, then waits for the graceful exit.
    pub fn stop(mut self) -> Result<(), String> {
        let pid = self.child.id().to_string();
        let _ = std::process::Command::new("kill").args(["-TERM", &pid]).status();
        self.child.wait().map_err(|e| e.to_string())?;
        Ok(())
    }
}

impl Drop for ChildSlipway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
