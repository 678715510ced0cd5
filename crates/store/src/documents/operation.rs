//! Version 1 of the `operations` body, and the pieces resources share with it (provisioning
//! states, the ARM error).

use serde::{Deserialize, Serialize};
use slipway_domain::ids::ResourceKey;
use slipway_domain::operation::{
    ActionCall, ChildOperation, CloudError, Initiator, Operation, OperationRequest, Rerun,
};
use slipway_domain::state::ProvisioningState;
use slipway_domain::time::Timestamp;

use slipway_domain::approval::Approval;
use slipway_domain::whatif::WhatIf;

use super::approval::ApprovalDocument;
use super::whatif::WhatIfDocument;
use super::{DocumentError, check_version, is_version_1, operation_id, version_1};

/// An `operations` row's body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OperationDocument {
    /// Absent in version 1 (see the module documentation).
    #[serde(rename = "v", default = "version_1", skip_serializing_if = "is_version_1")]
    version: u32,
    /// Canonical operation id (lowercase UUID).
    #[serde(rename = "id")]
    id: String,
    /// Lowercased.
    #[serde(rename = "subscription")]
    subscription: String,
    /// The lowercased resource id.
    #[serde(rename = "resourceKey")]
    resource_key: String,
    /// The resource id in its original casing.
    #[serde(rename = "resourceId")]
    resource_id: String,
    #[serde(rename = "request")]
    request: OperationRequestDocument,
    #[serde(rename = "status")]
    status: ProvisioningStateDocument,
    #[serde(rename = "error", default, skip_serializing_if = "Option::is_none")]
    error: Option<CloudErrorDocument>,
    /// Milliseconds since the Unix epoch, as every time below.
    #[serde(rename = "startTime")]
    start_time: i64,
    #[serde(rename = "lastTransitionTime")]
    last_transition_time: i64,
    #[serde(rename = "percentComplete", default, skip_serializing_if = "Option::is_none")]
    percent_complete: Option<u8>,
    /// The task its job runs now; added without a version bump (a reader that does not know
    /// it loses only what the next poll reads again).
    #[serde(rename = "currentTask", default, skip_serializing_if = "Option::is_none")]
    current_task: Option<String>,
    /// The id of the resource the operation's job waits for.
    #[serde(rename = "waitingOn", default, skip_serializing_if = "Option::is_none")]
    waiting_on: Option<String>,
    /// A cascading delete's children and their delete operations.
    #[serde(rename = "childOperations", default, skip_serializing_if = "Vec::is_empty")]
    child_operations: Vec<ChildOperationDocument>,
    /// A POST action's name and request body.
    #[serde(rename = "action", default, skip_serializing_if = "Option::is_none")]
    action: Option<ActionCallDocument>,
    /// An update that runs the unchanged spec again: why. Added without a version bump: a
    /// reader that does not know it reads the operation as the update it is.
    #[serde(rename = "rerun", default, skip_serializing_if = "Option::is_none")]
    rerun: Option<RerunDocument>,
    /// A what-if's proposal and prediction. A reader that knows no `whatIf` request cannot
    /// read such an operation: what-ifs wait until every replica runs this version.
    #[serde(rename = "whatIf", default, skip_serializing_if = "Option::is_none")]
    what_if: Option<WhatIfDocument>,
    /// A request held for approval (`documents::approval`).
    #[serde(rename = "approval", default, skip_serializing_if = "Option::is_none")]
    approval: Option<ApprovalDocument>,
    #[serde(rename = "note", default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    #[serde(rename = "notificationUri", default, skip_serializing_if = "Option::is_none")]
    notification_uri: Option<String>,
    /// Always written, even when every field is empty (`{}`).
    #[serde(rename = "initiator", default)]
    initiator: InitiatorDocument,
    #[serde(rename = "apiVersion")]
    api_version: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ChildOperationDocument {
    #[serde(rename = "resourceId")]
    resource_id: String,
    #[serde(rename = "operationId")]
    operation_id: String,
}

