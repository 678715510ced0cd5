//! CPU time read from `/proc`: of a process, of its children, or of an in-process Slipway's
//! own threads. Steadier than wall-clock rates on a shared machine, since time spent waiting
//! for a core does not count.

/// CPU time (user + system) of the process or thread whose `/proc/…/stat` is `path`, with
/// its command name: steadier than wall-clock rates on a shared machine, since time spent
/// waiting for a core does not count.
pub(super) fn cpu_seconds_of(path: &std::path::Path) -> Option<(String, f64)> {
    let (name, fields) = stat_fields(path)?;
    Some((name, ticks_in_seconds(&fields, &[14, 15])?))
}

/// The sum of a `/proc/…/stat`'s `fields` (numbered as proc(5) numbers them: 14 and 15 are
/// the process's own CPU ticks, 16 and 17 those of its children it waited for), in seconds.
pub fn stat_ticks(path: &std::path::Path, fields: &[usize]) -> Option<f64> {
    ticks_in_seconds(&stat_fields(path)?.1, fields)
}

/// The command name and the fields after it, which start at field 3 (the state).
fn stat_fields(path: &std::path::Path) -> Option<(String, Vec<String>)> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name is in parentheses and may hold spaces.
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    Some((name, rest.split_whitespace().map(str::to_string).collect()))
}

/// `/proc` reports CPU in USER_HZ, 100 per second on Linux.
fn ticks_in_seconds(after_name: &[String], fields: &[usize]) -> Option<f64> {
    let mut ticks = 0.0;
    for &i in fields {
        ticks += after_name.get(i.checked_sub(3)?)?.parse::<f64>().ok()?;
    }
    Some(ticks / 100.0)
}

/// CPU time an in-process Slipway has used so far: its runtime's threads and the store's.
pub fn slipway_cpu_seconds() -> Option<f64> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut total = 0.0;
    for task in tasks.flatten() {
        // A thread may end between the listing and the read: it no longer counts either way.
        if let Some((name, seconds)) = cpu_seconds_of(&task.path().join("stat"))
            && name.starts_with("slipway-")
        {
            total += seconds;
        }
    }
    Some(total)
}

/// Milliseconds of CPU per operation between two readings, if both were taken.
pub fn cpu_ms_per_op(before: Option<f64>, after: Option<f64>, ops: usize) -> Option<f64> {
    Some((after? - before?) * 1000.0 / ops.max(1) as f64)
}
