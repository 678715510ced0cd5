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
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::{Object, Transaction};
use slipway_domain::ids::ResourceKey;
use slipway_domain::resource::{ResourceRecord, Snapshot};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Statement;
use tokio_postgres::types::ToSql;

use super::writes::commit;
use super::{Failure, Inner, panic_text, rows};
use crate::columns::{ResourceColumns, normalize_key, resource_columns};
use crate::plan::{ChangePlan, OperationRow, ResourceWrite};
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

const INSERT_RESOURCES: &str = "INSERT INTO resources (key, subscription, resource_group, type_key, next_due, intent,
         lease_owner, lease_until, lease_epoch, generation, body)
     SELECT u.key, u.subscription, u.resource_group, u.type_key, u.next_due, u.intent, u.lease_owner,
         u.lease_until, COALESCE(u.lease_epoch, 0), u.generation, u.body
     FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BOOLEAN[], $7::TEXT[],
                 $8::BIGINT[], $9::BIGINT[], $10::BIGINT[], $11::TEXT[]) WITH ORDINALITY
          AS u(key, subscription, resource_group, type_key, next_due, intent, lease_owner, lease_until,
               lease_epoch, generation, body, ord)
     ORDER BY u.ord";

/// Epochs only grow: a record that dropped its lease keeps the row's epoch, so a later claim
/// still moves past every fence ever handed out.
const UPDATE_RESOURCES: &str = "UPDATE resources r SET subscription = u.subscription,
         resource_group = u.resource_group, type_key = u.type_key, next_due = u.next_due, intent = u.intent,
         lease_owner = u.lease_owner, lease_until = u.lease_until,
         lease_epoch = GREATEST(r.lease_epoch, COALESCE(u.lease_epoch, 0)), generation = u.generation,
         body = u.body
     FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BOOLEAN[], $7::TEXT[],
                 $8::BIGINT[], $9::BIGINT[], $10::BIGINT[], $11::TEXT[])
          AS u(key, subscription, resource_group, type_key, next_due, intent, lease_owner, lease_until,
               lease_epoch, generation, body)
     WHERE r.key = u.key";

const DELETE_RESOURCES: &str = "DELETE FROM resources WHERE key = ANY($1)";

/// Resources changes read as context (a child's parent): under their keys' advisory locks,
/// which every change of them takes, so no row lock is needed.
const RELATED_RESOURCES: &str = concat!("SELECT ", resource_columns!(), " FROM resources WHERE key = ANY($1)");

/// The resources nested under each named parent (read without locks: while a parent is
/// deleting no child can be added, and a child only ever goes).
const RESOURCES_UNDER: &str = concat!(
    "SELECT ",
    resource_columns!(),
    " FROM unnest($1::TEXT[]) AS u(parent) JOIN resources ON key > u.parent || '/' AND key < u.parent || '0'"
);

/// Wake-ups of single resources (a child's parent), as below.
const WAKE_KEYS: &str = "UPDATE resources r SET next_due = LEAST(COALESCE(r.next_due, u.now), u.now), intent = TRUE
     FROM unnest($1::TEXT[], $2::BIGINT[]) AS u(key, now) WHERE r.key = u.key";

/// Wake-ups: each range's resources become due at its time (unless due sooner) in the
/// intent lane, as a client's write would make them. Runs after the resource writes, so a row
/// written in the same batch is woken too.
const WAKE_RANGES: &str = "UPDATE resources r SET next_due = LEAST(COALESCE(r.next_due, u.now), u.now), intent = TRUE
     FROM unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[]) AS u(after, before, now)
     WHERE r.key > u.after AND r.key < u.before";

/// New operations in snapshot order (which `seq` then keeps).
const INSERT_OPERATIONS: &str =
    "INSERT INTO operations (subscription, id, resource_key, status, terminal, expires_at, body)
     SELECT u.subscription, u.id, u.resource_key, u.status, u.terminal, u.expires_at, u.body
     FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BOOLEAN[], $6::TEXT[], $7::BIGINT[])
          WITH ORDINALITY AS u(subscription, id, resource_key, status, terminal, body, expires_at, ord)
     ORDER BY u.ord";

const UPDATE_OPERATIONS: &str =
    "UPDATE operations o SET resource_key = u.resource_key, status = u.status, terminal = u.terminal,
         expires_at = u.expires_at, body = u.body
     FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BOOLEAN[], $6::TEXT[], $7::BIGINT[])
          AS u(subscription, id, resource_key, status, terminal, body, expires_at)
     WHERE o.subscription = u.subscription AND o.id = u.id";

