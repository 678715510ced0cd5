//! Destination health: what the notifier knows about each callback destination (`host:port`
//! of the URI), shared by every notification sent there. Pure bookkeeping on times passed in;
//! the delivery loop asks [`Destinations::admit`] before each send and reports each outcome
//! to [`Destinations::finished`].
//!
//! * At most `per_destination` deliveries to one destination are in flight; one more due row
//!   is held back (deferred in the store, unsent) until about when a slot frees, paced by the
//!   destination's observed latency so a burst is spread, not re-read on every pass.
//! * A destination that fails (no answer, a timeout, `5xx`, `408`, `429`) is backed off as a
//!   whole: until its retry time none of its rows is sent ([`Admission::BackedOff`]). Then one
//!   probe goes; the rest wait for its verdict. A probe that fails doubles the back-off
//!   ([`Limits::retry`]); any answer the destination gives (even a `4xx`: the fault is the
//!   row's, not the destination's) makes it healthy again.
//! * Failures of deliveries already in flight when the destination was backed off carry no
//!   news and do not double the back-off again.

use std::collections::HashMap;
use std::time::Duration;

use slipway_domain::{RetryPolicy, Timestamp};

/// The destination of a callback URI: `host:port` (lowercase host, the scheme's default port
/// when none is given). A URI that does not parse is its own destination.
pub fn destination_of(uri: &str) -> String {
    match reqwest::Url::parse(uri) {
        Ok(url) => match (url.host_str(), url.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{}:{port}", host.to_ascii_lowercase()),
            (Some(host), None) => host.to_ascii_lowercase(),
            _ => uri.to_string(),
        },
        Err(_) => uri.to_string(),
    }
}

#[derive(Clone, Debug)]
pub struct Limits {
    pub per_destination: usize,
    /// A failing destination's back-off: `first_backoff` doubling to `max_backoff`
    /// ([`super::NotifierOptions::retry_policy`]).
    pub retry: RetryPolicy,
    /// The longest a delivery can take: a probe's verdict is known by then.
    pub request_timeout: Duration,
}

/// What to do with a due row for a destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Send it now; a slot on the destination is taken until [`Destinations::finished`].
    Send,
    /// The destination has as many deliveries in flight as it may have: hold the row back
    /// (unsent, no attempt counted) until `until`.
    Busy { until: Timestamp },
    /// The destination failed `failures` times in a row and is backed off until `until`: the
    /// row is not sent; `error` is the destination's last failure.
    BackedOff { until: Timestamp, failures: u32, error: String },
}

/// How a finished delivery went, as far as the destination is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The destination answered (whatever the status: it is reachable and working).
    Answered,
    /// No answer, a timeout, or an answer that says the destination is in trouble.
    Failed(String),
}

/// Latency assumed for a destination nothing is known about yet.
const INITIAL_LATENCY: Duration = Duration::from_millis(100);
/// Closest spacing of held-back rows of one destination.
const MIN_SPACING: Duration = Duration::from_millis(10);
/// Rows waiting for a probe come back this long after it must have ended.
const PROBE_MARGIN: Duration = Duration::from_millis(250);

#[derive(Debug)]
struct Health {
    /// Start times of the deliveries in flight.
    in_flight: Vec<Timestamp>,
    /// Consecutive failures; zero when healthy.
    failures: u32,
    /// Backed off until then (meaningful while `failures > 0`).
    retry_at: Timestamp,
    /// When `failures` last went up: failures of deliveries started before carry no news.
    escalated_at: Timestamp,
    last_error: String,
    /// Smoothed duration of deliveries.
    latency: Duration,
    /// Held-back rows are paced from here.
    next_slot: Timestamp,
    last_used: Timestamp,
}

impl Health {
    fn new(now: Timestamp) -> Self {
        Health {
            in_flight: Vec::new(),
            failures: 0,
            retry_at: now,
            escalated_at: now,
            last_error: String::new(),
            latency: INITIAL_LATENCY,
            next_slot: now,
            last_used: now,
        }
    }
}

#[derive(Debug)]
pub struct Destinations {
    limits: Limits,
    health: HashMap<String, Health>,
}

impl Destinations {
    pub fn new(limits: Limits) -> Self {
        Destinations { limits, health: HashMap::new() }
    }

