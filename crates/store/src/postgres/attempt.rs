//! Running one call on a pooled connection: each attempt bounded client-side, so a server
//! that stops answering cannot hang a caller, and retried on another connection when it failed
//! without committing (a deadlock, a serialization failure, a connection the server closed).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use deadpool_postgres::{HookError, Object, PoolError, Timeouts};

use super::{Failure, Inner, describe};
use crate::{Entry, StoreError};

/// Deadlock and serialization-failure retries per call.
const CONFLICT_RETRIES: usize = 3;

/// How many rows a write changed: a write that changed none committed nothing worth counting.
pub(super) trait RowsWritten {
    fn rows_written(&self) -> u64;
}

impl RowsWritten for u64 {
    fn rows_written(&self) -> u64 {
        *self
    }
}

impl<T> RowsWritten for Vec<T> {
    fn rows_written(&self) -> u64 {
        self.len() as u64
    }
}

/// A delete: whether it removed the row.
impl RowsWritten for bool {
    fn rows_written(&self) -> u64 {
        u64::from(*self)
    }
}

/// A put writes its row whenever it succeeds.
impl RowsWritten for Entry {
    fn rows_written(&self) -> u64 {
        1
    }
}

/// One try at a call, on one pooled connection.
pub(super) type Attempt<'c, T> = Pin<Box<dyn Future<Output = Result<T, Failure>> + Send + 'c>>;

impl Inner {
    pub(super) async fn client(&self, timeouts: &Timeouts) -> Result<Object, StoreError> {
        let asked = std::time::Instant::now();
        let got = self.pool.timeout_get(timeouts).await.map_err(|e| self.pool_error(e));
        self.stats.metrics.pool_wait.observe(asked.elapsed().as_secs_f64());
        got
    }

    fn pool_error(&self, e: PoolError) -> StoreError {
        let target = &self.target;
        match e {
            PoolError::Timeout(kind) => {
                StoreError::Unavailable(format!("PostgreSQL at {target}: timed out getting a connection ({kind:?})"))
            }
            // Whatever keeps a connection from being made (down, refusing logins, database
            // gone) is outside this process and may pass: never a bug of ours.
            PoolError::Backend(e) | PoolError::PostCreateHook(HookError::Backend(e)) => StoreError::Unavailable(
                format!("cannot connect to PostgreSQL at {target} ({}): {}", self.transport, describe(&e)),
            ),
            PoolError::Closed => StoreError::Unavailable("the PostgreSQL pool is closed".into()),
            other => StoreError::Internal(format!("PostgreSQL pool: {other}")),
        }
    }

    /// Runs `work` on a pooled connection, again on another one when it failed without
    /// committing anything.
    pub(super) async fn run<T, F>(
        &self,
        limit: Option<Duration>,
        timeouts: Timeouts,
        mut work: F,
    ) -> Result<T, StoreError>
    where
        F: for<'c> FnMut(&'c mut Object) -> Attempt<'c, T>,
    {
        let mut conflicts = 0;
        let mut broken = 0;
        loop {
            let mut client = self.client(&timeouts).await?;
            let outcome = match limit {
                Some(limit) => match tokio::time::timeout(limit, work(&mut client)).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        // The server may be gone without a word (a partition): this connection
                        // is not trusted again. Dropping it rolls back whatever it had begun.
                        drop(Object::take(client));
                        return Err(StoreError::Unavailable(format!(
                            "PostgreSQL at {} did not answer within {limit:?}",
                            self.target
                        )));
                    }
                },
                None => work(&mut client).await,
            };
            let failure = match outcome {
                Ok(value) => return Ok(value),
                Err(failure) => failure,
            };
            let dead = matches!(failure, Failure::Retry { broken: true, .. }) || client.is_closed();
            if dead {
                drop(Object::take(client));
            }
            match failure {
                Failure::Fail(e) => return Err(e),
                Failure::Retry { error, broken: true } if broken < self.broken_budget => {
                    broken += 1;
                    tracing::debug!(error = %error, "PostgreSQL connection lost; retrying on another");
                }
                Failure::Retry { error, broken: false } if conflicts < CONFLICT_RETRIES => {
                    conflicts += 1;
                    self.stats.conflict();
                    tracing::debug!(error = %error, "PostgreSQL transaction conflict; retrying");
                }
                Failure::Retry { error, .. } => return Err(error),
            }
        }
    }
}
