//! Which `Azure-AsyncNotificationUri` callbacks Slipway calls. A tenant names the URI, so
//! without a policy any client could make Slipway POST to its loopback, its cloud metadata
//! endpoint or the private network behind it (server-side request forgery).
//!
//! * **Scheme**: `https` only, unless `allow_http`.
//! * **Allowlist**: `scheme://host[:port]` patterns; a host `*.example.com` matches every
//!   name below `example.com` (not `example.com` itself); without a port any port matches.
//!   An empty list allows any public host.
//! * **Addresses**: loopback, private (RFC 1918, `fc00::/7`), shared (`100.64.0.0/10`),
//!   link-local, `0.0.0.0/8`, multicast, broadcast, unspecified and reserved addresses —
//!   IPv4-mapped, -compatible and NAT64 IPv6 forms of them too — are refused unless
//!   `allow_private_networks`. The allowlist never lifts this.
//! * **Twice**: at admission ([`CallbackPolicy::check_uri`], an IP literal or `localhost`
//!   is refused there), and at delivery, after DNS resolution: the notifier's client
//!   resolves names through [`PolicyResolver`], which refuses a name if any of its
//!   addresses is refused and hands the connector only addresses it checked, so what was
//!   checked is what is connected to (no second lookup to rebind). The client follows no
//!   redirects and uses no proxy.
//! * URIs with a user name or password, or longer than [`MAX_URI_CHARS`], are refused.

mod address;
mod allowlist;
mod resolver;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use reqwest::Url;

pub use address::{AddressKind, classify};
use allowlist::HostPattern;
pub use resolver::{Lookup, PolicyResolver, refusal_in, system_lookup};

/// Longest callback URI accepted.
pub const MAX_URI_CHARS: usize = 2048;

#[derive(Clone, Debug, Default)]
pub struct CallbackPolicy {
    allowlist: Vec<HostPattern>,
    allow_http: bool,
    allow_private_networks: bool,
}

/// The schemes a callback URI may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallbackSchemes {
    HttpsOnly,
    HttpAndHttps,
}

/// The addresses a callback may reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallbackNetworks {
    /// Public addresses only: no loopback, private, link-local or otherwise internal one.
    PublicOnly,
    /// Private networks too (a callback receiver inside the platform).
    PrivateToo,
}

#[derive(Debug, thiserror::Error)]
#[error("callback_allowlist entry '{entry}': {reason}")]
pub struct CallbackPolicyError {
    entry: String,
    reason: String,
}

/// Why a callback URI is refused; the text is fit for the client (it names the rule, not
/// Slipway's configuration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    TooLong,
    NotAUrl,
    Scheme {
        allow_http: bool,
    },
    Credentials,
    NotAllowlisted,
    /// The URI's host is such an address (or `localhost`).
    Host(AddressKind),
    /// At delivery: the host resolved to such an address.
    Resolved {
        host: String,
        address: IpAddr,
        kind: AddressKind,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TooLong => write!(f, "the URI is longer than {MAX_URI_CHARS} characters"),
            Refusal::NotAUrl => f.write_str("the URI is not an absolute http or https URL"),
            Refusal::Scheme { allow_http: false } => f.write_str("callbacks must use https"),
            Refusal::Scheme { allow_http: true } => f.write_str("callbacks must use http or https"),
            Refusal::Credentials => f.write_str("the URI must not contain a user name or password"),
            Refusal::NotAllowlisted => f.write_str("the host is not allowed to receive callbacks"),
            Refusal::Host(kind) => write!(f, "the host is {kind}"),
            Refusal::Resolved { host, address, kind } => write!(f, "{host} resolves to {address}, {kind}"),
        }
    }
}

impl std::error::Error for Refusal {}

impl CallbackPolicy {
    /// `allowlist` entries are `scheme://host[:port]` (`https://hooks.example.com`,
    /// `https://*.example.com:8443`); an `http` entry needs `allow_http`.
    pub fn new(
        allowlist: &[String],
        schemes: CallbackSchemes,
        networks: CallbackNetworks,
    ) -> Result<Self, CallbackPolicyError> {
        let allow_http = schemes == CallbackSchemes::HttpAndHttps;
        let allow_private_networks = networks == CallbackNetworks::PrivateToo;
        let allowlist = allowlist.iter().map(|e| HostPattern::parse(e, allow_http)).collect::<Result<_, _>>()?;
        Ok(CallbackPolicy { allowlist, allow_http, allow_private_networks })
    }

    /// Anything goes: any scheme of http and https, any host, any address. For tests whose
    /// callbacks listen on loopback.
    pub fn allow_all() -> Self {
        CallbackPolicy { allowlist: Vec::new(), allow_http: true, allow_private_networks: true }
    }

    pub fn allowlist(&self) -> Vec<String> {
        self.allowlist.iter().map(|p| p.text.clone()).collect()
    }

    pub fn allow_http(&self) -> bool {
        self.allow_http
    }

    pub fn allow_private_networks(&self) -> bool {
        self.allow_private_networks
    }

