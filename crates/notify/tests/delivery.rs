//! The notifier alone, on a SQLite store the test watches through a recording wrapper:
//! attempts are bounded and end in a dead letter, a failing destination is backed off as a
//! whole, and a callback the policy refuses at send time is given up at once. Time is moved
//! by the test instead of waited for: a `jump` of tokio's clock, which the notifier's
//! injected clock reads, on the current-thread runtime that `jump` needs. It stays real
//! otherwise: the notifier sends over loopback HTTP, which paused time does not wait for.
//! (The notifier inside a whole Slipway, with black-holed callbacks and SIGTERM, is
//! `crates/slipway/tests/notifications.rs`.)

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use slipway_domain::admission::{Rejection, RequestContext};
use slipway_domain::resource::Snapshot;
use slipway_domain::time::Clock;
use slipway_domain::{Operation, ProvisioningState, Timestamp};
use slipway_notify::{CallbackNetworks, CallbackPolicy, CallbackSchemes, Notifier, NotifierOptions, StatusDocument};
use slipway_store::conformance::{Call, Faulty, Method, ctx, put, spec, vnet};
use slipway_store::sqlite::{SqliteOptions, SqliteStore};
use slipway_store::{ChangeRequest, NotificationId, Store};
use slipway_test_support::callback::{Arrival, Callback};
use slipway_test_support::{TestClock, jump};
use tokio::sync::{Notify, watch};

/// Upper bound for conditions the notifier alone brings about.
const QUICK: Duration = Duration::from_secs(10);

fn init_logging() {
    if let Ok(filter) = std::env::var("SLIPWAY_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

/// What each notification carries here: enough to tell operations apart (the body's shape
/// is the API's, tested there).
fn status_document() -> StatusDocument {
    Arc::new(|op: &Operation| json!({"name": op.id.to_string(), "status": op.status.to_string()}))
}

/// A notifier running on its own over a recording SQLite store.
struct Bench {
    _dir: tempfile::TempDir,
    store: Arc<Faulty<SqliteStore>>,
    clock: Arc<TestClock>,
    signal: Arc<Notify>,
    calls: watch::Receiver<Vec<Call>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    running: Option<tokio::task::JoinHandle<()>>,
    ops: u64,
}

/// Retries come minutes apart: the test moves the clock, real time barely matters.
fn bench_options() -> NotifierOptions {
    NotifierOptions {
        request_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(1),
        max_attempts: 10,
        first_backoff: Duration::from_secs(60),
        max_backoff: Duration::from_secs(600),
        idle_interval: Duration::from_millis(20),
        callbacks: CallbackPolicy::allow_all(),
        ..NotifierOptions::default()
    }
}

impl Bench {
    fn start(options: NotifierOptions) -> Bench {
        init_logging();
        let dir = tempfile::tempdir().unwrap();
        let inner = SqliteStore::open(SqliteOptions::new(dir.path().join("outbox.db"))).unwrap();
        // The notifier's bookkeeping, and each pass's claim: the time it claimed at and how
        // many rows it got.
        let recorded = [
            Method::ClaimNotifications,
            Method::FinishNotification,
            Method::RescheduleNotification,
            Method::AbandonNotification,
            Method::DeferNotifications,
        ];
        let store = Arc::new(Faulty::new(Arc::new(inner)).recording(&recorded));
        let calls = store.calls();
        let clock = Arc::new(TestClock::new());
        let signal = Arc::new(Notify::new());
        let notifier = Notifier::new(store.clone(), clock.clone(), signal.clone(), options, status_document()).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(notifier.run(async move {
            let _ = stopped.await;
        }));
        Bench { _dir: dir, store, clock, signal, calls, stop: Some(stop), running: Some(running), ops: 0 }
    }

    /// An operation that ended now and notifies `uri`, as the engine queues it.
    async fn ended_operation(&mut self, uri: &str) {
        self.ops += 1;
        let now = self.clock.now();
        let id = vnet("sub-notify", "rg", &format!("vnet{}", self.ops));
        let context = RequestContext { notification_uri: Some(uri.to_string()), ..ctx(self.ops, now) };
        let (admitted, _) = put(self.store.as_ref(), &id, spec(1), context).await;
        let slipway_domain::admission::Admitted::Accepted { operation, .. } = admitted else { panic!("{admitted:?}") };
        let op = operation.id;
        self.store
            .change(
                ChangeRequest::new(id.key(), now),
                Box::new(move |s: &mut Snapshot| {
                    if s.set_operation_status(&op, ProvisioningState::Succeeded, None, now) {
                        Ok(())
                    } else {
                        Err(Rejection::OperationNotFound)
                    }
                }),
            )
            .await
            .expect("operation ends");
        self.signal.notify_one();
    }

    /// Waits until the recorded bookkeeping calls satisfy `f`; returns them.
    async fn wait(&self, what: &str, f: impl Fn(&[Call]) -> bool) -> Vec<Call> {
        let mut rx = self.calls.clone();
        match tokio::time::timeout(QUICK, rx.wait_for(|c| f(&bookkeeping(c)))).await {
            Ok(Ok(c)) => bookkeeping(&c),
            _ => panic!("{what}: not seen within {QUICK:?}; calls: {:#?}", *self.calls.borrow()),
        }
    }

    /// Waits for a pass of the notifier that claimed at `at` or later; the rows it claimed
    /// (all that pass can send).
    async fn pass_at(&self, at: Timestamp) -> usize {
        let claimed = |calls: &[Call]| {
            calls.iter().find_map(|c| match c {
                Call::ClaimNotifications(t, n) if *t >= at => Some(*n),
                _ => None,
            })
        };
        let mut rx = self.calls.clone();
        match tokio::time::timeout(QUICK, rx.wait_for(|c| claimed(c).is_some())).await {
            Ok(Ok(c)) => claimed(&c).unwrap_or_default(),
            _ => panic!("no pass of the notifier at {at} within {QUICK:?}; calls: {:?}", *self.calls.borrow()),
        }
    }

    /// Moves time on by `d` (see the module's doc) and wakes the notifier.
    async fn advance(&self, d: Duration) {
        jump(d).await;
        self.signal.notify_one();
    }

    async fn stop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(QUICK, self.running.take().unwrap()).await.expect("notifier stops").unwrap();
    }
}

/// The notifier's bookkeeping: every recorded call but its claims.
fn bookkeeping(calls: &[Call]) -> Vec<Call> {
    calls.iter().filter(|c| !matches!(c, Call::ClaimNotifications(..))).cloned().collect()
}

fn reschedules(calls: &[Call], id: i64) -> Vec<(Timestamp, String)> {
    let id = NotificationId(id);
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Reschedule(i, at, e) if *i == id => Some((*at, e.clone())),
            _ => None,
        })
        .collect()
}

