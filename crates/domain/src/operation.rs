//! Operation documents: one per accepted mutating request (docs/arm-contract.md#operations) —
//! a create, update or delete, a POST action with its call, a what-if, or a drift check on
//! request ([`OperationRequest`]).

use crate::ids::{OperationId, ResourceKey, SubscriptionId};
use crate::state::ProvisioningState;
use crate::time::Timestamp;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperationRequest {
    Create,
    Update,
    Delete,
    /// A POST action (`Operation::action` says which).
    Action,
    /// `POST {id}/whatIf`: a proposed change run in check mode (`Operation::what_if`).
    WhatIf,
    /// `POST {id}/checkDrift`: the resource's own spec run in check mode now; its result is
    /// the resource's drift (`Operation::what_if` holds the spec twice).
    CheckDrift,
}

impl OperationRequest {
    pub const ALL: [OperationRequest; 6] = [
        OperationRequest::Create,
        OperationRequest::Update,
        OperationRequest::Delete,
        OperationRequest::Action,
        OperationRequest::WhatIf,
        OperationRequest::CheckDrift,
    ];

    /// The name the API shows (an event's `operation.request`).
    pub fn wire_name(self) -> &'static str {
        match self {
            OperationRequest::Create => "Create",
            OperationRequest::Update => "Update",
            OperationRequest::Delete => "Delete",
            OperationRequest::Action => "Action",
            OperationRequest::WhatIf => "WhatIf",
            OperationRequest::CheckDrift => "CheckDrift",
        }
    }

    /// The word logs, errors and metrics use.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationRequest::Create => "create",
            OperationRequest::Update => "update",
            OperationRequest::Delete => "delete",
            OperationRequest::Action => "action",
            OperationRequest::WhatIf => "whatIf",
            OperationRequest::CheckDrift => "checkDrift",
        }
    }

    /// Whether the operation's status is the resource's `provisioningState` while it runs:
    /// creates, updates and deletes; an action or a what-if leaves the state alone.
    pub fn moves_resource(self) -> bool {
        matches!(self, OperationRequest::Create | OperationRequest::Update | OperationRequest::Delete)
    }
}

/// Why an update runs its resource's spec again though the spec did not change
/// (docs/arm-contract.md#retry-now). Its jobs carry it too, so the job history says why they
/// ran after the operation itself has expired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rerun {
    /// `POST {id}/retry`: a client asked for the failed spec to be run again now.
    Retry,
    /// A drift check found the resource changed behind Slipway's back, and its type puts
    /// drift right (`drift_remediation = "auto"`).
    Drift,
}

impl Rerun {
    pub const ALL: [Rerun; 2] = [Rerun::Retry, Rerun::Drift];

    pub fn as_str(self) -> &'static str {
        match self {
            Rerun::Retry => "retry",
            Rerun::Drift => "drift",
        }
    }
}

/// What a POST action asked for: the action and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionCall {
    pub name: String,
    /// The request body (`{}` when none was sent), handed to the action's job.
    pub parameters: serde_json::Value,
}

/// The ARM error body (`CloudError.error`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudError {
    pub code: String,
    pub message: String,
    pub target: Option<String>,
    pub details: Vec<CloudError>,
}

impl CloudError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        CloudError { code: code.into(), message: message.into(), target: None, details: Vec::new() }
    }

    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }
}

