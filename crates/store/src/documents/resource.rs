//! Version 1 of the `resources` body.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use slipway_domain::config_version::ConfigVersion;
use slipway_domain::identity::JobContext;
use slipway_domain::ids::ArmId;
use slipway_domain::job::Job;
use slipway_domain::operation::CloudError;
use slipway_domain::policy_admission::{Effect, Finding};
use slipway_domain::quota::MeterName;
use slipway_domain::reference::Reference;
use slipway_domain::resource::{Deletion, ResourceRecord, Schedule, Spec, SystemData};
use slipway_domain::time::Timestamp;

use super::context::JobContextDocument;
use super::job::JobDocument;
use super::operation::{CloudErrorDocument, ProvisioningStateDocument};
use super::whatif::DriftDocument;
use super::{DocumentError, check_version, is_version_1, operation_id, operation_id_opt, version_1};
use slipway_domain::drift::Drift;

/// A `resources` row's body: the record without its lease and schedule, which live in the
/// row's columns (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ResourceDocument {
    /// Absent in version 1 (see the module documentation).
    #[serde(rename = "v", default = "version_1", skip_serializing_if = "is_version_1")]
    version: u32,
    #[serde(rename = "id")]
    id: ArmIdDocument,
    /// The type's kind (e.g. `VirtualNetwork`).
    #[serde(rename = "kind")]
    kind: String,
    #[serde(rename = "spec")]
    spec: SpecDocument,
    #[serde(rename = "systemData")]
    system_data: SystemDataDocument,
    #[serde(rename = "provisioningState")]
    provisioning_state: ProvisioningStateDocument,
    #[serde(rename = "desiredConfigVersion")]
    desired_config_version: String,
    /// Always written, even when empty.
    #[serde(rename = "jobs", default)]
    jobs: Vec<JobDocument>,
    #[serde(rename = "duplicateJobs", default, skip_serializing_if = "Vec::is_empty")]
    duplicate_jobs: Vec<JobDocument>,
    /// Canonical operation ids (lowercase UUIDs), as every operation id below.
    #[serde(rename = "activeOperationId", default, skip_serializing_if = "Option::is_none")]
    active_operation_id: Option<String>,
    #[serde(rename = "lastOperationId")]
    last_operation_id: String,
    #[serde(rename = "jobSeq", default)]
    job_seq: u64,
    #[serde(rename = "deletion", default, skip_serializing_if = "Option::is_none")]
    deletion: Option<DeletionDocument>,
    #[serde(rename = "convergenceStoppedFor", default, skip_serializing_if = "Option::is_none")]
    convergence_stopped_for: Option<String>,
    #[serde(rename = "jobContext", default, skip_serializing_if = "Option::is_none")]
    job_context: Option<JobContextDocument>,
    /// The resources its properties reference.
    #[serde(rename = "references", default, skip_serializing_if = "Vec::is_empty")]
    references: Vec<ReferenceDocument>,
    /// What jobs reported (`set_stats`), as they reported it.
    #[serde(rename = "outputs", default, skip_serializing_if = "serde_json::Map::is_empty")]
    outputs: serde_json::Map<String, serde_json::Value>,
    /// The last drift check's verdict. Added without a version bump: an older reader drops
    /// it, and the next check finds it again.
    #[serde(rename = "drift", default, skip_serializing_if = "Option::is_none")]
    drift: Option<DriftDocument>,
    #[serde(rename = "lastError", default, skip_serializing_if = "Option::is_none")]
    last_error: Option<CloudErrorDocument>,
    /// Written empty (`{"nextDue":null,"intent":false}`); read and dropped: the columns hold
    /// the schedule.
    #[serde(rename = "schedule", default)]
    schedule: ScheduleDocument,
    /// Never written; read and dropped if present: the columns hold the lease.
    #[serde(rename = "lease", default, skip_serializing_if = "Option::is_none")]
    lease: Option<LeaseDocument>,
    /// Written; the `generation` column overrides it on read.
    #[serde(rename = "generation", default)]
    generation: u64,
    /// What it consumes of each quota meter. Added without a version bump: absent means
    /// nothing, as it did before meters existed.
    #[serde(rename = "usage", default, skip_serializing_if = "BTreeMap::is_empty")]
    usage: BTreeMap<String, u64>,
    /// What admission policies found not compliant at its last write. Added without a
    /// version bump: absent means none.
    #[serde(rename = "findings", default, skip_serializing_if = "Vec::is_empty")]
    findings: Vec<FindingDocument>,
}