fn finished(calls: &[Call]) -> usize {
    calls.iter().filter(|c| matches!(c, Call::Finish(_))).count()
}

fn deferred_ids(calls: &[Call]) -> Vec<i64> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Defer(rows) => Some(rows.iter().map(|(id, _)| id.0)),
            _ => None,
        })
        .flatten()
        .collect()
}

async fn collect(callback: &mut Callback, into: &mut Vec<Arrival>) {
    while let Ok(a) = callback.arrivals.try_recv() {
        into.push(a);
    }
}

#[tokio::test]
async fn attempts_run_out_and_the_notification_is_kept_as_dead() {
    let mut callback = Callback::start().await;
    callback.status.store(503, Ordering::SeqCst);
    let mut b = Bench::start(NotifierOptions { max_attempts: 3, ..bench_options() });
    b.ended_operation(&callback.uri("/failing")).await;

    // Attempt 1, then 2 after the first back-off (60 s), then 3 after the second (120 s).
    for (attempt, backoff) in [(1, 60), (2, 120)] {
        let a = callback.next(QUICK).await;
        assert_eq!((a.path.as_str(), &a.body["status"]), ("/failing", &json!("Succeeded")));
        let calls = b
            .wait(&format!("attempt {attempt} rescheduled"), |c| {
                c.iter().filter(|c| matches!(c, Call::Reschedule(..))).count() == attempt
            })
            .await;
        let Some(Call::Reschedule(_, at, error)) = calls.last() else { panic!("{calls:?}") };
        assert_eq!(error, "callback answered 503 Service Unavailable");
        let wait = at.millis_after(b.clock.now());
        assert!((backoff - 5) * 1000 < wait && wait <= backoff * 1000, "attempt {attempt}: next in {wait} ms");
        b.advance(Duration::from_secs(backoff as u64 + 1)).await;
    }
    let a = callback.next(QUICK).await;
    assert_eq!(a.path, "/failing");
    let calls = b.wait("abandoned", |c| c.iter().any(|c| matches!(c, Call::Abandon(..)))).await;
    let Some(Call::Abandon(id, error)) = calls.last() else { panic!("{calls:?}") };
    assert_eq!(error, "gave up after 3 attempts: callback answered 503 Service Unavailable");
    b.stop().await;

    // Dead, not pending: it never comes due again, however late.
    let later = b.clock.now().add(Duration::from_secs(30 * 24 * 3600));
    let pending = b.store.claim_notifications(later, 10, Duration::from_secs(60)).await.unwrap();
    assert!(pending.is_empty(), "row {id} still pending: {pending:?}");
    assert!(callback.arrivals.try_recv().is_err(), "no fourth attempt");
}

