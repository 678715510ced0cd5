//! Who is calling and from where: the verified credential (or the loopback-only local mode),
//! and whether the peer is a configured proxy or ARM front end whose forwarded headers may be
//! believed. Everything a client merely claims in a header is ignored unless one of those
//! vouches for it.

use std::net::IpAddr;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use slipway_auth::{AuthError, Authenticated};
use slipway_domain::Principal;

use crate::ApiState;
use crate::error::ArmError;

/// Where absolute URLs point and whose forwarding headers count.
#[derive(Clone, Debug, Default)]
pub struct EdgeOptions {
    /// `https://slipway.example.com`: the scheme and authority of every absolute URL Slipway
    /// hands out (`Azure-AsyncOperation`, `Location`, `nextLink`).
    pub public_base_url: Option<String>,
    /// Peers whose `Referer`, `X-Forwarded-Proto` and `X-Forwarded-Host` are believed.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The listener serves HTTPS: URLs built from the request's own `Host` use `https`.
    pub tls: bool,
}

impl EdgeOptions {
    fn trusts(&self, peer: Option<IpAddr>) -> bool {
        peer.is_some_and(|ip| self.trusted_proxies.iter().any(|net| net.contains(&ip)))
    }
}

/// The caller of one request.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    pub principal: Principal,
    /// The identity headers (`x-ms-client-*`, `x-ms-home-tenant-id`,
    /// `x-ms-arm-resource-system-data`) are believed: the caller is a configured ARM front end,
    /// or authentication is off (the local user may do anything anyway).
    pub speaks_for_others: bool,
}

/// The client's address: the TCP peer, or behind a trusted proxy the nearest address in
/// `X-Forwarded-For` that is not itself a trusted proxy (what a client writes further left
/// is its own claim). `None` when the listener gave no peer (requests made in-process).
pub(crate) fn client_addr(options: &EdgeOptions, headers: &HeaderMap, peer: Option<IpAddr>) -> Option<IpAddr> {
    if !options.trusts(peer) {
        return peer;
    }
    let forwarded = headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok());
    let hops: Vec<IpAddr> = forwarded.flat_map(|v| v.split(',')).filter_map(|h| h.trim().parse().ok()).collect();
    hops.into_iter().rev().find(|ip| !options.trusts(Some(*ip))).or(peer)
}

/// Authenticates a request: a principal, or the `401` (or `503`) to answer.
pub(crate) async fn authenticate(state: &ApiState, headers: &HeaderMap) -> Result<Caller, Response> {
    let Some(auth) = &state.auth else {
        return Ok(Caller { principal: Principal::local(), speaks_for_others: true });
    };
    let value = headers.get(header::AUTHORIZATION).map(|v| v.to_str().map_err(|_| AuthError::Malformed));
    let result = match value.transpose() {
        Ok(value) => auth.authenticate(value).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(Authenticated { principal, trusted_front_end }) => {
            Ok(Caller { principal, speaks_for_others: trusted_front_end })
        }
        Err(e) => Err(refusal(&e)),
    }
}

/// `401` with `WWW-Authenticate: Bearer` (RFC 6750) and the ARM error, or `503` when the
/// credential could not be checked. The credential itself is never echoed.
fn refusal(e: &AuthError) -> Response {
    if let AuthError::Unavailable(why) = e {
        tracing::warn!(error = %why, "cannot check credentials");
        return ArmError::unavailable("Credentials cannot be checked right now; retry later.").into_response();
    }
    tracing::debug!(reason = %e, "request not authenticated");
    let mut resp = ArmError::new(StatusCode::UNAUTHORIZED, e.arm_code(), capitalise(&e.to_string())).into_response();
    let challenge = match e.bearer_error() {
        Some(code) => format!("Bearer realm=\"slipway\", error=\"{code}\", error_description=\"{e}\""),
        None => "Bearer realm=\"slipway\"".to_string(),
    };
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    resp
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect::<String>() + ".",
        None => String::new(),
    }
}

/// A host (and port) fit to put into a URL: letters, digits, `.-:[]`, nothing else.
fn clean_authority(s: &str) -> Option<&str> {
    let ok = !s.is_empty()
        && s.len() <= 255
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    ok.then_some(s)
}

