//! The counting parts, one per component that counts (the API's middleware, a store engine,
//! the engine, a provider's HTTP client, the notification sender), with their label sets and
//! histogram buckets. `Metrics` registers each part once under its name.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

/// A histogram family whose buckets come from a plain function (nameable, so storable).
pub type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Latencies of requests and transactions: 0.5 ms to 10 s.
fn latency() -> Histogram {
    Histogram::new([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
}

/// Rows per group commit: 1 to 512.
fn batch_sizes() -> Histogram {
    Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0])
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// The route template (`/subscriptions/{subscriptionId}/…`), never the path itself.
    pub route: String,
    pub method: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
    pub method: String,
}

/// The ARM front end's requests.
#[derive(Clone, Debug)]
pub struct HttpMetrics {
    pub requests: Family<HttpLabels, Counter>,
    pub duration: HistogramFamily<RouteLabels>,
}

impl Default for HttpMetrics {
    fn default() -> Self {
        HttpMetrics { requests: Family::default(), duration: Family::new_with_constructor(latency) }
    }
}

impl HttpMetrics {
    pub fn observe(&self, route: &str, method: &str, status: u16, seconds: f64) {
        let (route, method) = (route.to_string(), method.to_string());
        self.requests.get_or_create(&HttpLabels { route: route.clone(), method: method.clone(), status }).inc();
        self.duration.get_or_create(&RouteLabels { route, method }).observe(seconds);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// `namespace/type`, lowercased as the store keys it.
    pub r#type: String,
    /// `create`, `update`, `delete` or `action`.
    pub request: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationEndLabels {
    pub r#type: String,
    pub request: String,
    /// `Succeeded`, `Failed` or `Canceled`.
    pub status: String,
}

/// What a store engine committed. Operations are counted here, at commit, because every
/// operation a client starts and every way one ends (its job, a cancel, a superseding delete,
/// its deadline) is a committed change: counted anywhere else, some path would be missed.
#[derive(Clone, Debug)]
pub struct StoreMetrics {
    pub operations_accepted: Family<OperationLabels, Counter>,
    pub operations_ended: Family<OperationEndLabels, Counter>,
    /// Write transactions, from the first statement to the commit (a group commit counts once).
    pub transactions: Histogram,
    /// Write calls per transaction (a group commit's changes).
    pub batch_size: Histogram,
    /// Waiting for a pooled connection.
    pub pool_wait: Histogram,
    /// Transactions rolled back by a deadlock or a serialization failure (and retried):
    /// replicas working on the same rows.
    pub conflicts: Counter,
}

impl Default for StoreMetrics {
    fn default() -> Self {
        StoreMetrics {
            operations_accepted: Family::default(),
            operations_ended: Family::default(),
            transactions: latency(),
            batch_size: batch_sizes(),
            pool_wait: latency(),
            conflicts: Counter::default(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobRequestLabels {
    pub provider: String,
    /// `launch`, `find`, `poll`, `cancel` or `kill`.
    pub request: String,
    /// `ok`, or the provider error's class (`transient`, `permanent`, `unknown`, …).
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobEndLabels {
    pub provider: String,
    /// `provision`, `deprovision`, `preflight`, `action` or `check`.
    pub r#type: String,
    /// `Succeeded`, `Failed` or `Canceled`.
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriftCheckLabels {
    /// The resource type as configured (`Slipway.Example/virtualNetworks`).
    pub r#type: String,
    /// `InSync`, `Drifted` or `Unknown`.
    pub result: String,
}

/// The engine's lanes and the jobs it drives.
#[derive(Clone, Debug, Default)]
pub struct EngineMetrics {
    /// Resources handed to this node by claims.
    pub claimed: Counter,
    /// Lease renewals by `outcome`: `all` (every lease renewed), `partial`, `error`.
    pub renewals: Family<OutcomeLabels, Counter>,
    /// Writes the store refused because the worker's lease had passed to another node.
    pub fenced_writes: Counter,
    /// Workers driving a resource now.
    pub workers: Gauge,
    pub job_requests: Family<JobRequestLabels, Counter>,
    pub jobs_ended: Family<JobEndLabels, Counter>,
    /// 1 while a provider's last readiness check passed (reachable, credentials accepted).
    pub providers_ready: Family<ProviderLabels, Gauge>,
    /// Drift checks judged, by type and result.
    pub drift_checks: Family<DriftCheckLabels, Counter>,
    /// Resources this node took from the drift lane and is working on now.
    pub drift_workers: Gauge,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderRequestLabels {
    pub provider: String,
    /// The request's path template (`/api/v2/job_templates/{id}/launch/`).
    pub endpoint: String,
    pub method: String,
    /// The HTTP status, or `error` when no answer came.
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderLabels {
    pub provider: String,
}

/// A provider's HTTP requests (the AAP controller's API).
#[derive(Clone, Debug)]
pub struct ProviderMetrics {
    pub requests: HistogramFamily<ProviderRequestLabels>,
    /// Time spent holding requests back because the controller sent `Retry-After`.
    pub retry_after_waits: Family<ProviderLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
}

impl Default for ProviderMetrics {
    fn default() -> Self {
        ProviderMetrics { requests: Family::new_with_constructor(latency), retry_after_waits: Family::default() }
    }
}

/// The async-notification sender.
#[derive(Clone, Debug, Default)]
pub struct NotifierMetrics {
    /// Delivery attempts by `outcome`: `delivered`, `failed` (will retry), `dead` (given up:
    /// no attempts left, refused by the callback policy, or the operation expired). A turn
    /// held back because its destination is backed off is no attempt sent, and not counted
    /// until it gives up.
    pub attempts: Family<OutcomeLabels, Counter>,
}
