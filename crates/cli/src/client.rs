//! The HTTP side: one reqwest client with the bearer token, every request given its
//! `api-version`, answers read as JSON and refusals turned into `ApiError`s.

use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::error::{ApiError, CliError};
use crate::profile::Settings;

/// The api-version of the platform's own endpoints (subscriptions, role assignments, API
/// tokens, overview lists) and of discovery.
pub const PLATFORM_API: &str = "2025-06-01";

pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// A successful answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    /// JSON when the body is JSON, `Null` when empty, else the text as a string.
    pub body: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
    }

    /// `Retry-After` in seconds (ARM sends seconds, never a date).
    pub fn retry_after(&self) -> Option<Duration> {
        self.header("retry-after").and_then(|v| v.trim().parse::<f64>().ok()).map(Duration::from_secs_f64)
    }
}

impl Client {
    pub fn new(settings: &Settings) -> Result<Client, CliError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("slipway-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CliError::Local(format!("building the HTTP client: {e}")))?;
        Ok(Client { http, base: settings.url.trim_end_matches('/').to_string(), token: settings.token.clone() })
    }

    /// `target` is a path on the server or an absolute URL (a status URL, a `nextLink`); an
    /// `api-version` it does not carry yet is added.
    pub fn url(&self, target: &str, api_version: &str) -> String {
        let url = if target.starts_with("http://") || target.starts_with("https://") {
            target.to_string()
        } else {
            format!("{}{target}", self.base)
        };
        if url.contains("api-version=") {
            url
        } else {
            let sep = if url.contains('?') { '&' } else { '?' };
            format!("{url}{sep}api-version={api_version}")
        }
    }

    pub fn request(&self, method: Method, target: &str, api_version: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, self.url(target, api_version));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// Sends and reads the whole answer; a status of 400 or more is an `ApiError`.
    pub async fn send(&self, builder: reqwest::RequestBuilder) -> Result<Reply, CliError> {
        let response = builder.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.map_err(transport)?;
        if status >= 400 {
            return Err(CliError::Api(ApiError::from_body(status, &text)));
        }
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok(Reply { status, headers, body })
    }

    pub async fn call(
        &self,
        method: Method,
        target: &str,
        api_version: &str,
        body: Option<&Value>,
    ) -> Result<Reply, CliError> {
        let mut builder = self.request(method, target, api_version);
        if let Some(body) = body {
            builder = builder.json(body);
        }
        self.send(builder).await
    }

    pub async fn get(&self, target: &str, api_version: &str) -> Result<Value, CliError> {
        Ok(self.call(Method::GET, target, api_version, None).await?.body)
    }

    /// Every item of a list, following `nextLink` to the end.
    pub async fn list_all(&self, target: &str, api_version: &str) -> Result<Vec<Value>, CliError> {
        let mut items = Vec::new();
        let mut next = Some(target.to_string());
        while let Some(page_url) = next.take() {
            let mut page = self.get(&page_url, api_version).await?;
            if let Some(Value::Array(value)) = page.get_mut("value").map(Value::take) {
                items.extend(value);
            }
            next = page.get("nextLink").and_then(Value::as_str).filter(|l| !l.is_empty()).map(str::to_string);
        }
        Ok(items)
    }
}

/// A request that never got an HTTP answer: cannot connect (exit 5), unless it is a
/// protocol problem after connecting.
pub fn transport(e: reqwest::Error) -> CliError {
    if e.is_connect() || e.is_timeout() {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        CliError::Connect(text)
    } else {
        CliError::Local(format!("the HTTP exchange failed: {e}"))
    }
}

/// Percent-encodes one path segment (a name may hold characters a URL reserves).
pub fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, SEGMENT).to_string()
}

const SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~').remove(b'(').remove(b')');

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> Client {
        let settings = Settings {
            profile: "p".into(),
            url: "http://h:1/".into(),
            token: None,
            subscription: None,
            resource_group: None,
            oidc: None,
        };
        Client::new(&settings).unwrap()
    }

    #[test]
    fn the_api_version_is_added_once() {
        let c = client();
        assert_eq!(c.url("/subscriptions", "v1"), "http://h:1/subscriptions?api-version=v1");
        assert_eq!(c.url("/x?a=b", "v1"), "http://h:1/x?a=b&api-version=v1");
        assert_eq!(c.url("https://o/s?api-version=v2", "v1"), "https://o/s?api-version=v2");
    }

    #[test]
    fn a_segment_keeps_names_readable_and_reserved_characters_escaped() {
        assert_eq!(segment("vm-1(a)"), "vm-1(a)");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }
}
