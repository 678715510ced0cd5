//! `Store::change` on PostgreSQL, with group commit: the changes that arrive while a
//! transaction is busy are run together as the next one. Whatever the batch size, one
//! transaction takes a fixed number of statements — lock every key, read every resource and
//! its open operations, then one multi-row statement per kind of write — so a busy server
//! parses, plans and fsyncs once per batch instead of once per change.
//!
//! Each change still sees the latest committed state of its resource (under the key's
//! advisory lock and the row's lock, as a lone change would), and changes of the same key in
//! one batch run in arrival order, each on the state the previous one left. A change that is
//! refused (rejection, lost lease, panic) writes nothing and leaves the others unaffected.
//!
//! Lock order: keys' advisory locks in hash order, then rows in key order, the same in every
//! batch of every replica, so batches never deadlock each other.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use deadpool_postgres::{Object, Transaction};
use slipway_domain::ids::ResourceKey;
use slipway_domain::resource::{ResourceRecord, Snapshot};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::ToSql;

use super::change_rows::WriteRows;
use super::writes::commit;
use super::{Failure, Inner, rows};
use crate::columns::{RESOURCE_COLUMN_COUNT, resource_columns};
use crate::plan::{ChangePlan, Retention};
use crate::{ChangeFn, ChangeRequest, StoreError};

/// Most changes in one transaction.
pub(super) const MAX_BATCH: usize = 128;

/// Every key of the batch, each locked once, in one order for everyone.
const LOCK_KEYS: &str = "SELECT pg_advisory_xact_lock(h)
     FROM (SELECT DISTINCT hashtextextended(k, 0) AS h FROM unnest($1::TEXT[]) AS k ORDER BY 1) AS locks";

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

/// A change function, run at most once across the attempts of one call, and what it decided.
pub(super) struct Pending {
    change: Option<ChangeFn>,
    decided: Option<(Snapshot, Result<Snapshot, StoreError>)>,
}

impl Pending {
    pub(super) fn new(change: ChangeFn) -> Self {
        Pending { change: Some(change), decided: None }
    }

    /// The snapshot to write for `before`, or why not. A retried attempt (the batch met a
    /// deadlock or a dead connection) reuses the first decision when it read back exactly
    /// the same snapshot — the function is pure in it — and otherwise gives up, since the
    /// function cannot run twice.
    fn decide(&mut self, before: &Snapshot) -> Result<Snapshot, StoreError> {
        if let Some((seen, decided)) = &self.decided {
            return if seen == before {
                decided.clone()
            } else {
                Err(StoreError::Unavailable("the resource changed while a failed write was retried; try again".into()))
            };
        }
        let change = self.change.take().ok_or_else(|| StoreError::Internal("the change function was lost".into()))?;
        let mut after = before.clone();
        let decided = crate::run_change(change, &mut after).map(|()| after);
        self.decided = Some((before.clone(), decided.clone()));
        decided
    }
}

/// One queued `change` call.
pub(super) struct Queued {
    req: ChangeRequest,
    pending: Mutex<Pending>,
    reply: Mutex<Option<oneshot::Sender<Result<Snapshot, StoreError>>>>,
}

impl Queued {
    pub(super) fn new(
        req: ChangeRequest,
        change: ChangeFn,
    ) -> (Queued, oneshot::Receiver<Result<Snapshot, StoreError>>) {
        let (reply, answer) = oneshot::channel();
        (Queued { req, pending: Mutex::new(Pending::new(change)), reply: Mutex::new(Some(reply)) }, answer)
    }

    fn answer(&self, outcome: Result<Snapshot, StoreError>) {
        if let Some(reply) = self.reply.lock().unwrap_or_else(PoisonError::into_inner).take() {
            // The caller may have gone away; what was committed stands regardless.
            let _ = reply.send(outcome);
        }
    }
}

