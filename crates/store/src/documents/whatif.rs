//! A what-if operation's part of the `operations` body: the spec before and the one
//! proposed, and the tasks its check-mode job said it would change.

use serde::{Deserialize, Serialize};
use slipway_domain::whatif::{TaskChange, WhatIf};

use super::resource::SpecDocument;

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
        let WhatIf { before, after, predicted } = w;
        WhatIfDocument {
            before: before.as_ref().map(SpecDocument::from),
            after: after.as_ref().map(SpecDocument::from),
            predicted: predicted.as_ref().map(|p| p.iter().map(TaskChangeDocument::from).collect()),
        }
    }
}

impl From<WhatIfDocument> for WhatIf {
    fn from(d: WhatIfDocument) -> Self {
        let WhatIfDocument { before, after, predicted } = d;
        WhatIf {
            before: before.map(Into::into),
            after: after.map(Into::into),
            predicted: predicted.map(|p| p.into_iter().map(TaskChange::from).collect()),
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
