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
//! Lock order: keys' (and quota meters') advisory locks in hash order, then rows in key order, the same in every
//! batch of every replica, so batches never deadlock each other.

mod load;
mod pending;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use deadpool_postgres::Object;
use slipway_domain::ids::ResourceKey;
use slipway_domain::ids::SubscriptionId;
use slipway_domain::resource::{ResourceRecord, Setting, Snapshot};
use tokio::sync::{mpsc, oneshot};

use super::change_rows::WriteRows;
use super::writes::commit;
use super::{Failure, Inner};
use crate::plan::{ChangePlan, Retention};
use crate::usage::Tally;
use crate::{ChangeFn, ChangeRequest, EntryKind, StoreError};
use load::{Loaded, load};
use pending::Pending;

/// Most changes in one transaction.
pub(super) const MAX_BATCH: usize = 128;

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
    let Loaded { snapshots: mut current, context, referrers, mut usage, settings } =
        load(&tx, &keys, &related, &batch).await?;
    let mut outcomes = Vec::with_capacity(batch.len());
    let mut plans: BTreeMap<String, ChangePlan> = BTreeMap::new();
    let mut shared: HashMap<(SubscriptionId, Vec<EntryKind>), Arc<[Setting]>> = HashMap::new();
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
        snapshot.settings = match &queued.req.settings {
            // One copy per partition and kinds asked, shared by every change of the batch.
            Some(read) => {
                Arc::clone(shared.entry((read.subscription.clone(), read.kinds.clone())).or_insert_with(|| {
                    read.kinds
                        .iter()
                        .flat_map(|k| settings.get(&(k.tag().to_string(), read.subscription.as_str().to_string())))
                        .flatten()
                        .cloned()
                        .collect()
                }))
            }
            None => Arc::default(),
        };
        snapshot.usage = match &queued.req.usage {
            Some(read) => usage.read(&read.subscription, &read.group, &read.meters),
            None => Default::default(),
        };
        outcomes.push(decide(queued, snapshot, retention, &mut plans, &mut usage));
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
    usage: &mut Tally,
) -> Result<Snapshot, StoreError> {
    queued.req.check_fence(snapshot)?;
    let after = queued.pending.lock().unwrap_or_else(PoisonError::into_inner).decide(snapshot)?;
    let mut plan = ChangePlan::of(&queued.req.key, snapshot, &after, queued.req.now, retention)?;
    plan.activity.extend(queued.req.activity_row(snapshot, &after, retention.activity)?);
    crate::usage::check_growth(&plan.usage, queued.req.meters_read())?;
    usage.apply(&plan.usage);
    let key = queued.req.key.as_str().to_string();
    let merged = match plans.remove(&key) {
        Some(earlier) => earlier.then(plan),
        None => plan,
    };
    plans.insert(key, merged);
    *snapshot = after.clone();
    Ok(after)
}