#[tokio::test]
async fn a_failing_destination_is_backed_off_as_a_whole() {
    let mut bad = Callback::start().await;
    let mut good = Callback::start().await;
    bad.status.store(500, Ordering::SeqCst);
    let mut b = Bench::start(bench_options());
    let mut seen = Vec::new();

    // The first notification to `bad` fails: the destination is backed off for 60 s.
    b.ended_operation(&bad.uri("/one")).await;
    seen.push(bad.next(QUICK).await);
    let calls = b.wait("first failure", |c| !c.is_empty()).await;
    let Call::Reschedule(NotificationId(first), _, ref error) = calls[0] else { panic!("{calls:?}") };
    assert_eq!(error, "callback answered 500 Internal Server Error");

    // Two more for `bad` are not sent while it is backed off (each turn counts, with the
    // destination's error); one for `good` goes straight through.
    b.ended_operation(&bad.uri("/two")).await;
    b.ended_operation(&bad.uri("/three")).await;
    b.ended_operation(&good.uri("/other")).await;
    let calls = b
        .wait("held back and delivered", |c| {
            finished(c) == 1 && (2..=3).all(|id| reschedules(c, first + id - 1).len() == 1)
        })
        .await;
    assert_eq!(good.next(QUICK).await.path, "/other");
    collect(&mut bad, &mut seen).await;
    assert_eq!(seen.len(), 1, "nothing more reached the backed-off destination: {seen:?}");
    let retry_at = reschedules(&calls, first)[0].0;
    for id in [first + 1, first + 2] {
        let (at, error) = reschedules(&calls, id).remove(0);
        assert!(at >= retry_at, "not before the destination's next try");
        assert!(error.starts_with("not sent: 127.0.0.1:"), "{error}");
        assert!(
            error.ends_with(
                "is backed off after 1 failed deliveries (last: callback answered 500 Internal Server Error)"
            ),
            "{error}"
        );
    }

    // The destination recovers. Past its back-off one probe goes; the other two wait for it.
    bad.status.store(200, Ordering::SeqCst);
    b.advance(Duration::from_secs(61)).await;
    let probe = bad.next(QUICK).await;
    let calls = b.wait("probe delivered, the rest held", |c| finished(c) == 2 && deferred_ids(c).len() == 2).await;
    collect(&mut bad, &mut seen).await;
    assert_eq!(seen.len(), 1, "exactly one probe: {seen:?} then {probe:?}");
    let held = deferred_ids(&calls);
    assert_eq!(held.len(), 2, "the other two held back for the probe's verdict: {calls:#?}");

    // Healthy again: the rest go as soon as they are due.
    b.advance(Duration::from_secs(5)).await;
    b.wait("all delivered", |c| finished(c) == 4).await;
    seen.push(probe);
    for _ in 0..2 {
        seen.push(bad.next(QUICK).await);
    }
    let mut paths: Vec<_> = seen.iter().map(|a| a.path.as_str()).collect();
    paths.sort();
    assert_eq!(paths, ["/one", "/one", "/three", "/two"]);
    assert!(b.calls.borrow().iter().all(|c| !matches!(c, Call::Abandon(..))));
    b.stop().await;
}

#[tokio::test]
async fn a_callback_the_policy_refuses_at_send_time_is_given_up_at_once() {
    // Rows written while the policy allowed loopback (or before there was one), sent by a
    // notifier whose policy does not: not one connection, no retries, a dead letter saying why.
    let mut callback = Callback::start().await;
    let http_only = CallbackPolicy::new(&[], CallbackSchemes::HttpAndHttps, CallbackNetworks::PublicOnly).unwrap();
    let mut b = Bench::start(NotifierOptions { callbacks: http_only, ..bench_options() });
    b.ended_operation(&callback.uri("/refused")).await;
    b.ended_operation("http://localhost:9/refused").await;
    let calls = b.wait("both given up", |c| c.iter().filter(|c| matches!(c, Call::Abandon(..))).count() == 2).await;
    let mut errors: Vec<&str> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Abandon(_, e) => Some(e.as_str()),
            _ => None,
        })
        .collect();
    errors.sort();
    assert_eq!(errors, ["refused by the callback policy: the host is a loopback address"; 2]);
    assert!(calls.iter().all(|c| matches!(c, Call::Abandon(..))), "no attempt rescheduled: {calls:?}");
    // An hour later the notifier's next pass finds nothing to send: what was given up never
    // comes due again, and nothing reaches the callback.
    let later = b.clock.now().add(Duration::from_secs(3600));
    b.advance(Duration::from_secs(3600)).await;
    assert_eq!(b.pass_at(later).await, 0, "a notification given up came due again");
    assert!(callback.arrivals.try_recv().is_err(), "the callback was never called");
    b.stop().await;
}
