//! WAL checkpoints off the write path. SQLite's automatic checkpoint runs inside the commit
//! that crosses the threshold: with `synchronous=FULL` that commit copies thousands of pages
//! and fsyncs the database file, and every request queued behind it waits (accept-latency
//! tails of ~100 ms in the steady benchmark). Here a thread of its own checkpoints passively
//! — never waiting for, nor blocking, the writer or the readers — a few times a second.

use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::schema;
use crate::StoreError;

const INTERVAL: Duration = Duration::from_millis(200);

pub(super) struct Checkpointer {
    // Dropping the sender stops the thread.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    pub(super) fn start(path: &Path) -> Result<Checkpointer, StoreError> {
        let conn = schema::open_checkpointer(path)?;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("slipway-sqlite-checkpoint".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(INTERVAL) {
                    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                        tracing::warn!(error = %e, "SQLite WAL checkpoint failed");
                    }
                }
            })
            .map_err(|e| StoreError::Internal(format!("cannot start the SQLite checkpoint thread: {e}")))?;
        Ok(Checkpointer { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop = None;
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the SQLite checkpoint thread panicked");
        }
    }
}
