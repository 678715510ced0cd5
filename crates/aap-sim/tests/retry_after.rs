//! 429 bursts and the per-client Retry-After accounting, over HTTP. Clients are told apart by
//! `User-Agent`. Timing assertions compare instants measured around the requests with what
//! the simulator answered; the only waits are the scenario's own (a client that waits as told,
//! or one that comes back too early on purpose, right after the in-flight grace the simulator
//! reports). On paused time: the simulator's windows and the clients' waits are tokio timers
//! in this process, so the instants compared are exact.

use std::time::Duration;

use aap_sim::{FaultCounts, Faults, RateLimitBurst, Sim, SimConfig, Violation};
use serde_json::{Value, json};
use slipway_test_support::eventually;
use tokio::time::Instant;

struct Answer {
    status: u16,
    retry_after: Option<u64>,
    /// When the answer was complete.
    at: Instant,
}

async fn get(sim: &Sim, client: &str, rel: &str) -> Answer {
    let resp = reqwest::Client::new()
        .get(format!("{}/api/v2/{rel}", sim.base_url()))
        .header("User-Agent", client)
        .send()
        .await
        .expect("answered");
    let at = Instant::now();
    let status = resp.status().as_u16();
    let retry_after = resp.headers().get("retry-after").map(|v| v.to_str().unwrap().parse().unwrap());
    Answer { status, retry_after, at }
}

async fn admin(sim: &Sim, rel: &str) -> Value {
    reqwest::get(format!("{}/_sim/{rel}", sim.base_url())).await.unwrap().json().await.unwrap()
}

/// Returns once `at` is in the past (a request sent now arrives after it): a millisecond
/// past it, the paused clock's smallest step.
async fn past(at: Instant) {
    tokio::time::sleep_until(at + Duration::from_millis(1)).await;
}

