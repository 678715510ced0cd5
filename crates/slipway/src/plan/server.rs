//! `[server]`'s part of the plan: the API's options, the listener's limits and TLS, and what
//! the edge believes (public base URL, trusted proxies).

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use slipway_api::{ApiOptions, EdgeOptions};
use slipway_listener::{ListenerOptions, ServerTls};
use slipway_notify::CallbackPolicy;

use super::Found;
use crate::config::{Config, ProviderConfig, exposure};

/// The largest page a collection GET may return (the most `$top` accepts).
pub const MAX_PAGE_SIZE: usize = 1000;

/// `server.listen`: an address to bind, and without `[auth]` a loopback one.
pub(super) fn listen(config: &Config, found: &mut Found) -> String {
    let listen = &config.server.listen;
    if listen.to_socket_addrs().is_err() {
        found.add(format!("server.listen: '{listen}' is not an address to listen on (host:port)"));
    } else if let Ok(addr) = listen.parse::<SocketAddr>() {
        // A host name is judged again once bound, on the address it resolved to.
        found.ok(exposure(config.auth.is_some(), addr));
    }
    listen.clone()
}

/// The API's options, with the callback policy the notifier shares.
pub(super) fn api(config: &Config, callbacks: Option<CallbackPolicy>, found: &mut Found) -> Option<ApiOptions> {
    let s = &config.server;
    let page_size = found.between("server.page_size", s.page_size, 1, MAX_PAGE_SIZE);
    let metrics_access = found.ok(s.metrics_access(config));
    Some(ApiOptions {
        location: s.location.clone(),
        retry_after_secs: s.retry_after_seconds,
        max_body_bytes: s.max_body_bytes,
        page_size,
        event_retention_secs: config.store.event_retention_seconds,
        callbacks: callbacks?,
        metrics_access: metrics_access?,
        resource_groups: s.resource_groups.creation(),
    })
}

/// The listener's timeouts, connection cap and TLS (its files loaded now, so a bad one is
/// named before anything starts).
pub(super) fn listener(config: &Config, found: &mut Found) -> Option<ListenerOptions> {
    let s = &config.server;
    let mut seconds = |key: &str, value: u64| Duration::from_secs(found.at_least(&format!("server.{key}"), value, 1));
    let header_read_timeout = seconds("header_read_timeout_seconds", s.header_read_timeout_seconds);
    let body_read_timeout = seconds("body_read_timeout_seconds", s.body_read_timeout_seconds);
    let idle_timeout = seconds("idle_timeout_seconds", s.idle_timeout_seconds);
    Some(ListenerOptions {
        header_read_timeout,
        body_read_timeout,
        idle_timeout,
        max_connections: s.max_connections,
        fd_reserve: fd_reserve(config),
        tls: tls(config, found)?,
    })
}

/// `Some(None)`: plain HTTP; `None`: the TLS settings or files are wrong (recorded).
fn tls(config: &Config, found: &mut Found) -> Option<Option<ServerTls>> {
    let Some(options) = found.ok(config.tls_options())? else { return Some(None) };
    found.at_least("server.tls_reload_interval_seconds", config.server.tls_reload_interval_seconds, 1);
    found.ok(ServerTls::load(options).map_err(|e| format!("server TLS: {e}"))).map(Some)
}

/// Whose forwarding headers are believed, and which base URL absolute URLs use.
pub(super) fn edge(config: &Config, found: &mut Found) -> Option<EdgeOptions> {
    let s = &config.server;
    let mut trusted_proxies = Vec::new();
    let mut proxies_ok = true;
    for (i, p) in s.trusted_proxies.iter().enumerate() {
        match p.parse::<ipnet::IpNet>().or_else(|_| p.parse::<std::net::IpAddr>().map(ipnet::IpNet::from)) {
            Ok(net) => trusted_proxies.push(net),
            Err(_) => {
                proxies_ok = false;
                found.add(format!("server.trusted_proxies[{i}] = '{p}': not an IP address or CIDR range"));
            }
        }
    }
    let public_base_url = match &s.public_base_url {
        Some(u) if !(u.starts_with("https://") || u.starts_with("http://")) || u.contains(['?', '#', ' ']) => {
            found.add(format!(
                "server.public_base_url = '{u}': use scheme and authority only, e.g. https://slipway.example.com"
            ));
            return None;
        }
        other => other.clone(),
    };
    proxies_ok.then_some(EdgeOptions { public_base_url, trusted_proxies, tls: s.tls_cert_file.is_some() })
}

/// File descriptors to keep free of client connections when the cap is derived from the
/// open-file limit: the process itself (stdio, runtime, listener, logs, lock files), the
/// store's connections, notification deliveries, and each provider's concurrent work.
fn fd_reserve(config: &Config) -> usize {
    let store = if super::is_postgres(&config.store.url) {
        config.store.pool_size.saturating_add(8)
    } else {
        32 // writer, readers and checkpointer: database, WAL and shared-memory files each
    };
    let providers = config.providers.iter().fold(0usize, |sum, p| {
        sum.saturating_add(match p {
            // Pipes and artifact files per ansible-runner child.
            ProviderConfig::Ansible(a) => a.max_concurrent_jobs.saturating_mul(8),
            ProviderConfig::Aap(a) => a.max_concurrent_requests.saturating_mul(2).saturating_add(8),
        })
    });
    // One socket per callback in flight.
    [store, config.notifications.max_concurrent, providers].into_iter().fold(64, usize::saturating_add)
}
