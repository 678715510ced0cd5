//! What can go wrong in a client command: ARM's error body parsed into a type, and the
//! command-level failures each exit code stands for (`crate::exit`).

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

/// ARM's `{"error": {code, message, target?, details?}}`, with the HTTP status it came with.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct ArmError {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub details: Vec<ArmError>,
    /// Typed facts beside the message: which guardrail refused (`QuotaExceeded`,
    /// `ScopeLocked`, `PolicyViolation`).
    #[serde(default, rename = "additionalInfo")]
    pub additional_info: Box<[AdditionalInfo]>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct AdditionalInfo {
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub info: Value,
}

impl AdditionalInfo {
    /// The guardrail that refused, in a line: `refused by the lock …`.
    fn guardrail(&self) -> Option<String> {
        slipway_domain::refusal::guardrail_refusal(&self.kind, &self.info)
    }
}

#[derive(Deserialize)]
struct Envelope {
    error: ArmError,
}

impl ArmError {
    /// Reads an error as an operation status document or an error body carries it.
    pub fn from_value(value: &Value) -> Option<ArmError> {
        serde_json::from_value(value.clone()).ok()
    }

    /// Indented lines: code and message, the target, then each detail one level deeper.
    pub fn render(&self, indent: usize, out: &mut String) {
        let pad = "  ".repeat(indent);
        let code = if self.code.is_empty() { "Error" } else { &self.code };
        out.push_str(&format!("{pad}{code}: {}\n", self.message));
        if let Some(target) = self.target.as_deref().filter(|t| !t.is_empty()) {
            out.push_str(&format!("{pad}  target: {target}\n"));
        }
        for guardrail in self.additional_info.iter().filter_map(AdditionalInfo::guardrail) {
            out.push_str(&format!("{pad}  {guardrail}\n"));
        }
        for detail in &self.details {
            detail.render(indent + 1, out);
        }
    }
}

/// An API answer that was not a success.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub error: ArmError,
}

impl ApiError {
    /// An ARM error body when there is one; otherwise the status and whatever text came.
    pub fn from_body(status: u16, body: &str) -> ApiError {
        let error = match serde_json::from_str::<Envelope>(body) {
            Ok(envelope) => envelope.error,
            Err(_) => {
                ArmError { code: format!("Http{status}"), message: body.trim().to_string(), ..Default::default() }
            }
        };
        ApiError { status, error }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = format!("the API answered {}\n", self.status);
        self.error.render(1, &mut text);
        f.write_str(text.trim_end())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A terminal `Failed` operation: its status document.
    #[error("{}", operation_text("failed", .0))]
    OperationFailed(Value),
    /// A terminal `Canceled` operation: its status document.
    #[error("{}", operation_text("was canceled", .0))]
    Canceled(Value),
    #[error("{0}")]
    Usage(String),
    #[error("gave up waiting: {0}")]
    TimedOut(String),
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("{0}")]
    Api(ApiError),
    /// Anything else that stops a command (an answer that is not what ARM promises, a file
    /// that cannot be written).
    #[error("{0}")]
    Local(String),
}

fn operation_text(what: &str, status: &Value) -> String {
    let name = status["name"].as_str().unwrap_or("?");
    let mut text = format!("operation {name} {what}\n");
    if let Some(error) = ArmError::from_value(&status["error"]) {
        error.render(1, &mut text);
    }
    text.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arm_error_prints_code_message_target_and_indented_details() {
        let body = r#"{"error": {"code": "MultipleErrorsOccurred", "message": "2 problems",
            "details": [{"code": "InvalidRequestContent", "message": "bad", "target": "properties.a"},
                        {"code": "InvalidRequestContent", "message": "worse"}]}}"#;
        let text = ApiError::from_body(400, body).to_string();
        assert_eq!(
            text,
            "the API answered 400\n  MultipleErrorsOccurred: 2 problems\n    InvalidRequestContent: bad\n      \
             target: properties.a\n    InvalidRequestContent: worse"
        );
    }

    #[test]
    fn a_body_that_is_no_arm_error_is_kept_as_text() {
        let e = ApiError::from_body(502, "Bad Gateway");
        assert_eq!((e.error.code.as_str(), e.error.message.as_str()), ("Http502", "Bad Gateway"));
    }
}