    /// Decides about one due row for `destination`; [`Admission::Send`] takes a slot.
    pub fn admit(&mut self, destination: &str, now: Timestamp) -> Admission {
        let limits = &self.limits;
        let h = self.health.entry(destination.to_string()).or_insert_with(|| Health::new(now));
        h.last_used = now;
        if h.failures > 0 && now < h.retry_at {
            return Admission::BackedOff { until: h.retry_at, failures: h.failures, error: h.last_error.clone() };
        }
        // A destination that failed gets one probe at a time until it answers.
        let probing = h.failures > 0;
        let limit = if probing { 1 } else { limits.per_destination.max(1) };
        if h.in_flight.len() < limit {
            h.in_flight.push(now);
            return Admission::Send;
        }
        let oldest = h.in_flight.iter().copied().min().unwrap_or(now);
        if probing {
            let verdict_by = oldest.add(limits.request_timeout + PROBE_MARGIN);
            return Admission::Busy { until: verdict_by.max(now.add(MIN_SPACING)) };
        }
        // About when a slot frees: deliveries take `latency` (or longer, if the oldest one in
        // flight has already), `limit` of them at a time.
        let latency = h.latency.max(now.since(oldest));
        let spacing = (latency / limit as u32).clamp(MIN_SPACING, limits.request_timeout.max(MIN_SPACING));
        h.next_slot = h.next_slot.max(now).add(spacing);
        Admission::Busy { until: h.next_slot }
    }

    /// A delivery admitted at `started` ended at `now` after `took`; `verdict` is `None` when
    /// it says nothing about the destination (the operation had expired, the store failed,
    /// the delivery was interrupted).
    pub fn finished(
        &mut self,
        destination: &str,
        started: Timestamp,
        now: Timestamp,
        took: Duration,
        verdict: Option<Verdict>,
    ) {
        let Some(h) = self.health.get_mut(destination) else { return };
        if let Some(i) = h.in_flight.iter().position(|t| *t == started) {
            h.in_flight.swap_remove(i);
        }
        h.last_used = now;
        let Some(verdict) = verdict else { return };
        h.latency = (h.latency * 3 + took) / 4;
        match verdict {
            Verdict::Answered => h.failures = 0,
            Verdict::Failed(error) => {
                if h.failures == 0 || started >= h.escalated_at {
                    h.failures += 1;
                    h.escalated_at = now;
                    h.retry_at = now.add(self.limits.retry.delay(h.failures));
                }
                h.last_error = error;
            }
        }
    }

    /// Forgets destinations with nothing in flight that were not used for a while (twice the
    /// longest back-off, so a failing one's rows still find its record when they are due).
    pub fn prune(&mut self, now: Timestamp) {
        let keep_for = self.limits.retry.max().saturating_mul(2).max(Duration::from_secs(60));
        self.health.retain(|_, h| !h.in_flight.is_empty() || now.since(h.last_used) < keep_for);
    }

    /// Deliveries in flight to `destination`.
    pub fn in_flight(&self, destination: &str) -> usize {
        self.health.get(destination).map_or(0, |h| h.in_flight.len())
    }

    pub fn len(&self) -> usize {
        self.health.len()
    }

