//! [`Faulty`]: any store, with faults a test turns on and off and a record of what was asked
//! of it. It delegates every method of [`Store`] — the trait has no defaults, so a method
//! added to it is a compile error here, never a call silently dropped by a test double.
//!
//! ```text
//! let store = Arc::new(Faulty::new(inner).recording(&[Method::RenewLeases]));
//! store.fail(&[Method::Change]);          // changes are Unavailable from now on
//! store.heal();                           // and work again
//! store.refused(Method::Change);          // how many were refused meanwhile
//! store.calls().wait_for(|calls| …).await; // await what the code under test did
//! let gate = store.hold_next(Method::Change); // the next change commits, then waits …
//! gate.open();                            // … until the test lets its caller go on
//! ```
//!
//! [`Faulty::holding_time`] makes it hold paused time still during every call, for tests on
//! paused time over a store that works off the runtime (SQLite's writer thread).

mod delegation;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use slipway_domain::Timestamp;
use slipway_test_support::{TimeHeld, hold_time};
use tokio::sync::watch;

use crate::{NotificationId, Store, StoreError};

/// The methods of [`Store`] that can fail (`stats` and `metrics` cannot, and are always
/// delegated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    Change,
    GetResource,
    ListResources,
    ListOperations,
    ListReferrers,
    Usage,
    GetOperation,
    Claim,
    RenewLeases,
    ReleaseLeases,
    SweepOperations,
    Events,
    SweepEvents,
    RecordActivity,
    Activity,
    SweepActivity,
    ScheduleDrift,
    ClaimNotifications,
    FinishNotification,
    RescheduleNotification,
    AbandonNotification,
    DeferNotifications,
    GetEntry,
    ListEntries,
    PutEntry,
    DeleteEntry,
    Ping,
    Reading,
}

impl Method {
    pub const ALL: [Method; 28] = [
        Method::Change,
        Method::GetResource,
        Method::ListResources,
        Method::ListOperations,
        Method::ListReferrers,
        Method::Usage,
        Method::GetOperation,
        Method::Claim,
        Method::RenewLeases,
        Method::ReleaseLeases,
        Method::SweepOperations,
        Method::Events,
        Method::SweepEvents,
        Method::RecordActivity,
        Method::Activity,
        Method::SweepActivity,
        Method::ScheduleDrift,
        Method::ClaimNotifications,
        Method::FinishNotification,
        Method::RescheduleNotification,
        Method::AbandonNotification,
        Method::DeferNotifications,
        Method::GetEntry,
        Method::ListEntries,
        Method::PutEntry,
        Method::DeleteEntry,
        Method::Ping,
        Method::Reading,
    ];
}

/// A call the inner store answered successfully, with the arguments tests look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// `renew_leases`: how many keys were named, how many leases were renewed.
    Renew(usize, u64),
    /// `claim_notifications`: the time it claimed at, how many rows it got.
    ClaimNotifications(Timestamp, usize),
    /// `finish_notification(id)`.
    Finish(NotificationId),
    /// `reschedule_notification(id, next_attempt_at, last_error)`.
    Reschedule(NotificationId, Timestamp, String),
    /// `abandon_notification(id, last_error)`.
    Abandon(NotificationId, String),
    /// `defer_notifications(rows)`.
    Defer(Vec<(NotificationId, Timestamp)>),
    /// Any other method, by name.
    Other(Method),
}

impl Call {
    pub fn method(&self) -> Method {
        match self {
            Call::Renew(..) => Method::RenewLeases,
            Call::ClaimNotifications(..) => Method::ClaimNotifications,
            Call::Finish(_) => Method::FinishNotification,
            Call::Reschedule(..) => Method::RescheduleNotification,
            Call::Abandon(..) => Method::AbandonNotification,
            Call::Defer(_) => Method::DeferNotifications,
            Call::Other(method) => *method,
        }
    }
}

/// A store that delegates to `inner`, refuses the methods a test made fail, and records the
/// calls that succeeded.
pub struct Faulty<S: ?Sized = dyn Store> {
    inner: Arc<S>,
    failing: Mutex<BTreeSet<Method>>,
    refused: Mutex<BTreeMap<Method, usize>>,
    recorded: BTreeSet<Method>,
    calls: watch::Sender<Vec<Call>>,
    hold_time: bool,
    gates: Mutex<BTreeMap<Method, Arc<Gate>>>,
}

