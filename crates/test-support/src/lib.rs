//! What Slipway's tests share, so that every test reads time one way and waits one way.
//!
//! * [`TestClock`] is the [`Clock`] a test hands to the code under test: a wall-clock start
//!   plus however far tokio's clock has moved since. On `#[tokio::test(start_paused = true)]`
//!   it moves only when tokio's time does (`tokio::time::advance`, or the runtime's
//!   auto-advance when every task waits on a timer), together with every timer; on real time
//!   it is real time, and [`jump`] moves it — and every timer with it — forward at once.
//! * [`eventually`] is the one bounded wait for a condition, [`wait_ready`] the one wait for
//!   a server's `/readyz`.
//! * [`hold_time`] and [`holding_time`] keep paused time still while work the runtime cannot
//!   see (another thread's) is under way.
//! * [`callback`] is a client's async-notification endpoint on loopback.
//!
//! A dev-dependency only, or behind the store's test-only `conformance` feature; never in the
//! product.
//!
//! Paused time is only sound while everything the test waits for happens on the runtime or
//! in `spawn_blocking`: tokio auto-advances a paused clock whenever the runtime is idle, and
//! network I/O, child processes and other threads (the SQLite store's writer) leave it idle.

pub mod callback;

use std::future::Future;
use std::time::Duration;

use slipway_domain::time::{Clock, SystemClock, Timestamp};

/// The clock of a test: `start` plus the time tokio's clock has moved since the clock was
/// made. Make it inside the test's runtime, whose clock it then reads.
#[derive(Debug)]
pub struct TestClock {
    start: Timestamp,
    since: tokio::time::Instant,
}

impl TestClock {
    /// Starting at the machine's time now.
    pub fn new() -> TestClock {
        TestClock::starting_at(SystemClock.now())
    }

    /// Starting at `start`.
    pub fn starting_at(start: Timestamp) -> TestClock {
        TestClock { start, since: tokio::time::Instant::now() }
    }
}

impl Default for TestClock {
    fn default() -> Self {
        TestClock::new()
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        self.start.add(tokio::time::Instant::now().saturating_duration_since(self.since))
    }
}

/// Moves tokio's clock forward by `d` at once in a test that runs on real time, as if the
/// process had been suspended that long: every [`TestClock`] reads `d` later and every timer
/// due by then fires. It pauses the clock, advances it and lets it run again, which needs
/// the current-thread runtime (`#[tokio::test]`'s default). On paused time, call
/// `tokio::time::advance` instead.
pub async fn jump(d: Duration) {
    tokio::time::pause();
    // `advance` yields once; a paused clock does not auto-advance over a yield.
    tokio::time::advance(d).await;
    tokio::time::resume();
}

/// Paused time held still, as tokio holds it while a `spawn_blocking` task runs, until this
/// is dropped: for work done on a thread the runtime does not know about. The SQLite store's
/// writes are such work (its reads run in `spawn_blocking`, its writes on its own writer
/// thread): awaited bare on paused time, the idle runtime would move the clock to its next
/// timer while the write is on its way to disk. Costs a blocking thread while it is held.
#[must_use = "time is held only while the guard lives"]
pub struct TimeHeld {
    _release: std::sync::mpsc::Sender<()>,
}

/// Holds paused time still until the returned guard is dropped (see [`TimeHeld`]). Call it
/// inside the test's runtime.
pub fn hold_time() -> TimeHeld {
    let (release, released) = std::sync::mpsc::channel::<()>();
    // The blocking task holds the clock while it exists; it ends when `release` is dropped.
    drop(tokio::task::spawn_blocking(move || {
        let _ = released.recv();
    }));
    TimeHeld { _release: release }
}

/// Awaits `work` with paused time held still (see [`TimeHeld`]).
pub async fn holding_time<F: Future>(work: F) -> F::Output {
    let _held = hold_time();
    work.await
}

/// What a condition polled by [`eventually`] answers.
pub trait Outcome {
    type Value;
    /// `Ok` once the condition holds; `Err` with what was seen instead, if that is worth
    /// saying when the wait runs out.
    fn into_result(self) -> Result<Self::Value, Option<String>>;
}

