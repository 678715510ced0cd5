//! Quota usage, counted where resources are written: the `usage` table holds, per
//! subscription, resource group and meter, the sum of what the stored resources consume
//! (`ResourceRecord::usage`). Every change that alters what a resource consumes — a create,
//! a resize, the removal of its row when a delete succeeds — adds the difference in its own
//! transaction ([`deltas`]), so the sum is exactly the resources', never a reservation.
//!
//! A change that may grow a meter names it (`ChangeRequest::usage`) and reads its sums in
//! its transaction (`Snapshot::usage`). On PostgreSQL it holds the meter's advisory lock
//! ([`lock_key`], exclusively, with its other keys in hash order) from before that read to its
//! commit, so no two replicas both take the last unit. Growth without that read is refused
//! ([`check_growth`]); shrinking needs no lock (a concurrent check reads the larger value,
//! which is only ever more careful).

use std::collections::BTreeMap;

use slipway_domain::ids::SubscriptionId;
use slipway_domain::quota::{MeterName, Usage};
use slipway_domain::resource::{ResourceRecord, Snapshot};

use crate::StoreError;

/// One row's change: `delta` added to what `meter` counts in a subscription's group.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct UsageDelta {
    pub(crate) subscription: String,
    /// The resource group's name, lowercased.
    pub(crate) group: String,
    pub(crate) meter: String,
    pub(crate) delta: i64,
}

/// A stored usage row: what one group of a subscription consumes of a meter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupUsage {
    /// The resource group's name, lowercased.
    pub group: String,
    pub meter: MeterName,
    pub value: u64,
}

/// The advisory lock a change reading `meter`'s usage in `subscription` holds.
pub(crate) fn lock_key(subscription: &str, meter: &MeterName) -> String {
    format!("usage|{subscription}|{}", meter.as_str())
}

fn consumed(record: Option<&ResourceRecord>) -> BTreeMap<&MeterName, u64> {
    record.map(|r| r.usage.iter().map(|(m, n)| (m, *n)).collect()).unwrap_or_default()
}

/// What a change from `before` to `after` adds to the usage rows, one delta per meter that
/// changed, in key order.
pub(crate) fn deltas(before: &Snapshot, after: &Snapshot) -> Result<Vec<UsageDelta>, StoreError> {
    let Some(record) = after.resource.as_ref().or(before.resource.as_ref()) else { return Ok(Vec::new()) };
    let (old, new) = (consumed(before.resource.as_ref()), consumed(after.resource.as_ref()));
    let mut meters: Vec<&MeterName> = old.keys().chain(new.keys()).copied().collect();
    meters.sort();
    meters.dedup();
    let mut out = Vec::new();
    for meter in meters {
        let (was, is) = (old.get(meter).copied().unwrap_or(0), new.get(meter).copied().unwrap_or(0));
        if was == is {
            continue;
        }
        let signed = |n: u64| i64::try_from(n).map_err(|_| StoreError::Internal(format!("usage of {meter} too large")));
        out.push(UsageDelta {
            subscription: record.id.subscription_key().as_str().to_string(),
            group: record.id.resource_group_key(),
            meter: meter.as_str().to_string(),
            delta: signed(is)? - signed(was)?,
        });
    }
    Ok(out)
}

/// Refuses a change that grows a meter it did not read: only a read under the meter's lock
/// can judge growth, so growth without one would be counted but never checked.
pub(crate) fn check_growth(deltas: &[UsageDelta], read: &[MeterName]) -> Result<(), StoreError> {
    match deltas.iter().find(|d| d.delta > 0 && !read.iter().any(|m| m.as_str() == d.meter)) {
        Some(d) => Err(StoreError::Internal(format!("a change grew the usage of {} without reading it", d.meter))),
        None => Ok(()),
    }
}

/// Usage sums as a batch of changes sees them: read once, then moved by each change's
/// deltas, so a later change in the batch sees an earlier one's consumption.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// (subscription, group, meter) → value.
    rows: BTreeMap<(String, String, String), i64>,
}

impl Tally {
    pub(crate) fn add(&mut self, subscription: &str, group: &str, meter: &str, value: i64) {
        *self.rows.entry((subscription.to_string(), group.to_string(), meter.to_string())).or_default() += value;
    }

    pub(crate) fn apply(&mut self, deltas: &[UsageDelta]) {
        for d in deltas {
            self.add(&d.subscription, &d.group, &d.meter, d.delta);
        }
    }

    /// The sums a change of a resource in `subscription`'s `group` reads for `meters`.
    pub(crate) fn read(
        &self,
        subscription: &SubscriptionId,
        group: &str,
        meters: &[MeterName],
    ) -> BTreeMap<MeterName, Usage> {
        let sub = subscription.as_str();
        meters
            .iter()
            .map(|meter| {
                let mut usage = Usage::default();
                for ((s, g, m), value) in &self.rows {
                    if s == sub && m == meter.as_str() {
                        let value = u64::try_from(*value).unwrap_or(0);
                        usage.subscription += value;
                        if g == group {
                            usage.group += value;
                        }
                    }
                }
                (meter.clone(), usage)
            })
            .collect()
    }
}

/// `deltas` merged per row, in key order (the order every engine writes usage rows in).
pub(crate) fn merged(deltas: impl IntoIterator<Item = UsageDelta>) -> Vec<UsageDelta> {
    let mut sums: BTreeMap<(String, String, String), i64> = BTreeMap::new();
    for d in deltas {
        *sums.entry((d.subscription, d.group, d.meter)).or_default() += d.delta;
    }
    sums.into_iter()
        .filter(|(_, delta)| *delta != 0)
        .map(|((subscription, group, meter), delta)| UsageDelta { subscription, group, meter, delta })
        .collect()
}
