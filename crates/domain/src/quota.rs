//! Quotas: what a resource consumes ([`Meter`]s the platform defines per type), and the
//! check a write's change makes against the usage counted in its own transaction
//! ([`charge`]).
//!
//! A resource carries what it consumes (`ResourceRecord::usage`), computed from its spec
//! whenever the spec is written; the store keeps, in the same transaction as every resource
//! write, the sum of those values per subscription, group and meter, and hands a change the
//! sums it asked for ([`Snapshot::usage`]). So usage is exactly what the stored resources
//! consume, never a reservation that could drift: a resource counts from the write that
//! creates it until the change that removes its row (a delete that succeeded; a failed delete
//! keeps it). Only growth is checked: a limit lowered below the current usage refuses
//! growth, and shrinking or deleting is always allowed.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::admission::Rejection;
use crate::ids::TypeKey;
use crate::resource::Snapshot;

/// A meter's name, as the quota API addresses it (`…/quotas/{meter}`): 1 to 64 ASCII
/// letters, digits, `.`, `_` or `-`. Matched exactly.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MeterName(String);

impl MeterName {
    pub fn parse(text: &str) -> Result<MeterName, String> {
        let ok = !text.is_empty()
            && text.len() <= 64
            && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(MeterName(text.to_string()))
        } else {
            Err(format!("'{text}' is not a meter name (1 to 64 letters, digits, '.', '_' or '-')"))
        }
    }

    /// A name as stored, read back unchecked.
    pub fn read_stored(text: impl Into<String>) -> MeterName {
        MeterName(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MeterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How much of a meter one resource consumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Measure {
    /// One per resource.
    Count,
    /// A numeric property (`properties.cores`): a non-negative integer, rounded up; absent or
    /// not a number counts 0.
    Sum { path: Vec<String> },
    /// A property's value looked up in a table (`properties.size`: small → 2); a value the
    /// table lacks counts 0.
    Table { path: Vec<String>, values: BTreeMap<String, u64> },
}

/// A meter: what one type's resources consume, counted per subscription and per group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meter {
    pub name: MeterName,
    pub type_key: TypeKey,
    pub measure: Measure,
    /// What its amounts are, as the usage API names it (`Count`, `GB`, …).
    pub unit: String,
}

impl Meter {
    /// What a resource with these properties consumes.
    pub fn consumed(&self, properties: &Value) -> u64 {
        match &self.measure {
            Measure::Count => 1,
            Measure::Sum { path } => match at(properties, path) {
                Some(Value::Number(n)) => {
                    n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0).ceil() as u64)).unwrap_or(0)
                }
                _ => 0,
            },
            Measure::Table { path, values } => {
                at(properties, path).and_then(Value::as_str).and_then(|v| values.get(v)).copied().unwrap_or(0)
            }
        }
    }
}

/// The value at `path` under a spec's `properties`.
fn at<'a>(properties: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(properties, |value, segment| value.get(segment))
}

/// The limits on one meter, each absent when unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// On the subscription as a whole.
    pub subscription: Option<u64>,
    /// On each resource group of the subscription.
    pub group: Option<u64>,
}

/// A meter's usage as a change reads it, counted in its transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// What the subscription's resources consume.
    pub subscription: u64,
    /// What the resources of the changed resource's group consume.
    pub group: u64,
}

/// Where a limit applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitScope {
    Subscription,
    Group,
}

/// A write that would take a meter past a limit: ARM's `409 QuotaExceeded`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaExceeded {
    pub meter: MeterName,
    pub scope: LimitScope,
    pub limit: u64,
    /// What the scope consumes now.
    pub current: u64,
    /// What the write adds.
    pub requested: u64,
    pub unit: String,
}

impl fmt::Display for QuotaExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scope = match self.scope {
            LimitScope::Subscription => "subscription",
            LimitScope::Group => "resource group",
        };
        write!(
            f,
            "Quota exceeded for meter '{}': the {scope}'s limit is {} {unit}, {} {unit} in use, and this request asks for {} more",
            self.meter,
            self.limit,
            self.current,
            self.requested,
            unit = self.unit,
        )
    }
}