impl From<&ChildOperation> for ChildOperationDocument {
    fn from(c: &ChildOperation) -> Self {
        ChildOperationDocument { resource_id: c.resource_id.clone(), operation_id: c.operation_id.as_str().to_string() }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ActionCallDocument {
    #[serde(rename = "name")]
    name: String,
    /// Stored as the client sent it.
    #[serde(rename = "parameters", default)]
    parameters: serde_json::Value,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum OperationRequestDocument {
    #[serde(rename = "Create")]
    Create,
    #[serde(rename = "Update")]
    Update,
    #[serde(rename = "Delete")]
    Delete,
    #[serde(rename = "Action")]
    Action,
    #[serde(rename = "WhatIf")]
    WhatIf,
    #[serde(rename = "CheckDrift")]
    CheckDrift,
}

/// Why an update (and its jobs) ran the unchanged spec again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum RerunDocument {
    #[serde(rename = "retry")]
    Retry,
    #[serde(rename = "drift")]
    Drift,
}

impl From<Rerun> for RerunDocument {
    fn from(r: Rerun) -> Self {
        match r {
            Rerun::Retry => RerunDocument::Retry,
            Rerun::Drift => RerunDocument::Drift,
        }
    }
}

impl From<RerunDocument> for Rerun {
    fn from(r: RerunDocument) -> Self {
        match r {
            RerunDocument::Retry => Rerun::Retry,
            RerunDocument::Drift => Rerun::Drift,
        }
    }
}

/// Spelled exactly so (no case folding, no `Cancelled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ProvisioningStateDocument {
    #[serde(rename = "Accepted")]
    Accepted,
    #[serde(rename = "WaitingForApproval")]
    WaitingForApproval,
    #[serde(rename = "Provisioning")]
    Provisioning,
    #[serde(rename = "Updating")]
    Updating,
    #[serde(rename = "Deleting")]
    Deleting,
    #[serde(rename = "Canceling")]
    Canceling,
    #[serde(rename = "Succeeded")]
    Succeeded,
    #[serde(rename = "Failed")]
    Failed,
    #[serde(rename = "Canceled")]
    Canceled,
}

/// The ARM error body, nested through `details`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CloudErrorDocument {
    #[serde(rename = "code")]
    code: String,
    #[serde(rename = "message")]
    message: String,
    #[serde(rename = "target", default, skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(rename = "details", default, skip_serializing_if = "Vec::is_empty")]
    details: Vec<CloudErrorDocument>,
}

/// Who asked; each field left out when empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InitiatorDocument {
    #[serde(rename = "tenantId", default, skip_serializing_if = "String::is_empty")]
    tenant_id: String,
    #[serde(rename = "clientId", default, skip_serializing_if = "String::is_empty")]
    client_id: String,
    #[serde(rename = "clientRequestId", default, skip_serializing_if = "String::is_empty")]
    client_request_id: String,
    #[serde(rename = "correlationRequestId", default, skip_serializing_if = "String::is_empty")]
    correlation_request_id: String,
}

impl From<&Operation> for OperationDocument {
    fn from(op: &Operation) -> Self {
        let Operation {
            id,
            subscription,
            resource_key,
            resource_id,
            request,
            status,
            error,
            start_time,
            last_transition_time,
            percent_complete,
            current_task,
            waiting_on,
            child_operations,
            action,
            rerun,
            what_if,
            approval,
            note,
            notification_uri,
            initiator,
            api_version,
        } = op;
        OperationDocument {
            version: super::CURRENT,
            id: id.as_str().to_string(),
            subscription: subscription.as_str().to_string(),
            resource_key: resource_key.as_str().to_string(),
            resource_id: resource_id.clone(),
            request: (*request).into(),
            status: (*status).into(),
            error: error.as_ref().map(CloudErrorDocument::from),
            start_time: start_time.as_millis(),
            last_transition_time: last_transition_time.as_millis(),
            percent_complete: *percent_complete,
            current_task: current_task.clone(),
            waiting_on: waiting_on.clone(),
            child_operations: child_operations.iter().map(ChildOperationDocument::from).collect(),
            action: action
                .as_ref()
                .map(|a| ActionCallDocument { name: a.name.clone(), parameters: a.parameters.clone() }),
            rerun: rerun.map(RerunDocument::from),
            what_if: what_if.as_ref().map(WhatIfDocument::from),
            approval: approval.as_deref().map(ApprovalDocument::from),
            note: note.clone(),
            notification_uri: notification_uri.clone(),
            initiator: initiator.into(),
            api_version: api_version.clone(),
        }
    }
}

impl TryFrom<OperationDocument> for Operation {
    type Error = DocumentError;

    fn try_from(doc: OperationDocument) -> Result<Self, DocumentError> {
        let OperationDocument {
            version,
            id,
            subscription,
            resource_key,
            resource_id,
            request,
            status,
            error,
            start_time,
            last_transition_time,
            percent_complete,
            current_task,
            waiting_on,
            child_operations,
            action,
            rerun,
            what_if,
            approval,
            note,
            notification_uri,
            initiator,
            api_version,
        } = doc;
        check_version(version)?;
        Ok(Operation {
            id: operation_id(id, "id")?,
            subscription: slipway_domain::SubscriptionId::new(&subscription),
            resource_key: ResourceKey::new(resource_key),
            resource_id,
            request: request.into(),
            status: status.into(),
            error: error.map(CloudError::from),
            start_time: Timestamp(start_time),
            last_transition_time: Timestamp(last_transition_time),
            percent_complete,
            current_task,
            waiting_on,
            child_operations: child_operations
                .into_iter()
                .map(|c| {
                    Ok(ChildOperation {
                        resource_id: c.resource_id,
                        operation_id: operation_id(c.operation_id, "childOperations.operationId")?,
                    })
                })
                .collect::<Result<_, DocumentError>>()?,
            action: action.map(|a| ActionCall { name: a.name, parameters: a.parameters }),
            rerun: rerun.map(Rerun::from),
            what_if: what_if.map(WhatIf::from),
            approval: approval.map(|a| Approval::try_from(a).map(Box::new)).transpose()?,
            note,
            notification_uri,
            initiator: initiator.into(),
            api_version,
        })
    }
}

