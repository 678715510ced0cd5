//! Registry entries ([`crate::entries`]) in PostgreSQL. A write is one transaction: it reads
//! the row `FOR UPDATE`, so concurrent writes of one entry run one after the other and each
//! checks its expectation against the version the one before it committed; then it writes.
//! An entry that does not exist yet has no row to lock: the insert is `ON CONFLICT DO
//! NOTHING`, and one that finds the row inserted meanwhile has written nothing and runs
//! again (as a conflict), this time finding the row to check against.

use std::sync::Arc;
use std::time::Duration;

use slipway_domain::activity::ActivityEntry;

use deadpool_postgres::{GenericClient, Object, Transaction};
use tokio_postgres::Row;

use super::Failure;
use super::rows::column;
use super::writes::commit;
use crate::StoreError;
use crate::entries::{
    Current, Entry, EntryKind, EntryRow, Expect, PutEntry, delete_activity, entry_columns, plan_delete, plan_put,
};

const GET: &str = concat!("SELECT ", entry_columns!(), " FROM entries WHERE kind = $1 AND id = $2");
const LIST: &str = concat!("SELECT ", entry_columns!(), " FROM entries WHERE kind = $1 ORDER BY id");
const LIST_PARTITION: &str =
    concat!("SELECT ", entry_columns!(), " FROM entries WHERE kind = $1 AND partition = $2 ORDER BY id");
const CURRENT: &str = "SELECT version, partition FROM entries WHERE kind = $1 AND id = $2 FOR UPDATE";
const INSERT: &str = "INSERT INTO entries (kind, id, partition, body, version, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (kind, id) DO NOTHING";
const UPDATE: &str =
    "UPDATE entries SET partition = $3, body = $4, version = $5, updated_at = $6 WHERE kind = $1 AND id = $2";
const DELETE: &str = "DELETE FROM entries WHERE kind = $1 AND id = $2";

/// The (kind, partition)'s advisory lock, exclusively: a change reading that kind of entry
/// in that partition holds it shared from its read to its commit (`ChangeRequest::settings`).
const LOCK_PARTITION: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";

async fn lock_partition(tx: &Transaction<'_>, kind: EntryKind, partition: &str) -> Result<(), Failure> {
    let stmt = tx.prepare_cached(LOCK_PARTITION).await?;
    tx.execute(&stmt, &[&crate::settings_lock_key(kind, partition)]).await?;
    Ok(())
}

fn read_row(row: &Row) -> Result<Entry, StoreError> {
    let id: String = column(row, 1, "entry", "?")?;
    let get = |i| (row, i, id.as_str());
    EntryRow {
        kind: at(get(0))?,
        partition: at(get(2))?,
        body: at(get(3))?,
        version: at(get(4))?,
        updated_at: at(get(5))?,
        id: id.clone(),
    }
    .into_entry()
}

fn at<'a, T: tokio_postgres::types::FromSql<'a>>((row, i, id): (&'a Row, usize, &str)) -> Result<T, StoreError> {
    column(row, i, "entry", id)
}

pub(super) async fn get(client: &mut Object, kind: EntryKind, id: String) -> Result<Option<Entry>, Failure> {
    let stmt = client.prepare_cached(GET).await?;
    let row = client.query_opt(&stmt, &[&kind.tag(), &id]).await?;
    Ok(row.as_ref().map(read_row).transpose()?)
}

pub(super) async fn list(
    client: &mut Object,
    kind: EntryKind,
    partition: Option<String>,
) -> Result<Vec<Entry>, Failure> {
    let rows = match &partition {
        Some(partition) => {
            let stmt = client.prepare_cached(LIST_PARTITION).await?;
            client.query(&stmt, &[&kind.tag(), partition]).await?
        }
        None => {
            let stmt = client.prepare_cached(LIST).await?;
            client.query(&stmt, &[&kind.tag()]).await?
        }
    };
    Ok(rows.iter().map(read_row).collect::<Result<Vec<_>, _>>()?)
}

/// The row as stored, locked until this transaction ends.
async fn current(client: &Transaction<'_>, kind: EntryKind, id: &str) -> Result<Option<Current>, Failure> {
    let stmt = client.prepare_cached(CURRENT).await?;
    let row = client.query_opt(&stmt, &[&kind.tag(), &id]).await?;
    let read = |row: &Row| -> Result<Current, StoreError> {
        Ok(Current { version: column(row, 0, "entry", id)?, partition: column(row, 1, "entry", id)? })
    };
    Ok(row.as_ref().map(read).transpose()?)
}

pub(super) async fn put(client: &mut Object, put: Arc<PutEntry>, retention: Duration) -> Result<Entry, Failure> {
    let (kind, id, now) = (put.kind, &put.id, put.now);
    let tx = client.transaction().await?;
    let stored = current(&tx, kind, id).await?;
    lock_partition(&tx, kind, stored.as_ref().map_or(put.partition.as_str(), |c| c.partition.as_str())).await?;
    let plan = plan_put(&put, stored.as_ref(), retention)?;
    let (sql, e) = (if plan.insert { INSERT } else { UPDATE }, &plan.entry);
    let stmt = tx.prepare_cached(sql).await?;
    let written =
        tx.execute(&stmt, &[&kind.tag(), &e.id, &e.partition, &e.body, &plan.version, &now.as_millis()]).await?;
    if written == 0 {
        // Inserted by another transaction since this one found no row: nothing was written
        // (dropping the transaction rolls it back); the next attempt checks that row.
        return Err(Failure::Retry {
            error: StoreError::Unavailable(format!("{kind} entry {id:?} kept changing under concurrent writes")),
            broken: false,
        });
    }
    super::activity::insert(&tx, &plan.activity.into_iter().collect()).await?;
    commit(tx).await?;
    Ok(plan.entry)
}

pub(super) async fn delete(
    client: &mut Object,
    kind: EntryKind,
    id: String,
    expect: Expect,
    activity: Arc<Option<ActivityEntry>>,
    retention: Duration,
) -> Result<bool, Failure> {
    let tx = client.transaction().await?;
    let stored = current(&tx, kind, &id).await?;
    if let Some(c) = &stored {
        lock_partition(&tx, kind, &c.partition).await?;
    }
    let removed = plan_delete(kind, &id, expect, stored.as_ref())?;
    if removed {
        let stmt = tx.prepare_cached(DELETE).await?;
        tx.execute(&stmt, &[&kind.tag(), &id]).await?;
    }
    let row = delete_activity(Option::clone(&activity), removed, retention)?;
    super::activity::insert(&tx, &row.into_iter().collect()).await?;
    commit(tx).await?;
    Ok(removed)
}
