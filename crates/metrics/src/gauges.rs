//! The gauges a scrape sets from one store reading ([`Reading`]), replaced whole each time
//! instead of being kept up to date in between, with their label sets.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActiveLabels {
    pub r#type: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabels {
    pub r#type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LaneLabels {
    /// `intent` (a client's write is waiting) or `followup` (a retry, poll or deadline).
    pub lane: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutboxLabels {
    /// `pending` or `dead`.
    pub state: String,
}

/// The statuses an operation in flight can have.
const ACTIVE_STATUSES: [&str; 6] =
    ["Accepted", "WaitingForApproval", "Provisioning", "Updating", "Deleting", "Canceling"];

/// An operation waiting for a person to approve it is not stuck: it counts as active but
/// leaves the stuck-operation alarm alone.
const WAITING_FOR_A_PERSON: &str = "WaitingForApproval";

/// What a scrape reads from the store, replaced whole on every scrape.
#[derive(Clone, Debug, Default)]
pub struct Gauges {
    pub operations_active: Family<ActiveLabels, Gauge>,
    /// Seconds since the oldest non-terminal operation of each type started: the stuck
    /// operation alarm.
    pub oldest_active_age: Family<TypeLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    pub due_resources: Family<LaneLabels, Gauge>,
    pub outbox: Family<OutboxLabels, Gauge>,
}

/// One scrape's store reading, in the terms of [`Gauges`].
#[derive(Clone, Debug, Default)]
pub struct Reading {
    /// `(type, status, count, age of the oldest in seconds)`.
    pub active: Vec<(String, String, i64, f64)>,
    pub due_intent: i64,
    pub due_followup: i64,
    pub outbox_pending: i64,
    pub outbox_dead: i64,
}

impl Gauges {
    /// Every gauge set from `reading`; each of `types` reads 0, not nothing, while none of its
    /// operations is in flight.
    pub(crate) fn set(&self, reading: &Reading, types: &[String]) {
        self.operations_active.clear();
        self.oldest_active_age.clear();
        for r#type in types {
            for status in ACTIVE_STATUSES {
                self.operations_active
                    .get_or_create(&ActiveLabels { r#type: r#type.clone(), status: status.into() })
                    .set(0);
            }
            self.oldest_active_age.get_or_create(&TypeLabels { r#type: r#type.clone() }).set(0.0);
        }
        for (r#type, status, count, age) in &reading.active {
            self.operations_active
                .get_or_create(&ActiveLabels { r#type: r#type.clone(), status: status.clone() })
                .set(*count);
            let oldest = self.oldest_active_age.get_or_create(&TypeLabels { r#type: r#type.clone() });
            if status != WAITING_FOR_A_PERSON && *age > oldest.get() {
                oldest.set(*age);
            }
        }
        let lane = |name: &str| LaneLabels { lane: name.into() };
        self.due_resources.get_or_create(&lane("intent")).set(reading.due_intent);
        self.due_resources.get_or_create(&lane("followup")).set(reading.due_followup);
        let state = |name: &str| OutboxLabels { state: name.into() };
        self.outbox.get_or_create(&state("pending")).set(reading.outbox_pending);
        self.outbox.get_or_create(&state("dead")).set(reading.outbox_dead);
    }
}
