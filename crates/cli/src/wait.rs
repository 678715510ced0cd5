//! Following an operation to its end: GET its status URL at the pace the server's
//! `Retry-After` asks, until it is terminal or `--timeout` passes. On a terminal stderr a
//! live line shows the status, the time waited, the job's progress (percentage and current
//! task, when the server reports them) and its latest output line; otherwise plain lines, one
//! per change of status or progress, so logs and CI output stay readable.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use reqwest::Method;
use serde_json::Value;

use crate::client::{Client, PLATFORM_API};
use crate::error::CliError;

/// The fastest and slowest the status URL is polled, whatever `Retry-After` says: a server
/// answering `0` is not hammered, a huge value does not stall a short `--timeout`.
const FASTEST_POLL: Duration = Duration::from_millis(200);
const SLOWEST_POLL: Duration = Duration::from_secs(30);
/// What an answer without `Retry-After` waits.
const DEFAULT_POLL: Duration = Duration::from_secs(1);

#[derive(Args, Clone, Debug, Default)]
pub struct WaitArgs {
    /// Print the operation and return at once instead of waiting for it.
    #[arg(long)]
    pub no_wait: bool,
    #[command(flatten)]
    pub timeout: TimeoutArgs,
}

#[derive(Args, Clone, Debug, Default)]
pub struct TimeoutArgs {
    /// Stop waiting after this many seconds (exit 4); the operation goes on.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

impl TimeoutArgs {
    pub fn duration(&self) -> Result<Option<Duration>, CliError> {
        match self.timeout {
            None => Ok(None),
            Some(s) if s.is_finite() && s >= 0.0 => Ok(Some(Duration::from_secs_f64(s))),
            Some(s) => Err(CliError::Usage(format!("--timeout {s}: give a number of seconds"))),
        }
    }
}

pub fn is_terminal_status(status: &str) -> bool {
    matches!(status, "Succeeded" | "Failed" | "Canceled")
}

/// A terminal status document as the command's result: `Failed` and `Canceled` become the
/// errors their exit codes stand for.
pub fn outcome(doc: Value) -> Result<Value, CliError> {
    match doc["status"].as_str() {
        Some("Failed") => Err(CliError::OperationFailed(doc)),
        Some("Canceled") => Err(CliError::Canceled(doc)),
        _ => Ok(doc),
    }
}

/// The job-output URL of an operation's status URL.
pub fn logs_url(status_url: &str) -> String {
    match status_url.split_once('?') {
        Some((path, query)) => format!("{path}/logs?{query}"),
        None => format!("{path}/logs", path = status_url),
    }
}

/// Polls `status_url` until the operation is terminal; the last status document.
pub async fn follow(client: &Client, status_url: &str, timeout: Option<Duration>) -> Result<Value, CliError> {
    let started = Instant::now();
    let mut progress = Progress::new();
    loop {
        let reply = client.call(Method::GET, status_url, PLATFORM_API, None).await?;
        let pause = reply.retry_after().unwrap_or(DEFAULT_POLL).clamp(FASTEST_POLL, SLOWEST_POLL);
        let doc = reply.body;
        let status = doc["status"].as_str().unwrap_or("Unknown").to_string();
        if is_terminal_status(&status) {
            progress.finish(&doc, started.elapsed());
            return Ok(doc);
        }
        let latest_line = if progress.live.is_some() { latest_output(client, status_url).await } else { None };
        progress.show(&doc, started.elapsed(), latest_line);
        if let Some(limit) = timeout {
            let left = limit.saturating_sub(started.elapsed());
            if left.is_zero() {
                progress.abandon();
                let name = doc["name"].as_str().unwrap_or("?");
                return Err(CliError::TimedOut(format!(
                    "operation {name} is still {status} after {:.0?}",
                    started.elapsed()
                )));
            }
            tokio::time::sleep(pause.min(left)).await;
        } else {
            tokio::time::sleep(pause).await;
        }
    }
}

/// The job's last output line, if it printed one yet: best effort, never fails the wait.
async fn latest_output(client: &Client, status_url: &str) -> Option<String> {
    let url = logs_url(status_url);
    let sep = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{sep}tail=1");
    let reply = client.call(Method::GET, &url, PLATFORM_API, None).await.ok()?;
    let text = reply.body.as_str()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

struct Progress {
    live: Option<ProgressBar>,
    last_status: Option<String>,
}

impl Progress {
    fn new() -> Progress {
        let live = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress { live, last_status: None }
    }

    fn show(&mut self, doc: &Value, elapsed: Duration, latest_line: Option<String>) {
        let (word, progress) = (doc["status"].as_str().unwrap_or("Unknown"), job_progress(doc));
        let status = format!("{word}{progress}");
        match &self.live {
            Some(bar) => {
                let line = latest_line.map(|l| format!("  {}", shorten(&l, 100))).unwrap_or_default();
                bar.set_message(format!("{word}  {}s{progress}{line}", elapsed.as_secs()));
            }
            None if self.last_status.as_ref() != Some(&status) => {
                eprintln!("operation {}: {status}", doc["name"].as_str().unwrap_or("?"));
            }
            None => {}
        }
        self.last_status = Some(status);
    }

    fn finish(&mut self, doc: &Value, elapsed: Duration) {
        let status = doc["status"].as_str().unwrap_or("Unknown");
        let name = doc["name"].as_str().unwrap_or("?");
        match self.live.take() {
            Some(bar) => bar.finish_with_message(format!("{status} after {}s", elapsed.as_secs())),
            None => eprintln!("operation {name}: {status}"),
        }
    }

    fn abandon(&mut self) {
        if let Some(bar) = self.live.take() {
            bar.abandon();
        }
    }
}

/// How far the operation's job has got, as ` 33%, task: Name` (each part when the server
/// reports it); empty otherwise.
fn job_progress(doc: &Value) -> String {
    let percent = doc["percentComplete"].as_u64().map(|p| format!("{p}%"));
    let task = doc["properties"]["currentTask"].as_str().map(|t| format!("task: {}", shorten(t, 80)));
    let parts: Vec<String> = percent.into_iter().chain(task).collect();
    if parts.is_empty() { String::new() } else { format!(" {}", parts.join(", ")) }
}

fn shorten(line: &str, max: usize) -> String {
    let line = line.lines().last().unwrap_or_default();
    match line.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_live_beside_the_status_url() {
        assert_eq!(
            logs_url("http://h/s/operationStatuses/1?api-version=v"),
            "http://h/s/operationStatuses/1/logs?api-version=v"
        );
        assert_eq!(logs_url("/s/operationStatuses/1"), "/s/operationStatuses/1/logs");
    }

    #[test]
    fn failed_and_canceled_are_errors_with_their_document() {
        let doc = |s: &str| serde_json::json!({"name": "op", "status": s});
        assert!(outcome(doc("Succeeded")).is_ok());
        assert!(matches!(outcome(doc("Failed")), Err(CliError::OperationFailed(_))));
        assert!(matches!(outcome(doc("Canceled")), Err(CliError::Canceled(_))));
    }

    #[test]
    fn progress_shows_the_parts_the_server_reports() {
        let doc = serde_json::json!({"status": "Provisioning", "percentComplete": 33, "properties": {"currentTask": "Sleep"}});
        assert_eq!(job_progress(&doc), " 33%, task: Sleep");
        assert_eq!(job_progress(&serde_json::json!({"properties": {"currentTask": "Sleep"}})), " task: Sleep");
        assert_eq!(job_progress(&serde_json::json!({"status": "Accepted"})), "");
    }

    #[test]
    fn a_long_output_line_is_shortened_on_a_character_boundary() {
        assert_eq!(shorten("ééé", 2), "éé…");
        assert_eq!(shorten("a\nb", 5), "b");
    }
}
