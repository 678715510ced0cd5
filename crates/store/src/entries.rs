//! Registry entries: small platform records that are not resources (API tokens, the
//! subscription registry, role assignments), kept in the store so every replica sees the
//! same ones without a restart.
//!
//! An entry is addressed by its kind and id (compared exactly: callers lowercase when they
//! want case-insensitive ids), belongs to one partition (the subscription id, `""` for
//! platform-wide entries) for its whole life, carries an opaque JSON body, and a version
//! that starts at 1 and grows by one at every replace. Writes say what they expect to find
//! ([`Expect`]); a mismatch is [`StoreError::Precondition`] and writes nothing.
//!
//! Everything the engines share is decided here — tags, the expectation check, the version
//! rule, the partition rule, decoding rows — so an engine only adds its SQL: it reads the
//! row as [`Current`] under its write isolation, asks [`plan_put`] or [`plan_delete`], and
//! executes the answer.

use std::time::Duration;

use slipway_domain::Timestamp;
use slipway_domain::activity::ActivityEntry;

use crate::StoreError;
use crate::activity::ActivityRow;
use crate::columns::{corrupt, from_i64, to_i64};

/// Which registry an entry belongs to. Stored as a short text tag ([`EntryKind::tag`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    ApiToken,
    Subscription,
    RoleAssignment,
    /// What a backup and a restore leave in the store ([`BACKUP_TAKEN`], [`RESTORE_PENDING`]).
    Backup,
    /// A quota limit set over the API for a subscription or one of its groups.
    QuotaLimit,
    /// A management lock at a subscription, a resource group or a resource.
    Lock,
    /// A subscription's own policy definition.
    PolicyDefinition,
    /// A policy assignment at a subscription, a resource group or a resource.
    PolicyAssignment,
    /// A policy exemption at a subscription, a resource group or a resource.
    PolicyExemption,
}

/// The `backup` entry a backup copy carries: `{"takenAt": <ms>}`, when its snapshot was taken.
pub const BACKUP_TAKEN: &str = "taken";
/// The `backup` entry of a store restored from a backup whose reconciliation with the
/// providers has not finished: no Slipway serves it (`slipway restore`).
pub const RESTORE_PENDING: &str = "restore-pending";

impl EntryKind {
    pub const ALL: [EntryKind; 9] = [
        EntryKind::ApiToken,
        EntryKind::Subscription,
        EntryKind::RoleAssignment,
        EntryKind::Backup,
        EntryKind::QuotaLimit,
        EntryKind::Lock,
        EntryKind::PolicyDefinition,
        EntryKind::PolicyAssignment,
        EntryKind::PolicyExemption,
    ];

    /// The text stored in the `kind` column. Never changes once shipped.
    pub fn tag(self) -> &'static str {
        match self {
            EntryKind::ApiToken => "apiToken",
            EntryKind::Subscription => "subscription",
            EntryKind::RoleAssignment => "roleAssignment",
            EntryKind::Backup => "backup",
            EntryKind::QuotaLimit => "quotaLimit",
            EntryKind::Lock => "lock",
            EntryKind::PolicyDefinition => "policyDefinition",
            EntryKind::PolicyAssignment => "policyAssignment",
            EntryKind::PolicyExemption => "policyExemption",
        }
    }

    /// The kind a stored tag names (exactly, as [`EntryKind::tag`] spells it).
    pub fn from_tag(tag: &str) -> Option<EntryKind> {
        EntryKind::ALL.into_iter().find(|kind| kind.tag() == tag)
    }
}

impl std::fmt::Display for EntryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.tag())
    }
}

/// A stored entry. `partition` is the subscription id the entry belongs to (`""` =
/// platform-wide): the store keeps every row partitionable by subscription, so no
/// transaction spans two subscriptions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: EntryKind,
    pub id: String,
    pub partition: String,
    /// JSON text, opaque to the store.
    pub body: String,
    /// 1 when inserted, one more at every replace.
    pub version: u64,
    pub updated_at: Timestamp,
}

/// A write of [`Store::put_entry`](crate::Store::put_entry): `body` as the entry `kind`/`id`
/// in `partition`, stamped `now`, if `expect` holds for what is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutEntry {
    pub kind: EntryKind,
    pub id: String,
    pub partition: String,
    /// JSON text, opaque to the store.
    pub body: String,
    pub expect: Expect,
    pub now: Timestamp,
    /// The request's activity-log entry, written settled in the same transaction.
    pub activity: Option<Box<ActivityEntry>>,
}

