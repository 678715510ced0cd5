//! The notifier's DNS resolver: every address a callback's host resolves to is checked
//! against the policy, and only checked addresses reach the connector, so what was checked is
//! what is connected to.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::{CallbackPolicy, Refusal};

/// A name lookup: the addresses of a host name.
pub type Lookup = Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> + Send + Sync>;

/// The system resolver (`getaddrinfo`, through tokio).
pub fn system_lookup() -> Lookup {
    Arc::new(|host: String| {
        Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.map(|a| a.ip()).collect()) })
    })
}

/// The notifier's DNS resolver: every address of a name is checked against the policy, and
/// only checked addresses reach the connector.
pub struct PolicyResolver {
    policy: Arc<CallbackPolicy>,
    lookup: Lookup,
}

impl PolicyResolver {
    pub fn new(policy: Arc<CallbackPolicy>, lookup: Lookup) -> Self {
        PolicyResolver { policy, lookup }
    }
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let (policy, lookup) = (self.policy.clone(), self.lookup.clone());
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addresses = lookup(host.clone()).await?;
            if addresses.is_empty() {
                return Err(io::Error::new(io::ErrorKind::NotFound, format!("{host} has no addresses")).into());
            }
            for &address in &addresses {
                if let Err(kind) = policy.check_address(address) {
                    return Err(Box::new(Refusal::Resolved { host: host.clone(), address, kind }) as _);
                }
            }
            let addrs: Addrs = Box::new(addresses.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// The policy's refusal behind a failed request, if that is why it failed.
pub fn refusal_in<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refusal> {
    let mut source = Some(e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<Refusal>() {
            return Some(r);
        }
        source = s.source();
    }
    None
}