/// Scheme and authority for absolute URLs. A trusted proxy's `Referer` (what ARM sends) or
/// `X-Forwarded-Proto`/`-Host` come first; then the configured public base URL; then the
/// request's own `Host` over the listener's scheme.
pub(crate) fn base_url(options: &EdgeOptions, headers: &HeaderMap, peer: Option<IpAddr>, scheme: &str) -> String {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if options.trusts(peer) {
        if let Some((scheme, rest)) = header("referer").and_then(|r| r.split_once("://")) {
            let authority = rest.split(['/', '?', '#']).next().and_then(clean_authority);
            if let Some(authority) = authority.filter(|_| scheme == "http" || scheme == "https") {
                return format!("{scheme}://{authority}");
            }
        }
        let proto = header("x-forwarded-proto").and_then(|p| p.split(',').next()).map(str::trim);
        let host = header("x-forwarded-host").and_then(|h| h.split(',').next()).map(str::trim);
        if proto.is_some() || host.is_some() {
            let scheme = proto.filter(|p| *p == "http" || *p == "https").unwrap_or(scheme);
            if let Some(host) = host.or_else(|| header("host")).and_then(clean_authority) {
                return format!("{scheme}://{host}");
            }
        }
    }
    if let Some(base) = &options.public_base_url {
        return base.trim_end_matches('/').to_string();
    }
    let host = header("host").and_then(clean_authority).unwrap_or("localhost");
    format!("{scheme}://{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn forwarding_headers_count_only_from_trusted_proxies() {
        let proxy: IpAddr = "10.0.0.5".parse().unwrap();
        let stranger: IpAddr = "203.0.113.9".parse().unwrap();
        let options =
            EdgeOptions { public_base_url: None, trusted_proxies: vec!["10.0.0.0/24".parse().unwrap()], tls: false };
        let h = headers(&[
            ("host", "127.0.0.1:8080"),
            ("referer", "https://attacker.example/subscriptions/x"),
            ("x-forwarded-proto", "https"),
        ]);
        assert_eq!(base_url(&options, &h, Some(stranger), "http"), "http://127.0.0.1:8080");
        assert_eq!(base_url(&options, &h, None, "http"), "http://127.0.0.1:8080");
        assert_eq!(base_url(&options, &h, Some(proxy), "http"), "https://attacker.example");
        let forwarded =
            headers(&[("host", "internal:8080"), ("x-forwarded-proto", "https"), ("x-forwarded-host", "rp.example")]);
        assert_eq!(base_url(&options, &forwarded, Some(proxy), "http"), "https://rp.example");
    }

    #[test]
    fn the_client_address_is_the_peer_unless_a_trusted_proxy_forwards_it() {
        let options = EdgeOptions { trusted_proxies: vec!["10.0.0.0/24".parse().unwrap()], ..Default::default() };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let h = headers(&[("x-forwarded-for", "198.51.100.7, 203.0.113.9, 10.0.0.6")]);
        assert_eq!(client_addr(&options, &h, Some(ip("203.0.113.1"))), Some(ip("203.0.113.1")), "a stranger's claim");
        assert_eq!(client_addr(&options, &h, Some(ip("10.0.0.5"))), Some(ip("203.0.113.9")), "nearest untrusted hop");
        assert_eq!(client_addr(&options, &headers(&[]), Some(ip("10.0.0.5"))), Some(ip("10.0.0.5")));
        assert_eq!(client_addr(&options, &headers(&[]), None), None);
    }

    #[test]
    fn the_public_base_url_wins_over_the_host_header() {
        let options = EdgeOptions {
            public_base_url: Some("https://slipway.example/".into()),
            trusted_proxies: vec![],
            tls: false,
        };
        let h = headers(&[("host", "evil.example"), ("referer", "https://attacker.example/")]);
        assert_eq!(base_url(&options, &h, Some("127.0.0.1".parse().unwrap()), "http"), "https://slipway.example");
    }

    #[test]
    fn a_host_that_does_not_fit_in_a_url_is_not_used() {
        let options = EdgeOptions::default();
        for bad in ["a b", "x/y", "x@y", "x?y", "x#y"] {
            assert_eq!(base_url(&options, &headers(&[("host", bad)]), None, "https"), "https://localhost", "{bad}");
        }
    }
}
