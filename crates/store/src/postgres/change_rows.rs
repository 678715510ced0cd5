//! The rows a PostgreSQL group commit writes: every change's plan gathered into parallel
//! arrays, one multi-row statement per kind of row (`unnest`), sent together.

use deadpool_postgres::Transaction;
use slipway_domain::ids::ResourceKey;
use tokio_postgres::Statement;
use tokio_postgres::types::ToSql;

use super::Failure;
use super::activity::ActivityRows;
use crate::columns::ResourceColumns;
use crate::plan::{ChangePlan, EventRow, OperationRow, ResourceWrite};
use crate::usage::UsageDelta;

const INSERT_RESOURCES: &str = "INSERT INTO resources (key, subscription, resource_group, type_key, next_due, intent,
         lease_owner, lease_until, lease_epoch, generation, body, drift_due)
     SELECT u.key, u.subscription, u.resource_group, u.type_key, u.next_due, u.intent, u.lease_owner,
         u.lease_until, COALESCE(u.lease_epoch, 0), u.generation, u.body, u.drift_due
     FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BOOLEAN[], $7::TEXT[],
                 $8::BIGINT[], $9::BIGINT[], $10::BIGINT[], $11::TEXT[], $12::BIGINT[]) WITH ORDINALITY
          AS u(key, subscription, resource_group, type_key, next_due, intent, lease_owner, lease_until,
               lease_epoch, generation, body, drift_due, ord)
     ORDER BY u.ord";

/// Epochs only grow: a record that dropped its lease keeps the row's epoch, so a later claim
/// still moves past every fence ever handed out.
const UPDATE_RESOURCES: &str = "UPDATE resources r SET subscription = u.subscription,
         resource_group = u.resource_group, type_key = u.type_key, next_due = u.next_due, intent = u.intent,
         lease_owner = u.lease_owner, lease_until = u.lease_until,
         lease_epoch = GREATEST(r.lease_epoch, COALESCE(u.lease_epoch, 0)), generation = u.generation,
         body = u.body, drift_due = u.drift_due
     FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BOOLEAN[], $7::TEXT[],
                 $8::BIGINT[], $9::BIGINT[], $10::BIGINT[], $11::TEXT[], $12::BIGINT[])
          AS u(key, subscription, resource_group, type_key, next_due, intent, lease_owner, lease_until,
               lease_epoch, generation, body, drift_due)
     WHERE r.key = u.key";

const DELETE_RESOURCES: &str = "DELETE FROM resources WHERE key = ANY($1)";

/// The reference rows of the resources whose references changed: cleared, then inserted.
const CLEAR_REFERENCES: &str = "DELETE FROM resource_references WHERE from_key = ANY($1)";
const INSERT_REFERENCES: &str = "INSERT INTO resource_references (to_key, from_key)
     SELECT u.to_key, u.from_key FROM unnest($1::TEXT[], $2::TEXT[]) AS u(to_key, from_key) ON CONFLICT DO NOTHING";

/// Every row the wake-ups below will update, locked in key order first: each wake-up
/// statement alone would lock its rows in the order its plan meets them, and two batches
/// waking overlapping rows in two orders would deadlock. (The batch's own rows are held
/// already; re-locking them is free.)
const LOCK_WOKEN: &str = "SELECT 1 FROM resources r WHERE r.key IN (
         SELECT w.key FROM unnest($1::TEXT[], $2::TEXT[]) AS u(after, before)
             JOIN resources w ON w.key > u.after AND w.key < u.before
         UNION SELECT k FROM unnest($3::TEXT[]) AS k
         UNION SELECT x.from_key FROM resource_references x WHERE x.to_key = ANY($4::TEXT[]))
     ORDER BY r.key FOR UPDATE";

/// Wake-ups of every resource referencing each key, as below.
const WAKE_REFERRERS: &str =
    "UPDATE resources r SET next_due = LEAST(COALESCE(r.next_due, u.now), u.now), intent = TRUE
     FROM resource_references x JOIN unnest($1::TEXT[], $2::BIGINT[]) AS u(key, now) ON x.to_key = u.key
     WHERE r.key = x.from_key";

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

