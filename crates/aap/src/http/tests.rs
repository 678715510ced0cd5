use slipway_provider::ProviderError;

use super::gate::parse_http_date;
use super::*;

#[test]
fn retry_after_forms() {
    let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
    let h = |s: &str| HeaderValue::from_str(s).unwrap();
    assert_eq!(parse_retry_after(&h("3"), now), Some(Duration::from_secs(3)));
    assert_eq!(parse_retry_after(&h(" 120 "), now), Some(Duration::from_secs(120)));
    assert_eq!(parse_retry_after(&h("Sun, 06 Nov 1994 08:49:47 GMT"), now), Some(Duration::from_secs(10)));
    assert_eq!(parse_retry_after(&h("Sun, 06 Nov 1994 08:49:00 GMT"), now), Some(Duration::ZERO));
    assert_eq!(parse_retry_after(&h("soon"), now), None);
    assert_eq!(parse_retry_after(&h("-1"), now), None);
    assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
    assert_eq!(parse_http_date("Sun, 29 Nov 2026 21:30:56 GMT"), Some(1_795_987_856));
    assert_eq!(parse_http_date("Sun, 29 Foo 2026 21:30:56 GMT"), None);
}

#[test]
fn error_classification_for_idempotent_requests() {
    let st = |status, retry_after| HttpError::Status { status, retry_after, message: format!("s{status}") };
    assert_eq!(
        st(429, Some(Duration::from_secs(7))).into_provider(),
        ProviderError::RateLimited { retry_after: Duration::from_secs(7), message: "s429".into() }
    );
    assert_eq!(
        st(429, None).into_provider(),
        ProviderError::RateLimited { retry_after: DEFAULT_RATE_LIMIT_WAIT, message: "s429".into() }
    );
    for s in [500, 502, 503, 504, 408] {
        assert!(matches!(st(s, None).into_provider(), ProviderError::Transient(_)), "{s}");
    }
    for s in [400, 401, 403, 404, 405, 409] {
        assert!(matches!(st(s, None).into_provider(), ProviderError::Permanent(_)), "{s}");
    }
    assert!(matches!(HttpError::NotSent("x".into()).into_provider(), ProviderError::Transient(_)));
    assert!(matches!(HttpError::Unknown("x".into()).into_provider(), ProviderError::Transient(_)));
    assert!(matches!(HttpError::Invalid("x".into()).into_provider(), ProviderError::Permanent(_)));
    assert!(st(503, None).retryable() && st(429, None).retryable() && !st(500, None).retryable());
    assert!(!st(401, None).retryable());
    let held = HttpError::Throttled { retry_after: Duration::from_millis(2500), message: "held".into() };
    assert!(!held.retryable());
    assert_eq!(
        held.into_provider(),
        ProviderError::RateLimited { retry_after: Duration::from_millis(2500), message: "held".into() }
    );
}

#[test]
fn which_answers_close_the_gate() {
    let s = Some(Duration::from_secs(2));
    assert_eq!(closes_gate(429, s), s);
    assert_eq!(closes_gate(503, s), s);
    assert_eq!(closes_gate(429, None), None, "nothing advertised");
    assert_eq!(closes_gate(503, None), None);
    for other in [200, 202, 500, 502, 504] {
        assert_eq!(closes_gate(other, s), None, "{other}");
    }
}

/// An `Http` whose requests fail at connect (port 1 refuses): a `NotSent` error proves the
/// request left the gate.
fn refused(max_wait: Duration) -> Http {
    Http::new(HttpSettings {
        client: reqwest::Client::new(),
        root: Url::parse("http://127.0.0.1:1/api/").unwrap(),
        authorization: None,
        scrub: Vec::new(),
        max_concurrent: 4,
        retries: 0,
        backoff: Duration::from_millis(10),
        max_wait,
        timeout: Duration::from_secs(5),
        jitter_seed: String::new(),
    })
}