/// Error codes Slipway puts on operations.
pub mod codes {
    pub const CANCELED: &str = "Canceled";
    pub const PROVISIONING_FAILED: &str = "ProvisioningFailed";
    pub const DEPROVISIONING_FAILED: &str = "DeprovisioningFailed";
    pub const OPERATION_TIMED_OUT: &str = "OperationTimedOut";
    pub const ACTION_FAILED: &str = "ActionFailed";
    /// The operation's preflight checks failed; `details` holds one entry per failed check.
    pub const PREFLIGHT_FAILED: &str = "PreflightValidationFailed";
    /// One failed preflight check (its name is the `target`).
    pub const PREFLIGHT_CHECK_FAILED: &str = "PreflightCheckFailed";
    /// A what-if's check-mode job failed.
    pub const WHAT_IF_FAILED: &str = "WhatIfFailed";
    /// The backend cannot run the type's job in check mode (the message says what to change).
    pub const WHAT_IF_NOT_SUPPORTED: &str = "WhatIfNotSupported";
    /// An approver denied the request (`approval`).
    pub const APPROVAL_DENIED: &str = "ApprovalDenied";
    /// Nobody approved the request in time, and its policy ends such a request `Failed`.
    pub const APPROVAL_TIMED_OUT: &str = "ApprovalTimedOut";
}

/// A child's delete, started by its parent's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildOperation {
    pub resource_id: String,
    pub operation_id: OperationId,
}

/// Who asked: ARM identity headers, kept for visibility checks and correlation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Initiator {
    pub tenant_id: String,
    pub client_id: String,
    pub client_request_id: String,
    pub correlation_request_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    pub id: OperationId,
    /// An operation is visible only under its subscription.
    pub subscription: SubscriptionId,
    pub resource_key: ResourceKey,
    /// The resource id in its original casing.
    pub resource_id: String,
    pub request: OperationRequest,
    pub status: ProvisioningState,
    pub error: Option<CloudError>,
    pub start_time: Timestamp,
    /// Last write; equals the end time once terminal.
    pub last_transition_time: Timestamp,
    pub percent_complete: Option<u8>,
    /// While its job runs: the task it runs now (`progress`).
    pub current_task: Option<String>,
    /// While the operation's job cannot start yet: the resource it waits for (a parent that
    /// is not `Succeeded`).
    pub waiting_on: Option<String>,
    /// A cascading delete's children and their own delete operations.
    pub child_operations: Vec<ChildOperation>,
    /// A POST action's name and body.
    pub action: Option<ActionCall>,
    /// An update that runs the unchanged spec again, and why.
    pub rerun: Option<Rerun>,
    /// A what-if's proposal and, once its check job ended, the automation's prediction.
    pub what_if: Option<crate::whatif::WhatIf>,
    /// A request an admission policy holds for approval: who must decide, what it would
    /// change, and the decision (`approval`).
    pub approval: Option<Box<crate::approval::Approval>>,
    /// What a client should know about how the operation ended (a forced delete).
    pub note: Option<String>,
    pub notification_uri: Option<String>,
    pub initiator: Initiator,
    /// The api-version of the request, echoed on status and result URLs.
    pub api_version: String,
}

impl Operation {
    /// Create and update operations provision the spec; their jobs wait for parents and
    /// references and run the type's preflight checks first.
    pub fn provisions(&self) -> bool {
        matches!(self.request, OperationRequest::Create | OperationRequest::Update)
    }

    pub fn end_time(&self) -> Option<Timestamp> {
        self.status.is_terminal().then_some(self.last_transition_time)
    }

    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }

    /// ARO's `NeedToPatchOperation`, comparing the error by value (ARO compares pointers and
    /// so rewrites on every reconcile that computes a failure).
    pub fn needs_write(&self, status: ProvisioningState, error: Option<&CloudError>) -> bool {
        let error_changed = error.is_some() && self.error.as_ref() != error;
        self.status != status || error_changed
    }

    /// Moves to `status`; `error` replaces the stored one when given (it is never cleared by
    /// a later `None`). Returns whether anything changed. A terminal operation never moves.
    pub fn transition(&mut self, status: ProvisioningState, error: Option<CloudError>, now: Timestamp) -> bool {
        if self.is_terminal() || !self.needs_write(status, error.as_ref()) {
            return false;
        }
        if status.is_terminal()
            && self.status == ProvisioningState::WaitingForApproval
            && let Some(approval) = self.approval.as_mut()
        {
            // Ended before anyone decided: superseded, canceled, past its operation's life.
            approval.ended.get_or_insert(crate::approval::Unapproved::Canceled);
        }
        self.status = status;
        if error.is_some() {
            self.error = error;
        }
        if status.is_terminal() {
            self.waiting_on = None;
            self.current_task = None;
            if status == ProvisioningState::Succeeded && self.percent_complete.is_some() {
                self.percent_complete = Some(100);
            }
        }
        self.last_transition_time = now;
        true
    }
}