/// Runs queued changes in batches until every sender is gone. Several of these share one
/// queue, so a few batches are in flight at once on separate connections.
pub(super) async fn run_batches(inner: Arc<Inner>, queue: Arc<tokio::sync::Mutex<mpsc::Receiver<Queued>>>) {
    loop {
        let batch: Batch = {
            let mut queue = queue.lock().await;
            let Some(first) = queue.recv().await else { return };
            let mut batch = vec![Arc::new(first)];
            while batch.len() < MAX_BATCH {
                match queue.try_recv() {
                    Ok(next) => batch.push(Arc::new(next)),
                    Err(_) => break,
                }
            }
            Arc::new(batch)
        };
        let started = std::time::Instant::now();
        match run(&inner, &batch).await {
            // One change's writes broke the transaction (a constraint it violates, a bug): the
            // others must not fail with it, so each runs alone, reusing its decision.
            Err(StoreError::Internal(_)) if batch.len() > 1 => {
                for queued in batch.iter() {
                    let alone: Batch = Arc::new(vec![Arc::clone(queued)]);
                    let started = std::time::Instant::now();
                    let outcome = run(&inner, &alone).await;
                    answer(&inner, &alone, outcome, started);
                }
            }
            outcome => answer(&inner, &batch, outcome, started),
        }
    }
}

type Batch = Arc<Vec<Arc<Queued>>>;

/// The batch's attempts (retried after deadlocks and dead connections).
async fn run(inner: &Inner, batch: &Batch) -> Result<(Vec<Result<Snapshot, StoreError>>, bool), StoreError> {
    let retention = inner.retention;
    let batch = Arc::clone(batch);
    inner
        .run(inner.attempt_limit, inner.timeouts, move |c| Box::pin(change_batch(c, Arc::clone(&batch), retention)))
        .await
}

fn answer(
    inner: &Inner,
    batch: &Batch,
    outcome: Result<(Vec<Result<Snapshot, StoreError>>, bool), StoreError>,
    started: std::time::Instant,
) {
    match outcome {
        Ok((outcomes, wrote)) => {
            inner.stats.record(batch.len() as u64, wrote, started);
            for (queued, outcome) in batch.iter().zip(outcomes) {
                queued.answer(outcome);
            }
        }
        Err(e) => {
            inner.stats.record(batch.len() as u64, false, started);
            for queued in batch.iter() {
                queued.answer(Err(e.clone()));
            }
        }
    }
}