#[tokio::test(start_paused = true)]
async fn a_closed_gate_holds_requests_until_the_advertised_time() {
    let http = refused(Duration::from_secs(5));
    let url = http.url("v2/jobs/");
    // Taken before closing: the gate's own deadline is at or after it.
    let until = Instant::now() + Duration::from_millis(300);
    http.close_gate("test", 429, Duration::from_millis(300));
    let held = http.throttled_for().expect("closed");
    assert!(held <= Duration::from_millis(300) && held > Duration::from_millis(200), "{held:?}");
    // Never shortened by a smaller Retry-After.
    http.close_gate("test", 429, Duration::from_millis(10));
    assert!(http.throttled_for().unwrap() > Duration::from_millis(200));
    // An absurd Retry-After closes it for a day, without overflowing.
    refused(Duration::from_secs(1)).close_gate("test", 429, Duration::from_secs(u64::MAX));

    // The launch path does not wait: refused at once, with the time left.
    let e = http.send_now(Method::POST, &url, None).await.unwrap_err();
    assert!(Instant::now() < until);
    assert!(
        matches!(&e, HttpError::Throttled { retry_after, message }
            if *retry_after <= Duration::from_millis(300) && message.contains("not sent")),
        "{e:?}"
    );
    // Everything else waits, then goes out (and is refused by the closed port).
    let (a, b) = tokio::join!(http.send(Method::GET, &url, None), http.send_idempotent(Method::GET, &url, None));
    let after = Instant::now();
    assert!(after >= until, "sent {:?} early", until - after);
    assert!(matches!(a, Err(HttpError::NotSent(_))), "{:?}", a.err());
    assert!(matches!(b, Err(HttpError::NotSent(_))), "{:?}", b.err());
    assert_eq!(http.throttled_for(), None);
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_max_wait_is_refused_without_sending() {
    let http = refused(Duration::from_millis(500));
    let url = http.url("v2/jobs/");
    http.close_gate("test", 429, Duration::from_secs(30));
    let started = Instant::now();
    for e in [http.send(Method::GET, &url, None).await, http.send_idempotent(Method::GET, &url, None).await] {
        let e = e.map(|_| ()).unwrap_err();
        assert!(
            matches!(&e, HttpError::Throttled { retry_after, .. } if *retry_after > Duration::from_secs(29)),
            "{e:?}"
        );
        assert!(matches!(e.into_provider(), ProviderError::RateLimited { .. }));
    }
    assert!(started.elapsed() < Duration::from_millis(500), "not waited for: {:?}", started.elapsed());
}

#[test]
fn backoff_grows_and_is_capped() {
    let base = Duration::from_millis(100);
    let cap = Duration::from_secs(1);
    for draw in [0, 1 << 63, u64::MAX] {
        let b0 = backoff(base, 0, cap, draw);
        assert!(b0 >= base && b0 <= base.mul_f64(1.25), "{b0:?}");
        let b2 = backoff(base, 2, cap, draw);
        assert!(b2 >= base * 4 && b2 <= cap, "{b2:?}");
        assert_eq!(backoff(base, 30, cap, draw), cap);
    }
}

/// The defaults (`retry_backoff` 500 ms, `max_retry_wait` 10 s): attempt → the wait
/// without jitter, and with the most jitter (just under 25% more, still capped).
#[test]
fn get_retry_waits_table() {
    let (base, cap) = (Duration::from_millis(500), Duration::from_secs(10));
    for (attempt, plain_ms, most_ms) in [
        (0, 500, 625),
        (1, 1000, 1250),
        (2, 2000, 2500),
        (3, 4000, 5000),
        (4, 8000, 10_000),
        (5, 10_000, 10_000),
        (6, 10_000, 10_000),
        (40, 10_000, 10_000),
    ] {
        assert_eq!(backoff(base, attempt, cap, 0), Duration::from_millis(plain_ms), "attempt {attempt}");
        let most = backoff(base, attempt, cap, u64::MAX);
        assert!(most <= Duration::from_millis(most_ms), "attempt {attempt}: {most:?}");
        assert!(most + Duration::from_millis(1) >= Duration::from_millis(most_ms), "attempt {attempt}: {most:?}");
    }
    // The exponent stops at 16, as it always did: 1 ms · 2^16 with a high cap.
    let wait = backoff(Duration::from_millis(1), 20, Duration::from_secs(3600), 0);
    assert_eq!(wait, Duration::from_millis(65_536));
    // Same seed, same waits; every one within its bounds.
    let draws = |http: &Http| (0..5).map(|a| backoff(base, a, cap, http.jitter_draw())).collect::<Vec<_>>();
    let (a, b) = (refused(cap), refused(cap));
    let waits = draws(&a);
    assert_eq!(waits, draws(&b));
    for (attempt, wait) in waits.iter().enumerate() {
        let plain = backoff(base, attempt as u32, cap, 0);
        assert!(*wait >= plain && *wait <= plain.mul_f64(1.25).min(cap), "attempt {attempt}: {wait:?}");
    }
    let seeded = |seed| Http { jitter: Mutex::new(SplitMix64::new(seed)), ..refused(cap) };
    assert_ne!(draws(&seeded(7)), draws(&seeded(8)));
}

#[test]
fn scrubbing_and_previews() {
    let secrets = vec!["s3cr3t-token".to_owned(), "ab".to_owned()];
    assert_eq!(scrub("bad token s3cr3t-token here, ab", &secrets), "bad token *** here, ab");
    assert_eq!(preview("<html>\n  <b>502</b>\n</html>"), "<html> <b>502</b> </html>");
    let long = preview(&"x".repeat(MAX_BODY_PREVIEW * 2));
    assert_eq!(long.chars().count(), MAX_BODY_PREVIEW);
    assert!(long.ends_with('…'));
}