/// The batch's usage deltas, merged per row and in key order (so two batches lock usage
/// rows in one order), before the event cursors.
const ADD_USAGE: &str = "INSERT INTO usage (subscription, meter, resource_group, value)
     SELECT u.subscription, u.meter, u.resource_group, u.delta
     FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::BIGINT[]) WITH ORDINALITY
          AS u(subscription, meter, resource_group, delta, ord)
     ORDER BY u.ord
     ON CONFLICT (subscription, meter, resource_group) DO UPDATE SET value = usage.value + EXCLUDED.value";

/// The batch's events, numbered per subscription in batch order: each subscription's cursor
/// row is bumped by its count (locked in subscription order, after every other row, so the
/// global lock order holds) and keeps that lock to commit, so positions follow commit order.
const INSERT_EVENTS: &str = "WITH input AS (
         SELECT u.* FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::BIGINT[], $5::BIGINT[], $6::TEXT[])
             WITH ORDINALITY AS u(subscription, resource_key, kind, at, expires_at, body, ord)),
     counts AS (SELECT subscription, count(*) AS n FROM input GROUP BY subscription),
     bumped AS (
         INSERT INTO event_cursors (subscription, last_seq)
         SELECT subscription, n FROM counts ORDER BY subscription
         ON CONFLICT (subscription) DO UPDATE SET last_seq = event_cursors.last_seq + EXCLUDED.last_seq
         RETURNING subscription, last_seq)
     INSERT INTO events (subscription, seq, resource_key, kind, at, expires_at, body)
     SELECT i.subscription,
            b.last_seq - c.n + row_number() OVER (PARTITION BY i.subscription ORDER BY i.ord),
            i.resource_key, i.kind, i.at, i.expires_at, i.body
     FROM input i JOIN counts c USING (subscription) JOIN bumped b USING (subscription)";

/// Every row a batch writes, as the parallel arrays `unnest` takes.
#[derive(Default)]
pub(super) struct WriteRows {
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
    wake_referrers_of: Vec<String>,
    wake_referrers_now: Vec<i64>,
    references_cleared: Vec<String>,
    reference_to: Vec<String>,
    reference_from: Vec<String>,
    events: EventRows,
    usage: Vec<UsageDelta>,
    activity: ActivityRows,
}

