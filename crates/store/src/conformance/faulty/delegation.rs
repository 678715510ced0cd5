//! [`Faulty`]'s [`Store`] implementation: each method refuses when the test made it fail,
//! else delegates to the inner store and records the call. Apart from the controls because
//! it only follows the trait, one method for each of the trait's.

use std::time::Duration;

use async_trait::async_trait;
use slipway_domain::activity::ActivityEntry;
use slipway_domain::ids::{OperationId, ResourceKey, SubscriptionId, TypeKey};
use slipway_domain::resource::{ResourceRecord, Snapshot};
use slipway_domain::{LeaseOwner, Operation, Timestamp};

use super::{Call, Faulty, Method};
use crate::{
    ActivityPage, ActivityQuery, ChangeFn, ChangeRequest, ClaimRequest, Entry, EntryKind, EventQuery, EventRead,
    Expect, GroupUsage, ListQuery, Notification, NotificationId, OperationPage, OperationQuery, Page, PutEntry, Store,
    StoreError, StoreReading, StoreStats,
};

#[async_trait]
impl<S: Store + ?Sized> Store for Faulty<S> {
    async fn change(&self, req: ChangeRequest, change: ChangeFn) -> Result<Snapshot, StoreError> {
        self.plain(Method::Change, self.inner.change(req, change)).await
    }

    async fn get_resource(&self, key: &ResourceKey) -> Result<Option<ResourceRecord>, StoreError> {
        self.plain(Method::GetResource, self.inner.get_resource(key)).await
    }

    async fn list_resources(&self, query: &ListQuery) -> Result<Page, StoreError> {
        self.plain(Method::ListResources, self.inner.list_resources(query)).await
    }

    async fn list_referrers(&self, key: &ResourceKey, limit: usize) -> Result<Vec<ResourceRecord>, StoreError> {
        self.plain(Method::ListReferrers, self.inner.list_referrers(key, limit)).await
    }

    async fn usage(&self, subscription: &SubscriptionId) -> Result<Vec<GroupUsage>, StoreError> {
        self.plain(Method::Usage, self.inner.usage(subscription)).await
    }

    async fn list_operations(&self, query: &OperationQuery) -> Result<OperationPage, StoreError> {
        self.plain(Method::ListOperations, self.inner.list_operations(query)).await
    }

    async fn get_operation(
        &self,
        subscription: &SubscriptionId,
        id: &OperationId,
        now: Timestamp,
    ) -> Result<Option<Operation>, StoreError> {
        self.plain(Method::GetOperation, self.inner.get_operation(subscription, id, now)).await
    }

    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ResourceRecord>, StoreError> {
        self.plain(Method::Claim, self.inner.claim(req)).await
    }

    async fn renew_leases(
        &self,
        owner: &LeaseOwner,
        keys: &[ResourceKey],
        until: Timestamp,
    ) -> Result<u64, StoreError> {
        let _held = self.enter(Method::RenewLeases)?;
        let renewed = self.inner.renew_leases(owner, keys, until).await?;
        self.record(Call::Renew(keys.len(), renewed));
        Ok(renewed)
    }

    async fn release_leases(&self, owner: &LeaseOwner) -> Result<u64, StoreError> {
        self.plain(Method::ReleaseLeases, self.inner.release_leases(owner)).await
    }

    async fn sweep_operations(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.plain(Method::SweepOperations, self.inner.sweep_operations(now)).await
    }

    async fn events(&self, query: &EventQuery) -> Result<EventRead, StoreError> {
        self.plain(Method::Events, self.inner.events(query)).await
    }

    async fn schedule_drift(&self, type_keys: &[TypeKey], at: Timestamp) -> Result<u64, StoreError> {
        self.plain(Method::ScheduleDrift, self.inner.schedule_drift(type_keys, at)).await
    }

    async fn sweep_events(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.plain(Method::SweepEvents, self.inner.sweep_events(now)).await
    }

    async fn record_activity(&self, entries: Vec<ActivityEntry>) -> Result<(), StoreError> {
        self.plain(Method::RecordActivity, self.inner.record_activity(entries)).await
    }

    async fn activity(&self, query: &ActivityQuery) -> Result<ActivityPage, StoreError> {
        self.plain(Method::Activity, self.inner.activity(query)).await
    }

    async fn sweep_activity(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.plain(Method::SweepActivity, self.inner.sweep_activity(now)).await
    }

    async fn claim_notifications(
        &self,
        now: Timestamp,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<Notification>, StoreError> {
        let _held = self.enter(Method::ClaimNotifications)?;
        let claimed = self.inner.claim_notifications(now, limit, hold).await?;
        self.record(Call::ClaimNotifications(now, claimed.len()));
        Ok(claimed)
    }

    async fn finish_notification(&self, id: NotificationId) -> Result<(), StoreError> {
        let _held = self.enter(Method::FinishNotification)?;
        self.inner.finish_notification(id).await?;
        self.record(Call::Finish(id));
        Ok(())
    }

    async fn reschedule_notification(
        &self,
        id: NotificationId,
        next_attempt_at: Timestamp,
        last_error: &str,
    ) -> Result<(), StoreError> {
        let _held = self.enter(Method::RescheduleNotification)?;
        self.inner.reschedule_notification(id, next_attempt_at, last_error).await?;
        self.record(Call::Reschedule(id, next_attempt_at, last_error.to_string()));
        Ok(())
    }

    async fn abandon_notification(&self, id: NotificationId, last_error: &str) -> Result<(), StoreError> {
        let _held = self.enter(Method::AbandonNotification)?;
        self.inner.abandon_notification(id, last_error).await?;
        self.record(Call::Abandon(id, last_error.to_string()));
        Ok(())
    }

    async fn defer_notifications(&self, rows: &[(NotificationId, Timestamp)]) -> Result<(), StoreError> {
        let _held = self.enter(Method::DeferNotifications)?;
        self.inner.defer_notifications(rows).await?;
        self.record(Call::Defer(rows.to_vec()));
        Ok(())
    }

    async fn get_entry(&self, kind: EntryKind, id: &str) -> Result<Option<Entry>, StoreError> {
        self.plain(Method::GetEntry, self.inner.get_entry(kind, id)).await
    }

    async fn list_entries(&self, kind: EntryKind, partition: Option<&str>) -> Result<Vec<Entry>, StoreError> {
        self.plain(Method::ListEntries, self.inner.list_entries(kind, partition)).await
    }

    async fn put_entry(&self, put: PutEntry) -> Result<Entry, StoreError> {
        self.plain(Method::PutEntry, self.inner.put_entry(put)).await
    }

    async fn delete_entry(
        &self,
        kind: EntryKind,
        id: &str,
        expect: Expect,
        activity: Option<ActivityEntry>,
    ) -> Result<bool, StoreError> {
        self.plain(Method::DeleteEntry, self.inner.delete_entry(kind, id, expect, activity)).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.plain(Method::Ping, self.inner.ping()).await
    }

    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }

    fn metrics(&self) -> slipway_metrics::StoreMetrics {
        self.inner.metrics()
    }

    async fn reading(&self, now: Timestamp) -> Result<StoreReading, StoreError> {
        self.plain(Method::Reading, self.inner.reading(now)).await
    }
}
