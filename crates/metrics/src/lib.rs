//! Slipway's Prometheus metrics: every family with its name, help and labels, in one place,
//! so the names an operator alerts on are written once (docs/operations.md and
//! `examples/grafana/slipway.json` use them; a test checks the dashboard against this list).
//!
//! Each part belongs to the component that counts it — [`HttpMetrics`] the API's middleware,
//! [`StoreMetrics`] a store engine, [`EngineMetrics`] the engine, [`ProviderMetrics`] a
//! provider's HTTP client, [`NotifierMetrics`] the notification sender — and is a set of cheap
//! shared handles: a component built without the application's [`Metrics`] counts into its
//! own, which nobody exports. [`Gauges`] are set from a store reading at scrape time, never
//! kept up to date in between. Names and labels follow Prometheus conventions: base units
//! (seconds), `_total` counters, low-cardinality labels only (route templates and type
//! names, never resource ids).

mod gauges;
mod parts;

use std::sync::{Arc, Mutex};

use prometheus_client::registry::Registry;

pub use gauges::{ActiveLabels, Gauges, LaneLabels, OutboxLabels, Reading, TypeLabels};
pub use parts::{
    DriftCheckLabels, EngineMetrics, HistogramFamily, HttpLabels, HttpMetrics, JobEndLabels, JobRequestLabels,
    NotifierMetrics, OperationEndLabels, OperationLabels, OutcomeLabels, ProviderLabels, ProviderMetrics,
    ProviderRequestLabels, RouteLabels, StoreMetrics,
};

/// The exposition's media type (OpenMetrics text, which Prometheus scrapes natively).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every part, registered once; clone the parts into the components that count them.
#[derive(Clone)]
pub struct Metrics {
    pub http: HttpMetrics,
    pub store: StoreMetrics,
    pub engine: EngineMetrics,
    pub providers: ProviderMetrics,
    pub notifier: NotifierMetrics,
    gauges: Gauges,
    registry: Arc<Registry>,
    /// Every name a query can use, suffixes included.
    names: Arc<Vec<String>>,
    /// A scrape replaces the gauges and encodes them as one step.
    scrape: Arc<Mutex<()>>,
    /// The configured types (lowercased `namespace/type`): their gauges read 0, not nothing,
    /// while none of their operations is in flight.
    types: Arc<Vec<String>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(StoreMetrics::default())
    }
}

