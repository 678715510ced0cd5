//! The local provider's overhead: N creates through a Slipway process's `ansible` provider
//! against the same playbook run directly with `ansible-playbook`, at most C at a time on
//! both sides, in one run. Wall time from the first request to the last end, per job and in
//! all, and CPU seconds per job (Slipway with everything it ran, against the playbooks'
//! processes alone). Each job logs its idempotency key in the playbook's `launches.log`, so a
//! lost or twice-run job shows as a count other than N.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{API, ChildSlipway, StoreKind, free_port, median, names, percentile};

#[derive(clap::Args)]
pub struct Args {
    /// Creates on each side.
    #[arg(long, default_value_t = 32)]
    pub jobs: usize,
    /// Jobs at once: the provider's `max_concurrent_jobs`, and the direct run's.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// The Python environment holding `ansible-runner` and `ansible-playbook` (default: the
    /// `.venv` of the checkout this binary was built in).
    #[arg(long)]
    pub venv: Option<PathBuf>,
    /// The type's `poll_interval_seconds`.
    #[arg(long, default_value_t = 1.0)]
    pub poll_seconds: f64,
}

/// One side's figures.
#[derive(Clone, Debug)]
pub struct Side {
    pub label: &'static str,
    /// First request (or process start) to the last job's end.
    pub wall_seconds: f64,
    /// Each job's end, from its request: every job is asked for at the start (Slipway's are
    /// the operations' `startTime` to `endTime`; the direct run's count from its start).
    pub job_seconds: Vec<f64>,
    /// CPU seconds in all: Slipway's process and every process it ran; the direct run's
    /// `ansible-playbook` processes.
    pub cpu_seconds: f64,
    /// Slipway's own share of `cpu_seconds` (its process without the jobs').
    pub own_cpu_seconds: Option<f64>,
    /// Lines in the playbook's launch log, and how many distinct keys they name.
    pub launches: (usize, usize),
}

impl Side {
    fn jobs_per_second(&self) -> f64 {
        self.job_seconds.len() as f64 / self.wall_seconds
    }

    fn cpu_per_job(&self) -> f64 {
        self.cpu_seconds / self.job_seconds.len().max(1) as f64
    }

    fn job_p(&self, p: f64) -> f64 {
        let mut s = self.job_seconds.clone();
        s.sort_by(f64::total_cmp);
        percentile(&s, p)
    }

    fn json(&self) -> Value {
        json!({"setup": self.label, "wall_seconds": self.wall_seconds, "jobs_per_second": self.jobs_per_second(),
               "job_p50_seconds": self.job_p(50.0), "job_p99_seconds": self.job_p(99.0),
               "job_median_seconds": median(&self.job_seconds),
               "cpu_seconds_per_job": self.cpu_per_job(),
               "own_cpu_seconds_per_job": self.own_cpu_seconds.map(|c| c / self.job_seconds.len().max(1) as f64),
               "launch_lines": self.launches.0,
               "distinct_launches": self.launches.1})
    }
}

#[derive(Clone, Debug)]
pub struct LocalJobs {
    pub jobs: usize,
    pub concurrency: usize,
    pub slipway: Side,
    pub direct: Side,
}

impl LocalJobs {
    /// Slipway's wall time over the direct run's, less one: the added time per job.
    pub fn added_wall(&self) -> f64 {
        self.slipway.wall_seconds / self.direct.wall_seconds - 1.0
    }

    pub fn added_cpu(&self) -> f64 {
        self.slipway.cpu_per_job() / self.direct.cpu_per_job() - 1.0
    }

    /// Every job ran exactly once on both sides.
    pub fn exactly_once(&self) -> bool {
        [&self.slipway, &self.direct].iter().all(|s| s.launches == (self.jobs, self.jobs))
    }

    /// One record per side and one of what Slipway added, as `compare` reads them.
    pub fn json(&self) -> Value {
        json!([self.slipway.json(), self.direct.json(),
               {"setup": "added", "jobs": self.jobs, "concurrency": self.concurrency,
                "added_wall": self.added_wall(), "added_cpu": self.added_cpu(),
                "exactly_once": self.exactly_once()}])
    }