impl Outcome for bool {
    type Value = ();
    fn into_result(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

impl<T> Outcome for Option<T> {
    type Value = T;
    fn into_result(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

/// `Err(seen)`: not yet, and what was seen instead (named if the wait runs out).
impl<T> Outcome for Result<T, String> {
    type Value = T;
    fn into_result(self) -> Result<T, Option<String>> {
        self.map_err(Some)
    }
}

/// The first pause between two looks; each pause doubles, up to [`LONGEST_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(5);
const LONGEST_POLL: Duration = Duration::from_millis(100);

/// Polls `check` until it holds and returns what it found; after `timeout` fails the test,
/// naming `what` was awaited and what the last look saw. A check that finds something that
/// can no longer change for the better panics itself.
///
/// The timeout is wall-clock time, so it bounds a test on paused time too. The pauses
/// between looks (5 ms, doubling up to 100 ms) are tokio sleeps: on paused time they are
/// what lets the clock move while nothing else is due.
pub async fn eventually<O: Outcome>(what: &str, timeout: Duration, check: impl AsyncFnMut() -> O) -> O::Value {
    match poll(timeout, check).await {
        Ok(value) => value,
        Err(None) => panic!("{what}: not within {timeout:?}"),
        Err(Some(seen)) => panic!("{what}: not within {timeout:?}; last seen: {seen}"),
    }
}

async fn poll<O: Outcome>(timeout: Duration, mut check: impl AsyncFnMut() -> O) -> Result<O::Value, Option<String>> {
    let start = std::time::Instant::now();
    let pauses = slipway_domain::RetryPolicy::exponential(FIRST_POLL, LONGEST_POLL);
    let mut misses = 0u32;
    loop {
        let seen = match check().await.into_result() {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if start.elapsed() >= timeout {
            return Err(seen);
        }
        misses = misses.saturating_add(1);
        tokio::time::sleep(pauses.delay(misses)).await;
    }
}

/// [`eventually`] for a test that is not async (it drives processes by their exit status,
/// a port, `psql`): the same pauses, slept on this thread.
pub fn eventually_blocking<O: Outcome>(what: &str, timeout: Duration, check: impl FnMut() -> O) -> O::Value {
    match within_blocking(timeout, check) {
        Ok(value) => value,
        Err(None) => panic!("{what}: not within {timeout:?}"),
        Err(Some(seen)) => panic!("{what}: not within {timeout:?}; last seen: {seen}"),
    }
}

/// [`eventually_blocking`] as a `Result`, for a caller that must clean up (kill a child)
/// before it fails: `Err` holds what the last look saw, if it said.
pub fn within_blocking<O: Outcome>(
    timeout: Duration,
    mut check: impl FnMut() -> O,
) -> Result<O::Value, Option<String>> {
    let start = std::time::Instant::now();
    let pauses = slipway_domain::RetryPolicy::exponential(FIRST_POLL, LONGEST_POLL);
    let mut misses = 0u32;
    loop {
        let seen = match check().into_result() {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if start.elapsed() >= timeout {
            return Err(seen);
        }
        misses = misses.saturating_add(1);
        std::thread::sleep(pauses.delay(misses));
    }
}

/// How long [`wait_ready`] waits.
pub const READY_WITHIN: Duration = Duration::from_secs(60);

/// Polls `{base}/readyz` until it answers 2xx; fails the test after [`READY_WITHIN`] with
/// the last answer (status and body) or connection error. Real time only: it talks to a
/// server over the network.
pub async fn wait_ready(http: &reqwest::Client, base: &str) {
    if let Err(e) = ready_within(http, base, READY_WITHIN).await {
        panic!("{e}");
    }
}

/// [`wait_ready`] as a `Result`, for a caller that adds to the failure what it knows (the
/// server's log) or gives another bound.
pub async fn ready_within(http: &reqwest::Client, base: &str, timeout: Duration) -> Result<(), String> {
    let url = format!("{base}/readyz");
    // One request never takes the whole wait: a server that accepts and then hangs is
    // asked again.
    let each = timeout.min(Duration::from_secs(5));
    let ready = async || match http.get(&url).timeout(each).send().await {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => {
            let status = r.status();
            Err(format!("{status} {}", r.text().await.unwrap_or_default().trim()))
        }
        Err(e) => Err(e.to_string()),
    };
    poll(timeout, ready)
        .await
        .map_err(|seen| format!("{url} did not answer 2xx within {timeout:?}; last: {}", seen.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_clock_moves_with_tokio_time() {
        let clock = TestClock::starting_at(Timestamp(1_000));
        assert_eq!(clock.now(), Timestamp(1_000));
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(clock.now(), Timestamp(61_000));
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(clock.now(), Timestamp(61_250));
    }

    #[tokio::test]
    async fn a_jump_moves_the_clock_and_fires_timers_on_real_time() {
        let clock = TestClock::new();
        let before = clock.now();
        let timer = tokio::spawn(tokio::time::sleep(Duration::from_secs(3600)));
        jump(Duration::from_secs(3600)).await;
        let moved = clock.now().millis_after(before);
        assert!((3_600_000..3_610_000).contains(&moved), "{moved} ms");
        tokio::time::timeout(Duration::from_secs(10), timer).await.expect("the timer fired").unwrap();
        // Real time again: the clock goes on.
        let at = clock.now();
        std::thread::sleep(Duration::from_millis(20));
        assert!(clock.now().millis_after(at) >= 20);
    }

    #[tokio::test(start_paused = true)]
    async fn held_time_stands_still_while_another_thread_works() {
        let clock = TestClock::new();
        let _due = tokio::spawn(tokio::time::sleep(Duration::from_secs(3600)));
        let before = clock.now();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let _ = tx.send(());
        });
        holding_time(rx).await.unwrap();
        assert_eq!(clock.now(), before, "the clock did not leap to the next timer");
    }

    #[tokio::test(start_paused = true)]
    async fn eventually_returns_what_the_check_found() {
        let mut looks = 0;
        let found = eventually("the third look", Duration::from_secs(5), async || {
            looks += 1;
            (looks == 3).then_some(looks)
        })
        .await;
        assert_eq!(found, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "the impossible: not within 50ms; last seen: still 1")]
    async fn eventually_names_what_it_waited_for_and_saw() {
        eventually("the impossible", Duration::from_millis(50), async || Err::<(), _>("still 1".to_string())).await;
    }

    #[tokio::test]
    async fn ready_within_names_the_last_answer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let e = ready_within(&reqwest::Client::new(), &base, Duration::from_millis(100)).await.unwrap_err();
        assert!(e.starts_with(&format!("{base}/readyz did not answer 2xx within 100ms; last: ")), "{e}");
    }
}
