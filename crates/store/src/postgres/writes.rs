//! Everything that writes. Each function is one attempt of one call on one connection: it
//! returns [`Failure::Retry`] only when nothing it did was committed.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::{Object, Transaction};
use slipway_domain::Operation;
use slipway_domain::Timestamp;
use slipway_domain::ids::ResourceKey;
use slipway_domain::resource::{Lease, ResourceRecord, Snapshot};
use tokio_postgres::Statement;
use tokio_postgres::types::ToSql;

use super::rows;
use super::{Failure, panic_text};
use crate::columns::resource_columns;
use crate::columns::{ResourceColumns, normalize_key, shares, sql_limit};
use crate::{ChangeFn, ChangeRequest, ClaimRequest, Notification, StoreError};

/// Serialises every change of one key, creates of an absent key included. The one-key
/// advisory lock space; the hash may collide, which only makes two keys wait for each other.
const LOCK_KEY: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";

/// The row lock keeps claims (which skip it) and lease renewals (which wait) from
/// interleaving with the change.
const RESOURCE_FOR_UPDATE: &str = concat!("SELECT ", resource_columns!(), " FROM resources WHERE key = $1 FOR UPDATE");

const OPEN_OPERATIONS: &str = "SELECT id, body FROM operations WHERE resource_key = $1 AND NOT terminal ORDER BY seq";

const INSERT_RESOURCE: &str = "INSERT INTO resources (key, subscription, resource_group, type_key, next_due, intent,
                                lease_owner, lease_until, lease_epoch, generation, body)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE($9::BIGINT, 0), $10, $11)";

/// Epochs only grow: a record that dropped its lease keeps the row's epoch, so a later claim
/// still moves past every fence ever handed out.
const UPDATE_RESOURCE: &str = "UPDATE resources SET subscription = $2, resource_group = $3, type_key = $4,
         next_due = $5, intent = $6, lease_owner = $7, lease_until = $8,
         lease_epoch = GREATEST(lease_epoch, COALESCE($9::BIGINT, 0)), generation = $10, body = $11
     WHERE key = $1";

const DELETE_RESOURCE: &str = "DELETE FROM resources WHERE key = $1";

/// New operations in snapshot order (which `seq` then keeps).
const INSERT_OPERATIONS: &str =
    "INSERT INTO operations (subscription, id, resource_key, status, terminal, expires_at, body)
     SELECT u.subscription, u.id, u.resource_key, u.status, u.terminal, $7, u.body
     FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BOOLEAN[], $6::TEXT[]) WITH ORDINALITY
          AS u(subscription, id, resource_key, status, terminal, body, ord)
     ORDER BY u.ord";

const UPDATE_OPERATIONS: &str =
    "UPDATE operations o SET resource_key = u.resource_key, status = u.status, terminal = u.terminal,
         expires_at = $7, body = u.body
     FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BOOLEAN[], $6::TEXT[])
          AS u(subscription, id, resource_key, status, terminal, body)
     WHERE o.subscription = u.subscription AND o.id = u.id";

const INSERT_NOTIFICATIONS: &str =
    "INSERT INTO outbox (subscription, operation_id, uri, attempts, next_attempt_at, created_at, state)
     SELECT u.subscription, u.operation_id, u.uri, 0, $4, $4, 'pending'
     FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[]) WITH ORDINALITY AS u(subscription, operation_id, uri, ord)
     ORDER BY u.ord";

/// A change function, run at most once across the attempts of one call, and what it decided.
pub(super) struct Pending {
    change: Option<ChangeFn>,
    decided: Option<(Snapshot, Snapshot)>,
}

impl Pending {
    pub(super) fn new(change: ChangeFn) -> Self {
        Pending { change: Some(change), decided: None }
    }

