//! A request's activity-log entry carried into the transaction of the change it makes
//! (docs/governance.md#the-activity-log): `Ctx::change` for a resource's change, `logged`,
//! `put_entry` and `delete_entry` for a registry write. Once one of them committed, the
//! answer records no second entry; otherwise `unwritten_activity` is what the recorder
//! writes after the answer.

use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use slipway_domain::activity::ActivityEntry;
use slipway_domain::admission;
use slipway_store::{ChangeRequest, EntryKind, Expect, PutEntry, change_with};

use super::Ctx;
use crate::ApiState;

impl Ctx {
    /// Runs a change of the request's own that writes its activity entry in its transaction
    /// (`ChangeRequest::with_activity`): once it commits, the answer records none.
    pub(crate) async fn change<R, F>(
        &self,
        state: &ApiState,
        req: ChangeRequest,
        f: F,
    ) -> Result<(R, slipway_domain::Snapshot), slipway_store::StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut slipway_domain::Snapshot) -> Result<R, admission::Rejection> + Send + 'static,
    {
        let req = match &self.activity {
            Some(entry) => req.with_activity(entry.clone()),
            None => req,
        };
        let changed = change_with(state.store.as_ref(), req, f).await;
        if changed.is_ok() {
            self.activity_written.store(true, Ordering::Relaxed);
        }
        changed
    }

    /// Runs a registry write that takes the request's activity entry into its transaction
    /// (`None` when the request records none); once it succeeded, the answer records none.
    pub(crate) async fn logged<T, E, Fut>(&self, write: impl FnOnce(Option<ActivityEntry>) -> Fut) -> Result<T, E>
    where
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let done = write(self.activity.clone()).await;
        if done.is_ok() {
            self.activity_written.store(true, Ordering::Relaxed);
        }
        done
    }

    /// Writes a registry entry with the request's activity entry in its transaction.
    pub(crate) async fn put_entry(
        &self,
        state: &ApiState,
        put: PutEntry,
    ) -> Result<slipway_store::Entry, slipway_store::StoreError> {
        self.logged(|activity| state.store.put_entry(PutEntry { activity: activity.map(Box::new), ..put })).await
    }

    /// Removes a registry entry with the request's activity entry in its transaction.
    pub(crate) async fn delete_entry(
        &self,
        state: &ApiState,
        kind: EntryKind,
        id: &str,
        expect: Expect,
    ) -> Result<bool, slipway_store::StoreError> {
        self.logged(|activity| state.store.delete_entry(kind, id, expect, activity)).await
    }

    /// The request's activity entry when no change wrote it, settled by its answer.
    pub(super) fn unwritten_activity(
        &self,
        status: StatusCode,
        error: Option<(String, String)>,
    ) -> Option<ActivityEntry> {
        if self.activity_written.load(Ordering::Relaxed) {
            return None;
        }
        let mut entry = self.activity.clone()?;
        entry.status = status.as_u16();
        entry.error = error;
        Some(entry)
    }
}