const INSERT_NOTIFICATIONS: &str =
    "INSERT INTO outbox (subscription, operation_id, uri, attempts, next_attempt_at, created_at, state)
     SELECT u.subscription, u.operation_id, u.uri, 0, u.due_at, u.due_at, 'pending'
     FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::BIGINT[]) WITH ORDINALITY
          AS u(subscription, operation_id, uri, due_at, ord)
     ORDER BY u.ord";

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
        // Change functions are caller code; a panic in one fails that call only.
        let decided = match catch_unwind(AssertUnwindSafe(|| change(&mut after))) {
            Ok(Ok(())) => Ok(after),
            Ok(Err(rejection)) => Err(StoreError::Rejected(rejection)),
            Err(panic) => Err(StoreError::Internal(format!("change function panicked: {}", panic_text(&*panic)))),
        };
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
        mut req: ChangeRequest,
        change: ChangeFn,
    ) -> (Queued, oneshot::Receiver<Result<Snapshot, StoreError>>) {
        req.key = normalize_key(&req.key);
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
        match run(&inner, &batch).await {
            // One change's writes broke the transaction (a constraint it violates, a bug): the
            // others must not fail with it, so each runs alone, reusing its decision.
            Err(StoreError::Internal(_)) if batch.len() > 1 => {
                for queued in batch.iter() {
                    let alone: Batch = Arc::new(vec![Arc::clone(queued)]);
                    let outcome = run(&inner, &alone).await;
                    answer(&inner, &alone, outcome);
                }
            }
            outcome => answer(&inner, &batch, outcome),
        }
    }
}

type Batch = Arc<Vec<Arc<Queued>>>;

/// The batch's attempts (retried after deadlocks and dead connections).
async fn run(inner: &Inner, batch: &Batch) -> Result<(Vec<Result<Snapshot, StoreError>>, bool), StoreError> {
    let ttl = inner.operation_ttl;
    let batch = Arc::clone(batch);
    inner.run(inner.attempt_limit, inner.timeouts, move |c| Box::pin(change_batch(c, Arc::clone(&batch), ttl))).await
}