    pub fn print(&self) {
        println!(
            "local-jobs: {} creates of a compute instance, {} at a time: Slipway's ansible provider vs ansible-playbook",
            self.jobs, self.concurrency
        );
        println!(
            "{:<10} {:>8} {:>7} {:>16} {:>10} {:>14} {:>14}",
            "side", "wall s", "jobs/s", "job p50/p99 s", "CPU s/job", "own CPU s/job", "launches"
        );
        for side in [&self.slipway, &self.direct] {
            println!(
                "{:<10} {:>8.2} {:>7.2} {:>16} {:>10.3} {:>14} {:>14}",
                side.label,
                side.wall_seconds,
                side.jobs_per_second(),
                format!("{:.2} / {:.2}", side.job_p(50.0), side.job_p(99.0)),
                side.cpu_per_job(),
                side.own_cpu_seconds.map_or("-".into(), |c| format!("{:.3}", c / side.job_seconds.len().max(1) as f64)),
                format!("{} ({} keys)", side.launches.0, side.launches.1)
            );
        }
        println!(
            "added by Slipway: wall {:+.1} % (goal ≤ 10 %), CPU {:+.1} % (goal ≤ 5 %), every job exactly once: {}",
            self.added_wall() * 100.0,
            self.added_cpu() * 100.0,
            self.exactly_once()
        );
        println!("{}", self.json());
    }
}

pub async fn run(args: Args) -> Result<(), String> {
    measure(&args).await?.print();
    Ok(())
}

pub async fn measure(args: &Args) -> Result<LocalJobs, String> {
    let venv = match &args.venv {
        Some(v) => v.clone(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv"),
    };
    let playbooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/playbooks");
    for tool in ["ansible-runner", "ansible-playbook"] {
        if !venv.join("bin").join(tool).exists() {
            return Err(format!("{} has no bin/{tool}: run scripts/setup-python.sh or pass --venv", venv.display()));
        }
    }
    // The direct run first: the page cache then holds Ansible's modules for both sides.
    let direct = direct(args, &venv, &playbooks).await?;
    let slipway = through_slipway(args, &venv, &playbooks).await?;
    Ok(LocalJobs { jobs: args.jobs, concurrency: args.concurrency, slipway, direct })
}

async fn through_slipway(args: &Args, venv: &Path, playbooks: &Path) -> Result<Side, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let port = free_port()?;
    let config = format!(
        r#"
[server]
listen = "127.0.0.1:{port}"
data_dir = "{data}"
retry_after_seconds = 0
[store]
{store}
[engine]
node_name = "bench"
[[providers]]
name = "ansible"
type = "ansible"
playbook_dir = "{playbooks}"
playbook_prefix = "slipway"
runner = "{runner}"
work_dir = "jobs"
max_concurrent_jobs = {concurrency}
[[types]]
namespace = "Slipway.Example"
type = "computeInstances"
kind = "ComputeInstance"
api_versions = ["{API}"]
provider = "ansible"
poll_interval_seconds = {poll}
"#,
        data = dir.path().display(),
        store = StoreKind::SqliteFull.config(dir.path()),
        playbooks = playbooks.display(),
        runner = venv.join("bin/ansible-runner").display(),
        concurrency = args.concurrency,
        poll = args.poll_seconds,
    );
    let (slipway, _) = ChildSlipway::start(dir.path(), &config, port).await?;
    let cpu_before = slipway.cpu_seconds_with_children().ok_or("no CPU reading of Slipway")?;
    let own_before = slipway.cpu_seconds();
    let start = Instant::now();
    let accepted = slipway.client.put_all(names("vm", args.jobs), None).await?;
    let urls: Vec<String> = accepted.into_iter().map(|a| a.status_url).collect();
    slipway.client.wait_succeeded(&urls, Duration::from_millis(50), Duration::from_secs(3600)).await?;
    let waited = start.elapsed().as_secs_f64();
    let cpu_after = slipway.cpu_seconds_with_children().ok_or("no CPU reading of Slipway")?;
    let own_after = slipway.cpu_seconds();
    let mut spans = Vec::with_capacity(urls.len());
    for url in &urls {
        let doc = slipway.client.operation(url).await?;
        let at =
            |field: &str| doc[field].as_str().and_then(seconds_of_day).ok_or_else(|| format!("no {field} in {doc}"));
        spans.push((at("startTime")?, at("endTime")?));
    }
    slipway.stop()?;
    let first = spans.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let last = spans.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
    Ok(Side {
        label: "slipway",
        // The operations' own clock, so the client's polling interval does not count; the
        // client's wait bounds it from above.
        wall_seconds: day_span(first, last).min(waited),
        job_seconds: spans.iter().map(|(s, e)| day_span(*s, *e)).collect(),
        // A job's processes are Slipway's children (the runner) and theirs, all reaped.
        cpu_seconds: cpu_after - cpu_before,
        own_cpu_seconds: own_after.zip(own_before).map(|(after, before)| after - before),
        launches: launches(&dir.path().join("state/launches.log")),
    })
}

