//! Reading Slipway's own `/metrics` (Prometheus text): counters summed over their series, and
//! the request-latency histogram, whose difference between two scrapes says how long requests
//! took *inside the server* — apart from the client's and the machine's share of a latency.

use std::collections::BTreeMap;

use crate::harness::Client;

/// One scrape of the server's metrics.
pub async fn scrape(client: &Client) -> Result<String, String> {
    let url = format!("{}/metrics", client.base);
    let reply = client.http.get(url).send().await.map_err(|e| e.to_string())?;
    reply.text().await.map_err(|e| e.to_string())
}

/// The sum of every sample of the counter `name` (its `_total` series) in a scrape.
pub fn counter_sum(text: &str, name: &str) -> f64 {
    let series = format!("{name}_total");
    text.lines()
        .filter(|l| l.strip_prefix(&series).is_some_and(|rest| rest.starts_with(['{', ' '])))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The sum of every sample of the gauge `name` whose labels contain `having` (empty for all).
pub fn gauge_sum(text: &str, name: &str, having: &str) -> f64 {
    text.lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(['{', ' '])) && l.contains(having))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Cumulative bucket counts of the histogram `family` over every series whose labels
/// contain `having` (`method="PUT"`; empty for all), by upper bound in seconds.
pub fn histogram_buckets(text: &str, family: &str, having: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{family}_bucket{{");
    let mut buckets: BTreeMap<String, f64> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else { continue };
        // Route templates hold braces (`{subscriptionId}`): the labels end at the last one.
        let Some((labels, count)) = rest.rsplit_once('}') else { continue };
        let le = labels.split(',').find_map(|l| l.strip_prefix("le=\"")?.strip_suffix('"'));
        if let (true, Some(le), Ok(count)) = (labels.contains(having), le, count.trim().parse::<f64>()) {
            *buckets.entry(le.to_string()).or_default() += count;
        }
    }
    let mut out: Vec<(f64, f64)> = buckets
        .into_iter()
        .filter_map(|(le, n)| Some((if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? }, n)))
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The ARM request-latency histogram of `method`'s requests, every route and status together.
pub fn request_latency_buckets(text: &str, method: &str) -> Vec<(f64, f64)> {
    histogram_buckets(text, "slipway_http_request_duration_seconds", &format!("method=\"{method}\""))
}

/// The store's write-transaction latency histogram (a group commit counts once).
pub fn transaction_buckets(text: &str) -> Vec<(f64, f64)> {
    histogram_buckets(text, "slipway_store_transaction_duration_seconds", "")
}

/// The smallest bucket bound (ms) that holds a share `q` of the requests counted between two
/// scrapes' buckets: the server-side quantile, as fine as the buckets are. `None` with no
/// request between them.
pub fn quantile_bound_ms(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> Option<f64> {
    let counted = |le: f64, b: &[(f64, f64)]| b.iter().find(|(bound, _)| *bound == le).map_or(0.0, |(_, n)| *n);
    let total = after.last().map(|(le, n)| n - counted(*le, before))?;
    if total <= 0.0 {
        return None;
    }
    after.iter().find(|(le, n)| (n - counted(*le, before)) >= q * total).map(|(le, _)| le * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_summed_over_their_series() {
        let text = "# TYPE slipway_engine_fenced_writes counter\n\
                    slipway_engine_fenced_writes_total 3\n\
                    slipway_engine_fenced_writes_created 17.0\n\
                    slipway_x_total{a=\"b\"} 5\n\
                    slipway_x_total{a=\"c\"} 2\n";
        assert_eq!(counter_sum(text, "slipway_engine_fenced_writes"), 3.0);
        assert_eq!(counter_sum(text, "slipway_x"), 7.0);
        assert_eq!(counter_sum(text, "slipway_none"), 0.0);
    }

    fn scrape_with(put_01: f64, put_025: f64, put_all: f64) -> String {
        let b = "slipway_http_request_duration_seconds_bucket";
        format!(
            "{b}{{le=\"0.01\",route=\"/s/{{subscriptionId}}/r\",method=\"PUT\",status=\"201\"}} {put_01}\n\
             {b}{{route=\"/r\",method=\"PUT\",status=\"201\",le=\"0.025\"}} {put_025}\n\
             {b}{{route=\"/r\",method=\"PUT\",status=\"201\",le=\"+Inf\"}} {put_all}\n\
             {b}{{route=\"/r\",method=\"GET\",status=\"200\",le=\"0.01\"}} 1000\n\
             {b}{{route=\"/r\",method=\"GET\",status=\"200\",le=\"+Inf\"}} 1000\n"
        )
    }

    #[test]
    fn the_server_side_quantile_is_read_from_the_buckets_counted_between_two_scrapes() {
        let before = request_latency_buckets(&scrape_with(50.0, 50.0, 50.0), "PUT");
        assert_eq!(before, vec![(0.01, 50.0), (0.025, 50.0), (f64::INFINITY, 50.0)]);
        // 100 PUTs between the scrapes: 98 within 10 ms, one more within 25 ms, one slower.
        let after = request_latency_buckets(&scrape_with(148.0, 149.0, 150.0), "PUT");
        assert_eq!(quantile_bound_ms(&before, &after, 0.5), Some(10.0));
        assert_eq!(quantile_bound_ms(&before, &after, 0.99), Some(25.0));
        assert_eq!(quantile_bound_ms(&before, &after, 0.999), Some(f64::INFINITY));
        assert_eq!(quantile_bound_ms(&after, &after, 0.99), None, "no request between them");
    }
}