/// A policy finding: `{assignmentId, definitionId, effect, enforced, reason}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FindingDocument {
    #[serde(rename = "assignmentId")]
    assignment_id: String,
    #[serde(rename = "definitionId")]
    definition_id: String,
    #[serde(rename = "effect")]
    effect: String,
    #[serde(rename = "enforced")]
    enforced: bool,
    #[serde(rename = "reason", default)]
    reason: String,
}

impl From<&Finding> for FindingDocument {
    fn from(f: &Finding) -> Self {
        FindingDocument {
            assignment_id: f.assignment_id.clone(),
            definition_id: f.definition_id.clone(),
            effect: f.effect.as_str().to_string(),
            enforced: f.enforced,
            reason: f.reason.clone(),
        }
    }
}

impl TryFrom<FindingDocument> for Finding {
    type Error = DocumentError;

    fn try_from(d: FindingDocument) -> Result<Self, DocumentError> {
        let effect = Effect::parse(&d.effect)
            .ok_or_else(|| DocumentError(format!("findings: unknown effect {:?}", d.effect)))?;
        Ok(Finding {
            assignment_id: d.assignment_id,
            definition_id: d.definition_id,
            effect,
            enforced: d.enforced,
            reason: d.reason,
        })
    }
}

/// A reference: the property and the id it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReferenceDocument {
    #[serde(rename = "property")]
    property: String,
    #[serde(rename = "id")]
    id: ArmIdDocument,
}

/// The resource id in its original casing, by segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ArmIdDocument {
    #[serde(rename = "subscription")]
    subscription: String,
    #[serde(rename = "resourceGroup")]
    resource_group: String,
    #[serde(rename = "namespace")]
    namespace: String,
    /// The full type (`virtualNetworks/subnets` for a child).
    #[serde(rename = "typeName")]
    type_name: String,
    /// A child's parents' names, outermost first; absent for a top-level resource.
    #[serde(rename = "parentNames", default, skip_serializing_if = "Vec::is_empty")]
    parent_names: Vec<String>,
    #[serde(rename = "name")]
    name: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SpecDocument {
    #[serde(rename = "location", default, skip_serializing_if = "Option::is_none")]
    location: Option<String>,
    /// Always written, even when empty.
    #[serde(rename = "tags", default)]
    tags: BTreeMap<String, String>,
    /// Stored as given; always written (`null` when absent).
    #[serde(rename = "properties", default)]
    properties: serde_json::Value,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SystemDataDocument {
    #[serde(rename = "createdBy", default, skip_serializing_if = "String::is_empty")]
    created_by: String,
    #[serde(rename = "createdByType", default, skip_serializing_if = "String::is_empty")]
    created_by_type: String,
    /// Milliseconds since the Unix epoch, as every time in a document.
    #[serde(rename = "createdAt")]
    created_at: i64,
    #[serde(rename = "lastModifiedBy", default, skip_serializing_if = "String::is_empty")]
    last_modified_by: String,
    #[serde(rename = "lastModifiedByType", default, skip_serializing_if = "String::is_empty")]
    last_modified_by_type: String,
    #[serde(rename = "lastModifiedAt")]
    last_modified_at: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DeletionDocument {
    #[serde(rename = "requestedAt")]
    requested_at: i64,
    #[serde(rename = "force", default, skip_serializing_if = "std::ops::Not::not")]
    force: bool,
}

/// The schedule's place in a body; see [`ResourceDocument::schedule`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ScheduleDocument {
    #[serde(rename = "nextDue", default)]
    next_due: Option<i64>,
    #[serde(rename = "intent")]
    intent: bool,
}

/// The lease's place in a body; see [`ResourceDocument::lease`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LeaseDocument {
    #[serde(rename = "owner")]
    owner: String,
    #[serde(rename = "until")]
    until: i64,
    #[serde(rename = "epoch")]
    epoch: u64,
}

