//! What a launch writes into a fresh job directory and the `ansible-runner` command it
//! spawns: only a short list of environment variables passes, and the job's files are the
//! owner's alone.

use std::fs;
use std::io;
use std::process::Stdio;

use slipway_provider::LaunchRequest;

use crate::Inner;
use crate::jobdir::{self, JOB_MARKER_VAR, JobDir, Layout};

/// Environment passed through to the runner. Everything else is dropped: runner writes
/// its full environment into `artifacts/run/command`, and Slipway's environment may hold
/// secrets (tokens for other providers).
const PASS_ENV: &[&str] = &["HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ"];

impl Inner {
    /// Writes a fresh job directory, replacing a stale one (created but never started).
    /// Blocking.
    pub(crate) fn prepare(&self, job: &JobDir, r: &LaunchRequest) -> io::Result<()> {
        match fs::remove_dir_all(&job.dir) {
            Ok(()) => {
                tracing::info!(dir = %job.dir.display(), "removed a job dir that never started")
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let layout = Layout {
            request: r,
            python: &self.python,
            extra_vars: &self.extra_vars,
            job_timeout_secs: self.job_timeout.map(|t| t.as_secs() + u64::from(t.subsec_nanos() > 0)),
        };
        job.create(&layout).inspect_err(|_| {
            let _ = fs::remove_dir_all(&job.dir);
        })
    }

    pub(crate) fn command(&self, job: &JobDir, playbook: &str) -> io::Result<tokio::process::Command> {
        let stdout = jobdir::create_private(&job.runner_stdout())?;
        let stderr = jobdir::create_private(&job.runner_stderr())?;
        let mut cmd = tokio::process::Command::new(&self.runner);
        cmd.arg("run")
            .arg(&job.dir)
            .arg("-p")
            .arg(playbook)
            .arg("--project-dir")
            .arg(&self.playbook_dir)
            .arg("--ident")
            .arg(jobdir::IDENT)
            .current_dir(&job.dir)
            .env_clear()
            .envs(PASS_ENV.iter().filter_map(|k| Some((*k, std::env::var_os(k)?))))
            // ANSIBLE_* configures Ansible itself (e.g. ANSIBLE_CONFIG); not secrets.
            .envs(
                std::env::vars_os()
                    .filter(|(k, _)| k.to_str().is_some_and(|k| k.starts_with("ANSIBLE_") && k != JOB_MARKER_VAR)),
            )
            .env("PATH", &self.path_env)
            .env(JOB_MARKER_VAR, &job.dir)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            // Own group: a Ctrl-C or signal to Slipway's group does not reach the job.
            .process_group(0)
            // Jobs outlive the provider (and Slipway): a restart adopts them.
            .kill_on_drop(false);
        private_umask(&mut cmd);
        Ok(cmd)
    }
}

/// Everything the job's processes create (runner's artifacts, Ansible's temporary files, what
/// the playbook writes without an explicit mode) is the owner's only: umask `077` in the
/// child, set between fork and exec.
#[allow(unsafe_code)]
fn private_umask(cmd: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the forked child before exec and only calls umask(2),
    // which is async-signal-safe, allocates nothing and cannot fail.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o077);
            Ok(())
        });
    }
}
