//! The AAP provider's throttling against the simulator: `Retry-After` (429 and 503) holds
//! every request of the provider, retries of idempotent requests, never of a launch.

#[allow(dead_code)]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use aap_sim::{Faults, RateLimitBurst, SimConfig};
use slipway_aap::{AapOptions, JobKind};
use slipway_provider::{Provider, ProviderError};
use slipway_test_support::eventually;
use support::*;
use tokio::time::Instant;

/// A 429 with `Retry-After` is retried no earlier than advertised.
#[tokio::test(start_paused = true)]
async fn rate_limit_retry_after_is_honoured() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(config(vec![t], vec![])).await;
    let p = provider(options(&sim));
    let l = p.launch(&create("Subnet", "op-r:1")).await.unwrap();
    // Every 2nd request (counted from now) is a 429 asking for 1 s.
    sim.handle().set_faults(Faults { rate_limit_every: 2, retry_after_seconds: 1, ..Faults::default() });
    sim.handle().reset_requests();
    status1(&p, &l.handle).await.unwrap(); // request 1: fine
    let started = Instant::now();
    let s = status1(&p, &l.handle).await.unwrap(); // request 2: 429, then request 3
    let elapsed = started.elapsed();
    assert!(!s.state.is_terminal());
    assert!(elapsed >= Duration::from_secs(1), "retried after {elapsed:?}");
    assert_eq!(count(&sim, "GET /api/v2/jobs/"), 3);

    // A wait longer than max_retry_wait is handed to the engine instead.
    sim.handle().set_faults(Faults { rate_limit_every: 1, retry_after_seconds: 60, ..Faults::default() });
    let started = Instant::now();
    let e = status1(&p, &l.handle).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(e, ProviderError::RateLimited { retry_after, .. } if retry_after == Duration::from_secs(60)),
        "{e:?}"
    );
    // The advertised minute holds every request of the provider, the launch too: refused
    // without being sent, with the time left.
    sim.handle().set_faults(Faults::default());
    sim.handle().reset_requests();
    let e = p.launch(&create("Subnet", "op-r:2")).await.unwrap_err();
    assert!(
        matches!(e, ProviderError::RateLimited { retry_after, .. }
            if retry_after <= Duration::from_secs(60) && retry_after > Duration::from_secs(50)),
        "{e:?}"
    );
    assert!(requests(&sim).is_empty(), "{:?}", requests(&sim));
    // A 429 on launch is a refusal, reported with its Retry-After.
    sim.handle().set_faults(Faults { rate_limit_every: 1, retry_after_seconds: 60, ..Faults::default() });
    let fresh = provider(options(&sim));
    fresh.cache_template("slipway-create-subnet", 1, JobKind::Job);
    let e = fresh.launch(&create("Subnet", "op-r:2")).await.unwrap_err();
    assert!(
        matches!(e, ProviderError::RateLimited { retry_after, .. } if retry_after == Duration::from_secs(60)),
        "{e:?}"
    );
    sim.handle().set_faults(Faults::default());
    assert!(key_jobs(&sim, "op-r:2").is_empty());
}

fn user_agent(client_id: &str) -> String {
    format!("slipway/{} ({client_id})", env!("CARGO_PKG_VERSION"))
}

/// The simulator with a strict Retry-After accounting: no grace for requests in flight.
fn strict(mut config: SimConfig) -> SimConfig {
    config.retry_after_grace_ms = 0;
    config
}

