//! One notification's turn: POST the operation-status body and record what happened in the
//! store (delivered, retry later, or given up), or — when its destination is backed off —
//! record the turn without sending.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use slipway_domain::Timestamp;
use slipway_domain::time::Clock;
use slipway_store::{Notification, Store, StoreError};

use super::callback_policy::{Refusal, refusal_in};
use super::destination::{Destinations, Verdict};
use super::{NotifierOptions, StatusDocument};

/// What the loop and every delivery task share.
pub(super) struct Shared {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub client: reqwest::Client,
    pub options: NotifierOptions,
    pub document: StatusDocument,
    /// Locked only for a decision or an update, never across an await.
    pub destinations: Mutex<Destinations>,
}

impl Shared {
    /// One delivery attempt's outcome: `delivered`, `failed` (to be retried) or `dead`.
    fn count(&self, outcome: &str) {
        let labels = slipway_metrics::OutcomeLabels { outcome: outcome.into() };
        self.options.metrics.attempts.get_or_create(&labels).inc();
    }

    fn retry_delay(&self, attempts: u32) -> Duration {
        // Per row: the notifier's policy (tables in crates/domain/tests/retry.rs).
        self.options.retry_policy().delay(attempts)
    }

    pub fn destinations(&self) -> std::sync::MutexGuard<'_, Destinations> {
        self.destinations.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A delivery's slot on its destination. The verdict is reported as soon as it is known —
/// before the store bookkeeping, so the next due row already meets the destination's new
/// state; a delivery dropped before that (shutdown, a panic) frees the slot without one.
pub(super) struct Slot {
    shared: Arc<Shared>,
    destination: String,
    started: Timestamp,
    clock_started: Instant,
    open: bool,
}

impl Slot {
    /// The slot [`Destinations::admit`] just granted at `started`.
    pub fn new(shared: Arc<Shared>, destination: String, started: Timestamp) -> Slot {
        Slot { shared, destination, started, clock_started: Instant::now(), open: true }
    }