    /// The snapshot to write for `before`. A retried attempt reuses the first decision when it
    /// read back exactly the same snapshot — the function is pure in it — and otherwise gives
    /// up, since the function cannot run twice.
    fn decide(&mut self, before: &Snapshot) -> Result<Snapshot, Failure> {
        if let Some((seen, after)) = &self.decided {
            return if seen == before {
                Ok(after.clone())
            } else {
                Err(Failure::Fail(StoreError::Unavailable(
                    "the resource changed while a failed write was retried; try again".into(),
                )))
            };
        }
        let change = self
            .change
            .take()
            .ok_or_else(|| Failure::Fail(StoreError::Internal("the change function was lost".into())))?;
        let mut after = before.clone();
        // Change functions are caller code; a panic in one fails that call only.
        match catch_unwind(AssertUnwindSafe(|| change(&mut after))) {
            Ok(Ok(())) => {}
            Ok(Err(rejection)) => return Err(Failure::Fail(StoreError::Rejected(rejection))),
            Err(panic) => {
                return Err(Failure::Fail(StoreError::Internal(format!(
                    "change function panicked: {}",
                    panic_text(&*panic)
                ))));
            }
        }
        self.decided = Some((before.clone(), after.clone()));
        Ok(after)
    }
}

pub(super) async fn change(
    client: &mut Object,
    req: Arc<ChangeRequest>,
    pending: Arc<Mutex<Pending>>,
    operation_ttl: Duration,
) -> Result<(Snapshot, bool), Failure> {
    let key = normalize_key(&req.key);
    let tx = client.transaction().await?;
    let before = load_snapshot(&tx, &key, &req).await?;
    if let Some(fence) = &req.fence {
        let held = before
            .resource
            .as_ref()
            .and_then(|res| res.lease.as_ref())
            .is_some_and(|lease| lease.owner == fence.owner && lease.epoch == fence.epoch);
        if !held {
            return Err(Failure::Fail(StoreError::LeaseLost));
        }
    }
    let after = pending.lock().unwrap_or_else(PoisonError::into_inner).decide(&before)?;
    let wrote = write_diff(&tx, &key, &before, &after, req.now, operation_ttl).await?;
    if wrote {
        commit(tx).await?;
    }
    // Otherwise dropping the transaction rolls it back without waiting: nothing to flush.
    Ok((after, wrote))
}

async fn load_snapshot(tx: &Transaction<'_>, key: &ResourceKey, req: &ChangeRequest) -> Result<Snapshot, Failure> {
    let (lock, resource, open, named) = tokio::join!(
        biased;
        tx.prepare_cached(LOCK_KEY),
        tx.prepare_cached(RESOURCE_FOR_UPDATE),
        tx.prepare_cached(OPEN_OPERATIONS),
        tx.prepare_cached(rows::GET_OPERATION),
    );
    let (lock, resource, open, named) = (lock?, resource?, open?, named?);
    let named_operation = async {
        match &req.operation {
            Some((subscription, id)) => {
                let subscription = subscription.to_ascii_lowercase();
                tx.query_opt(&named, &[&subscription, &id.as_str(), &req.now.as_millis()]).await
            }
            None => Ok(None),
        }
    };
    // Sent together (a `biased` `join!` polls in order; each sends on its first poll),
    // run in order: the lock first, then the reads see what the previous holder committed.
    // After an error the server refuses the rest, so the first error in order is the cause.
    let key = key.as_str();
    let by_key: [&(dyn ToSql + Sync); 1] = [&key];
    let (locked, resource, open, named) = tokio::join!(
        biased;
        tx.execute(&lock, &by_key),
        tx.query_opt(&resource, &by_key),
        tx.query(&open, &by_key),
        named_operation,
    );
    let (_, resource, open, named) = (locked?, resource?, open?, named?);
    let resource = resource.map(|row| rows::read_resource_row(&row)?.into_record()).transpose()?;
    let mut operations = open.iter().map(rows::read_operation).collect::<Result<Vec<Operation>, _>>()?;
    if let (Some((subscription, id)), Some(row)) = (&req.operation, named) {
        let subscription = subscription.to_ascii_lowercase();
        let loaded = operations.iter().any(|op| &op.id == id && op.subscription == subscription);
        if !loaded {
            operations.push(rows::read_operation(&row)?);
        }
    }
    Ok(Snapshot { resource, operations, notifications: Vec::new() })
}

