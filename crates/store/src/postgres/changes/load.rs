//! What a PostgreSQL group commit reads before deciding: every key locked in one order, then
//! each key's snapshot, the resources its changes read as context, children and referrers,
//! sent together and run in order so the reads see what the previous lock holders committed.

use std::collections::BTreeMap;
use std::sync::Arc;

use deadpool_postgres::Transaction;
use slipway_domain::resource::{ResourceRecord, Setting, Snapshot};
use tokio_postgres::types::ToSql;

use super::Queued;
use crate::EntryKind;
use crate::columns::{RESOURCE_COLUMN_COUNT, resource_columns};
use crate::postgres::{Failure, rows};
use crate::usage::Tally;

/// Every key of the batch, each locked once, in one order for everyone: exclusively the keys
/// the batch changes and the quota meters it reads, shared those it only reads as context
/// and the registry entries it reads (`settings`). Context is read, never written,
/// so changes that share it (many creates in one group, children of one parent) run
/// together, while a change of the context itself (the group's delete) waits for them all,
/// and they for it.
const LOCK_KEYS: &str = "SELECT CASE WHEN x THEN pg_advisory_xact_lock(h) ELSE pg_advisory_xact_lock_shared(h) END
     FROM (SELECT hashtextextended(k, 0) AS h, bool_or(x) AS x FROM unnest($1::TEXT[], $2::BOOLEAN[]) AS u(k, x)
           GROUP BY 1 ORDER BY 1) AS locks";

/// The row locks keep claims (which skip them) and lease renewals (which wait) from
/// interleaving with the changes.
const RESOURCES_FOR_UPDATE: &str =
    concat!("SELECT ", resource_columns!(), " FROM resources WHERE key = ANY($1) ORDER BY key FOR UPDATE");

const OPEN_OPERATIONS: &str = "SELECT id, body, resource_key FROM operations
     WHERE resource_key = ANY($1) AND NOT terminal ORDER BY seq";

/// Operations a change asked for by id (e.g. the one a cancel names), if not expired at
/// that change's time.
const NAMED_OPERATIONS: &str = "SELECT o.id, o.body, u.ord FROM operations o
     JOIN unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[]) WITH ORDINALITY AS u(subscription, id, now, ord)
       ON o.subscription = u.subscription AND o.id = u.id
     WHERE NOT o.terminal OR o.expires_at > u.now";

/// Resources changes read as context (a child's parent): under their keys' advisory locks,
/// which every change of them takes, so no row lock is needed.
const RELATED_RESOURCES: &str = concat!("SELECT ", resource_columns!(), " FROM resources WHERE key = ANY($1)");

/// For each named key, the resources outside its subtree that reference it or anything
/// under it (a delete's "in use" check; the referrer's reference rows are written under the
/// referenced resource's lock, so none appears behind this read's back), with the key.
const REFERRERS: &str = concat!(
    "SELECT ",
    resource_columns!(),
    ", u.k FROM unnest($1::TEXT[]) AS u(k)
     JOIN resource_references x
       ON (x.to_key = u.k OR (x.to_key > u.k || '/' AND x.to_key < u.k || '0'))
      AND NOT (x.from_key = u.k OR (x.from_key > u.k || '/' AND x.from_key < u.k || '0'))
     JOIN resources ON key = x.from_key"
);

/// The resources nested under each named parent (read without locks: while a parent is
/// deleting no child can be added, and a child only ever goes).
const RESOURCES_UNDER: &str = concat!(
    "SELECT ",
    resource_columns!(),
    " FROM unnest($1::TEXT[]) AS u(parent) JOIN resources ON key > u.parent || '/' AND key < u.parent || '0'"
);

/// The usage rows of each (subscription, meter) a change reads, under the meters' advisory
/// locks (`crate::usage`).
const USAGE_ROWS: &str = "SELECT x.subscription, x.resource_group, x.meter, x.value
     FROM unnest($1::TEXT[], $2::TEXT[]) AS u(subscription, meter)
     JOIN usage x ON x.subscription = u.subscription AND x.meter = u.meter";

/// The registry entries of each (kind, partition) a change reads, under their advisory
/// locks held shared (a write of one holds it exclusively).
const SETTINGS: &str = "SELECT e.kind, e.id, e.partition, e.body
     FROM unnest($1::TEXT[], $2::TEXT[]) AS u(kind, partition)
     JOIN entries e ON e.kind = u.kind AND e.partition = u.partition
     ORDER BY e.kind, e.id";

