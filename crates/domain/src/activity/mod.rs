//! The activity log (docs/governance.md#the-activity-log): one entry per request that changed
//! something or was refused — who asked, through what client, what was asked, what was
//! answered, the operation it started, and for a spec change the properties it changed.
//!
//! An accepted change's entry is written by the store in the change's own transaction, so
//! the log holds an entry exactly when its change committed: the API hands the change an
//! unsettled entry and [`ActivityEntry::settle`] fills in what the transaction decided (the
//! answer's status, the operation started, the [`diff`] of the spec). A refused request's
//! entry is settled by the API from its answer and written after it.
//!
//! [`filter`] is the Activity Log's `$filter` grammar.

pub mod diff;
pub mod filter;

use crate::ids::{OperationId, SubscriptionId};
use crate::resource::Snapshot;
use crate::time::Timestamp;

pub use diff::{ChangeKind, MAX_CHANGES, PropertyChange, SEALED_MARKER};
pub use filter::{ActivityFilter, ActivityStatus, FilterError};

/// One request, as the activity log keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActivityEntry {
    pub time: Timestamp,
    /// The subscription the target lies in; none for the platform's own records (API tokens).
    pub subscription: Option<SubscriptionId>,
    /// The id the request named, in its casing: a resource, a group, a lock, an assignment…
    pub target: String,
    /// ARM's form: `Slipway.Example/virtualNetworks/write`, `…/restart/action`.
    pub operation_name: String,
    pub caller: ActivityCaller,
    pub request: RequestInfo,
    /// The answer's HTTP status: 0 until settled.
    pub status: u16,
    /// The error code and message of a refusal.
    pub error: Option<(String, String)>,
    /// The operation the request started (or, for a cancel, named).
    pub operation_id: Option<OperationId>,
    /// What the request changed in the spec, at most [`MAX_CHANGES`] paths.
    pub changes: Vec<PropertyChange>,
    /// More paths changed than `changes` holds.
    pub changes_truncated: bool,
}

/// Who asked: the verified principal, the issuer (tenant) that vouched for it, and its kind
/// in ARM's words (`User`, `Application`, …).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActivityCaller {
    pub name: String,
    pub issuer: String,
    pub kind: String,
}

/// How the request came: its method and path, the client (`User-Agent`) and its address,
/// and the ids that correlate it with the client's own records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub method: String,
    pub uri: String,
    pub user_agent: String,
    pub client_address: String,
    pub correlation_id: String,
    pub request_id: String,
    pub client_request_id: String,
}

impl ActivityEntry {
    /// The target's key: its id lowercased, as scopes and filters compare it.
    pub fn target_key(&self) -> String {
        self.target.to_ascii_lowercase()
    }

    /// The resource group the target lies in, as the request wrote it, if any.
    pub fn resource_group_as_written(&self) -> Option<&str> {
        let at = self.target_key().find("/resourcegroups/")? + "/resourcegroups/".len();
        self.target[at..].split('/').next().filter(|g| !g.is_empty())
    }

    /// The resource group the target lies in (lowercased), if any.
    pub fn resource_group(&self) -> Option<String> {
        self.resource_group_as_written().map(str::to_ascii_lowercase)
    }

    /// The Activity Log's status: `Accepted` when the request started an operation that
    /// runs on, `Succeeded` for any other success, `Failed` for a refusal.
    pub fn outcome(&self) -> ActivityStatus {
        match self.status {
            200..=299 if self.operation_id.is_some() => ActivityStatus::Accepted,
            200..=299 => ActivityStatus::Succeeded,
            _ => ActivityStatus::Failed,
        }
    }

    /// Settles an entry inside the transaction of the change it describes, which turned
    /// `before` into `after`: the status the API answers for it (`201` for a create, `202`
    /// for a request that started or changed an operation, `204` for a delete of nothing,
    /// else `200`), the operation it started (or the one it names, `named`), and the spec's
    /// changed properties.
    pub fn settle(mut self, before: &Snapshot, after: &Snapshot, named: Option<&OperationId>) -> ActivityEntry {
        use crate::operation::OperationRequest::{Create, Delete, Update};
        let method = self.request.method.as_str();
        let started = after.operations.iter().find(|op| !before.operations.iter().any(|old| old.id == op.id));
        // The same request again while its operation runs is answered with that operation.
        let serving = after.active_operation().filter(|op| match method {
            "PUT" => matches!(op.request, Create | Update),
            "PATCH" => op.request == Update,
            "DELETE" => op.request == Delete,
            _ => false,
        });
        let operation = started.or(serving);
        self.operation_id = operation.map(|op| op.id.clone()).or_else(|| named.cloned());
        let (old, new) = (before.resource.as_ref(), after.resource.as_ref());
        self.status = match method {
            "PUT" if old.is_none() && new.is_some() => 201,
            "PUT" if operation.is_some_and(|op| op.request == Create) => 201,
            "PUT" => 200,
            "DELETE" if old.is_none() => 204,
            _ if self.operation_id.is_some() => 202,
            _ => 200,
        };
        let (changes, truncated) = diff::spec_changes(old.map(|r| &r.spec), new.map(|r| &r.spec));
        self.changes = changes;
        self.changes_truncated = truncated;
        self
    }

    /// Settles the entry of a registry entry's write that committed (a lock, an assignment,
    /// a quota limit…): `201` when it created the entry, else `200`.
    pub fn settle_entry(mut self, created: bool) -> ActivityEntry {
        self.status = if created { 201 } else { 200 };
        self
    }
}

#[cfg(test)]
mod tests;