    /// The URI if it may be called, as far as can be told without resolving its host.
    pub fn check_uri(&self, uri: &str) -> Result<Url, Refusal> {
        if uri.chars().count() > MAX_URI_CHARS {
            return Err(Refusal::TooLong);
        }
        let url = Url::parse(uri).map_err(|_| Refusal::NotAUrl)?;
        match url.scheme() {
            "https" => {}
            "http" if self.allow_http => {}
            _ => return Err(Refusal::Scheme { allow_http: self.allow_http }),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refusal::Credentials);
        }
        let host = host_of(&url).ok_or(Refusal::NotAUrl)?;
        if !self.allowlist.is_empty() && !self.allowlist.iter().any(|p| p.matches(&url)) {
            return Err(Refusal::NotAllowlisted);
        }
        let kind = match host {
            Host::Ip(ip) => classify(ip),
            Host::Domain(name) => is_localhost(name).then_some(AddressKind::Loopback),
        };
        match kind {
            Some(kind) if !self.allow_private_networks => Err(Refusal::Host(kind)),
            _ => Ok(url),
        }
    }

    /// `Err(kind)` when Slipway must not connect to `ip`.
    pub fn check_address(&self, ip: IpAddr) -> Result<(), AddressKind> {
        match classify(ip) {
            Some(kind) if !self.allow_private_networks => Err(kind),
            _ => Ok(()),
        }
    }
}

enum Host<'a> {
    Ip(IpAddr),
    Domain(&'a str),
}

/// The URL's host; the URL parser has already normalised an IPv4 address (`2130706433`,
/// `0x7f.1`) to its dotted form and put an IPv6 one in brackets.
fn host_of(url: &Url) -> Option<Host<'_>> {
    let host = url.host_str().filter(|h| !h.is_empty())?;
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse().ok().map(Host::Ip);
    }
    Some(match host.parse::<Ipv4Addr>() {
        Ok(v4) => Host::Ip(IpAddr::V4(v4)),
        Err(_) => Host::Domain(host),
    })
}

