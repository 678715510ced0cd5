//! Delivers ARM async notifications from the store's outbox: POST the operation-status body
//! to the client's `Azure-AsyncNotificationUri`, retrying with backoff until delivered or
//! until the operation expires (then the row is kept as dead and logged — never dropped
//! silently). At least once: a crash after the POST and before the bookkeeping resends.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use slipway_domain::time::Clock;
use slipway_store::{Notification, Store};
use tokio::sync::Notify;

use crate::wire;

#[derive(Clone, Debug)]
pub struct NotifierOptions {
    pub batch: usize,
    /// How often to look for due rows when nothing signalled.
    pub idle_interval: Duration,
    pub request_timeout: Duration,
    pub max_backoff: Duration,
    /// How long a claimed notification is hidden from other notifiers (replicas) while this
    /// one delivers it; longer than a delivery attempt can take.
    pub claim_hold: Duration,
    /// RP location for the status document's `id`.
    pub location: String,
}

impl Default for NotifierOptions {
    fn default() -> Self {
        NotifierOptions {
            batch: 64,
            idle_interval: Duration::from_secs(1),
            request_timeout: Duration::from_secs(10),
            max_backoff: Duration::from_secs(300),
            claim_hold: Duration::from_secs(60),
            location: "local".into(),
        }
    }
}

pub struct Notifier {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    client: reqwest::Client,
    options: NotifierOptions,
    signal: Arc<Notify>,
}

impl Notifier {
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        signal: Arc<Notify>,
        options: NotifierOptions,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder().timeout(options.request_timeout).build()?;
        Ok(Notifier { store, clock, client, options, signal })
    }

    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = self.signal.notified() => {}
                _ = tokio::time::sleep(self.options.idle_interval) => {}
            }
            match self.store.claim_notifications(self.clock.now(), self.options.batch, self.options.claim_hold).await {
                Ok(due) => {
                    for n in due {
                        self.deliver(n).await;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "reading the notification outbox failed"),
            }
        }
    }

    async fn deliver(&self, n: Notification) {
        let now = self.clock.now();
        let op = match self.store.get_operation(&n.subscription, &n.operation_id, now).await {
            Ok(Some(op)) => op,
            Ok(None) => {
                tracing::error!(operation = %n.operation_id, uri = %n.uri, attempts = n.attempts, "giving up on a notification: the operation expired");
                self.bookkeeping(self.store.abandon_notification(n.id, "operation expired before delivery").await);
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "loading a notification's operation failed");
                return;
            }
        };
        let body = wire::operation_status_body(&op, &wire::status_path(&op, &self.options.location));
        let sent = self.client.post(&n.uri).json(&body).send().await;
        let failure = match sent {
            Ok(r) if r.status().is_success() => {
                self.bookkeeping(self.store.finish_notification(n.id).await);
                return;
            }
            Ok(r) => format!("callback answered {}", r.status()),
            Err(e) => format!("callback failed: {e}"),
        };
        let backoff = Duration::from_secs(1u64 << n.attempts.min(16)).min(self.options.max_backoff);
        tracing::warn!(operation = %op.id, uri = %n.uri, attempt = n.attempts + 1, error = %failure, "notification not delivered; will retry");
        self.bookkeeping(self.store.reschedule_notification(n.id, now.add(backoff), &failure).await);
    }

    fn bookkeeping(&self, r: Result<(), slipway_store::StoreError>) {
        if let Err(e) = r {
            tracing::warn!(error = %e, "recording a notification attempt failed");
        }
    }
}
