//! ARM optimistic concurrency: a resource's `etag`, and the `If-Match` / `If-None-Match`
//! preconditions of PUT, PATCH and DELETE (RFC 9110 §13.1), checked inside the request's
//! change against the resource as committed.

use axum::http::HeaderMap;
use slipway_domain::admission::Rejection;

/// The preconditions a request carries; empty when it carries none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Preconditions {
    if_match: Option<Vec<String>>,
    if_none_match: Option<Vec<String>>,
}

impl Preconditions {
    pub fn from_headers(headers: &HeaderMap) -> Preconditions {
        let list = |name: &str| {
            let values: Vec<String> = headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(|t| t.trim().trim_start_matches("W/").to_string())
                .filter(|t| !t.is_empty())
                .collect();
            (!values.is_empty()).then_some(values)
        };
        Preconditions { if_match: list("if-match"), if_none_match: list("if-none-match") }
    }

    pub fn is_empty(&self) -> bool {
        self.if_match.is_none() && self.if_none_match.is_none()
    }

    /// `Err(412)` unless the resource's current `etag` (`None`: it does not exist) meets
    /// both preconditions: `If-Match` names it (or `*` and it exists), `If-None-Match` does
    /// not (`*`: it must not exist — a create-only PUT).
    pub fn check(&self, current: Option<&str>) -> Result<(), Rejection> {
        let names = |list: &[String], etag: Option<&str>| etag.is_some_and(|e| list.iter().any(|t| t == "*" || t == e));
        if let Some(list) = &self.if_match
            && !names(list, current)
        {
            let why = match current {
                None => "the resource does not exist".to_string(),
                Some(e) => format!("its current etag is {e}"),
            };
            return Err(failed(format!("If-Match does not match the resource: {why}.")));
        }
        if let Some(list) = &self.if_none_match
            && names(list, current)
        {
            return Err(failed(match list.iter().any(|t| t == "*") {
                true => "If-None-Match: * refuses an existing resource.".to_string(),
                false => "If-None-Match names the resource's current etag.".to_string(),
            }));
        }
        Ok(())
    }
}

fn failed(message: String) -> Rejection {
    Rejection::PreconditionFailed { message }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn pre(if_match: Option<&str>, if_none_match: Option<&str>) -> Preconditions {
        let mut h = HeaderMap::new();
        if let Some(v) = if_match {
            h.insert("if-match", HeaderValue::from_str(v).unwrap());
        }
        if let Some(v) = if_none_match {
            h.insert("if-none-match", HeaderValue::from_str(v).unwrap());
        }
        Preconditions::from_headers(&h)
    }

    #[test]
    fn precondition_table() {
        let e = "\"abc\"";
        // (If-Match, If-None-Match, current etag, passes)
        let cases = [
            (None, None, None, true),
            (None, None, Some(e), true),
            (Some("*"), None, Some(e), true),
            (Some("*"), None, None, false),
            (Some(e), None, Some(e), true),
            (Some("W/\"abc\""), None, Some(e), true),
            (Some("\"x\", \"abc\""), None, Some(e), true),
            (Some("\"x\""), None, Some(e), false),
            (Some(e), None, None, false),
            (None, Some("*"), None, true),
            (None, Some("*"), Some(e), false),
            (None, Some("\"x\""), Some(e), true),
            (None, Some(e), Some(e), false),
            (Some(e), Some("*"), Some(e), false),
        ];
        for (m, n, current, passes) in cases {
            let got = pre(m, n).check(current);
            assert_eq!(got.is_ok(), passes, "If-Match {m:?}, If-None-Match {n:?}, current {current:?}: {got:?}");
        }
        assert!(pre(None, None).is_empty());
        assert!(!pre(Some("*"), None).is_empty());
    }
}