/// Rejects a status/result request whose identity does not match the initiator's (ARO rule:
/// same subscription always; tenant and client only when the operation recorded them).
pub fn is_visible_to(op: &Operation, subscription: &SubscriptionId, tenant_id: &str, client_id: &str) -> bool {
    op.subscription == *subscription
        && (op.initiator.tenant_id.is_empty() || op.initiator.tenant_id.eq_ignore_ascii_case(tenant_id))
        && (op.initiator.client_id.is_empty() || op.initiator.client_id.eq_ignore_ascii_case(client_id))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn op(status: ProvisioningState) -> Operation {
        Operation {
            id: OperationId::parse("00000000-0000-0000-0000-000000000001").unwrap(),
            subscription: "sub".into(),
            resource_key: ResourceKey::new("/subscriptions/sub/resourcegroups/rg/providers/ns/t/n"),
            resource_id: "/subscriptions/sub/resourceGroups/rg/providers/ns/t/n".into(),
            request: OperationRequest::Create,
            status,
            error: None,
            start_time: Timestamp(0),
            last_transition_time: Timestamp(0),
            percent_complete: None,
            current_task: None,
            waiting_on: None,
            child_operations: Vec::new(),
            action: None,
            rerun: None,
            what_if: None,
            approval: None,
            note: None,
            notification_uri: None,
            initiator: Initiator::default(),
            api_version: "2025-01-01".into(),
        }
    }

    #[test]
    fn needs_write_compares_by_value() {
        use ProvisioningState::*;
        let o = op(Provisioning);
        assert!(!o.needs_write(Provisioning, None));
        assert!(o.needs_write(Succeeded, None));
        let e = CloudError::new("X", "boom");
        assert!(o.needs_write(Provisioning, Some(&e)));
        let mut failed = op(Failed);
        failed.error = Some(e.clone());
        assert!(!failed.needs_write(Failed, Some(&e.clone())), "same error by value: no write");
        assert!(!failed.needs_write(Failed, None), "a None never clears");
    }

    #[test]
    fn transition_stamps_time_and_freezes_terminal() {
        use ProvisioningState::*;
        let mut o = op(Accepted);
        assert!(!o.transition(Accepted, None, Timestamp(5)));
        assert_eq!(o.last_transition_time, Timestamp(0));
        assert!(o.transition(Provisioning, None, Timestamp(5)));
        assert_eq!(o.last_transition_time, Timestamp(5));
        assert_eq!(o.end_time(), None);
        assert!(o.transition(Failed, Some(CloudError::new("X", "m")), Timestamp(9)));
        assert_eq!(o.end_time(), Some(Timestamp(9)));
        assert!(!o.transition(Succeeded, None, Timestamp(10)), "terminal operations never move");
        assert_eq!(o.status, Failed);
    }

    #[test]
    fn visibility() {
        let mut o = op(ProvisioningState::Accepted);
        assert!(is_visible_to(&o, &"SUB".into(), "", ""));
        assert!(!is_visible_to(&o, &"other".into(), "", ""));
        o.initiator.tenant_id = "T1".into();
        o.initiator.client_id = "O1".into();
        assert!(is_visible_to(&o, &"sub".into(), "t1", "o1"));
        assert!(!is_visible_to(&o, &"sub".into(), "t1", "o2"));
        assert!(!is_visible_to(&o, &"sub".into(), "t2", "o1"));
    }
}
