//! The activity log's request side (docs/governance.md#the-activity-log): what a request's
//! entry names — its target and ARM operation name, read off its route ([`describe`]) — and
//! who asked through what ([`draft`]); and the [`ActivityRecorder`] that writes the entries
//! of requests whose change did not carry them (refusals, and writes with no transaction of
//! their own) after the answer, in batches, so recording never delays one.
//!
//! A request whose change committed has its entry written in that change's transaction
//! (`handlers::Ctx::logged`); the answer then carries no second one.

mod event_data;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::{HeaderMap, Method};
use slipway_domain::Timestamp;
use slipway_domain::access::Scope;
use slipway_domain::activity::{ActivityCaller, ActivityEntry, RequestInfo};
use slipway_domain::ids::SubscriptionId;
use slipway_store::Store;
use tokio::sync::mpsc;

use crate::edge::Caller;
use crate::route::Route;

pub use event_data::event_data;

/// Most refusals waiting to be written; past it they are dropped and counted (a flood of
/// refused requests must not grow memory without bound).
const QUEUE: usize = 4_096;
/// Most entries one write takes.
const BATCH: usize = 256;

/// What a request's entry names: the target id and ARM's operation name; `None` for a
/// request that changes nothing (a read, or a read made by `POST`).
pub(crate) fn describe(route: &Route, method: &Method, path: &str) -> Option<(String, String)> {
    let verb = match *method {
        Method::PUT | Method::PATCH => "write",
        Method::DELETE => "delete",
        Method::POST => "action",
        _ => return None,
    };
    // The names as the route read them: an escaped name is the same name (a `%30` in a
    // subscription id must not file the entry under a subscription nobody reads).
    let path = crate::route::decoded_path(path.trim_end_matches('/'));
    let named = |ns: &str, ty: &str| Some((path.clone(), format!("{ns}/{ty}/{verb}")));
    match route {
        Route::Resource(id) => Some((id.to_string(), format!("{}/{}/{verb}", id.namespace, id.type_name))),
        Route::Collection { parent: Some(id), type_name, .. } if *method == Method::POST => {
            let action = type_name.rsplit('/').next().unwrap_or_default();
            Some((id.to_string(), format!("{}/{}/{action}/action", id.namespace, id.type_name)))
        }
        Route::OperationCancel { namespace, .. } => {
            Some((path.trim_end_matches("/cancel").to_string(), format!("{namespace}/operations/cancel/action")))
        }
        Route::OperationDecision { namespace, verdict, .. } => {
            let segment = crate::route::decision_segment(*verdict);
            let op = path.rsplit_once('/').map_or(path.as_str(), |(op, _)| op).to_string();
            Some((op, format!("{namespace}/operations/{segment}/action")))
        }
        Route::Subscription(_) => named("Microsoft.Resources", "subscriptions"),
        Route::RoleAssignments { id: Some(_), .. } => named("Slipway.Authorization", "roleAssignments"),
        Route::ProviderRegistration { namespace, register, .. } => {
            Some((path.clone(), format!("{namespace}/{}/action", if *register { "register" } else { "unregister" })))
        }
        Route::ResourceGroup { .. } => named("Microsoft.Resources", "subscriptions/resourceGroups"),
        Route::ApiTokens { .. } => Some((
            path.clone(),
            format!("Slipway.Authorization/apiTokens/{}", if *method == Method::DELETE { "delete" } else { "write" }),
        )),
        Route::Tags(_) => named("Microsoft.Resources", "tags"),
        Route::Quota { meter: Some(_), .. } => named("Microsoft.Quota", "quotas"),
        Route::Locks { name: Some(_), .. } => named("Microsoft.Authorization", "locks"),
        Route::Policy { collection, name: Some(_), .. } => named("Microsoft.Authorization", collection.segment()),
        _ => None,
    }
}

/// Where a request's client is: its address, `User-Agent` and ids.
pub(crate) struct Origin<'a> {
    pub headers: &'a HeaderMap,
    pub address: Option<IpAddr>,
    pub request_id: &'a str,
}

