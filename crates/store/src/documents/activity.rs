//! Version 1 of an `activity` row's body: the whole entry (its columns only index it).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use slipway_domain::activity::{ActivityCaller, ActivityEntry, ChangeKind, PropertyChange, RequestInfo};
use slipway_domain::ids::SubscriptionId;
use slipway_domain::time::Timestamp;

use super::{DocumentError, check_version, is_version_1, operation_id_opt, version_1};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ActivityDocument {
    #[serde(rename = "v", default = "version_1", skip_serializing_if = "is_version_1")]
    version: u32,
    #[serde(rename = "time")]
    time: i64,
    #[serde(rename = "subscription", default, skip_serializing_if = "Option::is_none")]
    subscription: Option<String>,
    #[serde(rename = "target")]
    target: String,
    #[serde(rename = "operationName")]
    operation_name: String,
    #[serde(rename = "caller")]
    caller: CallerDocument,
    #[serde(rename = "request")]
    request: RequestDocument,
    #[serde(rename = "status")]
    status: u16,
    #[serde(rename = "error", default, skip_serializing_if = "Option::is_none")]
    error: Option<ErrorDocument>,
    #[serde(rename = "operationId", default, skip_serializing_if = "Option::is_none")]
    operation_id: Option<String>,
    #[serde(rename = "changes", default, skip_serializing_if = "Vec::is_empty")]
    changes: Vec<ChangeDocument>,
    #[serde(rename = "changesTruncated", default, skip_serializing_if = "std::ops::Not::not")]
    changes_truncated: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct CallerDocument {
    #[serde(rename = "name")]
    name: String,
    #[serde(rename = "issuer", default)]
    issuer: String,
    #[serde(rename = "kind", default)]
    kind: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct RequestDocument {
    #[serde(rename = "method")]
    method: String,
    #[serde(rename = "uri")]
    uri: String,
    #[serde(rename = "userAgent", default)]
    user_agent: String,
    #[serde(rename = "clientAddress", default)]
    client_address: String,
    #[serde(rename = "correlationId", default)]
    correlation_id: String,
    #[serde(rename = "requestId", default)]
    request_id: String,
    #[serde(rename = "clientRequestId", default)]
    client_request_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ErrorDocument {
    #[serde(rename = "code")]
    code: String,
    #[serde(rename = "message")]
    message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ChangeDocument {
    #[serde(rename = "path")]
    path: String,
    #[serde(rename = "kind")]
    kind: String,
    #[serde(rename = "previous", default, skip_serializing_if = "Option::is_none")]
    previous: Option<Value>,
    #[serde(rename = "new", default, skip_serializing_if = "Option::is_none")]
    new: Option<Value>,
    #[serde(rename = "secret", default, skip_serializing_if = "std::ops::Not::not")]
    secret: bool,
}

impl From<&ActivityEntry> for ActivityDocument {
    fn from(e: &ActivityEntry) -> Self {
        let ActivityEntry {
            time,
            subscription,
            target,
            operation_name,
            caller,
            request,
            status,
            error,
            operation_id,
            changes,
            changes_truncated,
        } = e;
        let ActivityCaller { name, issuer, kind } = caller;
        let RequestInfo { method, uri, user_agent, client_address, correlation_id, request_id, client_request_id } =
            request;
        ActivityDocument {
            version: 1,
            time: time.as_millis(),
            subscription: subscription.as_ref().map(|s| s.as_str().to_string()),
            target: target.clone(),
            operation_name: operation_name.clone(),
            caller: CallerDocument { name: name.clone(), issuer: issuer.clone(), kind: kind.clone() },
            request: RequestDocument {
                method: method.clone(),
                uri: uri.clone(),
                user_agent: user_agent.clone(),
                client_address: client_address.clone(),
                correlation_id: correlation_id.clone(),
                request_id: request_id.clone(),
                client_request_id: client_request_id.clone(),
            },
            status: *status,
            error: error.as_ref().map(|(code, message)| ErrorDocument { code: code.clone(), message: message.clone() }),
            operation_id: operation_id.as_ref().map(|id| id.as_str().to_string()),
            changes: changes
                .iter()
                .map(|c| ChangeDocument {
                    path: c.path.clone(),
                    kind: c.kind.as_str().to_string(),
                    previous: c.previous.clone(),
                    new: c.new.clone(),
                    secret: c.secret,
                })
                .collect(),
            changes_truncated: *changes_truncated,
        }
    }
}

impl TryFrom<ActivityDocument> for ActivityEntry {
    type Error = DocumentError;

    fn try_from(d: ActivityDocument) -> Result<Self, DocumentError> {
        let ActivityDocument {
            version,
            time,
            subscription,
            target,
            operation_name,
            caller,
            request,
            status,
            error,
            operation_id,
            changes,
            changes_truncated,
        } = d;
        check_version(version)?;
        let CallerDocument { name, issuer, kind } = caller;
        let RequestDocument { method, uri, user_agent, client_address, correlation_id, request_id, client_request_id } =
            request;
        let changes = changes
            .into_iter()
            .map(|c| {
                let kind = ChangeKind::parse(&c.kind)
                    .ok_or_else(|| DocumentError(format!("{:?} is not a property change kind", c.kind)))?;
                Ok(PropertyChange { path: c.path, kind, previous: c.previous, new: c.new, secret: c.secret })
            })
            .collect::<Result<_, DocumentError>>()?;
        Ok(ActivityEntry {
            time: Timestamp::from_millis(time),
            subscription: subscription.map(|s| SubscriptionId::new(&s)),
            target,
            operation_name,
            caller: ActivityCaller { name, issuer, kind },
            request: RequestInfo {
                method,
                uri,
                user_agent,
                client_address,
                correlation_id,
                request_id,
                client_request_id,
            },
            status,
            error: error.map(|e| (e.code, e.message)),
            operation_id: operation_id_opt(operation_id, "activity operation id")?,
            changes,
            changes_truncated,
        })
    }
}