impl From<OperationRequest> for OperationRequestDocument {
    fn from(r: OperationRequest) -> Self {
        match r {
            OperationRequest::Create => OperationRequestDocument::Create,
            OperationRequest::Update => OperationRequestDocument::Update,
            OperationRequest::Delete => OperationRequestDocument::Delete,
            OperationRequest::Action => OperationRequestDocument::Action,
            OperationRequest::WhatIf => OperationRequestDocument::WhatIf,
            OperationRequest::CheckDrift => OperationRequestDocument::CheckDrift,
        }
    }
}

impl From<OperationRequestDocument> for OperationRequest {
    fn from(r: OperationRequestDocument) -> Self {
        match r {
            OperationRequestDocument::Create => OperationRequest::Create,
            OperationRequestDocument::Update => OperationRequest::Update,
            OperationRequestDocument::Delete => OperationRequest::Delete,
            OperationRequestDocument::Action => OperationRequest::Action,
            OperationRequestDocument::WhatIf => OperationRequest::WhatIf,
            OperationRequestDocument::CheckDrift => OperationRequest::CheckDrift,
        }
    }
}

impl From<ProvisioningState> for ProvisioningStateDocument {
    fn from(s: ProvisioningState) -> Self {
        match s {
            ProvisioningState::Accepted => ProvisioningStateDocument::Accepted,
            ProvisioningState::WaitingForApproval => ProvisioningStateDocument::WaitingForApproval,
            ProvisioningState::Provisioning => ProvisioningStateDocument::Provisioning,
            ProvisioningState::Updating => ProvisioningStateDocument::Updating,
            ProvisioningState::Deleting => ProvisioningStateDocument::Deleting,
            ProvisioningState::Canceling => ProvisioningStateDocument::Canceling,
            ProvisioningState::Succeeded => ProvisioningStateDocument::Succeeded,
            ProvisioningState::Failed => ProvisioningStateDocument::Failed,
            ProvisioningState::Canceled => ProvisioningStateDocument::Canceled,
        }
    }
}

impl From<ProvisioningStateDocument> for ProvisioningState {
    fn from(s: ProvisioningStateDocument) -> Self {
        match s {
            ProvisioningStateDocument::Accepted => ProvisioningState::Accepted,
            ProvisioningStateDocument::WaitingForApproval => ProvisioningState::WaitingForApproval,
            ProvisioningStateDocument::Provisioning => ProvisioningState::Provisioning,
            ProvisioningStateDocument::Updating => ProvisioningState::Updating,
            ProvisioningStateDocument::Deleting => ProvisioningState::Deleting,
            ProvisioningStateDocument::Canceling => ProvisioningState::Canceling,
            ProvisioningStateDocument::Succeeded => ProvisioningState::Succeeded,
            ProvisioningStateDocument::Failed => ProvisioningState::Failed,
            ProvisioningStateDocument::Canceled => ProvisioningState::Canceled,
        }
    }
}

impl From<&CloudError> for CloudErrorDocument {
    fn from(e: &CloudError) -> Self {
        let CloudError { code, message, target, details } = e;
        CloudErrorDocument {
            code: code.clone(),
            message: message.clone(),
            target: target.clone(),
            details: details.iter().map(CloudErrorDocument::from).collect(),
        }
    }
}

impl From<CloudErrorDocument> for CloudError {
    fn from(e: CloudErrorDocument) -> Self {
        let CloudErrorDocument { code, message, target, details } = e;
        CloudError { code, message, target, details: details.into_iter().map(CloudError::from).collect() }
    }
}

impl From<&Initiator> for InitiatorDocument {
    fn from(i: &Initiator) -> Self {
        let Initiator { tenant_id, client_id, client_request_id, correlation_request_id } = i;
        InitiatorDocument {
            tenant_id: tenant_id.clone(),
            client_id: client_id.clone(),
            client_request_id: client_request_id.clone(),
            correlation_request_id: correlation_request_id.clone(),
        }
    }
}

impl From<InitiatorDocument> for Initiator {
    fn from(i: InitiatorDocument) -> Self {
        let InitiatorDocument { tenant_id, client_id, client_request_id, correlation_request_id } = i;
        Initiator { tenant_id, client_id, client_request_id, correlation_request_id }
    }
}