/// What a write expects to find (optimistic concurrency).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// No entry of that kind and id.
    Absent,
    /// The entry, at exactly this version.
    Version(u64),
    /// Whatever is there, or nothing.
    Any,
}

impl Expect {
    /// `Precondition` unless the row as stored (`None`: absent) is what this expects.
    pub(crate) fn check(self, kind: EntryKind, id: &str, stored: Option<u64>) -> Result<(), StoreError> {
        let failed = |found: String| {
            Err(StoreError::Precondition(format!("{kind} entry {id:?}: expected {}, found {found}", self.describe())))
        };
        match (self, stored) {
            (Expect::Any, _) | (Expect::Absent, None) => Ok(()),
            (Expect::Version(want), Some(have)) if want == have => Ok(()),
            (_, None) => failed("none".into()),
            (_, Some(have)) => failed(format!("version {have}")),
        }
    }

    fn describe(self) -> String {
        match self {
            Expect::Absent => "none".into(),
            Expect::Version(v) => format!("version {v}"),
            Expect::Any => "anything".into(),
        }
    }
}

/// An entry's row as stored, which a write decides on. The engine reads it with the lock
/// that keeps it until its write commits (SQLite: the one writer; PostgreSQL: `FOR UPDATE`).
pub(crate) struct Current {
    pub(crate) version: i64,
    pub(crate) partition: String,
}

/// What a put writes: the entry as it will be stored, and whether its row is new.
#[derive(Debug)]
pub(crate) struct PutPlan {
    pub(crate) insert: bool,
    pub(crate) entry: Entry,
    /// `entry.version` as the database stores it.
    pub(crate) version: i64,
    /// The request's activity row, settled, to write with it.
    pub(crate) activity: Option<ActivityRow>,
}

/// The row a put writes over `current`, or why it writes nothing: the expectation failed, or
/// the entry lives in another partition (a row never moves between subscriptions; delete it
/// and put it anew).
pub(crate) fn plan_put(put: &PutEntry, current: Option<&Current>, retention: Duration) -> Result<PutPlan, StoreError> {
    let PutEntry { kind, ref id, ref partition, ref body, expect, now, ref activity } = *put;
    let stored = current.map(|c| from_i64(c.version, "entry version")).transpose()?;
    expect.check(kind, id, stored)?;
    if let Some(current) = current
        && current.partition != *partition
    {
        return Err(StoreError::Precondition(format!(
            "{kind} entry {id:?} belongs to partition {:?}, not {partition:?}",
            current.partition
        )));
    }
    let version = match stored {
        None => 1,
        Some(v) => {
            v.checked_add(1).ok_or_else(|| StoreError::Internal(format!("{kind} entry {id:?}: version overflow")))?
        }
    };
    let entry =
        Entry { kind, id: id.clone(), partition: partition.clone(), body: body.clone(), version, updated_at: now };
    let activity = activity
        .as_deref()
        .map(|a| ActivityRow::of(&a.clone().settle_entry(current.is_none()), retention))
        .transpose()?;
    Ok(PutPlan { insert: current.is_none(), version: to_i64(version, "entry version")?, entry, activity })
}

/// Whether a delete removes a row (`false`: there is none and none was required), or why it
/// writes nothing.
pub(crate) fn plan_delete(
    kind: EntryKind,
    id: &str,
    expect: Expect,
    current: Option<&Current>,
) -> Result<bool, StoreError> {
    let stored = current.map(|c| from_i64(c.version, "entry version")).transpose()?;
    expect.check(kind, id, stored)?;
    Ok(current.is_some())
}

/// The activity row a delete that did not fail writes: the API answers `200` when it removed
/// the entry, `204` when there was none.
pub(crate) fn delete_activity(
    activity: Option<ActivityEntry>,
    removed: bool,
    retention: Duration,
) -> Result<Option<ActivityRow>, StoreError> {
    activity
        .map(|a| ActivityRow::of(&ActivityEntry { status: if removed { 200 } else { 204 }, ..a }, retention))
        .transpose()
}

/// The `entries` columns every engine reads a row by, as a literal for `concat!`.
macro_rules! entry_columns {
    () => {
        "kind, id, partition, body, version, updated_at"
    };
}
pub(crate) use entry_columns;

/// An `entries` row as stored, before it is trusted.
pub(crate) struct EntryRow {
    pub(crate) kind: String,
    pub(crate) id: String,
    pub(crate) partition: String,
    pub(crate) body: String,
    pub(crate) version: i64,
    pub(crate) updated_at: i64,
}