/// Operations to insert or update, as the parallel arrays `unnest` takes.
#[derive(Default)]
struct OperationRows {
    subscription: Vec<String>,
    id: Vec<String>,
    resource_key: Vec<String>,
    status: Vec<String>,
    terminal: Vec<bool>,
    body: Vec<String>,
}

impl OperationRows {
    fn push(&mut self, op: &Operation) -> Result<(), StoreError> {
        let body = serde_json::to_string(op)
            .map_err(|e| StoreError::Internal(format!("cannot encode operation {}: {e}", op.id)))?;
        self.subscription.push(op.subscription.to_ascii_lowercase());
        self.id.push(op.id.as_str().to_string());
        self.resource_key.push(normalize_key(&op.resource_key).as_str().to_string());
        self.status.push(op.status.as_str().to_string());
        self.terminal.push(op.is_terminal());
        self.body.push(body);
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.id.is_empty()
    }
}

/// Writes what differs between `before` and `after`, all statements sent at once. Returns
/// whether anything was written.
async fn write_diff(
    tx: &Transaction<'_>,
    key: &ResourceKey,
    before: &Snapshot,
    after: &Snapshot,
    now: Timestamp,
    operation_ttl: Duration,
) -> Result<bool, Failure> {
    let resource = match (before.resource.as_ref(), after.resource.as_ref()) {
        (Some(_), None) => Some((DELETE_RESOURCE, None)),
        (None, Some(rec)) => Some((INSERT_RESOURCE, Some(ResourceColumns::of(rec, key)?))),
        (Some(old), Some(rec)) if old != rec => Some((UPDATE_RESOURCE, Some(ResourceColumns::of(rec, key)?))),
        _ => None,
    };
    let mut inserted = OperationRows::default();
    let mut updated = OperationRows::default();
    for op in &after.operations {
        let old = before.operations.iter().find(|old| old.id == op.id && old.subscription == op.subscription);
        match old {
            Some(old) if old == op => {}
            Some(_) => updated.push(op)?,
            None => inserted.push(op)?,
        }
    }
    let notifications = &after.notifications;
    if resource.is_none() && inserted.is_empty() && updated.is_empty() && notifications.is_empty() {
        return Ok(false);
    }
    let expires_at = now.add(operation_ttl).as_millis();

    // Prepared first (answered from the connection's cache after the first use), so that the
    // writes below are sent in the order written: a `biased` `join!` polls its branches in
    // order, and each sends its statement on its first poll.
    let (resource_stmt, insert_stmt, update_stmt, notify_stmt) = tokio::join!(
        biased;
        prepare_if(tx, resource.as_ref().map(|(sql, _)| *sql)),
        prepare_if(tx, (!inserted.is_empty()).then_some(INSERT_OPERATIONS)),
        prepare_if(tx, (!updated.is_empty()).then_some(UPDATE_OPERATIONS)),
        prepare_if(tx, (!notifications.is_empty()).then_some(INSERT_NOTIFICATIONS)),
    );
    let (resource_stmt, insert_stmt, update_stmt, notify_stmt) =
        (resource_stmt?, insert_stmt?, update_stmt?, notify_stmt?);

    let write_resource = async {
        let (Some(stmt), Some((_, columns))) = (&resource_stmt, &resource) else {
            return Ok(0);
        };
        let key = key.as_str();
        match columns {
            None => tx.execute(stmt, &[&key]).await,
            Some(c) => {
                let params: [&(dyn ToSql + Sync); 11] = [
                    &key,
                    &c.subscription,
                    &c.resource_group,
                    &c.type_key,
                    &c.next_due,
                    &c.intent,
                    &c.lease_owner,
                    &c.lease_until,
                    &c.lease_epoch,
                    &c.generation,
                    &c.body,
                ];
                tx.execute(stmt, &params).await
            }
        }
    };
    let subscription: Vec<String> = notifications.iter().map(|n| n.subscription.to_ascii_lowercase()).collect();
    let operation_id: Vec<&str> = notifications.iter().map(|n| n.operation_id.as_str()).collect();
    let uri: Vec<&str> = notifications.iter().map(|n| n.uri.as_str()).collect();
    let write_notifications = async {
        let Some(stmt) = &notify_stmt else {
            return Ok(0);
        };
        tx.execute(stmt, &[&subscription, &operation_id, &uri, &now.as_millis()]).await
    };
    // The server runs them in this order and refuses the rest after an error, so the first
    // error in this order is the cause (`try_join!` could report a refusal instead).
    let (resource, inserted, updated, notified) = tokio::join!(
        biased;
        write_resource,
        write_operations(tx, insert_stmt.as_ref(), &inserted, expires_at),
        write_operations(tx, update_stmt.as_ref(), &updated, expires_at),
        write_notifications,
    );
    resource?;
    inserted?;
    updated?;
    notified?;
    Ok(true)
}