fn answer(inner: &Inner, batch: &Batch, outcome: Result<(Vec<Result<Snapshot, StoreError>>, bool), StoreError>) {
    match outcome {
        Ok((outcomes, wrote)) => {
            inner.stats.record(batch.len() as u64, wrote);
            for (queued, outcome) in batch.iter().zip(outcomes) {
                queued.answer(outcome);
            }
        }
        Err(e) => {
            inner.stats.record(batch.len() as u64, false);
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
    operation_ttl: Duration,
) -> Result<(Vec<Result<Snapshot, StoreError>>, bool), Failure> {
    let mut keys: Vec<&str> = batch.iter().map(|q| q.req.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut related: Vec<String> = batch
        .iter()
        .flat_map(|q| q.req.related.iter().map(|k| normalize_key(k).as_str().to_string()))
        .filter(|k| keys.binary_search(&k.as_str()).is_err())
        .collect();
    related.sort_unstable();
    related.dedup();
    let tx = client.transaction().await?;
    let (mut current, context) = load(&tx, &keys, &related, &batch).await?;
    let mut outcomes = Vec::with_capacity(batch.len());
    let mut plans: BTreeMap<String, ChangePlan> = BTreeMap::new();
    for queued in batch.iter() {
        // A related resource changed earlier in this batch is seen as that change left it.
        let seen: Vec<_> = queued
            .req
            .related
            .iter()
            .filter_map(|k| {
                let k = normalize_key(k);
                match current.get(k.as_str()) {
                    Some(snapshot) => snapshot.resource.clone(),
                    None => context.get(k.as_str()).cloned(),
                }
            })
            .collect();
        let children = if queued.req.children { children_of(&queued.req.key, &current, &context) } else { Vec::new() };
        let snapshot = current.get_mut(queued.req.key.as_str()).expect("every key was loaded");
        snapshot.related = seen;
        snapshot.children = children;
        snapshot.wake_children = false;
        snapshot.wake.clear();
        outcomes.push(decide(queued, snapshot, operation_ttl, &mut plans));
    }
    let mut rows = WriteRows::default();
    for (key, plan) in plans {
        rows.add(&ResourceKey(key), plan);
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
    let parent = normalize_key(parent);
    let mut under: BTreeMap<&str, Option<&ResourceRecord>> = BTreeMap::new();
    for (key, record) in loaded.iter().filter(|(k, _)| ResourceKey((*k).clone()).is_under(&parent)) {
        under.insert(key, Some(record));
    }
    for (key, snapshot) in current.iter().filter(|(k, _)| ResourceKey((*k).clone()).is_under(&parent)) {
        under.insert(key, snapshot.resource.as_ref());
    }
    crate::direct_children(&parent, under.into_values().flatten().cloned().collect())
}

/// Runs one queued change on its key's current snapshot, which it advances on success, and
/// adds what it writes (at its own time) to its key's plan.
fn decide(
    queued: &Queued,
    snapshot: &mut Snapshot,
    operation_ttl: Duration,
    plans: &mut BTreeMap<String, ChangePlan>,
) -> Result<Snapshot, StoreError> {
    queued.req.check_fence(snapshot)?;
    let after = queued.pending.lock().unwrap_or_else(PoisonError::into_inner).decide(snapshot)?;
    let plan = ChangePlan::of(&queued.req.key, snapshot, &after, queued.req.now, operation_ttl)?;
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
) -> Result<(BTreeMap<String, Snapshot>, BTreeMap<String, ResourceRecord>), Failure> {
    let (lock, resources, open, named, context, under) = tokio::join!(
        biased;
        tx.prepare_cached(LOCK_KEYS),
        tx.prepare_cached(RESOURCES_FOR_UPDATE),
        tx.prepare_cached(OPEN_OPERATIONS),
        tx.prepare_cached(NAMED_OPERATIONS),
        tx.prepare_cached(RELATED_RESOURCES),
        tx.prepare_cached(RESOURCES_UNDER),
    );
    let (lock, resources, open, named, context, under) = (lock?, resources?, open?, named?, context?, under?);
    let mut parents: Vec<String> =
        batch.iter().filter(|q| q.req.children).map(|q| normalize_key(&q.req.key).as_str().to_string()).collect();
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
    let (locked, resources, open, named, context, under) = tokio::join!(
        biased;
        tx.execute(&lock, &by_locked_keys),
        tx.query(&resources, &by_keys),
        tx.query(&open, &by_keys),
        named_rows,
        context_rows,
        under_rows,
    );
    let (_, resources, open, named, context, under) = (locked?, resources?, open?, named?, context?, under?);
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
    Ok((snapshots, related_records))
}

/// Every row a batch writes, as the parallel arrays `unnest` takes.
#[derive(Default)]
struct WriteRows {
    inserted_resources: ResourceRows,
    updated_resources: ResourceRows,
    deleted_resources: Vec<String>,
    inserted_operations: OperationRows,
    updated_operations: OperationRows,
    notification_subscriptions: Vec<String>,
    notification_operations: Vec<String>,
    notification_uris: Vec<String>,
    notification_due: Vec<i64>,
    wake_after: Vec<String>,
    wake_before: Vec<String>,
    wake_now: Vec<i64>,
    wake_keys: Vec<String>,
    wake_key_now: Vec<i64>,
}

impl WriteRows {
    fn add(&mut self, key: &ResourceKey, plan: ChangePlan) {
        match plan.resource {
            Some(ResourceWrite::Delete) => self.deleted_resources.push(key.as_str().to_string()),
            Some(ResourceWrite::Insert(c)) => self.inserted_resources.push(key, c),
            Some(ResourceWrite::Update(c)) => self.updated_resources.push(key, c),
            None => {}
        }
        for op in plan.operations {
            if op.insert { self.inserted_operations.push(op) } else { self.updated_operations.push(op) }
        }
        for n in plan.notifications {
            self.notification_subscriptions.push(n.subscription);
            self.notification_operations.push(n.operation_id);
            self.notification_uris.push(n.uri);
            self.notification_due.push(n.due_at);
        }
        if let Some(w) = plan.wake {
            self.wake_after.push(w.after);
            self.wake_before.push(w.before);
            self.wake_now.push(w.now);
        }
        for (key, now) in plan.wake_keys {
            if !self.wake_keys.contains(&key) {
                self.wake_keys.push(key);
                self.wake_key_now.push(now);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.inserted_resources.key.is_empty()
            && self.updated_resources.key.is_empty()
            && self.deleted_resources.is_empty()
            && self.inserted_operations.id.is_empty()
            && self.updated_operations.id.is_empty()
            && self.notification_uris.is_empty()
            && self.wake_now.is_empty()
            && self.wake_keys.is_empty()
    }

    /// All statements sent at once; the server runs them in this order and refuses the rest
    /// after an error, so the first error in this order is the cause. Each row appears once
    /// (the plans of one key are merged), as a multi-row `UPDATE` needs.
    async fn write(&self, tx: &Transaction<'_>) -> Result<(), Failure> {
        let statements = [
            (!self.deleted_resources.is_empty()).then_some(DELETE_RESOURCES),
            (!self.inserted_resources.key.is_empty()).then_some(INSERT_RESOURCES),
            (!self.updated_resources.key.is_empty()).then_some(UPDATE_RESOURCES),
            (!self.inserted_operations.id.is_empty()).then_some(INSERT_OPERATIONS),
            (!self.updated_operations.id.is_empty()).then_some(UPDATE_OPERATIONS),
            (!self.notification_uris.is_empty()).then_some(INSERT_NOTIFICATIONS),
            (!self.wake_now.is_empty()).then_some(WAKE_RANGES),
            (!self.wake_keys.is_empty()).then_some(WAKE_KEYS),
        ];
        let mut prepared = Vec::with_capacity(statements.len());
        for sql in statements {
            prepared.push(match sql {
                Some(sql) => Some(tx.prepare_cached(sql).await?),
                None => None,
            });
        }
        let deleted: [&(dyn ToSql + Sync); 1] = [&self.deleted_resources];
        let (inserted, updated) = (self.inserted_resources.params(), self.updated_resources.params());
        let (inserted_ops, updated_ops) = (self.inserted_operations.params(), self.updated_operations.params());
        let notified: [&(dyn ToSql + Sync); 4] = [
            &self.notification_subscriptions,
            &self.notification_operations,
            &self.notification_uris,
            &self.notification_due,
        ];
        let woken: [&(dyn ToSql + Sync); 3] = [&self.wake_after, &self.wake_before, &self.wake_now];
        let woken_keys: [&(dyn ToSql + Sync); 2] = [&self.wake_keys, &self.wake_key_now];
        let results = tokio::join!(
            biased;
            execute_if(tx, prepared[0].as_ref(), &deleted),
            execute_if(tx, prepared[1].as_ref(), &inserted),
            execute_if(tx, prepared[2].as_ref(), &updated),
            execute_if(tx, prepared[3].as_ref(), &inserted_ops),
            execute_if(tx, prepared[4].as_ref(), &updated_ops),
            execute_if(tx, prepared[5].as_ref(), &notified),
            execute_if(tx, prepared[6].as_ref(), &woken),
            execute_if(tx, prepared[7].as_ref(), &woken_keys),
        );
        results.0?;
        results.1?;
        results.2?;
        results.3?;
        results.4?;
        results.5?;
        results.6?;
        results.7?;
        Ok(())
    }
}

async fn execute_if(
    tx: &Transaction<'_>,
    stmt: Option<&Statement>,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, tokio_postgres::Error> {
    match stmt {
        Some(stmt) => tx.execute(stmt, params).await,
        None => Ok(0),
    }
}

#[derive(Default)]
struct ResourceRows {
    key: Vec<String>,
    subscription: Vec<String>,
    resource_group: Vec<String>,
    type_key: Vec<String>,
    next_due: Vec<Option<i64>>,
    intent: Vec<bool>,
    lease_owner: Vec<Option<String>>,
    lease_until: Vec<Option<i64>>,
    lease_epoch: Vec<Option<i64>>,
    generation: Vec<i64>,
    body: Vec<String>,
}

impl ResourceRows {
    fn push(&mut self, key: &ResourceKey, c: ResourceColumns) {
        self.key.push(key.as_str().to_string());
        self.subscription.push(c.subscription);
        self.resource_group.push(c.resource_group);
        self.type_key.push(c.type_key);
        self.next_due.push(c.next_due);
        self.intent.push(c.intent);
        self.lease_owner.push(c.lease_owner);
        self.lease_until.push(c.lease_until);
        self.lease_epoch.push(c.lease_epoch);
        self.generation.push(c.generation);
        self.body.push(c.body);
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.key,
            &self.subscription,
            &self.resource_group,
            &self.type_key,
            &self.next_due,
            &self.intent,
            &self.lease_owner,
            &self.lease_until,
            &self.lease_epoch,
            &self.generation,
            &self.body,
        ]
    }
}

#[derive(Default)]
struct OperationRows {
    subscription: Vec<String>,
    id: Vec<String>,
    resource_key: Vec<String>,
    status: Vec<&'static str>,
    terminal: Vec<bool>,
    body: Vec<String>,
    expires_at: Vec<i64>,
}

impl OperationRows {
    fn push(&mut self, op: OperationRow) {
        self.subscription.push(op.subscription);
        self.id.push(op.id);
        self.resource_key.push(op.resource_key);
        self.status.push(op.status);
        self.terminal.push(op.terminal);
        self.body.push(op.body);
        self.expires_at.push(op.expires_at);
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.subscription,
            &self.id,
            &self.resource_key,
            &self.status,
            &self.terminal,
            &self.body,
            &self.expires_at,
        ]
    }
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
