//! What a store has done since it was opened: commits, write calls and conflicts, counted
//! the same way by both engines, and the metrics each exports as it commits.

/// What a store has done since it was opened; for benchmarks and operators.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Commits: transactions that committed and wrote at least one row. A group commit
    /// counts once; a claim that found nothing, a renewal of no lease or a change that
    /// changed nothing is a write call but no commit. Both engines count the same way.
    pub commits: u64,
    /// Write calls answered (changes, claims, renewals, …), including those that changed
    /// nothing and so committed nothing.
    pub write_calls: u64,
    /// Transactions the database rolled back for a deadlock or a serialization failure,
    /// then run again (PostgreSQL; SQLite's one writer has none).
    pub conflicts: u64,
}

/// Counters an engine bumps as it commits, and the metrics it exports.
#[derive(Debug, Default)]
pub(crate) struct StatsCounters {
    commits: std::sync::atomic::AtomicU64,
    write_calls: std::sync::atomic::AtomicU64,
    conflicts: std::sync::atomic::AtomicU64,
    pub(crate) metrics: slipway_metrics::StoreMetrics,
}

impl StatsCounters {
    /// One write transaction of `calls` write calls, started at `started`.
    pub(crate) fn record(&self, calls: u64, committed: bool, started: std::time::Instant) {
        use std::sync::atomic::Ordering::Relaxed;
        self.write_calls.fetch_add(calls, Relaxed);
        if committed {
            self.commits.fetch_add(1, Relaxed);
        }
        self.metrics.transactions.observe(started.elapsed().as_secs_f64());
        self.metrics.batch_size.observe(calls as f64);
    }

    /// A transaction rolled back by a deadlock or serialization failure.
    pub(crate) fn conflict(&self) {
        self.conflicts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.metrics.conflicts.inc();
    }

    pub(crate) fn snapshot(&self) -> StoreStats {
        use std::sync::atomic::Ordering::Relaxed;
        StoreStats {
            commits: self.commits.load(Relaxed),
            write_calls: self.write_calls.load(Relaxed),
            conflicts: self.conflicts.load(Relaxed),
        }
    }
}