/// A meter as the platform configured it, with its default limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterDefinition {
    pub meter: Meter,
    /// The limits of a subscription (and of each of its groups) nobody set otherwise.
    pub defaults: Limits,
}

/// Who may set a subscription's limits besides the platform's Admin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OwnerLimits {
    /// Only the Admin sets limits.
    #[default]
    AdminOnly,
    /// A subscription's Owner may set its limits at or below the Admin's (the ceiling).
    BelowCeiling,
}

/// Every meter the platform defines, and who may set limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuotaBook {
    pub meters: Vec<MeterDefinition>,
    pub owner_limits: OwnerLimits,
}

impl QuotaBook {
    /// The meters a type's resources consume.
    pub fn of_type<'a>(&'a self, type_key: &'a TypeKey) -> impl Iterator<Item = &'a MeterDefinition> + 'a {
        self.meters.iter().filter(move |d| &d.meter.type_key == type_key)
    }
}

/// A limit as set over the API for one scope (a subscription, or one of its groups): the
/// Admin's, which is the ceiling, and the Owner's, at or below it. Either may be unset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitSetting {
    pub admin: Option<u64>,
    pub owner: Option<u64>,
}

impl LimitSetting {
    /// The Admin's limit, else the configured default: what an Owner may not pass.
    pub fn ceiling(setting: Option<&LimitSetting>, default: Option<u64>) -> Option<u64> {
        setting.and_then(|s| s.admin).or(default)
    }

    /// The limit that applies: the lower of the ceiling and the Owner's.
    pub fn effective(setting: Option<&LimitSetting>, default: Option<u64>) -> Option<u64> {
        let ceiling = LimitSetting::ceiling(setting, default);
        match (ceiling, setting.and_then(|s| s.owner)) {
            (Some(c), Some(o)) => Some(c.min(o)),
            (c, o) => c.or(o),
        }
    }
}

/// The meters of the changed resource's type, each with its limits: what [`charge`] checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Charge {
    pub meters: Vec<(Meter, Limits)>,
}

impl Charge {
    /// The meters whose usage the change must read (`ChangeRequest::usage`).
    pub fn meter_names(&self) -> Vec<MeterName> {
        self.meters.iter().map(|(m, _)| m.name.clone()).collect()
    }
}

/// After an admission function set the resource's spec: records what the resource now
/// consumes, and refuses the change if that grows a meter past a limit, judged against the
/// usage the store counted in this transaction (`snap.usage`). Shrinking always passes.
pub fn charge(snap: &mut Snapshot, charge: &Charge) -> Result<(), Rejection> {
    let Some(resource) = snap.resource.as_mut() else { return Ok(()) };
    for (meter, limits) in &charge.meters {
        let now = meter.consumed(&resource.spec.properties);
        let before = resource.usage.get(&meter.name).copied().unwrap_or(0);
        if now > before {
            let usage = snap.usage.get(&meter.name).copied().unwrap_or_default();
            let requested = now - before;
            let checks = [
                (LimitScope::Subscription, limits.subscription, usage.subscription),
                (LimitScope::Group, limits.group, usage.group),
            ];
            for (scope, limit, current) in checks {
                if let Some(limit) = limit
                    && current.saturating_add(requested) > limit
                {
                    return Err(Rejection::QuotaExceeded(QuotaExceeded {
                        meter: meter.name.clone(),
                        scope,
                        limit,
                        current,
                        requested,
                        unit: meter.unit.clone(),
                    }));
                }
            }
        }
        if now == 0 {
            resource.usage.remove(&meter.name);
        } else {
            resource.usage.insert(meter.name.clone(), now);
        }
    }
    Ok(())
}

/// Where a write leaves one meter of its subscription: what is used after it, of what limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    pub meter: MeterName,
    pub before: u64,
    pub after: u64,
    pub limit: u64,
    pub unit: String,
}

