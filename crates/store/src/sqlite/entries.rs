//! Registry entries ([`crate::entries`]) in SQLite: the reads the pool runs and the writes the
//! writer thread runs. A write reads the row and writes it in its own savepoint of the
//! writer's transaction, and the writer runs one request at a time: nothing can come between
//! the expectation check and the write.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, params};
use slipway_domain::activity::ActivityEntry;

use super::db_error;
use crate::StoreError;
use crate::entries::{
    Current, Entry, EntryKind, EntryRow, Expect, PutEntry, delete_activity, entry_columns, plan_delete, plan_put,
};

fn read_row(row: &Row<'_>) -> rusqlite::Result<EntryRow> {
    Ok(EntryRow {
        kind: row.get(0)?,
        id: row.get(1)?,
        partition: row.get(2)?,
        body: row.get(3)?,
        version: row.get(4)?,
        updated_at: row.get(5)?,
    })
}

pub(super) fn get(conn: &Connection, kind: EntryKind, id: &str) -> Result<Option<Entry>, StoreError> {
    let mut stmt = conn
        .prepare_cached(concat!("SELECT ", entry_columns!(), " FROM entries WHERE kind = ?1 AND id = ?2"))
        .map_err(db_error)?;
    let row = stmt.query_row(params![kind.tag(), id], read_row).optional().map_err(db_error)?;
    row.map(EntryRow::into_entry).transpose()
}

pub(super) fn list(conn: &Connection, kind: EntryKind, partition: Option<&str>) -> Result<Vec<Entry>, StoreError> {
    let rows: Vec<EntryRow> = match partition {
        Some(partition) => {
            let mut stmt = conn
                .prepare_cached(concat!(
                    "SELECT ",
                    entry_columns!(),
                    " FROM entries WHERE kind = ?1 AND partition = ?2 ORDER BY id"
                ))
                .map_err(db_error)?;
            stmt.query_map(params![kind.tag(), partition], read_row).and_then(Iterator::collect).map_err(db_error)?
        }
        None => {
            let mut stmt = conn
                .prepare_cached(concat!("SELECT ", entry_columns!(), " FROM entries WHERE kind = ?1 ORDER BY id"))
                .map_err(db_error)?;
            stmt.query_map(params![kind.tag()], read_row).and_then(Iterator::collect).map_err(db_error)?
        }
    };
    rows.into_iter().map(EntryRow::into_entry).collect()
}

fn current(conn: &Connection, kind: EntryKind, id: &str) -> Result<Option<Current>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT version, partition FROM entries WHERE kind = ?1 AND id = ?2").map_err(db_error)?;
    stmt.query_row(params![kind.tag(), id], |row| Ok(Current { version: row.get(0)?, partition: row.get(1)? }))
        .optional()
        .map_err(db_error)
}

pub(super) fn put(conn: &Connection, put: &PutEntry, retention: Duration) -> Result<Entry, StoreError> {
    let (kind, now) = (put.kind, put.now);
    let plan = plan_put(put, current(conn, kind, &put.id)?.as_ref(), retention)?;
    let sql = if plan.insert {
        "INSERT INTO entries (kind, id, partition, body, version, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
    } else {
        "UPDATE entries SET partition = ?3, body = ?4, version = ?5, updated_at = ?6 WHERE kind = ?1 AND id = ?2"
    };
    let e = &plan.entry;
    let mut stmt = conn.prepare_cached(sql).map_err(db_error)?;
    stmt.execute(params![kind.tag(), e.id, e.partition, e.body, plan.version, now.as_millis()]).map_err(db_error)?;
    super::writes::insert_activity(conn, plan.activity.as_slice())?;
    Ok(plan.entry)
}

pub(super) fn delete(
    conn: &Connection,
    kind: EntryKind,
    id: &str,
    expect: Expect,
    activity: Option<ActivityEntry>,
    retention: Duration,
) -> Result<bool, StoreError> {
    let removed = plan_delete(kind, id, expect, current(conn, kind, id)?.as_ref())?;
    if removed {
        let mut stmt = conn.prepare_cached("DELETE FROM entries WHERE kind = ?1 AND id = ?2").map_err(db_error)?;
        stmt.execute(params![kind.tag(), id]).map_err(db_error)?;
    }
    super::writes::insert_activity(conn, delete_activity(activity, removed, retention)?.as_slice())?;
    Ok(removed)
}
