//! Delivers ARM async notifications from the store's outbox: POST the operation-status body
//! to the client's `Azure-AsyncNotificationUri` until a `2xx`. The body is given: the binary
//! hands in the API's renderer ([`StatusDocument`]), so this crate knows no ARM shape and a
//! callback receives exactly what a status poll would.
//!
//! * **Concurrently, bounded.** At most `max_concurrent` deliveries are in flight, at most
//!   `max_per_destination` to one destination (`host:port` of the URI). The loop claims only
//!   as many due rows as it has free slots; a row whose destination is full is held back
//!   (deferred in the store, unsent, no attempt counted) until about when a slot frees. So a
//!   slow or black-holed callback delays nobody else's, and cannot take every slot.
//! * **Short timeouts**: `connect_timeout` to connect, `request_timeout` for the whole request.
//! * **Destinations back off as a whole** ([`destination`]): after a failure (no answer,
//!   timeout, `5xx`, `408`, `429`) none of the destination's rows is sent until its retry
//!   time (`first_backoff` doubling to `max_backoff`); each due row's turn meanwhile counts
//!   as a failed attempt and is rescheduled on its own schedule, never before the
//!   destination's next try. Then one probe goes; its answer reopens the destination.
//! * **Bounded attempts.** A row is retried (`first_backoff` doubling to `max_backoff`) until
//!   `max_attempts` attempts are used up, or its operation expires; then it is kept as dead
//!   with its last error and logged at error level — never dropped silently.
//! * **Only where the policy allows** ([`callback_policy`]): a URI the policy refuses — at
//!   admission, again before each send, and for every address its host resolves to — is
//!   never called; a refusal at send time gives the row up at once (kept as dead, with the
//!   reason as its last error). The client follows no redirects and uses no proxy.
//! * **At least once.** A crash after the POST and before the bookkeeping resends. On
//!   shutdown the loop stops claiming, gives the deliveries in flight up to half the grace
//!   period (at most one request timeout) to finish, then abandons the rest and gives their
//!   claims back (due now, no attempt counted), so the next process — or another replica —
//!   sends them again at once. If giving back fails, the claim lapses after `claim_hold`.

pub mod callback_policy;
mod deliver;
pub mod destination;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use slipway_domain::time::Clock;
use slipway_domain::{Operation, RetryPolicy};
use slipway_store::{NotificationId, Store};
use tokio::sync::Notify;
use tokio::task::{JoinError, JoinSet};

pub use self::callback_policy::{CallbackNetworks, CallbackPolicy, CallbackPolicyError, CallbackSchemes};
use self::callback_policy::{Lookup, PolicyResolver, system_lookup};
use self::deliver::{Shared, Slot, bookkeeping};
use self::destination::{Admission, Destinations, Limits, destination_of};

#[derive(Clone, Debug)]
pub struct NotifierOptions {
    /// Deliveries in flight at once, over all destinations.
    pub max_concurrent: usize,
    /// Deliveries in flight at once to one destination (`host:port`).
    pub max_per_destination: usize,
    /// The whole request: connecting, sending, and the answer's head.
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// Attempts per notification before it is given up (kept as dead).
    pub max_attempts: u32,
    /// Retry delay after the first failure (of a row, and of a destination); doubles.
    pub first_backoff: Duration,
    pub max_backoff: Duration,
    /// How often to look for due rows when nothing signalled.
    pub idle_interval: Duration,
    /// How long a claimed notification is hidden from other notifiers (replicas) while this
    /// one delivers it; kept longer than two request timeouts.
    pub claim_hold: Duration,
    /// The process's shutdown grace period: in-flight deliveries get up to half of it (at
    /// most one request timeout) to finish.
    pub shutdown_grace: Duration,
    /// Which callback URIs may be called (the same policy the API admits them by).
    pub callbacks: CallbackPolicy,
    /// Where delivery attempts are counted (the application's, for `/metrics`).
    pub metrics: slipway_metrics::NotifierMetrics,
}

impl Default for NotifierOptions {
    fn default() -> Self {
        NotifierOptions {
            max_concurrent: 32,
            max_per_destination: 4,
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            max_attempts: 20,
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            idle_interval: Duration::from_secs(1),
            claim_hold: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(20),
            callbacks: CallbackPolicy::default(),
            metrics: Default::default(),
        }
    }
}

impl NotifierOptions {
    /// The retry delays of rows and of destinations: `first_backoff` doubling to
    /// `max_backoff`, no jitter (`slipway_domain::retry`).
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::exponential(self.first_backoff, self.max_backoff)
    }
}

