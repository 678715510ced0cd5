//! The provider's options and what building a provider from them checks: the runner and the
//! interpreter found and executable, the work dir created private, the playbook dir made
//! absolute, and the job's `PATH` led by the runner's own directory.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;

use crate::{AnsibleProvider, Inner, jobdir, progress};

#[derive(Clone, Debug)]
pub struct AnsibleOptions {
    /// Provider instance name.
    pub name: String,
    /// Where playbooks live (runner's `--project-dir`).
    pub playbook_dir: PathBuf,
    /// Per-job private data directories are created here.
    pub work_dir: PathBuf,
    /// The `ansible-runner` executable (a bare name is looked up on `PATH`). Its directory
    /// is put first on the job's `PATH`, since runner needs `ansible-playbook` there.
    pub runner: PathBuf,
    /// Pinned `ansible_python_interpreter`. Empty: the `python` next to the runner (a venv).
    pub python_interpreter: PathBuf,
    /// `Some("slipway")` → `slipway-create-virtual-network.yml`.
    pub playbook_prefix: Option<String>,
    /// Explicit playbook names per kind and job word; they win over the convention.
    pub playbooks: slipway_provider::ExplicitNames,
    /// Runner's `job_timeout`: the job ends as Failed "Job terminated due to timeout".
    pub job_timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL on cancel.
    pub cancel_grace: Duration,
    /// Jobs this provider runs at once; a launch beyond it waits for one to end, at most
    /// `queue_wait`, and is then answered `RateLimited` (the engine asks again shortly).
    pub max_concurrent: usize,
    /// How long a launch over `max_concurrent` waits for a running job to end. Bounded, so
    /// the engine regains the resource (a client may have deleted it meanwhile) every so often.
    pub queue_wait: Duration,
    /// Static extra vars every job gets (e.g. where example playbooks keep state); the
    /// `slipway` envelope wins on a name clash.
    pub extra_vars: serde_json::Map<String, serde_json::Value>,
    /// How long a finished job's directory (its output, its artifacts) is kept.
    pub job_retention: Duration,
}

impl Default for AnsibleOptions {
    fn default() -> Self {
        AnsibleOptions {
            name: "ansible".into(),
            playbook_dir: PathBuf::from("playbooks"),
            work_dir: PathBuf::from("ansible-jobs"),
            runner: PathBuf::from("ansible-runner"),
            python_interpreter: PathBuf::new(),
            playbook_prefix: None,
            playbooks: HashMap::new(),
            job_timeout: None,
            cancel_grace: Duration::from_secs(10),
            max_concurrent: 8,
            queue_wait: Duration::from_secs(2),
            extra_vars: serde_json::Map::new(),
            job_retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// Why the provider could not be built.
#[derive(Debug, thiserror::Error)]
pub enum AnsibleError {
    #[error("ansible-runner not found or not executable: {0}")]
    RunnerNotFound(PathBuf),
    #[error("python interpreter not found: {0}")]
    PythonNotFound(PathBuf),
    #[error("cannot prepare the ansible work dir {path}: {source}")]
    WorkDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("invalid ansible provider option: {0}")]
    InvalidOption(String),
}

impl AnsibleProvider {
    pub fn new(options: AnsibleOptions) -> Result<Self, AnsibleError> {
        if options.max_concurrent == 0 {
            return Err(AnsibleError::InvalidOption("max_concurrent must be at least 1".into()));
        }
        let runner =
            resolve_executable(&options.runner).ok_or_else(|| AnsibleError::RunnerNotFound(options.runner.clone()))?;
        let runner_bin = runner.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"));
        let python = if options.python_interpreter.as_os_str().is_empty() {
            runner_bin.join("python")
        } else {
            options.python_interpreter.clone()
        };
        if !is_executable(&python) {
            return Err(AnsibleError::PythonNotFound(python));
        }
        let python_str = python.to_str().unwrap_or_default();
        // It goes into an INI inventory line unquoted.
        if python_str.is_empty() || python_str.contains(char::is_whitespace) {
            return Err(AnsibleError::InvalidOption(format!(
                "python_interpreter must be a UTF-8 path without whitespace: {}",
                python.display()
            )));
        }
        let work_dir_err = |source| AnsibleError::WorkDir { path: options.work_dir.clone(), source };
        jobdir::create_private_dir_all(&options.work_dir).map_err(work_dir_err)?;
        let work_dir = fs::canonicalize(&options.work_dir).map_err(work_dir_err)?;
        if let Ok(meta) = fs::metadata(&work_dir)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                work_dir = %work_dir.display(),
                mode = format!("{:o}", meta.permissions().mode() & 0o777),
                "the work dir is open to other users; job directories inside stay private (0700)"
            );
        }
        // The job dir is matched textually in /proc cmdlines and environments.
        if work_dir.to_str().is_none() {
            return Err(AnsibleError::InvalidOption(format!("work_dir must be valid UTF-8: {}", work_dir.display())));
        }
        let playbook_dir = std::path::absolute(&options.playbook_dir).map_err(|e| {
            AnsibleError::InvalidOption(format!("playbook_dir {}: {e}", options.playbook_dir.display()))
        })?;
        let mut path_env = OsString::from(runner_bin.as_os_str());
        path_env.push(":");
        path_env.push(std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()));
        Ok(AnsibleProvider {
            inner: Arc::new(Inner {
                name: options.name,
                playbook_dir,
                work_dir,
                runner,
                python,
                path_env,
                playbook_prefix: options.playbook_prefix,
                playbooks: options.playbooks,
                job_timeout: options.job_timeout,
                cancel_grace: options.cancel_grace,
                max_concurrent: options.max_concurrent,
                queue_wait: options.queue_wait,
                extra_vars: options.extra_vars,
                job_retention: options.job_retention,
                launch_lock: tokio::sync::Mutex::new(()),
                active: Mutex::new(HashSet::new()),
                place_freed: tokio::sync::Notify::new(),
                job_ended: std::sync::OnceLock::new(),
                cancelling: Mutex::new(HashSet::new()),
                escalations: Mutex::new(JoinSet::new()),
                tallies: progress::Tallies::default(),
            }),
        })
    }
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn resolve_executable(path: &Path) -> Option<PathBuf> {
    let found = if path.components().count() == 1 && !path.is_absolute() {
        let dirs = std::env::var_os("PATH")?;
        std::env::split_paths(&dirs).map(|d| d.join(path)).find(|p| is_executable(p))?
    } else {
        path.to_path_buf()
    };
    if !is_executable(&found) {
        return None;
    }
    // Absolute but not canonical: a venv's bin dir must stay the venv's (its `python`
    // symlink points outside the venv).
    std::path::absolute(found).ok()
}