async fn direct(args: &Args, venv: &Path, playbooks: &Path) -> Result<Side, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let playbook = playbooks.join("slipway-create-compute-instance.yml");
    let python = venv.join("bin/python");
    let inventory = dir.path().join("hosts");
    std::fs::write(
        &inventory,
        format!("localhost ansible_connection=local ansible_python_interpreter={}\n", python.display()),
    )
    .map_err(|e| e.to_string())?;
    let cpu_before = children_cpu_seconds().ok_or("no CPU reading of this process's children")?;
    let start = Instant::now();
    let queue = std::sync::Arc::new(std::sync::Mutex::new(0..args.jobs));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency {
        let (queue, venv, dir, playbook, inventory) =
            (queue.clone(), venv.to_path_buf(), dir.path().to_path_buf(), playbook.clone(), inventory.clone());
        tasks.spawn(async move {
            let mut took = Vec::new();
            loop {
                let Some(i) = queue.lock().expect("queue").next() else { return Ok::<_, String>(took) };
                let vars = dir.join(format!("vars-{i}.json"));
                std::fs::write(&vars, direct_vars(i, &dir).to_string()).map_err(|e| e.to_string())?;
                let status = tokio::process::Command::new(venv.join("bin/ansible-playbook"))
                    .arg("-i")
                    .arg(&inventory)
                    .arg(&playbook)
                    .arg("-e")
                    .arg(format!("@{}", vars.display()))
                    .stdout(std::process::Stdio::null())
                    .status()
                    .await
                    .map_err(|e| format!("ansible-playbook: {e}"))?;
                if !status.success() {
                    return Err(format!("ansible-playbook for job {i}: {status}"));
                }
                took.push(start.elapsed().as_secs_f64());
            }
        });
    }
    let mut job_seconds = Vec::with_capacity(args.jobs);
    while let Some(done) = tasks.join_next().await {
        job_seconds.extend(done.map_err(|e| e.to_string())??);
    }
    let wall_seconds = start.elapsed().as_secs_f64();
    let cpu_after = children_cpu_seconds().ok_or("no CPU reading of this process's children")?;
    Ok(Side {
        label: "direct",
        wall_seconds,
        job_seconds,
        cpu_seconds: cpu_after - cpu_before,
        own_cpu_seconds: None,
        launches: launches(&dir.path().join("state/launches.log")),
    })
}

/// What Slipway would pass the create playbook for instance `i` (the fields it reads).
fn direct_vars(i: usize, data_dir: &Path) -> Value {
    let name = format!("vm{i}");
    json!({
        "slipway": {
            "idempotencyKey": format!("direct-{i}"),
            "configVersion": "direct",
            "resource": {
                "id": format!("/subscriptions/direct/resourceGroups/bench/providers/Slipway.Example/computeInstances/{name}"),
                "name": name,
                "type": "Slipway.Example/computeInstances",
                "kind": "ComputeInstance",
                "location": "local",
                "tags": {},
                "properties": {"size": "small", "image": "debian"},
            },
        },
        "slipway_data_dir": data_dir.display().to_string(),
    })
}

/// Lines of a launch log and the distinct keys among them.
fn launches(log: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let distinct: std::collections::BTreeSet<&str> = lines.iter().copied().collect();
    (lines.len(), distinct.len())
}

/// CPU seconds of this process's children that have been waited for.
fn children_cpu_seconds() -> Option<f64> {
    crate::harness::stat_ticks(Path::new("/proc/self/stat"), &[16, 17])
}

/// Seconds into its day of an RFC 3339 UTC time (`…T13:50:01.123Z`).
fn seconds_of_day(ts: &str) -> Option<f64> {
    let time = ts.split_once('T')?.1.trim_end_matches('Z');
    let mut parts = time.split(':');
    let (h, m, s) =
        (parts.next()?.parse::<f64>().ok()?, parts.next()?.parse::<f64>().ok()?, parts.next()?.parse::<f64>().ok()?);
    Some(h * 3600.0 + m * 60.0 + s)
}

/// `end - start` for two times of day, across midnight at most once.
fn day_span(start: f64, end: f64) -> f64 {
    if end >= start { end - start } else { end + 86_400.0 - start }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_of_day_are_read_and_spans_cross_midnight() {
        assert_eq!(seconds_of_day("2026-12-03T13:50:01.250Z"), Some(13.0 * 3600.0 + 50.0 * 60.0 + 1.25));
        assert_eq!(seconds_of_day("13:50:01Z"), None);
        assert!((day_span(86_399.5, 0.25) - 0.75).abs() < 1e-9);
        assert_eq!(day_span(10.0, 12.5), 2.5);
    }
}