/// The client callbacks are sent with. Names resolve through the policy and the connector
/// gets only the addresses it checked; redirects are not followed and no proxy is used, as
/// either would take the request somewhere unchecked.
fn callback_client(options: &NotifierOptions, lookup: Lookup) -> Result<reqwest::Client, reqwest::Error> {
    let resolver = PolicyResolver::new(Arc::new(options.callbacks.clone()), lookup);
    reqwest::Client::builder()
        .timeout(options.request_timeout)
        .connect_timeout(options.connect_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(resolver))
        .build()
}

/// What a notification carries for an operation: its status document, in the shape the API
/// serves it. The binary passes the API's own renderer, so the notifier knows no ARM document
/// and a callback receives exactly what a status poll would.
pub type StatusDocument = Arc<dyn Fn(&Operation) -> serde_json::Value + Send + Sync>;

pub struct Notifier {
    shared: Arc<Shared>,
    signal: Arc<Notify>,
}

/// Most claim passes per wake-up: a pass that only held rows back may have more due behind.
const MAX_PASSES: usize = 8;
/// Longest wait for giving back the claims of interrupted deliveries on shutdown.
const GIVE_BACK_LIMIT: Duration = Duration::from_secs(2);

impl Notifier {
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        signal: Arc<Notify>,
        mut options: NotifierOptions,
        document: StatusDocument,
    ) -> Result<Self, reqwest::Error> {
        // Slipway's configuration refuses limits that contradict each other (`plan`); these
        // keep a caller that builds options by hand from a notifier that could never send.
        options.max_concurrent = options.max_concurrent.max(1);
        options.max_per_destination = options.max_per_destination.clamp(1, options.max_concurrent);
        options.max_attempts = options.max_attempts.max(1);
        options.connect_timeout = options.connect_timeout.min(options.request_timeout);
        options.claim_hold = options.claim_hold.max(options.request_timeout * 2);
        let client = callback_client(&options, system_lookup())?;
        let destinations = Mutex::new(Destinations::new(Limits {
            per_destination: options.max_per_destination,
            retry: options.retry_policy(),
            request_timeout: options.request_timeout,
        }));
        Ok(Notifier { shared: Arc::new(Shared { store, clock, client, options, document, destinations }), signal })
    }

    /// Delivers until `shutdown` resolves, then stops within half the shutdown grace period
    /// (plus at most [`GIVE_BACK_LIMIT`] to give back interrupted claims).
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let mut state = Loop { shared: self.shared.clone(), tasks: JoinSet::new(), in_flight: HashMap::new() };
        tokio::pin!(shutdown);
        let mut at_once = true;
        loop {
            // Shutdown is seen at once, whatever the loop is waiting for; rows a pass had
            // claimed and not yet handed out keep their claim until it lapses.
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                _ = state.step(&self.signal, at_once) => {}
            }
            at_once = false;
        }
        state.stop().await;
    }
}

struct Loop {
    shared: Arc<Shared>,
    tasks: JoinSet<()>,
    /// The row each delivery task is sending.
    in_flight: HashMap<tokio::task::Id, NotificationId>,
}

impl Loop {
    /// Waits for something to do (a signal, a finished delivery, the idle interval), then
    /// hands out due rows.
    async fn step(&mut self, signal: &Notify, at_once: bool) {
        if !at_once {
            tokio::select! {
                _ = signal.notified() => {}
                _ = tokio::time::sleep(self.shared.options.idle_interval) => {}
                Some(done) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => self.settle(done),
            }
        }
        while let Some(done) = self.tasks.try_join_next_with_id() {
            self.settle(done);
        }
        self.shared.destinations().prune(self.shared.clock.now());
        for _ in 0..MAX_PASSES {
            if !self.pass().await {
                break;
            }
        }
    }

