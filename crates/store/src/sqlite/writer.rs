//! The group-commit writer: one thread owns the read-write connection, drains pending
//! requests, runs them in one transaction (each in its own savepoint) and commits once.
//!
//! Requests come in two lanes. A client's write (an API request is waiting for it) goes into
//! the next batch ahead of every background write (the engine's steps, claims, renewals; the
//! notifier's bookkeeping), and a batch takes at most `max_batch` background writes: a
//! client write waits for at most the batch under way and then its own, however much
//! background work is queued. With one queue, a `PUT` arriving behind a few hundred engine
//! steps waited for all of them.

use std::panic::{AssertUnwindSafe, catch_unwind};

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use super::db_error;
use crate::{StatsCounters, StoreError, panic_text};

/// One write request, type-erased so requests with different results share a batch.
pub(super) trait Job: Send {
    /// Runs the work inside the request's savepoint; `false` means roll the savepoint back.
    fn run(&mut self, conn: &Connection) -> bool;
    /// Answers the caller once the batch's fate is known.
    fn finish(self: Box<Self>, committed: Result<(), StoreError>);
}

pub(super) struct Request<T, F> {
    work: Option<F>,
    outcome: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> Request<T, F> {
    pub(super) fn new(work: F, reply: oneshot::Sender<Result<T, StoreError>>) -> Self {
        Request { work: Some(work), outcome: None, reply }
    }
}

impl<T, F> Job for Request<T, F>
where
    T: Send,
    F: FnOnce(&Connection) -> Result<T, StoreError> + Send,
{
    fn run(&mut self, conn: &Connection) -> bool {
        let Some(work) = self.work.take() else {
            return false;
        };
        // A change function's panic is caught closer (`run_change`); this catches any other,
        // so that no request can take the writer (and with it every other request) down.
        let outcome = catch_unwind(AssertUnwindSafe(|| work(conn)))
            .unwrap_or_else(|panic| Err(StoreError::Internal(format!("write panicked: {}", panic_text(&panic)))));
        let ok = outcome.is_ok();
        self.outcome = Some(outcome);
        ok
    }

    fn finish(self: Box<Self>, committed: Result<(), StoreError>) {
        let answer = match (self.outcome, committed) {
            // A request that failed on its own says why, whatever happened to the batch.
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (_, Err(e)) => Err(e),
            (None, Ok(())) => Err(StoreError::Internal("write request was never run".into())),
        };
        // The caller may have gone away; the write stands regardless.
        let _ = self.reply.send(answer);
    }
}

/// Whose write a request is, which decides how soon it is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lane {
    /// A client is waiting for the answer.
    Client,
    /// The engine's or the notifier's own work.
    Background,
}

/// The writer's two queues.
pub(super) struct Queues {
    pub client: mpsc::Receiver<Box<dyn Job>>,
    pub background: mpsc::Receiver<Box<dyn Job>>,
}

impl Queues {
    /// The next request of either lane, the client's first, and its lane; `None` once both
    /// are closed and empty. Blocks the writer thread (on a runtime of its own) until one
    /// arrives.
    fn next(&mut self, waiter: &tokio::runtime::Runtime) -> Option<(Lane, Box<dyn Job>)> {
        waiter.block_on(async {
            tokio::select! {
                biased;
                Some(job) = self.client.recv() => Some((Lane::Client, job)),
                Some(job) = self.background.recv() => Some((Lane::Background, job)),
                else => None,
            }
        })
    }
}

/// The writer thread's body; returns when every sender is gone.
pub(super) fn run(conn: Connection, mut queues: Queues, max_batch: usize, stats: &StatsCounters) {
    let waiter = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(waiter) => waiter,
        Err(e) => {
            tracing::error!(error = %e, "the SQLite writer cannot wait for requests");
            return;
        }
    };
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(max_batch);
    while let Some((lane, first)) = queues.next(&waiter) {
        batch.push(first);
        // Every client write waiting now, then up to `max_batch` background writes: clients
        // go first but never take the background's share, so neither lane starves.
        while let Ok(job) = queues.client.try_recv() {
            batch.push(job);
        }
        let clients = if lane == Lane::Client { batch.len() } else { batch.len() - 1 };
        while batch.len() - clients < max_batch {
            match queues.background.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit_batch(&conn, &mut batch, stats);
    }
}