impl WriteRows {
    pub(super) fn add(&mut self, key: &ResourceKey, plan: ChangePlan) {
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
        if let Some(now) = plan.wake_referrers {
            self.wake_referrers_of.push(key.as_str().to_string());
            self.wake_referrers_now.push(now);
        }
        if let Some(to) = plan.references {
            self.references_cleared.push(key.as_str().to_string());
            for t in to {
                self.reference_to.push(t);
                self.reference_from.push(key.as_str().to_string());
            }
        }
        for (key, now) in plan.wake_keys {
            if !self.wake_keys.contains(&key) {
                self.wake_keys.push(key);
                self.wake_key_now.push(now);
            }
        }
        for e in plan.events {
            self.events.push(e);
        }
        self.usage.extend(plan.usage);
        for a in plan.activity {
            self.activity.push(a);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.inserted_resources.key.is_empty()
            && self.updated_resources.key.is_empty()
            && self.deleted_resources.is_empty()
            && self.inserted_operations.id.is_empty()
            && self.updated_operations.id.is_empty()
            && self.notification_uris.is_empty()
            && self.wake_now.is_empty()
            && self.wake_keys.is_empty()
            && self.wake_referrers_of.is_empty()
            && self.references_cleared.is_empty()
            && self.events.kind.is_empty()
            && self.usage.is_empty()
            && self.activity.is_empty()
    }

    fn wakes(&self) -> bool {
        !(self.wake_now.is_empty() && self.wake_keys.is_empty() && self.wake_referrers_of.is_empty())
    }

    /// All statements sent at once; the server runs them in this order and refuses the rest
    /// after an error, so the first error in this order is the cause. Each row appears once
    /// (the plans of one key are merged), as a multi-row `UPDATE` needs.
    pub(super) async fn write(&self, tx: &Transaction<'_>) -> Result<(), Failure> {
        let statements = [
            (!self.deleted_resources.is_empty()).then_some(DELETE_RESOURCES),
            (!self.inserted_resources.key.is_empty()).then_some(INSERT_RESOURCES),
            (!self.updated_resources.key.is_empty()).then_some(UPDATE_RESOURCES),
            (!self.inserted_operations.id.is_empty()).then_some(INSERT_OPERATIONS),
            (!self.updated_operations.id.is_empty()).then_some(UPDATE_OPERATIONS),
            (!self.notification_uris.is_empty()).then_some(INSERT_NOTIFICATIONS),
            self.wakes().then_some(LOCK_WOKEN),
            (!self.wake_now.is_empty()).then_some(WAKE_RANGES),
            (!self.wake_keys.is_empty()).then_some(WAKE_KEYS),
            (!self.references_cleared.is_empty()).then_some(CLEAR_REFERENCES),
            (!self.reference_to.is_empty()).then_some(INSERT_REFERENCES),
            (!self.wake_referrers_of.is_empty()).then_some(WAKE_REFERRERS),
            (!self.usage.is_empty()).then_some(ADD_USAGE),
            (!self.events.kind.is_empty()).then_some(INSERT_EVENTS),
            (!self.activity.is_empty()).then_some(super::activity::INSERT),
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
        let to_lock: [&(dyn ToSql + Sync); 4] =
            [&self.wake_after, &self.wake_before, &self.wake_keys, &self.wake_referrers_of];
        let woken: [&(dyn ToSql + Sync); 3] = [&self.wake_after, &self.wake_before, &self.wake_now];
        let woken_keys: [&(dyn ToSql + Sync); 2] = [&self.wake_keys, &self.wake_key_now];
        let cleared: [&(dyn ToSql + Sync); 1] = [&self.references_cleared];
        let referenced: [&(dyn ToSql + Sync); 2] = [&self.reference_to, &self.reference_from];
        let woken_referrers: [&(dyn ToSql + Sync); 2] = [&self.wake_referrers_of, &self.wake_referrers_now];
        let usage = crate::usage::merged(self.usage.iter().cloned());
        let usage_columns = (
            usage.iter().map(|d| d.subscription.as_str()).collect::<Vec<_>>(),
            usage.iter().map(|d| d.meter.as_str()).collect::<Vec<_>>(),
            usage.iter().map(|d| d.group.as_str()).collect::<Vec<_>>(),
            usage.iter().map(|d| d.delta).collect::<Vec<_>>(),
        );
        let used: [&(dyn ToSql + Sync); 4] = [&usage_columns.0, &usage_columns.1, &usage_columns.2, &usage_columns.3];
        let events = self.events.params();
        let activity = self.activity.params();
        let results = tokio::join!(
            biased;
            execute_if(tx, prepared[0].as_ref(), &deleted),
            execute_if(tx, prepared[1].as_ref(), &inserted),
            execute_if(tx, prepared[2].as_ref(), &updated),
            execute_if(tx, prepared[3].as_ref(), &inserted_ops),
            execute_if(tx, prepared[4].as_ref(), &updated_ops),
            execute_if(tx, prepared[5].as_ref(), &notified),
            execute_if(tx, prepared[6].as_ref(), &to_lock),
            execute_if(tx, prepared[7].as_ref(), &woken),
            execute_if(tx, prepared[8].as_ref(), &woken_keys),
            execute_if(tx, prepared[9].as_ref(), &cleared),
            execute_if(tx, prepared[10].as_ref(), &referenced),
            execute_if(tx, prepared[11].as_ref(), &woken_referrers),
            execute_if(tx, prepared[12].as_ref(), &used),
            execute_if(tx, prepared[13].as_ref(), &events),
            execute_if(tx, prepared[14].as_ref(), &activity),
        );
        results.0?;
        results.1?;
        results.2?;
        results.3?;
        results.4?;
        results.5?;
        results.6?;
        results.7?;
        results.8?;
        results.9?;
        results.10?;
        results.11?;
        results.12?;
        results.13?;
        results.14?;
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
    drift_due: Vec<Option<i64>>,
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
        self.drift_due.push(c.drift_due);
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
            &self.drift_due,
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

#[derive(Default)]
struct EventRows {
    subscription: Vec<String>,
    resource_key: Vec<String>,
    kind: Vec<&'static str>,
    at: Vec<i64>,
    expires_at: Vec<i64>,
    body: Vec<String>,
}

impl EventRows {
    fn push(&mut self, e: EventRow) {
        self.subscription.push(e.subscription);
        self.resource_key.push(e.resource_key);
        self.kind.push(e.kind);
        self.at.push(e.at);
        self.expires_at.push(e.expires_at);
        self.body.push(e.body);
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![&self.subscription, &self.resource_key, &self.kind, &self.at, &self.expires_at, &self.body]
    }
}
