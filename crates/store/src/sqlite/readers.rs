//! A small pool of read-only connections. WAL lets them read the last commit while the
//! writer works; they run on tokio's blocking pool so SQLite never stalls the runtime.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::Connection;
use tokio::sync::Semaphore;

use super::schema;
use crate::StoreError;

pub(super) struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    // One permit per connection: a permit holder always finds an idle one (or reopens it).
    permits: Arc<Semaphore>,
}

impl Readers {
    pub(super) fn open(path: &Path, count: usize) -> Result<Arc<Readers>, StoreError> {
        let idle = (0..count).map(|_| schema::open_reader(path)).collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(Readers {
            path: path.to_path_buf(),
            idle: Mutex::new(idle),
            permits: Arc::new(Semaphore::new(count)),
        }))
    }

    pub(super) async fn run<T, F>(self: &Arc<Self>, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite read pool is closed".into()))?;
        let pool = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let conn = pool.take()?;
            let out = read(&conn);
            pool.put(conn);
            out
        })
        .await
        .map_err(|e| StoreError::Internal(format!("SQLite read failed: {e}")))?
    }

    fn take(&self) -> Result<Connection, StoreError> {
        let conn = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        match conn {
            Some(conn) => Ok(conn),
            // Only after a read panicked and took its connection with it.
            None => schema::open_reader(&self.path),
        }
    }

    fn put(&self, conn: Connection) {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(conn);
    }
}