    pub fn is_empty(&self) -> bool {
        self.health.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn t(ms: i64) -> Timestamp {
        Timestamp(1_000_000 + ms)
    }

    fn limits() -> Limits {
        Limits { per_destination: 2, retry: RetryPolicy::exponential(S, 300 * S), request_timeout: 5 * S }
    }

    #[test]
    fn destinations_are_host_and_port() {
        for (uri, expected) in [
            ("http://Callbacks.Example/a/b?x=1", "callbacks.example:80"),
            ("https://callbacks.example/other", "callbacks.example:443"),
            ("http://127.0.0.1:8123/cb", "127.0.0.1:8123"),
            ("http://[::1]:9000/cb", "[::1]:9000"),
            ("not a uri", "not a uri"),
        ] {
            assert_eq!(destination_of(uri), expected, "{uri}");
        }
    }

    #[test]
    fn in_flight_per_destination_is_bounded_and_held_rows_are_paced() {
        let mut d = Destinations::new(limits());
        assert_eq!(d.admit("a:80", t(0)), Admission::Send);
        assert_eq!(d.admit("a:80", t(0)), Admission::Send);
        // Latency unknown (100 ms), two at a time: a slot about every 50 ms.
        assert_eq!(d.admit("a:80", t(0)), Admission::Busy { until: t(50) });
        assert_eq!(d.admit("a:80", t(0)), Admission::Busy { until: t(100) });
        assert_eq!(d.admit("b:80", t(0)), Admission::Send, "another destination is not affected");
        d.finished("a:80", t(0), t(40), Duration::from_millis(40), Some(Verdict::Answered));
        assert_eq!(d.in_flight("a:80"), 1);
        assert_eq!(d.admit("a:80", t(40)), Admission::Send);
        // The oldest delivery in flight has taken 2 s already: slots come slower.
        assert_eq!(d.admit("a:80", t(2_000)), Admission::Busy { until: t(3_000) });
    }

    #[test]
    fn a_failing_destination_is_backed_off_as_a_whole_then_probed() {
        let mut d = Destinations::new(limits());
        assert_eq!(d.admit("a:80", t(0)), Admission::Send);
        assert_eq!(d.admit("a:80", t(0)), Admission::Send);
        d.finished("a:80", t(0), t(5_000), 5 * S, Some(Verdict::Failed("timed out".into())));
        let backed_off = |until, failures| Admission::BackedOff { until, failures, error: "timed out".into() };
        assert_eq!(d.admit("a:80", t(5_000)), backed_off(t(6_000), 1));
        // The other delivery was in flight when the back-off began: no news, no doubling.
        d.finished("a:80", t(0), t(5_001), 5 * S, Some(Verdict::Failed("timed out".into())));
        assert_eq!(d.admit("a:80", t(5_999)), backed_off(t(6_000), 1));
        // Back-off over: one probe; the others wait for its verdict.
        assert_eq!(d.admit("a:80", t(6_000)), Admission::Send);
        assert_eq!(d.admit("a:80", t(6_000)), Admission::Busy { until: t(11_250) });
        d.finished("a:80", t(6_000), t(11_000), 5 * S, Some(Verdict::Failed("timed out".into())));
        assert_eq!(d.admit("a:80", t(11_000)), backed_off(t(13_000), 2), "a failed probe doubles it");
        assert_eq!(d.admit("a:80", t(13_000)), Admission::Send);
        // Any answer (here a 404: the row's fault) makes the destination healthy again.
        d.finished("a:80", t(13_000), t(13_010), Duration::from_millis(10), Some(Verdict::Answered));
        assert_eq!(d.admit("a:80", t(13_010)), Admission::Send);
        assert_eq!(d.admit("a:80", t(13_010)), Admission::Send);
    }

    #[test]
    fn the_back_off_is_capped() {
        let mut d = Destinations::new(limits());
        let mut now = t(0);
        let mut seen = Vec::new();
        for _ in 0..12 {
            assert_eq!(d.admit("a:80", now), Admission::Send);
            d.finished("a:80", now, now, Duration::ZERO, Some(Verdict::Failed("503".into())));
            let Admission::BackedOff { until, failures, .. } = d.admit("a:80", now) else { panic!("not backed off") };
            seen.push((failures, until.since(now).as_secs()));
            now = until;
        }
        let expected = [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16), (6, 32), (7, 64), (8, 128), (9, 256), (10, 300)];
        assert_eq!(seen[..10], expected);
        assert_eq!(seen[11], (12, 300));
    }

    #[test]
    fn outcomes_without_a_verdict_only_free_the_slot_and_idle_records_are_forgotten() {
        let mut d = Destinations::new(limits());
        assert_eq!(d.admit("a:80", t(0)), Admission::Send);
        d.finished("a:80", t(0), t(10), Duration::from_millis(10), None);
        assert_eq!(d.in_flight("a:80"), 0);
        assert_eq!(d.admit("a:80", t(10)), Admission::Send);
        d.prune(t(10 + 600_000));
        assert_eq!(d.len(), 1, "something in flight");
        d.finished("a:80", t(10), t(20), Duration::from_millis(10), Some(Verdict::Answered));
        d.prune(t(20 + 599_999));
        assert_eq!(d.len(), 1);
        d.prune(t(20 + 600_000));
        assert!(d.is_empty());
    }
}