/// The answer of one call, held back from its caller until the test opens it
/// ([`Faulty::hold_next`]).
pub struct Gate {
    reached: tokio::sync::Notify,
    open: tokio::sync::Semaphore,
}

impl Gate {
    /// Returns once the held call has been answered by the inner store.
    pub async fn reached(&self) {
        self.reached.notified().await;
    }

    /// Lets the held call's caller have its answer.
    pub fn open(&self) {
        self.open.add_permits(1);
    }
}

impl<S: Store + ?Sized> Faulty<S> {
    /// Fails nothing and records every call.
    pub fn new(inner: Arc<S>) -> Self {
        Faulty {
            inner,
            failing: Mutex::default(),
            refused: Mutex::default(),
            recorded: Method::ALL.into_iter().collect(),
            calls: watch::Sender::new(Vec::new()),
            hold_time: false,
            gates: Mutex::default(),
        }
    }

    /// Holds paused time still while each call runs ([`slipway_test_support::TimeHeld`]):
    /// while a write waits for SQLite's writer thread the runtime is idle, and paused time
    /// would otherwise leap to the next timer — a lease renewal, a deadline — in the middle
    /// of a transaction.
    pub fn holding_time(mut self) -> Self {
        self.hold_time = true;
        self
    }

    /// Records only calls of `methods` (the others still run, unrecorded).
    pub fn recording(mut self, methods: &[Method]) -> Self {
        self.recorded = methods.iter().copied().collect();
        self
    }

    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    /// From now on, `methods` fail with [`StoreError::Unavailable`] without reaching the
    /// inner store (as if the database were unreachable), until [`heal`](Self::heal).
    pub fn fail(&self, methods: &[Method]) {
        lock(&self.failing).extend(methods.iter().copied());
    }

    /// Every method reaches the inner store again.
    pub fn heal(&self) {
        lock(&self.failing).clear();
    }

    /// The next call of `method` that succeeds reaches the inner store as usual, then holds
    /// its answer until the returned gate is opened: what the code under test does once a
    /// write has committed but before it learns so. Paused time is not held while it waits.
    /// For the methods recorded by name ([`Call::Other`]), `change` among them.
    pub fn hold_next(&self, method: Method) -> Arc<Gate> {
        let gate = Arc::new(Gate { reached: tokio::sync::Notify::new(), open: tokio::sync::Semaphore::new(0) });
        lock(&self.gates).insert(method, gate.clone());
        gate
    }

    async fn pass_gate(&self, method: Method) {
        let gate = lock(&self.gates).remove(&method);
        if let Some(gate) = gate {
            gate.reached.notify_one();
            let _ = gate.open.acquire().await.map(|p| p.forget());
        }
    }

    /// How many calls of `method` were refused so far.
    pub fn refused(&self, method: Method) -> usize {
        lock(&self.refused).get(&method).copied().unwrap_or(0)
    }

    /// The recorded calls, in the order they were answered; `wait_for` awaits a condition.
    pub fn calls(&self) -> watch::Receiver<Vec<Call>> {
        self.calls.subscribe()
    }

    /// The recorded calls so far.
    pub fn recorded(&self) -> Vec<Call> {
        self.calls.borrow().clone()
    }

    /// `Err` when `method` is made to fail (counted); otherwise what the call holds while it
    /// runs.
    fn enter(&self, method: Method) -> Result<Option<TimeHeld>, StoreError> {
        if !lock(&self.failing).contains(&method) {
            return Ok(self.hold_time.then(hold_time));
        }
        *lock(&self.refused).entry(method).or_default() += 1;
        Err(StoreError::Unavailable(format!("{method:?} made to fail by the test")))
    }

    fn record(&self, call: Call) {
        if self.recorded.contains(&call.method()) {
            self.calls.send_modify(|calls| calls.push(call));
        }
    }