impl From<&ResourceRecord> for ResourceDocument {
    /// The body as stored: lease and schedule left out (they are the row's columns).
    fn from(rec: &ResourceRecord) -> Self {
        let ResourceRecord {
            id,
            kind,
            spec,
            system_data,
            provisioning_state,
            desired_config_version,
            jobs,
            duplicate_jobs,
            active_operation_id,
            last_operation_id,
            job_seq,
            deletion,
            convergence_stopped_for,
            job_context,
            references,
            outputs,
            drift,
            last_error,
            schedule: _,
            lease: _,
            generation,
            usage,
            findings,
        } = rec;
        ResourceDocument {
            version: super::CURRENT,
            id: id.into(),
            kind: kind.clone(),
            spec: spec.into(),
            system_data: system_data.into(),
            provisioning_state: (*provisioning_state).into(),
            desired_config_version: desired_config_version.as_str().to_string(),
            jobs: jobs.iter().map(JobDocument::from).collect(),
            duplicate_jobs: duplicate_jobs.iter().map(JobDocument::from).collect(),
            active_operation_id: active_operation_id.as_ref().map(|id| id.as_str().to_string()),
            last_operation_id: last_operation_id.as_str().to_string(),
            job_seq: *job_seq,
            deletion: deletion.as_ref().map(DeletionDocument::from),
            convergence_stopped_for: convergence_stopped_for.as_ref().map(|v| v.as_str().to_string()),
            job_context: job_context.as_ref().map(JobContextDocument::from),
            references: reference_documents(references),
            outputs: outputs.clone(),
            drift: drift.as_ref().map(DriftDocument::from),
            last_error: last_error.as_ref().map(CloudErrorDocument::from),
            schedule: ScheduleDocument::default(),
            lease: None,
            generation: *generation,
            usage: usage_document(usage),
            findings: findings.iter().map(FindingDocument::from).collect(),
        }
    }
}

impl TryFrom<ResourceDocument> for ResourceRecord {
    type Error = DocumentError;

    /// The record with no lease, an empty schedule and the body's generation; the row's
    /// columns supply the real ones.
    fn try_from(doc: ResourceDocument) -> Result<Self, DocumentError> {
        let ResourceDocument {
            version,
            id,
            kind,
            spec,
            system_data,
            provisioning_state,
            desired_config_version,
            jobs,
            duplicate_jobs,
            active_operation_id,
            last_operation_id,
            job_seq,
            deletion,
            convergence_stopped_for,
            job_context,
            references,
            outputs,
            drift,
            last_error,
            schedule: _,
            lease: _,
            generation,
            usage,
            findings,
        } = doc;
        check_version(version)?;
        Ok(ResourceRecord {
            id: id.into(),
            kind,
            spec: spec.into(),
            system_data: system_data.into(),
            provisioning_state: provisioning_state.into(),
            desired_config_version: ConfigVersion::new(desired_config_version),
            jobs: jobs.into_iter().map(Job::try_from).collect::<Result<_, _>>()?,
            duplicate_jobs: duplicate_jobs.into_iter().map(Job::try_from).collect::<Result<_, _>>()?,
            active_operation_id: operation_id_opt(active_operation_id, "activeOperationId")?,
            last_operation_id: operation_id(last_operation_id, "lastOperationId")?,
            job_seq,
            deletion: deletion.map(Deletion::from),
            convergence_stopped_for: convergence_stopped_for.map(ConfigVersion::new),
            job_context: job_context.map(JobContext::from),
            references: references_of(references),
            outputs,
            drift: drift.map(Drift::try_from).transpose()?,
            last_error: last_error.map(CloudError::from),
            schedule: Schedule::default(),
            lease: None,
            generation,
            usage: usage_of(usage),
            findings: findings.into_iter().map(Finding::try_from).collect::<Result<_, _>>()?,
        })
    }
}