/// A 429 with Retry-After holds *every* request of the provider instance (lookups, status
/// lists, find, cancel) until the advertised time; the launch is refused meanwhile, unsent.
/// Measured: each held call ends after the simulator's "blocked until", and the simulator saw
/// no request of this client arrive before it.
#[tokio::test(start_paused = true)]
async fn a_retry_after_holds_every_request_of_the_provider() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(strict(config(vec![t], vec![]))).await;
    let h = sim.handle();
    let p = provider(AapOptions { client_id: "node-a/aap".into(), ..options(&sim) });
    let ua = user_agent("node-a/aap");
    let l = p.launch(&create("Subnet", "op-g:1")).await.unwrap();
    // For the next second every request is answered 429, Retry-After: 1.
    h.set_faults(Faults {
        rate_limit_burst: Some(RateLimitBurst { every_ms: 3_600_000, length_ms: 1_000 }),
        ..Faults::default()
    });
    h.reset_requests();

    let first = async {
        let s = status1(&p, &l.handle).await;
        (s, Instant::now())
    };
    let others = async {
        let until = eventually("the 429", WAIT, async || h.blocked_until(&ua)).await;
        // The simulator records the 429 as it answers; the provider closes its gate once
        // the answer arrives.
        eventually("the provider's gate", WAIT, async || p.throttled_for()).await;
        // Only the first status request reached the simulator so far.
        assert_eq!(h.requests_by_client().get(&ua), Some(&1));
        let launched = p.launch(&create("Subnet", "op-g:2")).await;
        let launch_ended = Instant::now();
        let (found, status, cancel) = tokio::join!(
            async { (p.find(&create("Subnet", "op-g:1")).await, Instant::now()) },
            async { (status1(&p, &l.handle).await, Instant::now()) },
            async { (p.cancel(&l.handle).await, Instant::now()) },
        );
        (until, launched, launch_ended, found, status, cancel)
    };
    let ((s1, s1_at), (until, launched, launch_ended, found, status, cancel)) = tokio::join!(first, others);

    assert!(launch_ended < until, "the launch did not wait");
    assert!(
        matches!(&launched, Err(ProviderError::RateLimited { retry_after, .. }) if *retry_after <= Duration::from_secs(1)),
        "{launched:?}"
    );
    assert!(s1.is_ok() && s1_at >= until, "{s1:?}");
    assert!(id(&found.0.unwrap().pop().expect("found")) == id(&l) && found.1 >= until);
    assert!(status.0.is_ok() && status.1 >= until, "{:?}", status.0);
    assert!(cancel.0.is_ok() && cancel.1 >= until, "{:?}", cancel.0);
    assert_eq!(h.retry_after_violations(), vec![], "nothing arrived before the advertised time");
    assert!(key_jobs(&sim, "op-g:2").is_empty());
    let r = requests(&sim);
    assert_eq!(r.get("POST /api/v2/job_templates/{id}/launch/"), None, "{r:?}");
    assert_eq!(h.injected().rate_limited, 1, "one 429, then nothing until it expired: {r:?}");
    assert_eq!(h.requests_by_client().keys().collect::<Vec<_>>(), vec![&ua]);
}

/// A Retry-After longer than `max_retry_wait` is handed to the engine by every request of
/// the provider, without sending anything, until it has passed; another provider instance
/// (another client) is not held.
#[tokio::test(start_paused = true)]
async fn a_long_retry_after_refuses_requests_unsent() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(strict(config(vec![t], vec![]))).await;
    let h = sim.handle();
    let p = provider(AapOptions { client_id: "node-b".into(), ..options(&sim) });
    let l = p.launch(&create("Subnet", "op-l:1")).await.unwrap();
    h.set_faults(Faults { rate_limit_every: 1, retry_after_seconds: 60, ..Faults::default() });
    let e = status1(&p, &l.handle).await.unwrap_err();
    assert!(matches!(e, ProviderError::RateLimited { retry_after, .. } if retry_after == Duration::from_secs(60)));
    h.set_faults(Faults::default());
    h.reset_requests();

    let started = Instant::now();
    let held = |e: &ProviderError| {
        matches!(e, ProviderError::RateLimited { retry_after, .. }
            if *retry_after <= Duration::from_secs(60) && *retry_after > Duration::from_secs(50))
    };
    let e = status1(&p, &l.handle).await.unwrap_err();
    assert!(held(&e), "{e:?}");
    let e = p.find(&create("Subnet", "op-l:1")).await.unwrap_err();
    assert!(held(&e), "{e:?}");
    let e = p.cancel(&l.handle).await.unwrap_err();
    assert!(held(&e), "{e:?}");
    let e = p.launch(&create("Subnet", "op-l:2")).await.unwrap_err();
    assert!(held(&e), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "refused at once: {:?}", started.elapsed());
    assert!(requests(&sim).is_empty(), "nothing sent: {:?}", requests(&sim));

    let other = provider(AapOptions { client_id: "node-c".into(), ..options(&sim) });
    assert!(status1(&other, &l.handle).await.is_ok());
    assert_eq!(h.requests_by_client().keys().collect::<Vec<_>>(), vec![&user_agent("node-c")]);
    assert_eq!(h.retry_after_violations(), vec![]);
}