impl Share {
    /// Whether the write takes the meter past `percent` of its limit.
    pub fn passes(&self, percent: u8) -> bool {
        u128::from(self.after) * 100 > u128::from(self.limit) * u128::from(percent)
    }

    pub fn percent_after(&self) -> u64 {
        self.after.saturating_mul(100).checked_div(self.limit).unwrap_or(100)
    }
}

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Meter '{}': {} → {} of the subscription's {} {} ({} %)",
            self.meter.as_str(),
            self.before,
            self.after,
            self.limit,
            self.unit,
            self.percent_after()
        )
    }
}

/// After [`charge`], what the write leaves each limited meter of the subscription at; `was` is
/// what the resource consumed before the write (nothing, for a create).
pub fn shares(snap: &Snapshot, was: &BTreeMap<MeterName, u64>, charge: &Charge) -> Vec<Share> {
    let Some(resource) = snap.resource.as_ref() else { return Vec::new() };
    charge
        .meters
        .iter()
        .filter_map(|(meter, limits)| {
            let limit = limits.subscription?;
            let used = snap.usage.get(&meter.name).copied().unwrap_or_default().subscription;
            let before = was.get(&meter.name).copied().unwrap_or(0);
            let now = resource.usage.get(&meter.name).copied().unwrap_or(0);
            let after = used.saturating_add(now).saturating_sub(before);
            Some(Share { meter: meter.name.clone(), before: used, after, limit, unit: meter.unit.clone() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn table() -> Meter {
        Meter {
            name: MeterName::parse("cores").unwrap(),
            type_key: TypeKey::parse("Slipway.Example/computeInstances"),
            measure: Measure::Table {
                path: vec!["size".into()],
                values: [("small".to_string(), 2), ("large".to_string(), 8)].into_iter().collect(),
            },
            unit: "Count".into(),
        }
    }

    #[test]
    fn measures_read_their_property() {
        let sum = Meter { measure: Measure::Sum { path: vec!["disk".into(), "gb".into()] }, ..table() };
        assert_eq!(sum.consumed(&json!({"disk": {"gb": 40}})), 40);
        assert_eq!(sum.consumed(&json!({"disk": {"gb": 2.5}})), 3, "a fraction rounds up");
        assert_eq!(sum.consumed(&json!({"disk": {"gb": -4}})), 0, "a negative number counts nothing");
        assert_eq!(sum.consumed(&json!({"disk": "big"})), 0);
        assert_eq!(table().consumed(&json!({"size": "large"})), 8);
        assert_eq!(table().consumed(&json!({"size": "medium"})), 0, "a value the table lacks counts nothing");
        let count = Meter { measure: Measure::Count, ..table() };
        assert_eq!(count.consumed(&json!({})), 1);
    }

    #[test]
    fn the_lower_of_the_ceiling_and_the_owners_limit_applies() {
        let set = |admin, owner| LimitSetting { admin, owner };
        assert_eq!(LimitSetting::effective(None, Some(10)), Some(10));
        assert_eq!(LimitSetting::effective(None, None), None);
        assert_eq!(
            LimitSetting::effective(Some(&set(Some(20), None)), Some(10)),
            Some(20),
            "the Admin's replaces the default"
        );
        assert_eq!(LimitSetting::effective(Some(&set(None, Some(4))), Some(10)), Some(4));
        assert_eq!(
            LimitSetting::effective(Some(&set(Some(3), Some(4))), Some(10)),
            Some(3),
            "a ceiling lowered below the Owner's wins"
        );
        assert_eq!(LimitSetting::effective(Some(&set(None, Some(4))), None), Some(4));
    }

    #[test]
    fn meter_names_keep_to_their_grammar() {
        assert!(MeterName::parse("standardDSv3Family.cores-2_x").is_ok());
        for bad in ["", "has space", "a/b", &"x".repeat(65)] {
            assert!(MeterName::parse(bad).is_err(), "{bad:?}");
        }
    }
}
