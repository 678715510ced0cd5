//! Following an operation's progress: every distinct reading of its status document until it
//! ends, and the rules they must keep (docs/arm-contract.md#progress).

use std::time::{Duration, Instant};

use serde_json::Value;

/// One reading: the status, `percentComplete` and `properties.currentTask`.
pub type Reading = (String, Option<u64>, Option<String>);

/// Reads `status_url` every 50 ms until the operation ends; every reading that differs from
/// the one before, the last one (terminal) included.
pub async fn follow(http: &reqwest::Client, status_url: &str, timeout: Duration) -> Vec<Reading> {
    let deadline = Instant::now() + timeout;
    let mut seen: Vec<Reading> = Vec::new();
    loop {
        let body: Value = http.get(status_url).send().await.expect("GET status").json().await.expect("status JSON");
        let reading = (
            body["status"].as_str().unwrap_or_default().to_owned(),
            body["percentComplete"].as_u64(),
            body["properties"]["currentTask"].as_str().map(str::to_owned),
        );
        let terminal = matches!(reading.0.as_str(), "Succeeded" | "Failed" | "Canceled");
        if seen.last() != Some(&reading) {
            seen.push(reading);
        }
        if terminal {
            return seen;
        }
        assert!(Instant::now() < deadline, "the operation did not end within {timeout:?}: {seen:?}");
        // Sampling a job that runs on its own, not waiting for a condition to synchronise on.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The percentage never goes down and stays at most 99 until the operation succeeded, which
/// shows 100; the current task shows only while it runs.
pub fn assert_monotonic(seen: &[Reading]) {
    let percents: Vec<u64> = seen.iter().filter_map(|(_, p, _)| *p).collect();
    assert!(percents.windows(2).all(|w| w[0] <= w[1]), "never down: {seen:?}");
    let (last, running) = seen.split_last().expect("a reading");
    assert!(running.iter().all(|(_, p, _)| p.is_none_or(|p| p <= 99)), "at most 99 while running: {seen:?}");
    assert_eq!(last.0, "Succeeded", "{seen:?}");
    assert_eq!(last.2, None, "no current task once it ended: {seen:?}");
    if !percents.is_empty() {
        assert_eq!(last.1, Some(100), "{seen:?}");
    }
}
