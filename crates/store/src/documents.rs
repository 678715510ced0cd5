//! The store's own document types: the JSON a `resources` row keeps as its `body`
//! ([`ResourceDocument`]), the JSON an `operations` row keeps as its `body`
//! ([`OperationDocument`]), an `events` row's (`event::EventDocument`) and an `activity` row's
//! (`activity::ActivityDocument`), with the nested
//! types they need.
//!
//! The domain's types are not the format. Every JSON key is spelled out here with an explicit
//! `#[serde(rename = …)]`, every default and every omitted-when-empty rule is written on the
//! field it applies to, ids are plain strings, timestamps the same integers (milliseconds since
//! the Unix epoch) and enums the same strings. Conversions both ways are written by hand with
//! exhaustive destructuring and struct literals, so a field added to a domain type is a
//! compile error here — a decision about how it is stored — and never a silent change of what
//! is on disk. The format is pinned by the golden tests in `documents/tests/`.
//!
//! What the conversions decide, beyond field-for-field copies:
//!
//! * **A resource body leaves the lease and the schedule out.** They live in the row's columns
//!   (`columns::ResourceColumns::of`), which claims and renewals change without rewriting the
//!   body. Version 1 still writes `"schedule":{"nextDue":null,"intent":false}` (as every body
//!   ever written has it) and never a `"lease"`; on read both are parsed (a malformed one is a
//!   corrupt row, as before) and dropped, and `columns::ResourceRow::into_record` takes them
//!   from the columns. The body's `generation` is written too and overridden by the column.
//! * **Operation ids must be canonical**: a lowercase UUID, as `OperationId::parse` makes them
//!   (the only way one is created). A body holding anything else is a corrupt row rather than
//!   an id read differently from the way it was written.
//!
//! # Versions
//!
//! Each document has a format version, carried by a top-level `"v"` field that is **absent
//! for version 1**. Rows written before versions existed have no marker and are version 1;
//! this code writes version 1 without a marker too, so the bytes on disk are exactly what they
//! were (and an older binary still reads every row this one writes). A marker costs bytes on
//! every row and tells nothing while there is only one version, so version 1 goes without
//! one; absence has to mean 1 anyway for the rows already stored.
//!
//! A reader refuses a version it does not know — a row written by a newer Slipway — with an
//! error naming the version, rather than misreading it. The current documents are parsed in
//! one pass and the version checked afterwards; only when the parse fails is the `"v"` field
//! probed on its own, so that a newer document of another shape is reported as such.
//!
//! When a version 2 is needed: keep these types, renamed `…V1`, as the read path of old rows;
//! add the new ones with `"v": 2` always written (`CURRENT = 2`); decode by probing `"v"` first
//! (absent means 1) and parsing the matching type — a plain dispatch on the number, no
//! `#[serde(untagged)]` guessing — and convert either into the domain type. Rows are rewritten
//! in the new version as they change, so no migration is needed; but every binary that may
//! read the database (all replicas, and any a rollback would start) must read version 2
//! before one writes it — ship the reader first.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use slipway_domain::Operation;
use slipway_domain::ids::OperationId;
use slipway_domain::resource::ResourceRecord;

mod activity;
mod approval;
mod context;
mod event;
mod job;
mod operation;
mod resource;
#[cfg(test)]
mod tests;
mod whatif;

pub(crate) use operation::OperationDocument;
pub(crate) use resource::ResourceDocument;

/// The format version this code writes, and the only one it reads.
const CURRENT: u32 = 1;

/// Why a stored document cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct DocumentError(String);

/// The body of a `resources` row for `rec` (its lease and schedule left out).
pub(crate) fn encode_resource(rec: &ResourceRecord) -> serde_json::Result<String> {
    serde_json::to_string(&ResourceDocument::from(rec))
}

/// The record a `resources` body holds, with no lease, an empty schedule and the body's
/// generation: the caller takes those from the row's columns.
pub(crate) fn decode_resource(body: &str) -> Result<ResourceRecord, DocumentError> {
    ResourceRecord::try_from(parse::<ResourceDocument>(body)?)
}

/// The body of an `operations` row for `op`.
pub(crate) fn encode_operation(op: &Operation) -> serde_json::Result<String> {
    serde_json::to_string(&OperationDocument::from(op))
}

/// The operation an `operations` body holds.
pub(crate) fn decode_operation(body: &str) -> Result<Operation, DocumentError> {
    Operation::try_from(parse::<OperationDocument>(body)?)
}

/// The body of an `events` row for `event`.
pub(crate) fn encode_event(event: &slipway_domain::event::Event) -> serde_json::Result<String> {
    serde_json::to_string(&event::EventDocument::from(event))
}

/// The event an `events` row holds: its body and its columns.
pub(crate) fn decode_event(
    body: &str,
    columns: event::EventColumns<'_>,
) -> Result<slipway_domain::event::Event, DocumentError> {
    parse::<event::EventDocument>(body)?.into_event(columns)
}

pub(crate) use event::EventColumns;

/// The body of an `activity` row for `entry`.
pub(crate) fn encode_activity(entry: &slipway_domain::activity::ActivityEntry) -> serde_json::Result<String> {
    serde_json::to_string(&activity::ActivityDocument::from(entry))
}

/// The entry an `activity` body holds.
pub(crate) fn decode_activity(body: &str) -> Result<slipway_domain::activity::ActivityEntry, DocumentError> {
    slipway_domain::activity::ActivityEntry::try_from(parse::<activity::ActivityDocument>(body)?)
}

/// Parses a current document; when that fails, says so in terms of its version if it names
/// one this code does not read.
fn parse<T: DeserializeOwned>(body: &str) -> Result<T, DocumentError> {
    serde_json::from_str(body).map_err(|e| {
        #[derive(Deserialize)]
        struct Probe {
            #[serde(rename = "v", default = "version_1")]
            version: u32,
        }
        match serde_json::from_str::<Probe>(body) {
            Ok(Probe { version }) if version != CURRENT => unsupported(version),
            _ => DocumentError(e.to_string()),
        }
    })
}

/// The version of a document as read: absent means 1.
fn version_1() -> u32 {
    1
}

/// Version 1 is written without a marker.
fn is_version_1(v: &u32) -> bool {
    *v == 1
}

fn check_version(version: u32) -> Result<(), DocumentError> {
    if version == CURRENT { Ok(()) } else { Err(unsupported(version)) }
}

fn unsupported(version: u32) -> DocumentError {
    DocumentError(format!(
        "document version {version} is not one this Slipway reads (it reads version {CURRENT}); \
         was it written by a newer Slipway?"
    ))
}

/// An operation id as stored: its canonical (lowercase UUID) text.
fn operation_id(text: String, what: &str) -> Result<OperationId, DocumentError> {
    match OperationId::parse(&text) {
        Some(id) if id.as_str() == text => Ok(id),
        _ => Err(DocumentError(format!("{what} {text:?} is not an operation id (a lowercase UUID)"))),
    }
}

fn operation_id_opt(text: Option<String>, what: &str) -> Result<Option<OperationId>, DocumentError> {
    text.map(|t| operation_id(t, what)).transpose()
}
