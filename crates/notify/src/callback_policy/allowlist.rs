//! The callback allowlist's entries: `scheme://host[:port]` patterns, a leading `*.` matching
//! every name below a domain, parsed from the configuration and matched against a URI.

use reqwest::Url;

use super::{CallbackPolicyError, Host, host_of};

/// One allowlist entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct HostPattern {
    pub(super) text: String,
    scheme: String,
    host: HostMatch,
    port: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum HostMatch {
    Exact(String),
    /// `*.suffix`: any name ending in `.suffix`.
    Below(String),
}

impl HostPattern {
    pub(super) fn parse(entry: &str, allow_http: bool) -> Result<HostPattern, CallbackPolicyError> {
        let fail = |reason: &str| CallbackPolicyError { entry: entry.to_string(), reason: reason.to_string() };
        let text = entry.trim();
        let (scheme, rest) = text.split_once("://").ok_or_else(|| fail("use scheme://host[:port]"))?;
        let scheme = scheme.to_ascii_lowercase();
        match scheme.as_str() {
            "https" => {}
            "http" if allow_http => {}
            "http" => return Err(fail("an http entry needs callback_allow_http = true")),
            _ => return Err(fail("the scheme must be https or http")),
        }
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
            return Err(fail("give only scheme://host[:port], without a path, query or user"));
        }
        let (wildcard, rest) = match rest.strip_prefix("*.") {
            Some(below) => (true, below),
            None => (false, rest),
        };
        if rest.contains('*') {
            return Err(fail("a wildcard may only be a leading '*.'"));
        }
        // The URL parser normalises the host (case, IDNA, IP forms) as it will the URIs'.
        let url = Url::parse(&format!("{scheme}://{rest}/")).map_err(|_| fail("not a valid host"))?;
        let host = url.host_str().ok_or_else(|| fail("not a valid host"))?;
        let host = host.trim_end_matches('.').to_string();
        if wildcard && !matches!(host_of(&url), Some(Host::Domain(_))) {
            return Err(fail("a wildcard needs a domain name after '*.'"));
        }
        Ok(HostPattern {
            text: text.to_string(),
            scheme,
            host: if wildcard { HostMatch::Below(host) } else { HostMatch::Exact(host) },
            port: url.port(),
        })
    }

    pub(super) fn matches(&self, url: &Url) -> bool {
        let Some(host) = url.host_str() else { return false };
        let host = host.trim_end_matches('.');
        let host_ok = match &self.host {
            HostMatch::Exact(h) => host == h,
            HostMatch::Below(suffix) => {
                matches!(host_of(url), Some(Host::Domain(_)))
                    && host.len() > suffix.len() + 1
                    && host.ends_with(suffix.as_str())
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
            }
        };
        url.scheme() == self.scheme && host_ok && self.port.is_none_or(|p| Some(p) == url.port_or_known_default())
    }
}
