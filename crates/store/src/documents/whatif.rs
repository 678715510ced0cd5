//! What check-mode jobs found: a what-if operation's part of the `operations` body (the spec
//! before and the one proposed, and the tasks its job said it would change), and a drift
//! check's verdict in the `resources` body.

use serde::{Deserialize, Serialize};
use slipway_domain::config_version::ConfigVersion;
use slipway_domain::drift::{Drift, DriftState};
use slipway_domain::time::Timestamp;
use slipway_domain::whatif::{Guardrail, GuardrailKind, TaskChange, WhatIf};

use super::resource::SpecDocument;
use super::{DocumentError, operation_id_opt};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DriftDocument {
    #[serde(rename = "state")]
    state: DriftStateDocument,
    #[serde(rename = "lastCheckedAt")]
    last_checked_at: i64,
    #[serde(rename = "configVersion")]
    config_version: String,
    #[serde(rename = "changes", default, skip_serializing_if = "Vec::is_empty")]
    changes: Vec<TaskChangeDocument>,
    #[serde(rename = "message", default, skip_serializing_if = "String::is_empty")]
    message: String,
    #[serde(rename = "remediation", default, skip_serializing_if = "Option::is_none")]
    remediation: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum DriftStateDocument {
    #[serde(rename = "InSync")]
    InSync,
    #[serde(rename = "Drifted")]
    Drifted,
    #[serde(rename = "Unknown")]
    Unknown,
}

impl From<&Drift> for DriftDocument {
    fn from(d: &Drift) -> Self {
        let Drift { state, last_checked_at, config_version, changes, message, remediation } = d;
        DriftDocument {
            state: match state {
                DriftState::InSync => DriftStateDocument::InSync,
                DriftState::Drifted => DriftStateDocument::Drifted,
                DriftState::Unknown => DriftStateDocument::Unknown,
            },
            last_checked_at: last_checked_at.as_millis(),
            config_version: config_version.to_string(),
            changes: changes.iter().map(TaskChangeDocument::from).collect(),
            message: message.clone(),
            remediation: remediation.as_ref().map(|o| o.as_str().to_owned()),
        }
    }
}

impl TryFrom<DriftDocument> for Drift {
    type Error = DocumentError;

    fn try_from(d: DriftDocument) -> Result<Self, DocumentError> {
        let DriftDocument { state, last_checked_at, config_version, changes, message, remediation } = d;
        Ok(Drift {
            state: match state {
                DriftStateDocument::InSync => DriftState::InSync,
                DriftStateDocument::Drifted => DriftState::Drifted,
                DriftStateDocument::Unknown => DriftState::Unknown,
            },
            last_checked_at: Timestamp(last_checked_at),
            config_version: ConfigVersion::new(config_version),
            changes: changes.into_iter().map(TaskChange::from).collect(),
            message,
            remediation: operation_id_opt(remediation, "drift.remediation")?,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WhatIfDocument {
    #[serde(rename = "before", default, skip_serializing_if = "Option::is_none")]
    before: Option<SpecDocument>,
    /// Absent for a delete's what-if.
    #[serde(rename = "after", default, skip_serializing_if = "Option::is_none")]
    after: Option<SpecDocument>,
    /// Absent until the check job succeeded.
    #[serde(rename = "predicted", default, skip_serializing_if = "Option::is_none")]
    predicted: Option<Vec<TaskChangeDocument>>,
    /// What the guardrails would do. Added without a version bump: absent means none.
    #[serde(rename = "guardrails", default, skip_serializing_if = "Vec::is_empty")]
    guardrails: Vec<GuardrailDocument>,
}

/// `{kind, effect, enforced, id, message}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GuardrailDocument {
    #[serde(rename = "kind")]
    kind: String,
    #[serde(rename = "effect")]
    effect: String,
    #[serde(rename = "enforced")]
    enforced: bool,
    #[serde(rename = "id")]
    id: String,
    #[serde(rename = "message")]
    message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TaskChangeDocument {
    #[serde(rename = "task")]
    task: String,
    #[serde(rename = "host")]
    host: String,
    /// Ansible's diff as the job reported it.
    #[serde(rename = "diff", default, skip_serializing_if = "serde_json::Value::is_null")]
    diff: serde_json::Value,
}

impl From<&WhatIf> for WhatIfDocument {
    fn from(w: &WhatIf) -> Self {
        let WhatIf { before, after, predicted, guardrails } = w;
        WhatIfDocument {
            before: before.as_ref().map(SpecDocument::from),
            after: after.as_ref().map(SpecDocument::from),
            predicted: predicted.as_ref().map(|p| p.iter().map(TaskChangeDocument::from).collect()),
            guardrails: guardrails
                .iter()
                .map(|g| GuardrailDocument {
                    kind: g.kind.as_str().to_string(),
                    effect: g.effect.clone(),
                    enforced: g.enforced,
                    id: g.id.clone(),
                    message: g.message.clone(),
                })
                .collect(),
        }
    }
}

impl From<WhatIfDocument> for WhatIf {
    fn from(d: WhatIfDocument) -> Self {
        let WhatIfDocument { before, after, predicted, guardrails } = d;
        WhatIf {
            before: before.map(Into::into),
            after: after.map(Into::into),
            predicted: predicted.map(|p| p.into_iter().map(TaskChange::from).collect()),
            // A verdict of a kind this Slipway does not know is left out.
            guardrails: guardrails
                .into_iter()
                .filter_map(|g| {
                    Some(Guardrail {
                        kind: GuardrailKind::parse(&g.kind)?,
                        effect: g.effect,
                        enforced: g.enforced,
                        id: g.id,
                        message: g.message,
                    })
                })
                .collect(),
        }
    }
}

impl From<&TaskChange> for TaskChangeDocument {
    fn from(c: &TaskChange) -> Self {
        let TaskChange { task, host, diff } = c;
        TaskChangeDocument { task: task.clone(), host: host.clone(), diff: diff.clone() }
    }
}

impl From<TaskChangeDocument> for TaskChange {
    fn from(d: TaskChangeDocument) -> Self {
        let TaskChangeDocument { task, host, diff } = d;
        TaskChange { task, host, diff }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use slipway_domain::resource::Spec;

    use super::*;

    fn change() -> TaskChange {
        TaskChange { task: "Record the resource".into(), host: "localhost".into(), diff: json!([{"before": "a"}]) }
    }

    #[test]
    fn a_what_if_is_stored_by_name_and_read_back_whole() {
        let spec = Spec { location: Some("west".into()), tags: Default::default(), properties: json!({"a": 1}) };
        let w =
            WhatIf { before: Some(spec.clone()), after: None, predicted: Some(vec![change()]), guardrails: Vec::new() };
        let text = serde_json::to_value(WhatIfDocument::from(&w)).unwrap();
        assert_eq!(
            text,
            json!({"before": {"location": "west", "tags": {}, "properties": {"a": 1}},
                   "predicted": [{"task": "Record the resource", "host": "localhost", "diff": [{"before": "a"}]}]})
        );
        assert_eq!(WhatIf::from(serde_json::from_value::<WhatIfDocument>(text).unwrap()), w);
    }

    #[test]
    fn a_drift_verdict_is_stored_by_name_and_read_back_whole() {
        let d = Drift {
            state: DriftState::Drifted,
            last_checked_at: Timestamp(5),
            config_version: ConfigVersion::new("v1"),
            changes: vec![change()],
            message: String::new(),
            remediation: slipway_domain::ids::OperationId::parse("0190a0a0-0000-7000-8000-000000000001"),
        };
        let text = serde_json::to_value(DriftDocument::from(&d)).unwrap();
        assert_eq!(text["state"], "Drifted");
        assert_eq!(text["lastCheckedAt"], 5);
        assert_eq!(text["remediation"], "0190a0a0-0000-7000-8000-000000000001");
        assert_eq!(Drift::try_from(serde_json::from_value::<DriftDocument>(text).unwrap()).unwrap(), d);
        let bad = json!({"state": "Drifted", "lastCheckedAt": 5, "configVersion": "v1", "remediation": "nope"});
        assert!(Drift::try_from(serde_json::from_value::<DriftDocument>(bad).unwrap()).is_err());
    }
}