async fn prepare_if(tx: &Transaction<'_>, sql: Option<&str>) -> Result<Option<Statement>, tokio_postgres::Error> {
    match sql {
        Some(sql) => tx.prepare_cached(sql).await.map(Some),
        None => Ok(None),
    }
}

async fn write_operations(
    tx: &Transaction<'_>,
    stmt: Option<&Statement>,
    ops: &OperationRows,
    expires_at: i64,
) -> Result<u64, tokio_postgres::Error> {
    let Some(stmt) = stmt else {
        return Ok(0);
    };
    let params: [&(dyn ToSql + Sync); 7] =
        [&ops.subscription, &ops.id, &ops.resource_key, &ops.status, &ops.terminal, &ops.body, &expires_at];
    tx.execute(stmt, &params).await
}

/// A broken connection during COMMIT leaves the outcome unknown: never retried.
async fn commit(tx: Transaction<'_>) -> Result<(), Failure> {
    tx.commit().await.map_err(|e| match Failure::from(e) {
        Failure::Retry { error, broken: true } => Failure::Fail(StoreError::Unavailable(format!(
            "the connection failed during COMMIT, so whether it happened is unknown ({})",
            message(&error)
        ))),
        other => other,
    })
}

fn message(e: &StoreError) -> String {
    match e {
        StoreError::Unavailable(m) | StoreError::Internal(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Due rows of one lane that `owner` may take, earliest first; rows another transaction
/// holds (a change, another replica's claim) are skipped, not waited for.
const CLAIMABLE: &str = concat!(
    "SELECT ",
    resource_columns!(),
    " FROM resources
     WHERE intent = $1 AND next_due IS NOT NULL AND next_due <= $2
       AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until < $2
            OR (lease_owner = $3 AND intent))
     ORDER BY next_due, seq LIMIT $4
     FOR UPDATE SKIP LOCKED"
);

const TAKE_LEASES: &str =
    "UPDATE resources r SET lease_owner = $1, lease_until = $2, lease_epoch = u.epoch, intent = FALSE
     FROM unnest($3::TEXT[], $4::BIGINT[]) AS u(key, epoch)
     WHERE r.key = u.key";

pub(super) async fn claim(client: &mut Object, req: Arc<ClaimRequest>) -> Result<Vec<ResourceRecord>, Failure> {
    let room = req.intent_limit.saturating_add(req.followup_limit);
    if room == 0 {
        return Ok(Vec::new());
    }
    let now = req.now.as_millis();
    let tx = client.transaction().await?;
    let (claimable, take) = tokio::join!(biased; tx.prepare_cached(CLAIMABLE), tx.prepare_cached(TAKE_LEASES));
    let (claimable, take) = (claimable?, take?);
    // Each lane may end up with the whole room when the other is empty; the follow-up lane
    // never gets more than the intent lane leaves, so fewer rows are locked for nothing.
    let intent = tx.query(&claimable, &[&true, &now, &req.owner, &sql_limit(room)]).await?;
    let followup_room = room - intent.len().min(req.intent_limit);
    let followup = if followup_room == 0 {
        Vec::new()
    } else {
        tx.query(&claimable, &[&false, &now, &req.owner, &sql_limit(followup_room)]).await?
    };
    let (from_intent, from_followup) = shares(req.intent_limit, req.followup_limit, intent.len(), followup.len());
    let until = req.now.add(req.lease_for);
    let mut keys = Vec::with_capacity(from_intent + from_followup);
    let mut epochs = Vec::with_capacity(from_intent + from_followup);
    let mut claimed = Vec::with_capacity(from_intent + from_followup);
    for row in intent.iter().take(from_intent).chain(followup.iter().take(from_followup)) {
        let row = rows::read_resource_row(row)?;
        let held =
            row.lease_owner.as_deref() == Some(req.owner.as_str()) && row.lease_until.is_some_and(|until| until >= now);
        let epoch = if held { row.lease_epoch } else { row.lease_epoch.saturating_add(1) };
        let key = row.key.clone();
        let mut rec = row.into_record().inspect_err(|e| {
            tracing::error!(%key, error = %e, "cannot claim a corrupt resource row");
        })?;
        rec.lease =
            Some(Lease { owner: req.owner.clone(), until, epoch: crate::columns::from_i64(epoch, "lease epoch")? });
        rec.schedule.intent = false;
        keys.push(key);
        epochs.push(epoch);
        claimed.push(rec);
    }
    if claimed.is_empty() {
        // Nothing written: dropping the transaction rolls it back.
        return Ok(claimed);
    }
    tx.execute(&take, &[&req.owner, &until.as_millis(), &keys, &epochs]).await?;
    commit(tx).await?;
    Ok(claimed)
}

// Single statements run in their own implicit transaction. A retry after a lost connection
// may repeat one that did commit; each is harmless to repeat (renewing, releasing, sweeping,
// finishing, abandoning are idempotent; a repeated reschedule counts one attempt too many).

async fn execute(client: &mut Object, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, Failure> {
    let stmt = client.prepare_cached(sql).await?;
    Ok(client.execute(&stmt, params).await?)
}

pub(super) async fn renew_leases(
    client: &mut Object,
    owner: String,
    keys: Vec<String>,
    until: Timestamp,
) -> Result<u64, Failure> {
    execute(
        client,
        "UPDATE resources SET lease_until = $2 WHERE lease_owner = $1 AND key = ANY($3)",
        &[&owner, &until.as_millis(), &keys],
    )
    .await
}

/// The epoch stays: the next claim, by anyone, increments it past the released fences.
pub(super) async fn release_leases(client: &mut Object, owner: String) -> Result<u64, Failure> {
    execute(client, "UPDATE resources SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1", &[&owner])
        .await
}

pub(super) async fn sweep_operations(client: &mut Object, now: Timestamp) -> Result<u64, Failure> {
    execute(client, "DELETE FROM operations WHERE terminal AND expires_at <= $1", &[&now.as_millis()]).await
}

/// Due rows, each hidden for `hold` by the statement that picks it; rows another notifier
/// holds at the same moment are skipped.
const CLAIM_NOTIFICATIONS: &str = "WITH due AS (
         SELECT id, subscription, operation_id, uri, attempts, next_attempt_at, created_at FROM outbox
         WHERE state = 'pending' AND next_attempt_at <= $1
         ORDER BY next_attempt_at, id LIMIT $2
         FOR UPDATE SKIP LOCKED)
     UPDATE outbox o SET next_attempt_at = $3 FROM due WHERE o.id = due.id
     RETURNING due.id, due.subscription, due.operation_id, due.uri, due.attempts, due.next_attempt_at, due.created_at";

pub(super) async fn claim_notifications(
    client: &mut Object,
    now: Timestamp,
    limit: usize,
    hold: Duration,
) -> Result<Vec<Notification>, Failure> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    // A transaction of its own so that a row that cannot be decoded hides nothing.
    let tx = client.transaction().await?;
    let stmt = tx.prepare_cached(CLAIM_NOTIFICATIONS).await?;
    let rows = tx.query(&stmt, &[&now.as_millis(), &sql_limit(limit), &now.add(hold).as_millis()]).await?;
    let mut due = rows.iter().map(rows::read_notification).collect::<Result<Vec<_>, _>>()?;
    if !due.is_empty() {
        commit(tx).await?;
    }
    // RETURNING has no order of its own.
    due.sort_by_key(|n| (n.next_attempt_at, n.id));
    Ok(due)
}

// The notification updates are idempotent: an unknown or already finished id is no error,
// since a notifier retrying after a lost answer must not fail.

pub(super) async fn finish_notification(client: &mut Object, id: i64) -> Result<(), Failure> {
    execute(client, "DELETE FROM outbox WHERE id = $1", &[&id]).await.map(drop)
}

pub(super) async fn reschedule_notification(
    client: &mut Object,
    id: i64,
    next_attempt_at: Timestamp,
    last_error: String,
) -> Result<(), Failure> {
    execute(
        client,
        "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3
         WHERE id = $1 AND state = 'pending'",
        &[&id, &next_attempt_at.as_millis(), &last_error],
    )
    .await
    .map(drop)
}

pub(super) async fn abandon_notification(client: &mut Object, id: i64, last_error: String) -> Result<(), Failure> {
    execute(client, "UPDATE outbox SET state = 'dead', last_error = $2 WHERE id = $1", &[&id, &last_error])
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use slipway_domain::admission::Rejection;
    use slipway_domain::resource::Snapshot;

    use super::{Failure, Pending, shares};
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
        assert!(matches!(err, Failure::Fail(StoreError::Unavailable(_))), "{err:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn refusals_and_panics_are_answers() {
        let mut refusing = Pending::new(Box::new(|_: &mut Snapshot| Err(Rejection::NotFound)));
        let err = refusing.decide(&Snapshot::default()).expect_err("refused");
        assert!(matches!(err, Failure::Fail(StoreError::Rejected(Rejection::NotFound))), "{err:?}");
        let mut panicking = Pending::new(Box::new(|_: &mut Snapshot| panic!("bug in a change")));
        let err = panicking.decide(&Snapshot::default()).expect_err("panicked");
        assert!(matches!(&err, Failure::Fail(StoreError::Internal(m)) if m.contains("bug in a change")), "{err:?}");
    }

    #[test]
    fn lanes_share_unused_room() {
        assert_eq!(shares(2, 1, 5, 5), (2, 1), "both lanes full: each gets its own limit");
        assert_eq!(shares(2, 2, 1, 5), (1, 3), "intent leaves room to follow-up");
        assert_eq!(shares(1, 2, 5, 0), (3, 0), "follow-up leaves room to intent");
        assert_eq!(shares(2, 2, 1, 1), (1, 1));
        assert_eq!(shares(0, 0, 3, 3), (0, 0));
        assert_eq!(shares(usize::MAX, 1, 2, 2), (2, 2));
    }

    /// Capping the follow-up query at what the intent lane leaves never changes the outcome.
    #[test]
    fn capping_the_followup_query_changes_nothing() {
        for il in 0..5 {
            for fl in 0..5 {
                let room = il + fl;
                for ir in 0..=room {
                    for fr in 0..8 {
                        let capped = fr.min(room - ir.min(il));
                        assert_eq!(shares(il, fl, ir, capped), shares(il, fl, ir, fr), "{il} {fl} {ir} {fr}");
                    }
                }
            }
        }
    }
}