fn is_localhost(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use reqwest::dns::Resolve;

    use super::CallbackNetworks::*;
    use super::CallbackSchemes::*;
    use super::*;

    fn strict() -> CallbackPolicy {
        CallbackPolicy::default()
    }

    #[test]
    fn https_to_public_hosts_by_default() {
        let p = strict();
        assert!(p.check_uri("https://hooks.example.com/cb?x=1").is_ok());
        assert!(p.check_uri("https://93.184.216.34:8443/cb").is_ok());
        assert!(p.check_uri("https://[2606:2800:220:1:248:1893:25c8:1946]/").is_ok());
        assert_eq!(p.check_uri("http://hooks.example.com/").unwrap_err(), Refusal::Scheme { allow_http: false });
        assert_eq!(p.check_uri("ftp://hooks.example.com/").unwrap_err(), Refusal::Scheme { allow_http: false });
        assert_eq!(p.check_uri("/relative").unwrap_err(), Refusal::NotAUrl);
        assert_eq!(p.check_uri("not a uri").unwrap_err(), Refusal::NotAUrl);
        assert_eq!(p.check_uri("https://user:pw@hooks.example.com/").unwrap_err(), Refusal::Credentials);
        let long = format!("https://hooks.example.com/{}", "a".repeat(MAX_URI_CHARS));
        assert_eq!(p.check_uri(&long).unwrap_err(), Refusal::TooLong);
        let http = CallbackPolicy::new(&[], HttpAndHttps, PublicOnly).unwrap();
        assert!(http.check_uri("http://hooks.example.com/").is_ok());
        assert_eq!(http.check_uri("ftp://hooks.example.com/").unwrap_err(), Refusal::Scheme { allow_http: true });
    }

    #[test]
    fn private_loopback_and_other_special_addresses_are_refused() {
        let p = strict();
        let cases = [
            ("127.0.0.1", AddressKind::Loopback),
            ("127.1.2.3", AddressKind::Loopback),
            ("2130706433", AddressKind::Loopback), // 127.0.0.1, spelled as a number
            ("0x7f.1", AddressKind::Loopback),
            ("localhost", AddressKind::Loopback),
            ("api.localhost.", AddressKind::Loopback),
            ("[::1]", AddressKind::Loopback),
            ("[::ffff:127.0.0.1]", AddressKind::Loopback),
            ("[::ffff:10.1.2.3]", AddressKind::Private),
            ("[64:ff9b::a9fe:a9fe]", AddressKind::LinkLocal),
            ("10.0.0.1", AddressKind::Private),
            ("172.16.0.1", AddressKind::Private),
            ("172.31.255.255", AddressKind::Private),
            ("192.168.1.1", AddressKind::Private),
            ("[fd12:3456::1]", AddressKind::Private),
            ("[fc00::1]", AddressKind::Private),
            ("100.64.0.1", AddressKind::Shared),
            ("100.127.255.255", AddressKind::Shared),
            ("169.254.169.254", AddressKind::LinkLocal),
            ("[fe80::1]", AddressKind::LinkLocal),
            ("0.0.0.0", AddressKind::Unspecified),
            ("0.1.2.3", AddressKind::Unspecified),
            ("[::]", AddressKind::Unspecified),
            ("224.0.0.1", AddressKind::Multicast),
            ("[ff02::1]", AddressKind::Multicast),
            ("255.255.255.255", AddressKind::Broadcast),
            ("240.0.0.1", AddressKind::Reserved),
        ];
        for (host, kind) in cases {
            assert_eq!(p.check_uri(&format!("https://{host}/cb")).unwrap_err(), Refusal::Host(kind), "{host}");
        }
        for public in ["172.32.0.1", "100.128.0.1", "11.0.0.1", "[2001:4860:4860::8888]", "[::ffff:8.8.8.8]"] {
            assert!(p.check_uri(&format!("https://{public}/")).is_ok(), "{public}");
        }
        let open = CallbackPolicy::new(&[], HttpsOnly, PrivateToo).unwrap();
        assert!(open.check_uri("https://127.0.0.1/cb").is_ok());
        assert!(open.check_address("10.0.0.1".parse().unwrap()).is_ok());
        assert_eq!(
            strict().check_address("::ffff:192.168.0.1".parse().unwrap()),
            Err(AddressKind::Private),
            "IPv4-mapped"
        );
    }

    #[test]
    fn the_allowlist_names_schemes_hosts_and_ports() {
        let list =
            ["https://hooks.example.com", "https://*.tenant.example:8443/", "https://203.0.113.9"].map(String::from);
        let p = CallbackPolicy::new(&list, HttpsOnly, PublicOnly).unwrap();
        assert_eq!(p.allowlist().len(), 3);
        for ok in [
            "https://hooks.example.com/a",
            "https://HOOKS.example.com:444/a",
            "https://a.tenant.example:8443/",
            "https://a.b.tenant.example:8443/",
            "https://203.0.113.9/",
        ] {
            assert!(p.check_uri(ok).is_ok(), "{ok}");
        }
        for refused in [
            "https://other.example.com/",
            "https://hooks.example.com.evil.test/",
            "https://tenant.example:8443/",
            "https://a.tenant.example/",
            "https://eviltenant.example:8443/",
            "https://203.0.113.10/",
        ] {
            assert_eq!(p.check_uri(refused).unwrap_err(), Refusal::NotAllowlisted, "{refused}");
        }
        // The allowlist does not lift the address rule.
        let p = CallbackPolicy::new(&["https://10.0.0.5".to_string()], HttpsOnly, PublicOnly).unwrap();
        assert_eq!(p.check_uri("https://10.0.0.5/").unwrap_err(), Refusal::Host(AddressKind::Private));
        for (entry, http) in [
            ("hooks.example.com", HttpAndHttps),
            ("http://hooks.example.com", HttpsOnly),
            ("ftp://hooks.example.com", HttpAndHttps),
            ("https://hooks.example.com/path", HttpAndHttps),
            ("https://a.*.example.com", HttpAndHttps),
            ("https://*.10.0.0.1", HttpAndHttps),
            ("https://", HttpAndHttps),
        ] {
            let e = CallbackPolicy::new(&[entry.to_string()], http, PublicOnly).unwrap_err().to_string();
            assert!(e.starts_with(&format!("callback_allowlist entry '{entry}'")), "{e}");
        }
        assert!(CallbackPolicy::new(&["http://hooks.example.com".to_string()], HttpAndHttps, PublicOnly).is_ok());
    }

    fn fake(answer: Vec<IpAddr>) -> Lookup {
        Arc::new(move |_host| {
            let answer = answer.clone();
            Box::pin(async move { Ok(answer) })
        })
    }

    async fn resolve(policy: CallbackPolicy, answer: &[&str]) -> Result<Vec<SocketAddr>, String> {
        let answer = answer.iter().map(|a| a.parse().unwrap()).collect();
        let r = PolicyResolver::new(Arc::new(policy), fake(answer));
        match r.resolve("cb.example.test".parse().unwrap()).await {
            Ok(addrs) => Ok(addrs.collect()),
            Err(e) => Err(refusal_in(e.as_ref()).map(|r| r.to_string()).unwrap_or_else(|| format!("other: {e}"))),
        }
    }

    #[tokio::test]
    async fn resolved_addresses_are_checked_every_one() {
        assert_eq!(resolve(strict(), &["93.184.216.34"]).await.unwrap(), ["93.184.216.34:0".parse().unwrap()]);
        assert_eq!(
            resolve(strict(), &["93.184.216.34", "127.0.0.1"]).await.unwrap_err(),
            "cb.example.test resolves to 127.0.0.1, a loopback address"
        );
        assert_eq!(
            resolve(strict(), &["::ffff:169.254.169.254"]).await.unwrap_err(),
            "cb.example.test resolves to ::ffff:169.254.169.254, a link-local address"
        );
        assert!(resolve(strict(), &[]).await.unwrap_err().starts_with("other: "));
        assert_eq!(resolve(CallbackPolicy::allow_all(), &["10.0.0.1"]).await.unwrap().len(), 1);
    }
}