/// Counted in `stats` before anyone is answered, so a caller reading them after its answer
/// sees its own write.
fn commit_batch(conn: &Connection, batch: &mut Vec<Box<dyn Job>>, stats: &StatsCounters) {
    let calls = batch.len() as u64;
    let started = std::time::Instant::now();
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        stats.record(calls, false, started);
        fail_all(batch, db_error(e));
        return;
    }
    let changes_before = conn.total_changes();
    let lost = batch.iter_mut().find_map(|job| run_in_savepoint(conn, job.as_mut()).err());
    if let Some(e) = lost {
        abort(conn);
        stats.record(calls, false, started);
        fail_all(batch, e);
        return;
    }
    let changed = conn.total_changes() != changes_before;
    let committed = conn.execute_batch("COMMIT").map_err(db_error);
    if let Err(e) = &committed {
        tracing::error!(error = %e, requests = batch.len(), "SQLite group commit failed");
        abort(conn);
    }
    stats.record(calls, committed.is_ok() && changed, started);
    for job in batch.drain(..) {
        job.finish(committed.clone());
    }
}

/// `Err` means the whole transaction is lost, not just this request.
fn run_in_savepoint(conn: &Connection, job: &mut dyn Job) -> Result<(), StoreError> {
    conn.execute_batch("SAVEPOINT request").map_err(db_error)?;
    let ok = job.run(conn);
    if conn.is_autocommit() {
        // SQLite rolled the whole transaction back by itself (I/O error, disk full, …):
        // every earlier request of the batch went with it.
        return Err(StoreError::Unavailable("the SQLite transaction was rolled back".into()));
    }
    let end = if ok { "RELEASE request" } else { "ROLLBACK TO request; RELEASE request" };
    conn.execute_batch(end).map_err(db_error)
}

fn abort(conn: &Connection) {
    if !conn.is_autocommit()
        && let Err(e) = conn.execute_batch("ROLLBACK")
    {
        tracing::error!(error = %e, "SQLite rollback failed");
    }
}

fn fail_all(batch: &mut Vec<Box<dyn Job>>, error: StoreError) {
    for job in batch.drain(..) {
        job.finish(Err(error.clone()));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A request that notes when it runs and when it is answered.
    struct Noted {
        label: &'static str,
        log: Arc<Mutex<Vec<&'static str>>>,
    }

    impl Job for Noted {
        fn run(&mut self, _: &Connection) -> bool {
            self.log.lock().unwrap().push(self.label);
            true
        }

        fn finish(self: Box<Self>, committed: Result<(), StoreError>) {
            assert!(committed.is_ok());
            self.log.lock().unwrap().push("|");
        }
    }

    #[test]
    fn a_client_write_overtakes_queued_background_writes_and_batches_stay_bounded() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let noted = |label| Box::new(Noted { label, log: log.clone() }) as Box<dyn Job>;
        let (client_tx, client) = mpsc::channel(16);
        let (background_tx, background) = mpsc::channel(16);
        for _ in 0..7 {
            background_tx.try_send(noted("b")).unwrap();
        }
        client_tx.try_send(noted("C")).unwrap();
        drop((client_tx, background_tx));
        let conn = Connection::open_in_memory().unwrap();
        run(conn, Queues { client, background }, 3, &StatsCounters::default());
        // The client's write first, though queued last, and three background writes beside
        // it; every request is answered once its batch commits.
        let log = log.lock().unwrap().concat();
        assert_eq!(log, "Cbbb||||bbb|||b|");
    }
}
