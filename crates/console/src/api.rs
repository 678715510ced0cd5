//! The console's way to the API: each request a page needs goes through Slipway's own API
//! router in process, carrying the visitor's credential, address and forwarding headers. So
//! the console can show and do exactly what the visitor could with any other client —
//! authorization, tenancy, validation and rate limits are the API's, never a second copy.

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, header};
use axum::response::Response;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::Value;
use slipway_listener::PeerAddr;
use tower::ServiceExt;

/// What a path encodes: ARM ids are `/`-separated, and the API decodes each segment after
/// splitting. `%` stays (no ARM name may hold one), so a segment encoded before keeps its
/// meaning.
const PATH: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b'#').add(b'<').add(b'>').add(b'?').add(b'`');
const QUERY: &AsciiSet = &PATH.add(b'%').add(b'&').add(b'=').add(b'+').add(b'\'');

/// What one path segment must encode: its separators too.
const SEGMENT: &AsciiSet = &PATH.add(b'/').add(b'\\').add(b'%');

/// One path segment (a subscription or group name from a link), encoded so it stays one.
pub(crate) fn segment(text: &str) -> String {
    utf8_percent_encode(text, SEGMENT).to_string()
}

/// The largest answer a page reads (lists are paged far below this).
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// Headers of the visitor's request the API decides with: where absolute URLs point and, from
/// a trusted proxy, who the client is.
const FORWARDED: [HeaderName; 5] = [
    header::HOST,
    HeaderName::from_static("x-forwarded-for"),
    HeaderName::from_static("x-forwarded-proto"),
    HeaderName::from_static("x-forwarded-host"),
    header::USER_AGENT,
];

/// Who is asking, as the API should see them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Visitor {
    /// The bearer credential from the session cookie.
    pub token: Option<String>,
    pub peer: Option<PeerAddr>,
    pub forwarded: HeaderMap,
}

impl Visitor {
    pub fn from_request(headers: &HeaderMap, peer: Option<PeerAddr>, token: Option<String>) -> Visitor {
        let mut forwarded = HeaderMap::new();
        for name in FORWARDED {
            for value in headers.get_all(&name) {
                forwarded.append(name.clone(), value.clone());
            }
        }
        Visitor { token, peer, forwarded }
    }
}

/// An ARM error body's parts, as pages show them.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct ArmProblem {
    pub code: String,
    pub message: String,
    pub target: Option<String>,
    pub details: Vec<ArmProblem>,
    /// Which guardrail refused, in a line (from the error's `additionalInfo`).
    pub guardrail: Option<Box<str>>,
}

impl ArmProblem {
    pub fn new(code: &str, message: impl Into<String>) -> ArmProblem {
        ArmProblem { code: code.into(), message: message.into(), target: None, details: Vec::new(), guardrail: None }
    }

    pub fn from_error(error: &Value) -> ArmProblem {
        let text = |k: &str| error.get(k).and_then(Value::as_str).map(str::to_string);
        ArmProblem {
            code: text("code").unwrap_or_else(|| "Error".into()),
            message: text("message").unwrap_or_default(),
            target: text("target"),
            details: error
                .get("details")
                .and_then(Value::as_array)
                .map(|d| d.iter().map(ArmProblem::from_error).collect())
                .unwrap_or_default(),
            guardrail: error.get("additionalInfo").and_then(Value::as_array).and_then(|infos| {
                infos
                    .iter()
                    .find_map(|i| {
                        slipway_domain::refusal::guardrail_refusal(i["type"].as_str().unwrap_or_default(), &i["info"])
                    })
                    .map(String::into_boxed_str)
            }),
        }
    }
}

/// A refused or failed request: its status and the API's error.
#[derive(Clone, Debug)]
pub(crate) struct Refusal {
    pub status: StatusCode,
    pub problem: ArmProblem,
}

/// An answer the API gave: its status, headers and JSON body (`Null` when it had none).
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Answer {
    /// A response with its JSON body read (`Null` when it had none).
    pub async fn read(resp: Response) -> Answer {
        let (parts, body) = resp.into_parts();
        let bytes = to_bytes(body, MAX_ANSWER_BYTES).await.unwrap_or_default();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer { status: parts.status, headers: parts.headers, body }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body when the status is a success, else the refusal.
    pub fn ok(self) -> Result<Value, Refusal> {
        if self.status.is_success() {
            return Ok(self.body);
        }
        let problem = match self.body.get("error") {
            Some(error) => ArmProblem::from_error(error),
            None => ArmProblem::new(
                &self.status.canonical_reason().unwrap_or("Error").replace(' ', ""),
                format!("The API answered {}.", self.status),
            ),
        };
        Err(Refusal { status: self.status, problem })
    }
}

#[derive(Clone)]
pub(crate) struct ApiClient {
    router: Router,
}

/// A path with its query, each part percent-encoded.
pub(crate) fn uri(path: &str, query: &[(&str, &str)]) -> String {
    let mut out: String = utf8_percent_encode(path, PATH).to_string();
    for (i, (k, v)) in query.iter().enumerate() {
        out.push(if i == 0 { '?' } else { '&' });
        out.push_str(&utf8_percent_encode(k, QUERY).to_string());
        out.push('=');
        out.push_str(&utf8_percent_encode(v, QUERY).to_string());
    }
    out
}

impl ApiClient {
    pub fn new(router: Router) -> ApiClient {
        ApiClient { router }
    }

    /// The API's response, its body unread (a stream of job output, say).
    pub async fn send(
        &self,
        visitor: &Visitor,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Response {
        let mut req = Request::builder().method(method).uri(uri(path, query));
        for (name, value) in &visitor.forwarded {
            req = req.header(name, value);
        }
        if let Some(token) = &visitor.token
            && let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}"))
        {
            req = req.header(header::AUTHORIZATION, value);
        }
        let body = match body {
            Some(json) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(json.to_string())
            }
            None => Body::empty(),
        };
        let mut req = match req.body(body) {
            Ok(req) => req,
            Err(e) => {
                tracing::warn!(error = %e, "console built a request the API cannot take");
                return Response::builder().status(StatusCode::BAD_REQUEST).body(Body::empty()).unwrap_or_default();
            }
        };
        if let Some(peer) = visitor.peer {
            req.extensions_mut().insert(peer);
        }
        match self.router.clone().oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        }
    }

    /// The API's answer with its JSON body read.
    pub async fn call(
        &self,
        visitor: &Visitor,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Answer {
        Answer::read(self.send(visitor, method, path, query, body).await).await
    }

    /// `GET` with the api-version: the body, or why not.
    pub async fn get(&self, visitor: &Visitor, path: &str, api_version: &str) -> Result<Value, Refusal> {
        self.get_with(visitor, path, &[("api-version", api_version)]).await
    }

    pub async fn get_with(&self, visitor: &Visitor, path: &str, query: &[(&str, &str)]) -> Result<Value, Refusal> {
        self.call(visitor, Method::GET, path, query, None).await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_encode_what_would_change_their_meaning() {
        assert_eq!(
            uri("/subscriptions/s/resourceGroups/rg 1/x#y", &[("api-version", "1"), ("$filter", "a eq 'b&c'")]),
            "/subscriptions/s/resourceGroups/rg%201/x%23y?api-version=1&$filter=a%20eq%20%27b%26c%27"
        );
    }
}
