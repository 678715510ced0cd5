//! Stopping a job without leaving orphans.
//!
//! ansible-runner's own cancel (`killpg(SIGKILL)` of ansible-playbook's group) leaks
//! processes: ansible-core 2.19 workers call `setsid()`, leave that group, and keep
//! running (with their module, e.g. `sleep`) under init. What works (docs/providers.md#local-ansible):
//! SIGTERM the runner (so it records `canceled`) and ansible-playbook (whose handler stops
//! its workers), wait a grace period, then SIGKILL whatever is left. "Whatever is left" is
//! found three ways, because each alone misses something: the parent-pid tree from the
//! runner (collected before signalling, while nothing is reparented yet), the runner's
//! process group, and the job's environment marker (survives reparenting and `setsid`).
//!
//! Everything here is blocking; callers run it on the blocking pool.

use std::collections::HashSet;

use crate::jobdir::JobDir;
use crate::procfs::{self, ProcId, ProcStat};

/// Every running process that belongs to the job right now.
pub fn job_processes(job: &JobDir, runner: Option<ProcId>) -> HashSet<ProcId> {
    let procs = procfs::snapshot();
    let me = std::process::id() as i32;
    let marker = job.marker_entry();
    let mut out = HashSet::new();
    let runner_alive = runner.filter(|r| procfs::is_alive(*r));
    if let Some(r) = runner_alive {
        out.extend(procfs::tree(&procs, r.pid).iter().map(ProcStat::id));
        // The runner leads its own group (spawned with process_group(0)).
        out.extend(procs.iter().filter(|p| p.pgrp == r.pid).map(ProcStat::id));
    }
    out.extend(procs.iter().filter(|p| p.pid != me && procfs::environ_has(p.pid, &marker)).map(ProcStat::id));
    // Entries that are only zombies need no signal.
    let running: HashSet<i32> = procs.iter().filter(|p| p.is_running()).map(|p| p.pid).collect();
    out.retain(|p| running.contains(&p.pid) && p.pid != me);
    out
}

/// Sends SIGTERM to the runner and to ansible-playbook, and returns the job's processes
/// as they were before any signal (the list to escalate against later).
pub fn request_cancel(job: &JobDir, runner: ProcId) -> HashSet<ProcId> {
    let collected = job_processes(job, Some(runner));
    let procs = procfs::snapshot();
    // ansible-playbook: the pid of the first event, else the runner's direct children
    // (before the first event, or if events are unreadable). Only a process carrying the
    // job's marker is signalled, so a stale or reused pid is never hit.
    let marker = job.marker_entry();
    let mut playbooks: Vec<ProcId> =
        procs.iter().filter(|p| p.ppid == runner.pid && p.is_running()).map(ProcStat::id).collect();
    if let Some(pid) = job.playbook_pid()
        && let Some(stat) = procfs::read_stat(pid)
        && procfs::environ_has(pid, &marker)
    {
        playbooks.push(stat.id());
    }
    // Runner first: if ansible-playbook died first, runner would record `failed`.
    if !procfs::signal_if_same(runner, libc::SIGTERM) {
        tracing::debug!(dir = %job.dir.display(), "runner already gone at cancel");
    }
    for p in playbooks {
        if procfs::signal_if_same(p, libc::SIGTERM) {
            tracing::debug!(pid = p.pid, "sent SIGTERM to ansible-playbook");
        }
    }
    collected
}

/// The job's processes that still run: those in `known` plus any found now.
pub fn remaining(job: &JobDir, runner: Option<ProcId>, known: &HashSet<ProcId>) -> HashSet<ProcId> {
    let mut out: HashSet<ProcId> = known.iter().copied().filter(|p| procfs::is_alive(*p)).collect();
    out.extend(job_processes(job, runner));
    out
}

/// SIGKILLs every remaining process of the job; returns how many were signalled.
pub fn kill_all(job: &JobDir, runner: Option<ProcId>, known: &HashSet<ProcId>) -> usize {
    let targets = remaining(job, runner, known);
    if let Some(r) = runner.filter(|r| procfs::is_alive(*r)) {
        // Only while the runner lives is its pid certainly still our group's id.
        let _ = procfs::signal_group(r.pid, libc::SIGKILL);
    }
    let killed = targets.into_iter().filter(|p| procfs::signal_if_same(*p, libc::SIGKILL)).count();
    if killed > 0 {
        tracing::info!(dir = %job.dir.display(), killed, "killed remaining job processes");
    }
    killed
}

/// SIGKILLs processes still carrying the job's marker after its runner ended (workers a
/// timeout or crash orphaned), except `spare`. Returns how many were signalled.
pub fn sweep(job: &JobDir, spare: Option<ProcId>) -> usize {
    let killed = job_processes(job, None)
        .into_iter()
        .filter(|p| Some(*p) != spare && procfs::signal_if_same(*p, libc::SIGKILL))
        .count();
    if killed > 0 {
        tracing::info!(dir = %job.dir.display(), killed, "killed orphaned job processes");
    }
    killed
}