    /// Runs a call that is recorded by its method name.
    async fn plain<T>(
        &self,
        method: Method,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let held = self.enter(method)?;
        let out = call.await?;
        drop(held);
        self.record(Call::Other(method));
        self.pass_gate(method).await;
        Ok(out)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::{T0, at, ctx, put, spec, vnet};
    use crate::sqlite::{SqliteOptions, SqliteStore};
    use crate::{ChangeRequest, EntryKind};

    fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn Store> {
        Arc::new(SqliteStore::open(SqliteOptions::new(dir.path().join("faulty.db"))).expect("open"))
    }

    fn unavailable<T: std::fmt::Debug>(result: Result<T, StoreError>) -> bool {
        matches!(result, Err(StoreError::Unavailable(_)))
    }

    #[tokio::test]
    async fn delegates_records_and_refuses_what_it_is_told_to() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Faulty::new(sqlite(&dir));
        let id = vnet("sub", "rg", "r1");
        put(&store, &id, spec(1), ctx(1, T0)).await;
        assert!(store.get_resource(&id.key()).await.expect("get").is_some(), "the change reached the store");
        assert_eq!(store.renew_leases(&"nobody".into(), &[id.key()], at(1)).await, Ok(0));
        store.finish_notification(NotificationId(7)).await.expect("finish");
        store.reschedule_notification(NotificationId(8), at(2), "503").await.expect("reschedule");
        store.abandon_notification(NotificationId(9), "gone").await.expect("abandon");
        store.defer_notifications(&[(NotificationId(10), at(3))]).await.expect("defer");
        assert_eq!(
            store.recorded(),
            vec![
                Call::Other(Method::Change),
                Call::Other(Method::GetResource),
                Call::Renew(1, 0),
                Call::Finish(NotificationId(7)),
                Call::Reschedule(NotificationId(8), at(2), "503".into()),
                Call::Abandon(NotificationId(9), "gone".into()),
                Call::Defer(vec![(NotificationId(10), at(3))]),
            ]
        );
        assert_eq!(store.stats(), store.inner().stats(), "stats are the inner store's");

        // Failing methods are refused and counted, and reach nothing; the others still work.
        store.fail(&[Method::Change, Method::RenewLeases]);
        let before = store.inner().stats();
        assert!(unavailable(store.change(ChangeRequest::new(id.key(), at(4)), Box::new(|_| Ok(()))).await));
        assert!(unavailable(store.change(ChangeRequest::new(id.key(), at(5)), Box::new(|_| Ok(()))).await));
        assert!(unavailable(store.renew_leases(&"nobody".into(), &[], at(5)).await));
        assert_eq!(store.inner().stats(), before, "refused calls never reach the inner store");
        assert_eq!((store.refused(Method::Change), store.refused(Method::RenewLeases)), (2, 1));
        assert_eq!(store.refused(Method::Ping), 0);
        store.ping().await.expect("ping still works");
        assert_eq!(store.recorded().last(), Some(&Call::Other(Method::Ping)), "refused calls are not recorded");

        store.heal();
        store.change(ChangeRequest::new(id.key(), at(6)), Box::new(|_| Ok(()))).await.expect("healed");
        assert_eq!(store.refused(Method::Change), 2, "the count stays");
        for method in Method::ALL {
            store.fail(&[method]);
        }
        assert!(unavailable(store.reading(at(7)).await));
        assert!(unavailable(store.get_entry(EntryKind::ApiToken, "t").await));
        store.heal();
    }

    #[tokio::test]
    async fn records_only_what_it_is_asked_to_and_can_be_awaited() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(Faulty::new(sqlite(&dir)).recording(&[Method::FinishNotification]));
        let mut calls = store.calls();
        let waiter = tokio::spawn(async move {
            calls.wait_for(|c| c.contains(&Call::Finish(NotificationId(2)))).await.expect("sender alive").clone()
        });
        store.ping().await.expect("ping");
        store.finish_notification(NotificationId(1)).await.expect("finish");
        store.abandon_notification(NotificationId(1), "x").await.expect("abandon");
        store.finish_notification(NotificationId(2)).await.expect("finish");
        let seen = waiter.await.expect("waiter");
        assert_eq!(seen, vec![Call::Finish(NotificationId(1)), Call::Finish(NotificationId(2))]);
    }
}
