//! The slice of Linux `/proc` and signals this provider needs: process identity that
//! survives pid reuse, liveness, the process table, and `kill(2)`.
//!
//! Everything here is blocking; callers run it on the blocking pool.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs;
use std::io;

/// A process as identified across time: a pid alone can be reused, pid + start time
/// (`/proc/<pid>/stat` field 22, clock ticks since boot) cannot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcId {
    pub pid: i32,
    pub start_time: u64,
}

/// The fields of `/proc/<pid>/stat` we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub start_time: u64,
}

impl ProcStat {
    pub fn id(&self) -> ProcId {
        ProcId { pid: self.pid, start_time: self.start_time }
    }

    /// Zombies (`Z`) and dead (`X`) entries only wait to be reaped: they run nothing.
    pub fn is_running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X')
    }
}

/// Parses a `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and may
/// itself contain spaces and `)`, so fields are counted from the last `)`.
pub fn parse_stat(pid: i32, line: &str) -> Option<ProcStat> {
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); field N is fields[N - 3].
    Some(ProcStat {
        pid,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

pub fn read_stat(pid: i32) -> Option<ProcStat> {
    let line = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &line)
}

/// The identity of a live process, for recording right after spawning it.
pub fn identify(pid: i32) -> Option<ProcId> {
    read_stat(pid).map(|s| s.id())
}

/// Whether this exact process (not a later one reusing its pid) still runs.
pub fn is_alive(id: ProcId) -> bool {
    if id.pid <= 1 {
        return false;
    }
    // kill(pid, 0) asks the kernel directly; /proc then tells us whether the pid still
    // names the same process and whether it is merely a zombie.
    match signal(id.pid, 0) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
        Err(_) => return false,
    }
    read_stat(id.pid).is_some_and(|s| s.start_time == id.start_time && s.is_running())
}

/// Every process visible in `/proc` (entries that vanish mid-scan are skipped).
pub fn snapshot() -> Vec<ProcStat> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()).filter_map(read_stat).collect()
}

/// The NUL-separated argv of a process.
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect())
}

/// Whether the process's initial environment holds exactly `entry` (`NAME=value`).
/// Unreadable environments (other users' processes) count as not holding it.
pub fn environ_has(pid: i32, entry: &[u8]) -> bool {
    fs::read(format!("/proc/{pid}/environ")).map(|raw| raw.split(|b| *b == 0).any(|e| e == entry)).unwrap_or(false)
}

/// `root` and all its descendants in `procs`, found by following parent pids.
pub fn tree(procs: &[ProcStat], root: i32) -> Vec<ProcStat> {
    let mut children: HashMap<i32, Vec<&ProcStat>> = HashMap::new();
    for p in procs {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut out: Vec<ProcStat> = procs.iter().filter(|p| p.pid == root).copied().collect();
    let mut seen: HashSet<i32> = out.iter().map(|p| p.pid).collect();
    let mut queue: VecDeque<i32> = VecDeque::from([root]);
    while let Some(pid) = queue.pop_front() {
        for child in children.get(&pid).into_iter().flatten() {
            if seen.insert(child.pid) {
                out.push(**child);
                queue.push_back(child.pid);
            }
        }
    }
    out
}

/// Sends `sig` to `pid`. `sig == 0` only checks that the process exists.
///
/// Refuses pids that would address more than one process (`<= 0`: groups, "all") or init,
/// so a bad record can never turn into a broadcast kill.
#[allow(unsafe_code)]
pub fn signal(pid: i32, sig: i32) -> io::Result<()> {
    if pid <= 1 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; pid > 1 makes it
    // address exactly one process.
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Sends `sig` to every member of process group `pgid`.
#[allow(unsafe_code)]
pub fn signal_group(pgid: i32, sig: i32) -> io::Result<()> {
    if pgid <= 1 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: kill(2) with a negative pid signals one process group; no memory is shared,
    // and pgid > 1 rules out "every process" (-1) and our own group (0).
    let rc = unsafe { libc::kill(-pgid, sig) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Signals `id` only if that exact process still runs, so a recorded pid that has since
/// been reused by an unrelated process is left alone.
pub fn signal_if_same(id: ProcId, sig: i32) -> bool {
    if id.pid == std::process::id() as i32 {
        return false;
    }
    read_stat(id.pid).is_some_and(|s| s.start_time == id.start_time && s.is_running()) && signal(id.pid, sig).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_comm() {
        let line = "4242 (weird ) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        let s = parse_stat(4242, line).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.pgrp, 4242);
        assert_eq!(s.start_time, 987654);
    }

    #[test]
    fn own_process_is_alive_and_identified() {
        let me = identify(std::process::id() as i32).unwrap();
        assert!(is_alive(me));
        assert!(!is_alive(ProcId { start_time: me.start_time + 1, ..me }));
        assert!(!is_alive(ProcId { pid: 1, start_time: 0 }));
    }

    #[test]
    fn refuses_broadcast_pids() {
        assert!(signal(0, 0).is_err());
        assert!(signal(-1, 0).is_err());
        assert!(signal(1, 0).is_err());
        assert!(signal_group(0, 0).is_err());
        assert!(signal_group(1, 0).is_err());
    }

    #[test]
    fn tree_follows_parents() {
        let p = |pid, ppid| ProcStat { pid, state: 'S', ppid, pgrp: pid, start_time: 1 };
        let procs = [p(10, 1), p(11, 10), p(12, 11), p(13, 1), p(14, 12)];
        let mut pids: Vec<i32> = tree(&procs, 10).iter().map(|s| s.pid).collect();
        pids.sort();
        assert_eq!(pids, [10, 11, 12, 14]);
    }
}