impl Metrics {
    /// Every part registered, the store's being the one the opened store counts into
    /// (`Store::metrics`).
    pub fn new(store: StoreMetrics) -> Self {
        let (http, engine) = (HttpMetrics::default(), EngineMetrics::default());
        let (providers, notifier, gauges) = (ProviderMetrics::default(), NotifierMetrics::default(), Gauges::default());
        let mut f = Families::default();
        f.counter(
            "slipway_http_requests",
            "ARM requests answered, by route template, method and status",
            http.requests.clone(),
        );
        f.histogram("slipway_http_request_duration_seconds", "ARM request latency", http.duration.clone());
        f.counter(
            "slipway_operations_accepted",
            "Operations accepted, by resource type and request kind",
            store.operations_accepted.clone(),
        );
        f.counter(
            "slipway_operations_ended",
            "Operations ended, by resource type, request kind and final status",
            store.operations_ended.clone(),
        );
        f.gauge(
            "slipway_operations_active",
            "Non-terminal operations, by resource type and status",
            gauges.operations_active.clone(),
        );
        f.gauge(
            "slipway_operation_oldest_active_age_seconds",
            "Age of the oldest non-terminal operation, by resource type",
            gauges.oldest_active_age.clone(),
        );
        f.histogram(
            "slipway_store_transaction_duration_seconds",
            "Store write transaction latency (a group commit counts once)",
            store.transactions.clone(),
        );
        f.histogram(
            "slipway_store_transaction_writes",
            "Write calls per store transaction (a group commit's changes)",
            store.batch_size.clone(),
        );
        f.histogram(
            "slipway_store_pool_wait_seconds",
            "Waits for a pooled PostgreSQL connection",
            store.pool_wait.clone(),
        );
        f.counter(
            "slipway_store_transaction_conflicts",
            "Store transactions rolled back by a deadlock or serialization failure, and retried",
            store.conflicts.clone(),
        );
        f.counter("slipway_engine_claimed_resources", "Resources claimed by this node", engine.claimed.clone());
        f.gauge(
            "slipway_engine_due_resources",
            "Resources due for the engine now, by lane",
            gauges.due_resources.clone(),
        );
        f.counter(
            "slipway_engine_lease_renewals",
            "Lease renewals, by outcome (all, partial, error)",
            engine.renewals.clone(),
        );
        f.counter(
            "slipway_engine_fenced_writes",
            "Writes refused because the lease passed to another node",
            engine.fenced_writes.clone(),
        );
        f.gauge("slipway_engine_workers", "Resources this node is working on", engine.workers.clone());
        f.counter("slipway_drift_checks", "Drift checks judged, by type and result", engine.drift_checks.clone());
        f.gauge(
            "slipway_engine_drift_workers",
            "Resources this node took from the drift lane and is working on (at most its drift cap)",
            engine.drift_workers.clone(),
        );
        f.gauge(
            "slipway_provider_ready",
            "1 while the provider's last readiness check passed (checked every minute)",
            engine.providers_ready.clone(),
        );
        f.counter(
            "slipway_job_requests",
            "Provider job requests, by provider, request and outcome",
            engine.job_requests.clone(),
        );
        f.counter("slipway_jobs_ended", "Jobs ended, by provider, job type and state", engine.jobs_ended.clone());
        f.histogram(
            "slipway_provider_request_duration_seconds",
            "Provider HTTP requests, by provider, endpoint, method and status",
            providers.requests.clone(),
        );
        f.counter(
            "slipway_provider_retry_after_wait_seconds",
            "Seconds requests were held back by a provider's Retry-After",
            providers.retry_after_waits.clone(),
        );
        f.counter(
            "slipway_notification_attempts",
            "Async-notification deliveries, by outcome (delivered, failed, dead)",
            notifier.attempts.clone(),
        );
        f.gauge(
            "slipway_notification_outbox",
            "Async notifications in the outbox, by state (pending, dead)",
            gauges.outbox.clone(),
        );
        Metrics {
            http,
            store,
            engine,
            providers,
            notifier,
            gauges,
            registry: Arc::new(f.registry),
            names: Arc::new(f.names),
            scrape: Arc::new(Mutex::new(())),
            types: Arc::new(Vec::new()),
        }
    }