    /// Claims as many due rows as there are free slots and hands each out: sent, held back
    /// (destination full), or skipped (destination backed off). True when another pass may
    /// find more due rows for the slots still free.
    async fn pass(&mut self) -> bool {
        let shared = self.shared.clone();
        let free = shared.options.max_concurrent.saturating_sub(self.tasks.len());
        if free == 0 {
            return false;
        }
        let now = shared.clock.now();
        let due = match shared.store.claim_notifications(now, free, shared.options.claim_hold).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "reading the notification outbox failed");
                return false;
            }
        };
        let full = due.len() == free;
        let mut held = Vec::new();
        let mut skipped = JoinSet::new();
        for n in due {
            let destination = destination_of(&n.uri);
            let admission = shared.destinations().admit(&destination, now);
            match admission {
                Admission::Send => {
                    let row = n.id;
                    let slot = Slot::new(shared.clone(), destination, now);
                    let handle = self.tasks.spawn(deliver::deliver(shared.clone(), n, slot));
                    self.in_flight.insert(handle.id(), row);
                }
                Admission::Busy { until } => held.push((n.id, until)),
                Admission::BackedOff { until, failures, error } => {
                    skipped.spawn(deliver::skip_backed_off(shared.clone(), n, destination, until, failures, error));
                }
            }
        }
        let set_aside = !held.is_empty() || !skipped.is_empty();
        if !held.is_empty() {
            // If this fails, the claims lapse and the rows come back after the claim hold.
            bookkeeping(shared.store.defer_notifications(&held).await);
        }
        while skipped.join_next().await.is_some() {}
        full && set_aside && self.tasks.len() < shared.options.max_concurrent
    }

    /// A delivery task ended (its slot freed itself).
    fn settle(&mut self, done: Result<(tokio::task::Id, ()), JoinError>) {
        let id = match done {
            Ok((id, ())) => id,
            Err(e) => {
                if e.is_panic() {
                    tracing::error!(error = %e, "a notification delivery panicked");
                }
                e.id()
            }
        };
        self.in_flight.remove(&id);
    }

    /// Shutdown: let deliveries in flight finish for a while, abandon the rest and give
    /// their claims back.
    async fn stop(mut self) {
        let options = self.shared.options.clone();
        let drain = options.request_timeout.min(options.shutdown_grace / 2);
        let _ = tokio::time::timeout(drain, async {
            while let Some(done) = self.tasks.join_next_with_id().await {
                self.settle(done);
            }
        })
        .await;
        self.tasks.abort_all();
        let now = self.shared.clock.now();
        let mut given_back = Vec::new();
        while let Some(done) = self.tasks.join_next_with_id().await {
            match done {
                Ok(_) => self.settle(done),
                // Interrupted: its bookkeeping may or may not have run; giving back a row
                // already finished or rescheduled is harmless (at least once).
                Err(e) => given_back.extend(self.in_flight.remove(&e.id()).map(|row| (row, now))),
            }
        }
        if given_back.is_empty() {
            tracing::info!("notifier stopped");
            return;
        }
        let limit = options.shutdown_grace.saturating_sub(drain).min(GIVE_BACK_LIMIT);
        let interrupted = given_back.len();
        match tokio::time::timeout(limit, self.shared.store.defer_notifications(&given_back)).await {
            Ok(Ok(())) => tracing::info!(interrupted, "notifier stopped; interrupted deliveries are due again"),
            Ok(Err(e)) => {
                tracing::warn!(interrupted, error = %e, "notifier stopped; interrupted deliveries come back when their claims lapse")
            }
            Err(_) => {
                tracing::warn!(
                    interrupted,
                    "notifier stopped; interrupted deliveries come back when their claims lapse"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::callback_policy::refusal_in;
    use super::*;

    /// A callback on loopback answering `answer` to every request; counts connections.
    async fn listener(answer: String) -> (u16, tokio::sync::watch::Receiver<usize>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, rx) = tokio::sync::watch::channel(0);
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = l.accept().await {
                tx.send_modify(|n| *n += 1);
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock.write_all(answer.as_bytes()).await;
            }
        });
        (port, rx)
    }

    /// Every name resolves to 127.0.0.1.
    fn to_loopback() -> Lookup {
        Arc::new(|_host| Box::pin(async { Ok(vec![IpAddr::from([127, 0, 0, 1])]) }))
    }

    fn options(callbacks: CallbackPolicy) -> NotifierOptions {
        NotifierOptions { callbacks, request_timeout: Duration::from_secs(2), ..NotifierOptions::default() }
    }

    const OK: &str = "HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

    #[tokio::test]
    async fn a_name_resolving_to_a_refused_address_is_never_connected_to() {
        let (port, connections) = listener(OK.into()).await;
        let http_only = CallbackPolicy::new(&[], CallbackSchemes::HttpAndHttps, CallbackNetworks::PublicOnly).unwrap();
        let client = callback_client(&options(http_only), to_loopback()).unwrap();
        let e = client.post(format!("http://cb.example.test:{port}/")).send().await.unwrap_err();
        let refusal = refusal_in(&e).expect("the policy's refusal is found behind the request's error");
        assert_eq!(refusal.to_string(), "cb.example.test resolves to 127.0.0.1, a loopback address");
        assert_eq!(*connections.borrow(), 0);

        // Allowed, the request goes to the very address that was checked.
        let client = callback_client(&options(CallbackPolicy::allow_all()), to_loopback()).unwrap();
        let r = client.post(format!("http://cb.example.test:{port}/")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 204);
        assert_eq!(*connections.borrow(), 1);
    }

    #[tokio::test]
    async fn redirects_are_not_followed() {
        let (target, reached) = listener(OK.into()).await;
        let redirect = format!(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:{target}/\r\ncontent-length: 0\r\n\
             connection: close\r\n\r\n"
        );
        let (port, _) = listener(redirect).await;
        let client = callback_client(&options(CallbackPolicy::allow_all()), system_lookup()).unwrap();
        let r = client.post(format!("http://127.0.0.1:{port}/")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 307, "the redirect is the answer");
        assert_eq!(*reached.borrow(), 0, "its target was never called");
    }
}