async fn start(config: SimConfig) -> Sim {
    Sim::start("127.0.0.1:0", SimConfig { tick_ms: 10, ..config }).await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_burst_answers_everyone_429_until_the_end_of_its_window() {
    let sim = start(SimConfig::default()).await;
    let h = sim.handle();
    let before_set = Instant::now();
    h.set_faults(Faults {
        rate_limit_burst: Some(RateLimitBurst { every_ms: 60_000, length_ms: 1_500 }),
        ..Faults::default()
    });

    let a = get(&sim, "client-a", "jobs/").await;
    assert_eq!(a.status, 429);
    let ra = a.retry_after.expect("a Retry-After");
    assert!(ra == 1 || ra == 2, "the rest of a 1.5 s window, rounded up: {ra}");
    // Waiting as told gets past the window, whose end is at the earliest 1.5 s after `before_set`.
    assert!(a.at + Duration::from_secs(ra) >= before_set + Duration::from_millis(1_500));
    let b = get(&sim, "client-b", "ping/").await;
    assert_eq!(b.status, 429, "everyone is limited during a burst");

    // A client that waits as told is through and is no violator.
    tokio::time::sleep_until(a.at + Duration::from_secs(ra)).await;
    assert_eq!(get(&sim, "client-a", "jobs/").await.status, 200);
    assert_eq!(h.blocked_until("client-a"), None);
    assert_eq!(h.retry_after_violations(), vec![]);
    assert_eq!(h.injected(), FaultCounts { rate_limited: 2, ..FaultCounts::default() });
    let clients = h.requests_by_client();
    assert_eq!((clients["client-a"], clients["client-b"]), (2, 1));
    assert_eq!(admin(&sim, "clients").await, json!({"client-a": 2, "client-b": 1}));
    assert_eq!(admin(&sim, "injected").await["rate_limited"], 2);

    // Windows repeat: back in one after `every_ms`.
    h.set_faults(Faults {
        rate_limit_burst: Some(RateLimitBurst { every_ms: 300, length_ms: 100 }),
        ..Faults::default()
    });
    let mut seen = Vec::new();
    eventually("a 200 and two 429s: the windows repeat", Duration::from_secs(10), async || {
        seen.push(get(&sim, "prober", "ping/").await.status);
        if seen.contains(&200) && seen.iter().filter(|s| **s == 429).count() >= 2 {
            Ok(())
        } else {
            Err(format!("{seen:?}"))
        }
    })
    .await;
    h.reset_requests();
    assert_eq!(h.injected(), FaultCounts::default());
    assert!(h.requests_by_client().is_empty());
    sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn requests_before_the_retry_after_are_violations_except_those_in_flight() {
    let sim = start(SimConfig { retry_after_grace_ms: 300, ..SimConfig::default() }).await;
    let h = sim.handle();
    h.set_faults(Faults {
        rate_limit_burst: Some(RateLimitBurst { every_ms: 60_000, length_ms: 5_000 }),
        ..Faults::default()
    });
    let first = get(&sim, "eager", "jobs/").await;
    assert_eq!((first.status, first.retry_after), (429, Some(5)));
    let until = h.blocked_until("eager").expect("blocked");
    assert!(until > first.at + Duration::from_secs(4) && until <= first.at + Duration::from_secs(5), "{until:?}");
    // Right after the 429 went out: within the grace, as if it had been in flight.
    get(&sim, "eager", "jobs/").await;
    assert_eq!(h.retry_after_violations(), vec![]);
    // Later but still early: a violation, however it is answered. "Later": past the grace for
    // requests in flight, which the simulator reports. Early by at most the time from sending
    // it to the end of eager's latest block (the second 429 set one too, a little after the
    // first's).
    let in_flight = h.in_flight_until("eager").expect("blocked");
    let blocked_until = h.blocked_until("eager").expect("blocked");
    past(in_flight).await;
    let sent = Instant::now();
    let early = get(&sim, "eager", "jobs/42/").await;
    let at_most = u64::try_from((blocked_until - sent).as_micros().div_ceil(1000)).unwrap();
    assert_eq!(early.status, 429);
    // Another client is not concerned by eager's block.
    get(&sim, "bystander", "ping/").await;
    let v = h.retry_after_violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!((v[0].client.as_str(), v[0].endpoint.as_str()), ("eager", "GET /api/v2/jobs/{id}/"));
    assert!(v[0].early_by_ms > 0 && v[0].early_by_ms <= at_most, "at most {at_most} ms early: {v:?}");
    let served: Vec<Violation> = serde_json::from_value(admin(&sim, "violations").await).unwrap();
    assert_eq!(served, v);

    // A 503 carrying Retry-After blocks too; one without does not.
    h.set_faults(Faults { error_5xx_percent: 100, ..Faults::default() });
    let plain = get(&sim, "gw", "ping/").await;
    assert_eq!((plain.status, plain.retry_after), (503, None));
    assert_eq!(h.blocked_until("gw"), None);
    h.set_faults(Faults { error_5xx_percent: 100, error_5xx_retry_after_seconds: 3, ..Faults::default() });
    let told = get(&sim, "gw", "ping/").await;
    assert_eq!((told.status, told.retry_after), (503, Some(3)));
    assert!(h.blocked_until("gw").is_some());
    past(h.in_flight_until("gw").expect("blocked")).await;
    get(&sim, "gw", "jobs/").await;
    let v = h.retry_after_violations();
    assert_eq!(v.len(), 2, "{v:?}");
    assert_eq!((v[1].client.as_str(), v[1].endpoint.as_str()), ("gw", "GET /api/v2/jobs/"));
    assert_eq!(h.injected().unavailable, 3);
    sim.shutdown().await;
}

#[test]
fn burst_settings_parse_from_toml() {
    let c = SimConfig::from_toml(
        "retry_after_grace_ms = 50\n[faults]\nerror_5xx_retry_after_seconds = 2\nrate_limit_burst = { every_ms = 10000, length_ms = 2000 }",
    )
    .unwrap();
    assert_eq!(c.retry_after_grace_ms, 50);
    assert_eq!(c.faults.rate_limit_burst, Some(RateLimitBurst { every_ms: 10_000, length_ms: 2_000 }));
    assert_eq!(c.faults.error_5xx_retry_after_seconds, 2);
    assert!(SimConfig::from_toml("[faults]\nrate_limit_burst = { every_ms = 1 }").is_err());
    assert_eq!(SimConfig::default().retry_after_grace_ms, 100);
}
