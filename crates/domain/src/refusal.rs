//! How a guardrail's refusal reads to a person: the line the CLI and the console print from
//! an ARM error's `additionalInfo` entry (`QuotaExceeded`, `ScopeLocked`, `PolicyViolation`),
//! so both say the same thing.

use serde_json::Value;

/// `refused by the lock …`, for an `additionalInfo` entry of `kind` with `info`; `None` for
/// a kind that is no guardrail's.
pub fn guardrail_refusal(kind: &str, info: &Value) -> Option<String> {
    let text = |k: &str| info[k].as_str().unwrap_or("?").to_string();
    match kind {
        "QuotaExceeded" => Some(format!(
            "refused by the quota '{}' ({}): limit {}, in use {}, asked {} {}",
            text("meter"),
            text("scope"),
            info["limit"],
            info["currentValue"],
            info["requested"],
            text("unit")
        )),
        "ScopeLocked" => Some(format!("refused by the lock {} ({})", text("lockId"), text("level"))),
        "PolicyViolation" => Some(format!(
            "refused by the policy assignment {} (definition {})",
            text("policyAssignmentId"),
            text("policyDefinitionId")
        )),
        _ => None,
    }
}
