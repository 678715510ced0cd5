//! An operation's approval, its part of the `operations` body: the rule that asked for it,
//! who requested it, its deadline, the attached what-if, an update's prior resource and the
//! decision. Added without a version bump: only a request held for approval carries one. A
//! reader that knows no `WaitingForApproval` cannot read such an operation or its resource, so
//! `requireApproval` policies wait until every replica runs this version (docs/governance.md).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use slipway_domain::access::Role;
use slipway_domain::approval::{
    Approval, ApprovalRule, DecidedBy, Decision, Prior, Proposed, RequestKind, Requester, Requirement, TimeoutOutcome,
    Unapproved, Verdict,
};
use slipway_domain::config_version::ConfigVersion;
use slipway_domain::time::Timestamp;

use super::context::JobContextDocument;
use super::operation::{CloudErrorDocument, ProvisioningStateDocument};
use super::resource::{
    FindingDocument, ReferenceDocument, SystemDataDocument, reference_documents, references_of, usage_document,
    usage_of,
};
use super::whatif::WhatIfDocument;
use super::{DocumentError, operation_id};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ApprovalDocument {
    #[serde(rename = "assignmentId")]
    assignment_id: String,
    #[serde(rename = "definitionId")]
    definition_id: String,
    #[serde(rename = "reason", default)]
    reason: String,
    #[serde(rename = "rule")]
    rule: RuleDocument,
    #[serde(rename = "requestedBy")]
    requested_by: RequesterDocument,
    /// Milliseconds since the Unix epoch, as every time below.
    #[serde(rename = "deadline")]
    deadline: i64,
    #[serde(rename = "whatIf")]
    what_if: WhatIfDocument,
    #[serde(rename = "prior", default, skip_serializing_if = "Option::is_none")]
    prior: Option<PriorDocument>,
    #[serde(rename = "proposed", default, skip_serializing_if = "Option::is_none")]
    proposed: Option<ProposedDocument>,
    #[serde(rename = "decision", default, skip_serializing_if = "Option::is_none")]
    decision: Option<DecisionDocument>,
    /// `Denied`, `TimedOut` or `Canceled`.
    #[serde(rename = "ended", default, skip_serializing_if = "Option::is_none")]
    ended: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct RuleDocument {
    /// `create`, `update`.
    #[serde(rename = "requests")]
    requests: Vec<String>,
    #[serde(rename = "approverRole")]
    approver_role: String,
    #[serde(rename = "allowSelfApproval", default, skip_serializing_if = "std::ops::Not::not")]
    allow_self_approval: bool,
    #[serde(rename = "autoApproveRole", default, skip_serializing_if = "Option::is_none")]
    auto_approve_role: Option<String>,
    #[serde(rename = "timeoutSeconds")]
    timeout_seconds: u64,
    #[serde(rename = "onTimeout")]
    on_timeout: String,
    #[serde(rename = "quotaPercent", default, skip_serializing_if = "Option::is_none")]
    quota_percent: Option<u8>,
    #[serde(rename = "notify", default, skip_serializing_if = "Option::is_none")]
    notify: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct RequesterDocument {
    #[serde(rename = "name")]
    name: String,
    #[serde(rename = "tenant", default, skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct DecisionDocument {
    /// `Approved` or `Denied`.
    #[serde(rename = "verdict")]
    verdict: String,
    #[serde(rename = "by")]
    by: RequesterDocument,
    /// Made by the policy's auto-approve rule rather than by a person.
    #[serde(rename = "byRule", default, skip_serializing_if = "std::ops::Not::not")]
    by_rule: bool,
    #[serde(rename = "at")]
    at: i64,
    #[serde(rename = "comment", default, skip_serializing_if = "Option::is_none")]
    comment: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct PriorDocument {
    #[serde(rename = "provisioningState")]
    provisioning_state: ProvisioningStateDocument,
    #[serde(rename = "systemData")]
    system_data: SystemDataDocument,
    #[serde(rename = "usage", default, skip_serializing_if = "BTreeMap::is_empty")]
    usage: BTreeMap<String, u64>,
    #[serde(rename = "references", default, skip_serializing_if = "Vec::is_empty")]
    references: Vec<ReferenceDocument>,
    #[serde(rename = "findings", default, skip_serializing_if = "Vec::is_empty")]
    findings: Vec<FindingDocument>,
    #[serde(rename = "lastError", default, skip_serializing_if = "Option::is_none")]
    last_error: Option<CloudErrorDocument>,
    #[serde(rename = "convergenceStoppedFor", default, skip_serializing_if = "Option::is_none")]
    convergence_stopped_for: Option<String>,
    #[serde(rename = "desiredConfigVersion")]
    desired_config_version: String,
    #[serde(rename = "jobContext", default, skip_serializing_if = "Option::is_none")]
    job_context: Option<JobContextDocument>,
    #[serde(rename = "lastOperationId")]
    last_operation_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ProposedDocument {
    #[serde(rename = "usage", default, skip_serializing_if = "BTreeMap::is_empty")]
    usage: BTreeMap<String, u64>,
    #[serde(rename = "references", default, skip_serializing_if = "Vec::is_empty")]
    references: Vec<ReferenceDocument>,
}

impl From<&Requester> for RequesterDocument {
    fn from(r: &Requester) -> Self {
        RequesterDocument { name: r.name.clone(), tenant: r.tenant.clone() }
    }
}

impl From<RequesterDocument> for Requester {
    fn from(d: RequesterDocument) -> Self {
        Requester { name: d.name, tenant: d.tenant }
    }
}

impl From<&Approval> for ApprovalDocument {
    fn from(a: &Approval) -> Self {
        let Approval { requirement, requested_by, deadline, what_if, prior, proposed, decision, ended } = a;
        let rule = &requirement.rule;
        ApprovalDocument {
            assignment_id: requirement.assignment_id.clone(),
            definition_id: requirement.definition_id.clone(),
            reason: requirement.reason.clone(),
            rule: RuleDocument {
                requests: rule.requests.iter().map(|r| r.as_str().to_owned()).collect(),
                approver_role: rule.approver_role.name().to_owned(),
                allow_self_approval: rule.allow_self_approval,
                auto_approve_role: rule.auto_approve_role.map(|r| r.name().to_owned()),
                timeout_seconds: rule.timeout.as_secs(),
                on_timeout: rule.on_timeout.as_str().to_owned(),
                quota_percent: rule.quota_percent,
                notify: rule.notify.clone(),
            },
            requested_by: requested_by.into(),
            deadline: deadline.as_millis(),
            what_if: what_if.into(),
            prior: prior.as_ref().map(|p| PriorDocument {
                provisioning_state: p.provisioning_state.into(),
                system_data: (&p.system_data).into(),
                usage: usage_document(&p.usage),
                references: reference_documents(&p.references),
                findings: p.findings.iter().map(FindingDocument::from).collect(),
                last_error: p.last_error.as_ref().map(CloudErrorDocument::from),
                convergence_stopped_for: p.convergence_stopped_for.as_ref().map(|v| v.as_str().to_owned()),
                desired_config_version: p.desired_config_version.as_str().to_owned(),
                job_context: p.job_context.as_ref().map(JobContextDocument::from),
                last_operation_id: p.last_operation_id.as_str().to_owned(),
            }),
            proposed: proposed.as_ref().map(|p| ProposedDocument {
                usage: usage_document(&p.usage),
                references: reference_documents(&p.references),
            }),
            decision: decision.as_ref().map(|d| DecisionDocument {
                verdict: d.verdict.as_str().to_owned(),
                by: (&d.by).into(),
                by_rule: d.how == DecidedBy::Rule,
                at: d.at.as_millis(),
                comment: d.comment.clone(),
            }),
            ended: ended.map(|e| e.as_str().to_owned()),
        }
    }
}

fn unknown(what: &str, value: &str) -> DocumentError {
    DocumentError(format!("approval: unknown {what} {value:?}"))
}

fn role(text: &str) -> Result<Role, DocumentError> {
    Role::from_name(text).ok_or_else(|| unknown("role", text))
}

impl TryFrom<ApprovalDocument> for Approval {
    type Error = DocumentError;

    fn try_from(d: ApprovalDocument) -> Result<Self, DocumentError> {
        let r = d.rule;
        let rule = ApprovalRule {
            requests: r
                .requests
                .iter()
                .map(|k| RequestKind::parse(k).ok_or_else(|| unknown("request", k)))
                .collect::<Result<_, _>>()?,
            approver_role: role(&r.approver_role)?,
            allow_self_approval: r.allow_self_approval,
            auto_approve_role: r.auto_approve_role.as_deref().map(role).transpose()?,
            timeout: Duration::from_secs(r.timeout_seconds),
            on_timeout: TimeoutOutcome::parse(&r.on_timeout).ok_or_else(|| unknown("onTimeout", &r.on_timeout))?,
            quota_percent: r.quota_percent,
            notify: r.notify,
        };
        let prior = match d.prior {
            None => None,
            Some(p) => Some(Prior {
                provisioning_state: p.provisioning_state.into(),
                system_data: p.system_data.into(),
                usage: usage_of(p.usage),
                references: references_of(p.references),
                findings: p.findings.into_iter().map(TryFrom::try_from).collect::<Result<_, _>>()?,
                last_error: p.last_error.map(Into::into),
                convergence_stopped_for: p.convergence_stopped_for.map(ConfigVersion::new),
                desired_config_version: ConfigVersion::new(p.desired_config_version),
                job_context: p.job_context.map(Into::into),
                last_operation_id: operation_id(p.last_operation_id, "approval.prior.lastOperationId")?,
            }),
        };
        let proposed =
            d.proposed.map(|p| Proposed { usage: usage_of(p.usage), references: references_of(p.references) });
        let decision = match d.decision {
            None => None,
            Some(x) => Some(Decision {
                verdict: Verdict::parse(&x.verdict).ok_or_else(|| unknown("verdict", &x.verdict))?,
                by: x.by.into(),
                how: if x.by_rule { DecidedBy::Rule } else { DecidedBy::Approver },
                at: Timestamp(x.at),
                comment: x.comment,
            }),
        };
        let ended = d.ended.map(|e| Unapproved::parse(&e).ok_or_else(|| unknown("end", &e))).transpose()?;
        Ok(Approval {
            requirement: Requirement {
                assignment_id: d.assignment_id,
                definition_id: d.definition_id,
                reason: d.reason,
                rule,
            },
            requested_by: d.requested_by.into(),
            deadline: Timestamp(d.deadline),
            what_if: d.what_if.into(),
            prior,
            proposed,
            decision,
            ended,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use slipway_domain::policy_admission::{Effect, Finding};
    use slipway_domain::resource::{Spec, SystemData};
    use slipway_domain::state::ProvisioningState;
    use slipway_domain::whatif::WhatIf;

    use super::*;

    fn every_field() -> Approval {
        let spec =
            |n: i64| Spec { location: Some("west".into()), tags: Default::default(), properties: json!({"n": n}) };
        Approval {
            requirement: Requirement {
                assignment_id: "/subscriptions/s/providers/Microsoft.Authorization/policyAssignments/a".into(),
                definition_id: "/providers/Microsoft.Authorization/policyDefinitions/d".into(),
                reason: "size is in [large]".into(),
                rule: ApprovalRule {
                    requests: vec![RequestKind::Update],
                    approver_role: Role::Admin,
                    allow_self_approval: true,
                    auto_approve_role: Some(Role::Owner),
                    timeout: Duration::from_secs(600),
                    on_timeout: TimeoutOutcome::Failed,
                    quota_percent: Some(80),
                    notify: Some("https://chat.example/hook".into()),
                },
            },
            requested_by: Requester { name: "alice".into(), tenant: Some("t1".into()) },
            deadline: Timestamp(9_000),
            what_if: WhatIf { before: Some(spec(1)), after: Some(spec(2)), predicted: None, guardrails: Vec::new() },
            prior: Some(Prior {
                provisioning_state: ProvisioningState::Failed,
                system_data: SystemData { created_by: "alice".into(), created_at: Timestamp(1), ..Default::default() },
                usage: [(slipway_domain::quota::MeterName::read_stored("cores".to_string()), 4)].into(),
                references: Vec::new(),
                findings: vec![Finding {
                    assignment_id: "a".into(),
                    definition_id: "d".into(),
                    effect: Effect::Audit,
                    enforced: true,
                    reason: "r".into(),
                }],
                last_error: Some(slipway_domain::operation::CloudError::new("X", "y")),
                convergence_stopped_for: Some(ConfigVersion::new("v1")),
                desired_config_version: ConfigVersion::new("v0"),
                job_context: None,
                last_operation_id: slipway_domain::ids::OperationId::parse("0190a0a0-0000-7000-8000-000000000001")
                    .unwrap(),
            }),
            proposed: Some(Proposed { usage: Default::default(), references: Vec::new() }),
            decision: Some(Decision {
                verdict: Verdict::Denied,
                by: Requester { name: "bob".into(), tenant: None },
                how: DecidedBy::Approver,
                at: Timestamp(8_000),
                comment: Some("too big".into()),
            }),
            ended: Some(Unapproved::Denied),
        }
    }

    #[test]
    fn an_approval_is_stored_by_name_and_read_back_whole() {
        let a = every_field();
        let text = serde_json::to_value(ApprovalDocument::from(&a)).unwrap();
        assert_eq!(text["rule"]["approverRole"], "Admin");
        assert_eq!(text["rule"]["timeoutSeconds"], 600);
        assert_eq!(text["decision"]["verdict"], "Denied");
        assert_eq!(text["ended"], "Denied");
        assert_eq!(Approval::try_from(serde_json::from_value::<ApprovalDocument>(text.clone()).unwrap()).unwrap(), a);
        let mut bad = text;
        bad["rule"]["approverRole"] = json!("Boss");
        assert!(Approval::try_from(serde_json::from_value::<ApprovalDocument>(bad).unwrap()).is_err());
    }
}