    /// Every series a dashboard or alert reads exported from the start, at 0: each type's
    /// operations accepted, ended and in flight, each provider's requests and throttling.
    /// Without them a quiet system shows "no data" where it should show zero.
    pub fn with_series(mut self, types: &[String], providers: &[String]) -> Self {
        const REQUESTS: [&str; 4] = ["create", "update", "delete", "action"];
        for r#type in types {
            for request in REQUESTS {
                let labels = OperationLabels { r#type: r#type.clone(), request: request.into() };
                self.store.operations_accepted.get_or_create(&labels).inc_by(0);
                for status in ["Succeeded", "Failed", "Canceled"] {
                    let ended =
                        OperationEndLabels { r#type: r#type.clone(), request: request.into(), status: status.into() };
                    self.store.operations_ended.get_or_create(&ended).inc_by(0);
                }
            }
        }
        for provider in providers {
            for request in ["launch", "find", "poll", "cancel"] {
                let labels =
                    JobRequestLabels { provider: provider.clone(), request: request.into(), outcome: "ok".into() };
                self.engine.job_requests.get_or_create(&labels).inc_by(0);
            }
            self.providers.retry_after_waits.get_or_create(&ProviderLabels { provider: provider.clone() }).inc_by(0.0);
        }
        self.types = Arc::new(types.to_vec());
        self
    }

    /// The exposition, with the gauges set from `reading`.
    pub fn render(&self, reading: &Reading) -> String {
        let _one_at_a_time = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        self.gauges.set(reading, &self.types);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }

    /// Every metric name the exposition can carry, with the suffixes a query uses
    /// (`_total`, `_bucket`, `_sum`, `_count`), whether or not it has a sample yet.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

/// The registry being filled, and every name a query can use.
#[derive(Default)]
struct Families {
    registry: Registry,
    names: Vec<String>,
}

impl Families {
    fn counter(&mut self, name: &str, help: &str, metric: impl prometheus_client::registry::Metric) {
        self.add(name, help, &["_total"], metric)
    }

    fn gauge(&mut self, name: &str, help: &str, metric: impl prometheus_client::registry::Metric) {
        self.add(name, help, &[""], metric)
    }

    fn histogram(&mut self, name: &str, help: &str, metric: impl prometheus_client::registry::Metric) {
        self.add(name, help, &["_bucket", "_sum", "_count"], metric)
    }

    fn add(&mut self, name: &str, help: &str, suffixes: &[&str], metric: impl prometheus_client::registry::Metric) {
        self.registry.register(name, help, metric);
        self.names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_gauges_and_histograms_render_by_convention() {
        let m = Metrics::default();
        m.http.observe("/openapi.json", "GET", 200, 0.002);
        m.store
            .operations_accepted
            .get_or_create(&OperationLabels { r#type: "a/b".into(), request: "create".into() })
            .inc();
        let reading = Reading {
            active: vec![
                ("a/b".into(), "Accepted".into(), 2, 5.0),
                ("a/b".into(), "Deleting".into(), 1, 9.5),
                ("a/b".into(), "WaitingForApproval".into(), 1, 86_000.0),
            ],
            ..Reading::default()
        };
        let text = m.render(&reading);
        assert!(
            text.contains(r#"slipway_http_requests_total{route="/openapi.json",method="GET",status="200"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"slipway_operations_accepted_total{type="a/b",request="create"} 1"#), "{text}");
        assert!(text.contains(r#"slipway_operations_active{type="a/b",status="Deleting"} 1"#), "{text}");
        // The oldest of every status of a type but a request waiting for a person.
        assert!(text.contains(r#"slipway_operations_active{type="a/b",status="WaitingForApproval"} 1"#), "{text}");
        assert!(text.contains(r#"slipway_operation_oldest_active_age_seconds{type="a/b"} 9.5"#), "{text}");
        assert!(text.ends_with("# EOF\n"));
        // A type with nothing in flight any more disappears instead of freezing at its last value.
        let text = m.render(&Reading::default());
        assert!(!text.contains(r#"slipway_operations_active{type="a/b""#), "{text}");
    }

    #[test]
    fn a_quiet_system_exports_its_series_at_zero() {
        let m = Metrics::default().with_series(&["ns/things".into()], &["aap".into()]);
        let text = m.render(&Reading::default());
        for series in [
            r#"slipway_operations_active{type="ns/things",status="Accepted"} 0"#,
            r#"slipway_operation_oldest_active_age_seconds{type="ns/things"} 0.0"#,
            r#"slipway_operations_accepted_total{type="ns/things",request="create"} 0"#,
            r#"slipway_operations_ended_total{type="ns/things",request="delete",status="Failed"} 0"#,
            r#"slipway_job_requests_total{provider="aap",request="launch",outcome="ok"} 0"#,
            r#"slipway_provider_retry_after_wait_seconds_total{provider="aap"} 0.0"#,
        ] {
            assert!(text.contains(series), "{series} in\n{text}");
        }
        let busy = Reading { active: vec![("ns/things".into(), "Deleting".into(), 3, 2.5)], ..Reading::default() };
        let text = m.render(&busy);
        assert!(text.contains(r#"slipway_operations_active{type="ns/things",status="Deleting"} 3"#), "{text}");
        assert!(text.contains(r#"slipway_operations_active{type="ns/things",status="Accepted"} 0"#), "{text}");
        assert!(text.contains(r#"slipway_operation_oldest_active_age_seconds{type="ns/things"} 2.5"#), "{text}");
    }

    #[test]
    fn names_carry_the_suffixes_queries_use() {
        let metrics = Metrics::default();
        let names = metrics.names();
        for n in
            ["slipway_http_requests_total", "slipway_http_request_duration_seconds_bucket", "slipway_engine_workers"]
        {
            assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
        }
    }
}