    fn report(&mut self, verdict: Option<Verdict>, at: Timestamp) {
        if std::mem::replace(&mut self.open, false) {
            let took = self.clock_started.elapsed();
            self.shared.destinations().finished(&self.destination, self.started, at, took, verdict);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let now = self.shared.clock.now();
        self.report(None, now);
    }
}

/// Sends `n` and does its bookkeeping. When the operation cannot be loaded (the store
/// failed), nothing is recorded: the claim lapses and the row comes back after the claim hold.
pub(super) async fn deliver(shared: Arc<Shared>, n: Notification, mut slot: Slot) {
    let store = &shared.store;
    // Admission checked the URI already; the policy may have changed since (a restart).
    if let Err(refusal) = shared.options.callbacks.check_uri(&n.uri) {
        slot.report(None, shared.clock.now());
        shared.count("dead");
        refuse(store.as_ref(), &n, &refusal).await;
        return;
    }
    let op = match store.get_operation(&n.subscription, &n.operation_id, shared.clock.now()).await {
        Ok(Some(op)) => op,
        Ok(None) => {
            slot.report(None, shared.clock.now());
            shared.count("dead");
            tracing::error!(operation = %n.operation_id, uri = %n.uri, attempts = n.attempts, "giving up on a notification: the operation expired");
            bookkeeping(store.abandon_notification(n.id, "operation expired before delivery").await);
            return;
        }
        Err(e) => {
            slot.report(None, shared.clock.now());
            tracing::warn!(error = %e, "loading a notification's operation failed");
            return;
        }
    };
    let body = (shared.document)(&op);
    let sent = shared.client.post(&n.uri).json(&body).send().await;
    // The destination's back-off counts from the same instant as the row's retry, so a row
    // retried on the same count of failures is never due before its destination.
    let ended = shared.clock.now();
    let (failure, verdict) = match sent {
        Ok(r) if r.status().is_success() => {
            slot.report(Some(Verdict::Answered), ended);
            shared.count("delivered");
            bookkeeping(store.finish_notification(n.id).await);
            return;
        }
        Ok(r) => {
            let status = r.status();
            let failure = format!("callback answered {status}");
            // A 4xx is this notification's problem; the destination itself works.
            let troubled = status.is_server_error() || matches!(status.as_u16(), 408 | 429);
            let verdict = if troubled { Verdict::Failed(failure.clone()) } else { Verdict::Answered };
            (failure, verdict)
        }
        Err(e) => {
            if let Some(refusal) = refusal_in(&e) {
                // The host resolved to an address the policy refuses: nothing was sent,
                // and retrying would only ask again.
                slot.report(None, ended);
                shared.count("dead");
                refuse(store.as_ref(), &n, refusal).await;
                return;
            }
            let failure = describe(&e, &shared.options);
            (failure.clone(), Verdict::Failed(failure))
        }
    };
    slot.report(Some(verdict), ended);
    let attempts = n.attempts + 1;
    if attempts >= shared.options.max_attempts {
        shared.count("dead");
        give_up(store.as_ref(), &n, attempts, &failure).await;
    } else {
        shared.count("failed");
        let next = ended.add(shared.retry_delay(attempts));
        tracing::warn!(operation = %op.id, uri = %n.uri, attempt = attempts, error = %failure, next_attempt_at = %next, "notification not delivered; will retry");
        bookkeeping(store.reschedule_notification(n.id, next, &failure).await);
    }
}

/// `n`'s destination is backed off until `until` after `failures` failures ending in
/// `error`: the turn counts as an attempt that failed the same way, without sending. The row
/// comes back on its own schedule, never before the destination's next try.
pub(super) async fn skip_backed_off(
    shared: Arc<Shared>,
    n: Notification,
    destination: String,
    until: Timestamp,
    failures: u32,
    error: String,
) {
    let attempts = n.attempts + 1;
    let failure = format!("not sent: {destination} is backed off after {failures} failed deliveries (last: {error})");
    if attempts >= shared.options.max_attempts {
        shared.count("dead");
        give_up(shared.store.as_ref(), &n, attempts, &failure).await;
        return;
    }
    let next = shared.clock.now().add(shared.retry_delay(attempts)).max(until);
    tracing::debug!(operation = %n.operation_id, uri = %n.uri, attempt = attempts, next_attempt_at = %next, "notification held back: its destination is backed off");
    bookkeeping(shared.store.reschedule_notification(n.id, next, &failure).await);
}

/// The policy refuses the callback: given up at once (a dead letter, the reason its last
/// error), not retried.
async fn refuse(store: &dyn Store, n: &Notification, refusal: &Refusal) {
    tracing::error!(operation = %n.operation_id, uri = %n.uri, attempts = n.attempts, reason = %refusal, "giving up on a notification: the callback policy refuses it");
    bookkeeping(store.abandon_notification(n.id, &format!("refused by the callback policy: {refusal}")).await);
}

/// The dead-letter rule: kept as dead with its last error, logged, never dropped silently.
async fn give_up(store: &dyn Store, n: &Notification, attempts: u32, failure: &str) {
    tracing::error!(operation = %n.operation_id, uri = %n.uri, attempts, error = %failure, "giving up on a notification: no attempts left");
    bookkeeping(store.abandon_notification(n.id, &format!("gave up after {attempts} attempts: {failure}")).await);
}

fn describe(e: &reqwest::Error, options: &NotifierOptions) -> String {
    if e.is_connect() {
        let cause = std::error::Error::source(e).map(|s| format!(": {s}")).unwrap_or_default();
        if e.is_timeout() {
            return format!("callback failed: no connection within {:?}", options.connect_timeout);
        }
        return format!("callback failed: cannot connect{cause}");
    }
    if e.is_timeout() {
        return format!("callback failed: no answer within {:?}", options.request_timeout);
    }
    let mut text = format!("callback failed: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

pub(super) fn bookkeeping(r: Result<(), StoreError>) {
    if let Err(e) = r {
        tracing::warn!(error = %e, "recording a notification attempt failed");
    }
}