/// The unsettled entry of a request to `target`: the caller as verified, the client as it
/// says it is (its headers are its own claim, and recorded as such).
pub(crate) fn draft(
    caller: &Caller,
    method: &Method,
    uri: &str,
    (target, operation_name): (String, String),
    origin: &Origin<'_>,
    now: Timestamp,
) -> ActivityEntry {
    let header = |name: &str| {
        origin
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| slipway_domain::echo::echo(v, 256))
            .unwrap_or_default()
    };
    let p = &caller.principal;
    ActivityEntry {
        time: now,
        subscription: subscription_of(&target),
        operation_name,
        caller: ActivityCaller {
            name: p.name.clone(),
            issuer: p.tenant_or_empty().to_string(),
            kind: p.kind.as_arm_type().to_string(),
        },
        request: RequestInfo {
            method: method.as_str().to_string(),
            uri: slipway_domain::echo::echo(uri, 1_024),
            user_agent: header("user-agent"),
            client_address: origin.address.map(|a| a.to_string()).unwrap_or_default(),
            correlation_id: header("x-ms-correlation-request-id"),
            request_id: origin.request_id.to_string(),
            client_request_id: header("x-ms-client-request-id"),
        },
        target,
        status: 0,
        error: None,
        operation_id: None,
        changes: Vec::new(),
        changes_truncated: false,
    }
}

/// The subscription an id lies in (`/subscriptions/{s}/…`), if any.
fn subscription_of(target: &str) -> Option<SubscriptionId> {
    Scope::stored(target).subscription().map(SubscriptionId::new)
}

/// Writes entries after their answers, in batches, on a task of its own.
#[derive(Clone)]
pub struct ActivityRecorder {
    queue: mpsc::Sender<ActivityEntry>,
    dropped: Arc<AtomicU64>,
}

impl ActivityRecorder {
    /// A recorder writing to `store`, and the work that writes: run it on a task the server
    /// waits for. It ends when every recorder is dropped (the server's router, at shutdown),
    /// having written what was queued — and only then lets go of the store.
    pub fn new(store: Arc<dyn Store>) -> (ActivityRecorder, impl std::future::Future<Output = ()> + Send) {
        let (queue, mut rx) = mpsc::channel::<ActivityEntry>(QUEUE);
        let writer = async move {
            let mut batch = Vec::with_capacity(BATCH);
            while rx.recv_many(&mut batch, BATCH).await > 0 {
                let entries = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                let n = entries.len();
                if let Err(e) = store.record_activity(entries).await {
                    tracing::warn!(error = %e, entries = n, "could not record refused requests in the activity log");
                }
            }
        };
        (ActivityRecorder { queue, dropped: Arc::default() }, writer)
    }

    /// Queues a settled entry; when the queue is full it is dropped, counted and logged.
    pub(crate) fn record(&self, entry: ActivityEntry) {
        if self.queue.try_send(entry).is_err() {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::warn!(dropped = n, "the activity log's queue is full: refused requests go unrecorded");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route;

    fn named(method: Method, path: &str) -> Option<(String, String)> {
        describe(&route::parse(path).expect("a route"), &method, path)
    }

    #[test]
    fn requests_are_named_in_arm_operation_form() {
        let vnet = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg/providers/Slipway.Example/virtualNetworks/n1";
        let named_op = |m, p: &str| named(m, p).map(|(_, op)| op);
        assert_eq!(named_op(Method::PUT, vnet).as_deref(), Some("Slipway.Example/virtualNetworks/write"));
        assert_eq!(named_op(Method::DELETE, vnet).as_deref(), Some("Slipway.Example/virtualNetworks/delete"));
        assert_eq!(named(Method::GET, vnet), None, "a read is not activity");
        let subnet = format!("{vnet}/subnets/s1");
        assert_eq!(named_op(Method::PATCH, &subnet).as_deref(), Some("Slipway.Example/virtualNetworks/subnets/write"));
        let (target, op) = named(Method::POST, &format!("{vnet}/restart")).expect("an action");
        assert_eq!((target.as_str(), op.as_str()), (vnet, "Slipway.Example/virtualNetworks/restart/action"));
        let lock = "/subscriptions/00000000-0000-0000-0000-000000000001/providers/Microsoft.Authorization/locks/l1";
        assert_eq!(named_op(Method::PUT, lock).as_deref(), Some("Microsoft.Authorization/locks/write"));
        assert_eq!(
            subscription_of(lock).map(|s| s.as_str().to_string()).as_deref(),
            Some("00000000-0000-0000-0000-000000000001")
        );
        assert_eq!(subscription_of("/providers/Slipway.Authorization/apiTokens/t1"), None);
        let escaped =
            "/subscriptions/00000000-0000-0000-0000-00000000000%31/providers/Microsoft.Authorization/locks/l1";
        let (target, _) = named(Method::PUT, escaped).expect("a lock");
        assert_eq!(
            subscription_of(&target).map(|s| s.as_str().to_string()).as_deref(),
            Some("00000000-0000-0000-0000-000000000001")
        );
    }
}