/// A 503 with Retry-After (a gateway in maintenance) closes the gate as a 429 does; the
/// retries of idempotent requests honour it, and a launch meanwhile is refused, not
/// `Indeterminate` (it was never sent).
#[tokio::test(start_paused = true)]
async fn a_503_with_retry_after_closes_the_gate_too() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    // The default grace: the retry and the find leave the gate together when it opens, and
    // the one answered second was in flight when the first got its 503.
    let sim = start(config(vec![t], vec![])).await;
    let h = sim.handle();
    let p = provider(AapOptions { get_retries: 1, ..options(&sim) });
    let ua = user_agent("aap-test");
    let l = p.launch(&create("Subnet", "op-m:1")).await.unwrap();
    h.set_faults(Faults { error_5xx_percent: 100, error_5xx_retry_after_seconds: 1, ..Faults::default() });
    h.reset_requests();
    let started = Instant::now();
    let (a, (launched, b)) = tokio::join!(status1(&p, &l.handle), async {
        eventually("the 503", WAIT, async || h.blocked_until(&ua)).await;
        // The simulator records the 503 as it answers; the provider closes its gate once
        // the answer arrives (the launch would otherwise go out and meet the 503 itself).
        eventually("the provider's gate", WAIT, async || p.throttled_for()).await;
        // The template is cached: the launch goes straight to the (closed) gate.
        (p.launch(&create("Subnet", "op-m:2")).await, p.find(&create("Subnet", "op-m:1")).await)
    });
    // Two tries each, a second apart at least: the gate held the retry and the find.
    assert!(started.elapsed() >= Duration::from_secs(1), "{:?}", started.elapsed());
    assert!(matches!(&a, Err(ProviderError::Transient(m)) if m.contains("503")), "{a:?}");
    assert!(matches!(&b, Err(ProviderError::Transient(_))), "{b:?}");
    assert!(matches!(&launched, Err(ProviderError::RateLimited { .. })), "{launched:?}");
    assert!(key_jobs(&sim, "op-m:2").is_empty());
    assert_eq!(h.retry_after_violations(), vec![]);
    // The provider name is the default client id.
    assert_eq!(h.requests_by_client().keys().collect::<Vec<_>>(), vec![&ua]);
}

/// GETs are retried through 5xx; after the last retry the error is transient.
#[tokio::test(start_paused = true)]
async fn gets_are_retried_on_5xx() {
    let mut t = template(1, "slipway-create-subnet");
    t.duration_seconds = 600.0;
    let sim = start(config(vec![t], vec![])).await;
    let mut o = options(&sim);
    o.get_retries = 12;
    let p = provider(o);
    let l = p.launch(&create("Subnet", "op-5:1")).await.unwrap();
    sim.handle().set_faults(Faults { error_5xx_percent: 30, drop_percent: 30, seed: 7, ..Faults::default() });
    sim.handle().reset_requests();
    for _ in 0..10 {
        status1(&p, &l.handle).await.unwrap();
    }
    assert!(count(&sim, "GET /api/v2/jobs/") > 10, "{:?}", requests(&sim));

    let mut o = options(&sim);
    o.get_retries = 2;
    let p2 = provider(o);
    sim.handle().set_faults(Faults { error_5xx_percent: 100, ..Faults::default() });
    sim.handle().reset_requests();
    let e = status1(&p2, &l.handle).await.unwrap_err();
    assert!(matches!(&e, ProviderError::Transient(m) if m.contains("503")), "{e:?}");
    assert_eq!(count(&sim, "GET /api/v2/jobs/"), 3);
}

/// The launch POST is never retried: a 503 is `Indeterminate` after exactly one POST.
#[tokio::test(start_paused = true)]
async fn launch_is_never_retried() {
    let sim = start(config(vec![template(1, "slipway-create-subnet")], vec![])).await;
    let p = provider(options(&sim));
    p.launch(&create("Subnet", "op-n:1")).await.unwrap(); // resolves and caches
    sim.handle().set_faults(Faults { error_5xx_percent: 100, ..Faults::default() });
    sim.handle().reset_requests();
    let e = p.launch(&create("Subnet", "op-n:2")).await.unwrap_err();
    assert!(matches!(e, ProviderError::Indeterminate(_)), "{e:?}");
    assert_eq!(requests(&sim), BTreeMap::from([("POST /api/v2/job_templates/{id}/launch/".to_owned(), 1)]));
    // The simulator refused it before creating a job: find proves it absent.
    sim.handle().set_faults(Faults::default());
    assert_eq!(p.find(&create("Subnet", "op-n:2")).await.unwrap(), Vec::new());
}