/// One attempt at a batch: each change's outcome, and whether anything was written.
async fn change_batch(
    client: &mut Object,
    batch: Batch,
    retention: Retention,
) -> Result<(Vec<Result<Snapshot, StoreError>>, bool), Failure> {
    let mut keys: Vec<&str> = batch.iter().map(|q| q.req.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut related: Vec<String> = batch
        .iter()
        .flat_map(|q| q.req.related.iter().map(|k| k.as_str().to_string()))
        .filter(|k| keys.binary_search(&k.as_str()).is_err())
        .collect();
    related.sort_unstable();
    related.dedup();
    let tx = client.transaction().await?;
    let Loaded { snapshots: mut current, context, referrers } = load(&tx, &keys, &related, &batch).await?;
    let mut outcomes = Vec::with_capacity(batch.len());
    let mut plans: BTreeMap<String, ChangePlan> = BTreeMap::new();
    for queued in batch.iter() {
        // A related resource changed earlier in this batch is seen as that change left it.
        let seen: Vec<_> = queued
            .req
            .related
            .iter()
            .filter_map(|k| match current.get(k.as_str()) {
                Some(snapshot) => snapshot.resource.clone(),
                None => context.get(k.as_str()).cloned(),
            })
            .collect();
        let children = if queued.req.children { children_of(&queued.req.key, &current, &context) } else { Vec::new() };
        let referring =
            if queued.req.referrers { referrers_of(&queued.req.key, &current, &referrers) } else { Vec::new() };
        let snapshot = current.get_mut(queued.req.key.as_str()).expect("every key was loaded");
        snapshot.related = seen;
        snapshot.children = children;
        snapshot.referrers = referring;
        snapshot.wake_referrers = false;
        snapshot.wake_children = false;
        snapshot.wake.clear();
        outcomes.push(decide(queued, snapshot, retention, &mut plans));
    }
    let mut rows = WriteRows::default();
    for (key, plan) in plans {
        rows.add(&ResourceKey::new(key), plan);
    }
    if rows.is_empty() {
        // Dropping the transaction rolls it back without waiting: nothing to flush.
        return Ok((outcomes, false));
    }
    rows.write(&tx).await?;
    commit(tx).await?;
    Ok((outcomes, true))
}

/// `parent`'s direct children: as loaded, or as a change earlier in the batch left them.
fn children_of(
    parent: &ResourceKey,
    current: &BTreeMap<String, Snapshot>,
    loaded: &BTreeMap<String, ResourceRecord>,
) -> Vec<ResourceRecord> {
    let mut under: BTreeMap<&str, Option<&ResourceRecord>> = BTreeMap::new();
    for (key, record) in loaded.iter().filter(|(k, _)| ResourceKey::new((*k).clone()).is_under(parent)) {
        under.insert(key, Some(record));
    }
    for (key, snapshot) in current.iter().filter(|(k, _)| ResourceKey::new((*k).clone()).is_under(parent)) {
        under.insert(key, snapshot.resource.as_ref());
    }
    crate::direct_children(parent, under.into_values().flatten().cloned().collect())
}

/// Who references `key` or its subtree from outside it: as loaded, or as changes earlier in
/// the batch left the referrers (a reference written in this batch counts).
fn referrers_of(
    key: &ResourceKey,
    current: &BTreeMap<String, Snapshot>,
    loaded: &BTreeMap<String, Vec<ResourceRecord>>,
) -> Vec<ResourceRecord> {
    let within = |k: &ResourceKey| k == key || k.is_under(key);
    let mut found: BTreeMap<String, ResourceRecord> = BTreeMap::new();
    for r in loaded.get(key.as_str()).into_iter().flatten() {
        found.insert(r.key().as_str().to_string(), r.clone());
    }
    for (k, snapshot) in current {
        found.remove(k);
        if let Some(r) = &snapshot.resource
            && !within(&ResourceKey::new(k.clone()))
            && r.references.iter().any(|x| within(&x.id.key()))
        {
            found.insert(k.clone(), r.clone());
        }
    }
    found.into_values().collect()
}

/// Runs one queued change on its key's current snapshot, which it advances on success, and
/// adds what it writes (at its own time) to its key's plan.
fn decide(
    queued: &Queued,
    snapshot: &mut Snapshot,
    retention: Retention,
    plans: &mut BTreeMap<String, ChangePlan>,
) -> Result<Snapshot, StoreError> {
    queued.req.check_fence(snapshot)?;
    let after = queued.pending.lock().unwrap_or_else(PoisonError::into_inner).decide(snapshot)?;
    let plan = ChangePlan::of(&queued.req.key, snapshot, &after, queued.req.now, retention)?;
    let key = queued.req.key.as_str().to_string();
    let merged = match plans.remove(&key) {
        Some(earlier) => earlier.then(plan),
        None => plan,
    };
    plans.insert(key, merged);
    *snapshot = after.clone();
    Ok(after)
}

/// Locks every key, then reads each one's snapshot (resource, open operations, and any
/// operation a change named), sent together and run in order.
async fn load(
    tx: &Transaction<'_>,
    keys: &[&str],
    related: &[String],
    batch: &[Arc<Queued>],
) -> Result<Loaded, Failure> {
    let (lock, resources, open, named, context, under, referring) = tokio::join!(
        biased;
        tx.prepare_cached(LOCK_KEYS),
        tx.prepare_cached(RESOURCES_FOR_UPDATE),
        tx.prepare_cached(OPEN_OPERATIONS),
        tx.prepare_cached(NAMED_OPERATIONS),
        tx.prepare_cached(RELATED_RESOURCES),
        tx.prepare_cached(RESOURCES_UNDER),
        tx.prepare_cached(REFERRERS),
    );
    let (lock, resources, open, named, context, under, referring) =
        (lock?, resources?, open?, named?, context?, under?, referring?);
    let mut deleting: Vec<String> =
        batch.iter().filter(|q| q.req.referrers).map(|q| q.req.key.as_str().to_string()).collect();
    deleting.sort_unstable();
    deleting.dedup();
    let mut parents: Vec<String> =
        batch.iter().filter(|q| q.req.children).map(|q| q.req.key.as_str().to_string()).collect();
    parents.sort_unstable();
    parents.dedup();
    let locked_keys: Vec<&str> = keys.iter().copied().chain(related.iter().map(String::as_str)).collect();
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
    let by_locked_keys: [&(dyn ToSql + Sync); 1] = [&locked_keys];
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
    let (locked, resources, open, named, context, under, referring) = tokio::join!(
        biased;
        tx.execute(&lock, &by_locked_keys),
        tx.query(&resources, &by_keys),
        tx.query(&open, &by_keys),
        named_rows,
        context_rows,
        under_rows,
        referring_rows,
    );
    let (_, resources, open, named, context, under, referring) =
        (locked?, resources?, open?, named?, context?, under?, referring?);
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
    Ok(Loaded { snapshots, context: related_records, referrers })
}

/// What a batch read before deciding: each key's snapshot, the resources read as context
/// (related and children), and each deleting key's referrers.
struct Loaded {
    snapshots: BTreeMap<String, Snapshot>,
    context: BTreeMap<String, ResourceRecord>,
    referrers: BTreeMap<String, Vec<ResourceRecord>>,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use slipway_domain::admission::Rejection;
    use slipway_domain::resource::Snapshot;

    use super::Pending;
    use crate::StoreError;

    fn counting(runs: &Arc<AtomicUsize>) -> Pending {
        let runs = Arc::clone(runs);
        Pending::new(Box::new(move |s: &mut Snapshot| {
            runs.fetch_add(1, Ordering::SeqCst);
            s.operations.clear();
            s.notifications.clear();
            s.resource = None;
            Ok(())
        }))
    }

    #[test]
    fn a_retried_change_reuses_its_decision_only_on_the_same_snapshot() {
        let runs = Arc::new(AtomicUsize::new(0));
        let before = Snapshot::default();
        let mut pending = counting(&runs);
        let first = pending.decide(&before).expect("decided");
        let again = pending.decide(&before).expect("same snapshot: same decision");
        assert_eq!(first, again);
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the function ran once");

        let mut other = before.clone();
        other.notifications.push(slipway_domain::resource::NewNotification {
            subscription: "s".into(),
            operation_id: crate::conformance::op_id(1),
            uri: "u".into(),
        });
        let err = pending.decide(&other).expect_err("another snapshot");
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn refusals_and_panics_are_answers() {
        let mut refusing = Pending::new(Box::new(|_: &mut Snapshot| Err(Rejection::NotFound)));
        let err = refusing.decide(&Snapshot::default()).expect_err("refused");
        assert_eq!(err, StoreError::Rejected(Rejection::NotFound));
        let again = refusing.decide(&Snapshot::default()).expect_err("a retried attempt");
        assert_eq!(again, err, "a refusal is remembered like any decision");
        let mut panicking = Pending::new(Box::new(|_: &mut Snapshot| panic!("bug in a change")));
        let err = panicking.decide(&Snapshot::default()).expect_err("panicked");
        assert!(matches!(&err, StoreError::Internal(m) if m.contains("bug in a change")), "{err:?}");
    }
}
