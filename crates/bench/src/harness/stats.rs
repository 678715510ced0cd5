//! Summary statistics of a scenario's samples: percentiles and the median.

use std::time::Duration;

/// `p` in 0..=100 of already sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The median (the mean of the middle two of an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => s[n / 2],
        _ => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// p50 and p99 in milliseconds.
pub fn p50_p99_ms(mut samples: Vec<Duration>) -> (f64, f64) {
    let mut ms: Vec<f64> = samples.drain(..).map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    (percentile(&ms, 50.0), percentile(&ms, 99.0))
}