impl EntryRow {
    pub(crate) fn into_entry(self) -> Result<Entry, StoreError> {
        let name = || format!("{}/{}", self.kind, self.id);
        let kind = EntryKind::from_tag(&self.kind).ok_or_else(|| corrupt("entry", &name(), "unknown kind"))?;
        let version = from_i64(self.version, "entry version")?;
        if version == 0 {
            return Err(corrupt("entry", &name(), "version 0"));
        }
        Ok(Entry {
            kind,
            id: self.id,
            partition: self.partition,
            body: self.body,
            version,
            updated_at: Timestamp(self.updated_at),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp(1_700_000_000_000);

    fn current(version: i64, partition: &str) -> Current {
        Current { version, partition: partition.into() }
    }

    fn put(expect: Expect, current: Option<&Current>) -> Result<(bool, u64), StoreError> {
        let put = PutEntry {
            kind: EntryKind::ApiToken,
            id: "t1".into(),
            partition: "sub".into(),
            body: "{}".into(),
            expect,
            now: NOW,
            activity: None,
        };
        plan_put(&put, current, Duration::ZERO).map(|p| (p.insert, p.entry.version))
    }

    #[test]
    fn tags_round_trip_and_never_change() {
        let tags: Vec<&str> = EntryKind::ALL.iter().map(|k| k.tag()).collect();
        assert_eq!(
            tags,
            [
                "apiToken",
                "subscription",
                "roleAssignment",
                "backup",
                "quotaLimit",
                "lock",
                "policyDefinition",
                "policyAssignment",
                "policyExemption"
            ]
        );
        for kind in EntryKind::ALL {
            assert_eq!(EntryKind::from_tag(kind.tag()), Some(kind));
        }
        assert_eq!(EntryKind::from_tag("ApiToken"), None, "tags are exact");
    }

    #[test]
    fn a_put_inserts_at_1_and_replaces_at_the_next_version() {
        let v3 = current(3, "sub");
        assert_eq!(put(Expect::Absent, None), Ok((true, 1)));
        assert_eq!(put(Expect::Any, None), Ok((true, 1)));
        assert_eq!(put(Expect::Any, Some(&v3)), Ok((false, 4)));
        assert_eq!(put(Expect::Version(3), Some(&v3)), Ok((false, 4)));
    }

    #[test]
    fn a_mismatch_is_a_precondition_failure() {
        let v3 = current(3, "sub");
        let failed = |r: Result<(bool, u64), StoreError>| matches!(r, Err(StoreError::Precondition(_)));
        assert!(failed(put(Expect::Absent, Some(&v3))));
        assert!(failed(put(Expect::Version(2), Some(&v3))));
        assert!(failed(put(Expect::Version(4), Some(&v3))));
        assert!(failed(put(Expect::Version(1), None)));
        assert!(failed(put(Expect::Any, Some(&current(3, "other")))), "partitions are fixed");
        let delete = |expect, current: Option<&Current>| plan_delete(EntryKind::ApiToken, "t1", expect, current);
        assert_eq!(delete(Expect::Any, None), Ok(false));
        assert_eq!(delete(Expect::Absent, None), Ok(false));
        assert_eq!(delete(Expect::Any, Some(&v3)), Ok(true));
        assert_eq!(delete(Expect::Version(3), Some(&v3)), Ok(true));
        assert!(matches!(delete(Expect::Version(2), Some(&v3)), Err(StoreError::Precondition(_))));
        assert!(matches!(delete(Expect::Version(3), None), Err(StoreError::Precondition(_))));
        assert!(matches!(delete(Expect::Absent, Some(&v3)), Err(StoreError::Precondition(_))));
    }

    #[test]
    fn rows_are_checked() {
        let row = |kind: &str, version| EntryRow {
            kind: kind.into(),
            id: "t1".into(),
            partition: String::new(),
            body: "{}".into(),
            version,
            updated_at: NOW.as_millis(),
        };
        let entry = row("roleAssignment", 2).into_entry().expect("valid");
        assert_eq!((entry.kind, entry.version, entry.updated_at), (EntryKind::RoleAssignment, 2, NOW));
        for bad in [row("token", 1), row("apiToken", 0), row("apiToken", -1)] {
            assert!(matches!(bad.into_entry(), Err(StoreError::Internal(_))));
        }
    }
}
