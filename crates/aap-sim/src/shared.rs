//! What the server and the request handlers share, so that neither depends on the other for
//! it: the simulator's state with its webhook notifier, and the kill switch of a connection
//! (see `server` for how a killed connection closes without an answer).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::state::State;
use crate::webhook::Notifier;

pub(crate) struct Shared {
    pub state: Mutex<State>,
    pub notifier: Notifier,
}

impl Shared {
    /// The lock is never held across an await, and a panic inside it is a bug that already
    /// failed the test; keep serving rather than poisoning every later request.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The kill switch of one accepted connection.
#[derive(Clone, Debug, Default)]
pub(crate) struct ConnCtl(Arc<AtomicBool>);

impl ConnCtl {
    /// Makes the connection close without (further) response bytes.
    pub fn kill(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Whether [`ConnCtl::kill`] was called.
    pub fn killed(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