/// Locks every key, then reads each one's snapshot (resource, open operations, and any
/// operation a change named), sent together and run in order.
pub(super) async fn load(
    tx: &Transaction<'_>,
    keys: &[&str],
    related: &[String],
    batch: &[Arc<Queued>],
) -> Result<Loaded, Failure> {
    let (lock, resources, open, named, context, under, referring, usage, settings) = tokio::join!(
        biased;
        tx.prepare_cached(LOCK_KEYS),
        tx.prepare_cached(RESOURCES_FOR_UPDATE),
        tx.prepare_cached(OPEN_OPERATIONS),
        tx.prepare_cached(NAMED_OPERATIONS),
        tx.prepare_cached(RELATED_RESOURCES),
        tx.prepare_cached(RESOURCES_UNDER),
        tx.prepare_cached(REFERRERS),
        tx.prepare_cached(USAGE_ROWS),
        tx.prepare_cached(SETTINGS),
    );
    let (lock, resources, open, named, context, under, referring, usage, settings) =
        (lock?, resources?, open?, named?, context?, under?, referring?, usage?, settings?);
    let mut read_settings: Vec<(&'static str, &str)> = batch
        .iter()
        .filter_map(|q| q.req.settings.as_ref())
        .flat_map(|read| read.kinds.iter().map(|k| (k.tag(), read.subscription.as_str())))
        .collect();
    read_settings.sort_unstable();
    read_settings.dedup();
    let settings_locks: Vec<String> = read_settings
        .iter()
        .filter_map(|(tag, partition)| EntryKind::from_tag(tag).map(|kind| crate::settings_lock_key(kind, partition)))
        .collect();
    let mut metered: Vec<(&str, &str)> = batch
        .iter()
        .filter_map(|q| q.req.usage.as_ref())
        .flat_map(|read| read.meters.iter().map(|m| (read.subscription.as_str(), m.as_str())))
        .collect();
    metered.sort_unstable();
    metered.dedup();
    let meter_locks: Vec<String> = batch
        .iter()
        .filter_map(|q| q.req.usage.as_ref())
        .flat_map(|read| read.meters.iter().map(|m| crate::usage::lock_key(read.subscription.as_str(), m)))
        .collect();
    let mut deleting: Vec<String> =
        batch.iter().filter(|q| q.req.referrers).map(|q| q.req.key.as_str().to_string()).collect();
    deleting.sort_unstable();
    deleting.dedup();
    let mut parents: Vec<String> =
        batch.iter().filter(|q| q.req.children).map(|q| q.req.key.as_str().to_string()).collect();
    parents.sort_unstable();
    parents.dedup();
    let locked_keys: Vec<&str> = keys
        .iter()
        .copied()
        .chain(meter_locks.iter().map(String::as_str))
        .chain(related.iter().map(String::as_str))
        .chain(settings_locks.iter().map(String::as_str))
        .collect();
    let exclusive: Vec<bool> = std::iter::repeat_n(true, keys.len() + meter_locks.len())
        .chain(std::iter::repeat_n(false, related.len() + settings_locks.len()))
        .collect();
    let naming: Vec<(usize, &str, &str)> = batch
        .iter()
        .enumerate()
        .filter_map(|(i, q)| q.req.operation.as_ref().map(|(sub, id)| (i, sub.as_str(), id.as_str())))
        .collect();
    let subscriptions: Vec<&str> = naming.iter().map(|(_, sub, _)| *sub).collect();
    let ids: Vec<&str> = naming.iter().map(|(_, _, id)| *id).collect();
    let nows: Vec<i64> = naming.iter().map(|(i, _, _)| batch[*i].req.now.as_millis()).collect();
    let named_rows = async {
        if naming.is_empty() {
            return Ok(Vec::new());
        }
        tx.query(&named, &[&subscriptions, &ids, &nows]).await
    };
    // Sent together (a `biased` `join!` polls in order; each sends on its first poll), run in
    // order: the locks first, then the reads see what the previous holders committed. After
    // an error the server refuses the rest, so the first error in order is the cause.
    let by_keys: [&(dyn ToSql + Sync); 1] = [&keys];
    let by_locked_keys: [&(dyn ToSql + Sync); 2] = [&locked_keys, &exclusive];
    let context_rows = async {
        if related.is_empty() {
            return Ok(Vec::new());
        }
        tx.query(&context, &[&related]).await
    };
    let under_rows = async {
        if parents.is_empty() {
            return Ok(Vec::new());
        }
        tx.query(&under, &[&parents]).await
    };
    let referring_rows = async {
        if deleting.is_empty() {
            return Ok(Vec::new());
        }
        tx.query(&referring, &[&deleting]).await
    };
    let (usage_subscriptions, usage_meters): (Vec<&str>, Vec<&str>) = metered.iter().copied().unzip();
    let usage_rows = async {
        if metered.is_empty() {
            return Ok(Vec::new());
        }
        tx.query(&usage, &[&usage_subscriptions, &usage_meters]).await
    };
    let (settings_kinds, settings_partitions): (Vec<&str>, Vec<&str>) = read_settings.iter().copied().unzip();
    let settings_rows = async {
        if read_settings.is_empty() {
            return Ok(Vec::new());
        }
        tx.query(&settings, &[&settings_kinds, &settings_partitions]).await
    };
    let (locked, resources, open, named, context, under, referring, usage, settings) = tokio::join!(
        biased;
        tx.execute(&lock, &by_locked_keys),
        tx.query(&resources, &by_keys),
        tx.query(&open, &by_keys),
        named_rows,
        context_rows,
        under_rows,
        referring_rows,
        usage_rows,
        settings_rows,
    );
    let (_, resources, open, named, context, under, referring, usage, settings) =
        (locked?, resources?, open?, named?, context?, under?, referring?, usage?, settings?);
    let mut read_entries: BTreeMap<(String, String), Vec<Setting>> = BTreeMap::new();
    for row in &settings {
        let column = |i| rows::column::<String>(row, i, "entries", "?");
        let (kind, partition) = (column(0)?, column(2)?);
        let setting = Setting { kind: kind.clone(), id: column(1)?, body: column(3)? };
        read_entries.entry((kind, partition)).or_default().push(setting);
    }
    let mut tally = Tally::default();
    for row in &usage {
        let column = |i| rows::column::<String>(row, i, "usage", "?");
        tally.add(&column(0)?, &column(1)?, &column(2)?, rows::column(row, 3, "usage", "?")?);
    }
    let mut referrers: BTreeMap<String, Vec<ResourceRecord>> = BTreeMap::new();
    for row in &referring {
        let asking: String = rows::column(row, RESOURCE_COLUMN_COUNT, "resource_references", "?")?;
        referrers.entry(asking).or_default().push(rows::read_resource_row(row)?.into_record()?);
    }
    let mut related_records = BTreeMap::new();
    for row in context.iter().chain(&under) {
        let record = rows::read_resource_row(row)?;
        let key = record.key.clone();
        related_records.insert(key, record.into_record()?);
    }
    let mut snapshots: BTreeMap<String, Snapshot> = keys.iter().map(|k| (k.to_string(), Snapshot::default())).collect();
    for row in &resources {
        let record = rows::read_resource_row(row)?;
        let key = record.key.clone();
        let record = record.into_record()?;
        if let Some(snapshot) = snapshots.get_mut(&key) {
            snapshot.resource = Some(record);
        }
    }
    for row in &open {
        let key: String = rows::column(row, 2, "operation", "?")?;
        let op = rows::read_operation(row)?;
        if let Some(snapshot) = snapshots.get_mut(&key) {
            snapshot.operations.push(op);
        }
    }
    for row in &named {
        let ord: i64 = rows::column(row, 2, "operation", "?")?;
        let Some((i, subscription, _)) = usize::try_from(ord - 1).ok().and_then(|n| naming.get(n)) else { continue };
        let op = rows::read_operation(row)?;
        if let Some(snapshot) = snapshots.get_mut(batch[*i].req.key.as_str()) {
            let loaded = snapshot.operations.iter().any(|o| o.id == op.id && o.subscription == *subscription);
            if !loaded {
                snapshot.operations.push(op);
            }
        }
    }
    Ok(Loaded { snapshots, context: related_records, referrers, usage: tally, settings: read_entries })
}

/// What a batch read before deciding: each key's snapshot, the resources read as context
/// (related and children), and each deleting key's referrers.
pub(super) struct Loaded {
    pub(super) snapshots: BTreeMap<String, Snapshot>,
    pub(super) context: BTreeMap<String, ResourceRecord>,
    pub(super) referrers: BTreeMap<String, Vec<ResourceRecord>>,
    /// The usage rows of the meters the batch reads, as it committed them so far.
    pub(super) usage: Tally,
    /// The registry entries the batch reads, by (kind tag, partition).
    pub(super) settings: BTreeMap<(String, String), Vec<Setting>>,
}