impl From<&ArmId> for ArmIdDocument {
    fn from(id: &ArmId) -> Self {
        let ArmId { subscription, resource_group, namespace, type_name, parent_names, name } = id;
        ArmIdDocument {
            subscription: subscription.clone(),
            resource_group: resource_group.clone(),
            namespace: namespace.clone(),
            type_name: type_name.clone(),
            parent_names: parent_names.clone(),
            name: name.clone(),
        }
    }
}

impl From<ArmIdDocument> for ArmId {
    /// As stored, without validating again (the API validated it before it was written).
    fn from(id: ArmIdDocument) -> Self {
        let ArmIdDocument { subscription, resource_group, namespace, type_name, parent_names, name } = id;
        ArmId { subscription, resource_group, namespace, type_name, parent_names, name }
    }
}

impl From<&Deletion> for DeletionDocument {
    fn from(d: &Deletion) -> Self {
        let Deletion { requested_at, force } = d;
        DeletionDocument { requested_at: requested_at.as_millis(), force: *force }
    }
}

impl From<DeletionDocument> for Deletion {
    fn from(d: DeletionDocument) -> Self {
        let DeletionDocument { requested_at, force } = d;
        Deletion { requested_at: Timestamp(requested_at), force }
    }
}

impl From<&Spec> for SpecDocument {
    fn from(spec: &Spec) -> Self {
        let Spec { location, tags, properties } = spec;
        SpecDocument { location: location.clone(), tags: tags.clone(), properties: properties.clone() }
    }
}

impl From<SpecDocument> for Spec {
    fn from(spec: SpecDocument) -> Self {
        let SpecDocument { location, tags, properties } = spec;
        Spec { location, tags, properties }
    }
}

impl From<&SystemData> for SystemDataDocument {
    fn from(d: &SystemData) -> Self {
        let SystemData {
            created_by,
            created_by_type,
            created_at,
            last_modified_by,
            last_modified_by_type,
            last_modified_at,
        } = d;
        SystemDataDocument {
            created_by: created_by.clone(),
            created_by_type: created_by_type.clone(),
            created_at: created_at.as_millis(),
            last_modified_by: last_modified_by.clone(),
            last_modified_by_type: last_modified_by_type.clone(),
            last_modified_at: last_modified_at.as_millis(),
        }
    }
}

impl From<SystemDataDocument> for SystemData {
    fn from(d: SystemDataDocument) -> Self {
        let SystemDataDocument {
            created_by,
            created_by_type,
            created_at,
            last_modified_by,
            last_modified_by_type,
            last_modified_at,
        } = d;
        SystemData {
            created_by,
            created_by_type,
            created_at: Timestamp(created_at),
            last_modified_by,
            last_modified_by_type,
            last_modified_at: Timestamp(last_modified_at),
        }
    }
}

pub(super) fn reference_documents(references: &[Reference]) -> Vec<ReferenceDocument> {
    references.iter().map(|r| ReferenceDocument { property: r.property.clone(), id: (&r.id).into() }).collect()
}

pub(super) fn references_of(documents: Vec<ReferenceDocument>) -> Vec<Reference> {
    documents.into_iter().map(|r| Reference { property: r.property, id: r.id.into() }).collect()
}

pub(super) fn usage_document(usage: &BTreeMap<MeterName, u64>) -> BTreeMap<String, u64> {
    usage.iter().map(|(meter, n)| (meter.as_str().to_string(), *n)).collect()
}

pub(super) fn usage_of(document: BTreeMap<String, u64>) -> BTreeMap<MeterName, u64> {
    document.into_iter().map(|(meter, n)| (MeterName::read_stored(meter), n)).collect()
}
