//! The ARM request handlers. Each mutating request is one store transaction running a pure
//! admission function; the answer is built only from what was committed.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use slipway_domain::access::{Permission, Scope};
use slipway_domain::activity::ActivityEntry;
use slipway_domain::admission::{self, RequestContext};
use slipway_domain::echo::echo;
use slipway_domain::ids::{self, ArmId, OperationId, SubscriptionId};
use slipway_domain::subscription::Intent;
use slipway_domain::{Initiator, JobContext, PrincipalKind, RequestedBy, TenantContext};
use slipway_listener::PeerAddr;
use slipway_types::{JOBS_SEGMENT, ResourceType};

use self::actions::post_action;
use self::jobs::job_history;
use self::operations::{cancel_operation, find_operation, operation_check, operation_result, status_response};
use self::resources::{ListScope, Visible, delete_resource, get_resource, list, patch_resource, put_resource};
use crate::edge::{self, Caller};
use crate::error::ArmError;
use crate::route::{self, Route, RouteError};
use crate::{ApiState, access, activity};

pub(crate) mod actions;
mod activity_log;
mod admin;
pub(crate) mod approvals;
mod audit;
mod body;
pub(crate) mod discovery;
mod events;
mod filter;
mod groups;
pub(crate) mod guardrails;
pub(crate) mod jobs;
mod locks;
mod logged;
mod logs;
mod operations;
mod overview;
pub(crate) mod platform_version;
pub mod policy;
mod quotas;
mod resources;
mod tags;
mod tokens;
pub(crate) mod whatif;

/// Everything a handler needs from the request besides the body.
pub(crate) struct Ctx {
    pub method: Method,
    pub headers: HeaderMap,
    pub query: HashMap<String, String>,
    pub base: String,
    pub caller: Caller,
    /// The request's activity-log entry (none for a request that changes nothing), and
    /// whether a committed change already wrote it.
    activity: Option<ActivityEntry>,
    activity_written: AtomicBool,
}

impl Ctx {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }

    fn api_version(&self) -> Result<&str, ArmError> {
        self.query.get("api-version").map(String::as_str).filter(|v| !v.is_empty()).ok_or_else(|| {
            ArmError::bad_request(
                "MissingApiVersionParameter",
                "The api-version query parameter (?api-version=) is required for all requests.",
            )
        })
    }

    /// A header the caller's identity rests on: believed only from a caller that may speak
    /// for others (a configured ARM front end, or the local mode).
    fn identity_header(&self, name: &str) -> &str {
        if self.caller.speaks_for_others { self.header(name) } else { "" }
    }

    /// Who the operation belongs to (the ARO initiator rule): the forwarded identity when a
    /// trusted front end names one, else the verified principal.
    fn initiator(&self) -> Initiator {
        let principal = &self.caller.principal;
        let or =
            |forwarded: &str, own: &str| if forwarded.is_empty() { own.to_string() } else { forwarded.to_string() };
        let (own_tenant, own_client) = match principal.kind {
            PrincipalKind::Local => ("", ""),
            _ => (principal.tenant_or_empty(), principal.name.as_str()),
        };
        Initiator {
            tenant_id: or(self.identity_header("x-ms-home-tenant-id"), own_tenant),
            client_id: or(self.identity_header("x-ms-client-object-id"), own_client),
            client_request_id: self.header("x-ms-client-request-id").to_string(),
            correlation_request_id: self.header("x-ms-correlation-request-id").to_string(),
        }
    }
}

fn unsupported_version(v: &str, supported: &[String]) -> ArmError {
    ArmError::bad_request(
        "InvalidApiVersionParameter",
        format!("The api-version '{v}' is invalid. The supported versions are '{}'.", supported.join(",")),
    )
}

pub(crate) async fn handle(state: Arc<ApiState>, req: Request<Body>) -> Response {
    if req.method() == Method::HEAD {
        let (mut parts, body) = req.into_parts();
        parts.method = Method::GET;
        return existence(respond(state, Request::from_parts(parts, body)).await);
    }
    respond(state, req).await
}

/// `HEAD`, ARM's existence check, is the `GET` of the same path without its body: `204`
/// where the `GET` answers `200`, `404` where it finds nothing or may not be read (a `403`
/// would tell that something is there), any other status as it is.
fn existence(get: Response) -> Response {
    let status = match get.status() {
        StatusCode::OK => StatusCode::NO_CONTENT,
        StatusCode::FORBIDDEN | StatusCode::NOT_FOUND => StatusCode::NOT_FOUND,
        other => other,
    };
    let (mut parts, _) = get.into_parts();
    parts.status = status;
    parts.headers.remove(axum::http::header::CONTENT_TYPE);
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::empty())
}

async fn respond(state: Arc<ApiState>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let peer = parts.extensions.get::<PeerAddr>().map(|p| p.0.ip());
    let client = edge::client_addr(&state.edge, &parts.headers, peer);
    let limiter = state.rate_limits.as_ref();
    if let Some(Err(e)) = limiter.map(|l| l.check_address(client, state.clock.now(), false)) {
        return e.into_response();
    }
    let caller = match edge::authenticate(&state, &parts.headers).await {
        Ok(caller) => caller,
        Err(refusal) => {
            if refusal.status() == StatusCode::UNAUTHORIZED
                && let Some(l) = limiter
            {
                let _ = l.check_address(client, state.clock.now(), true);
            }
            return refusal;
        }
    };
    let remaining = match limiter.map(|l| l.check(&caller.principal, state.clock.now())) {
        Some(Err(e)) => return e.into_response(),
        Some(Ok(left)) => left,
        None => None,
    };
    let query =
        axum::extract::Query::<HashMap<String, String>>::try_from_uri(&parts.uri).map(|q| q.0).unwrap_or_default();
    let base = edge::base_url(&state.edge, &parts.headers, peer, if state.edge.tls { "https" } else { "http" });
    let path = parts.uri.path();
    let request_id = parts.extensions.get::<crate::RequestId>().map(|r| r.0.as_str()).unwrap_or_default();
    // A read changes nothing: its route is not parsed twice.
    let changes = parts.method != Method::GET;
    let activity = changes.then(|| route::parse(path).ok()).flatten();
    let activity = activity.and_then(|r| activity::describe(&r, &parts.method, path)).map(|named| {
        let origin = activity::Origin { headers: &parts.headers, address: client, request_id };
        let uri = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or(path);
        activity::draft(&caller, &parts.method, uri, named, &origin, state.clock.now())
    });
    let ctx = Ctx {
        base,
        method: parts.method,
        headers: parts.headers,
        query,
        caller,
        activity,
        activity_written: AtomicBool::new(false),
    };
    let (resp, error) = match dispatch(&state, &ctx, path, body).await {
        Ok(r) => (r, None),
        Err(e) => {
            let error = (e.body.code.clone(), e.body.message.clone());
            (e.into_response(), Some(error))
        }
    };
    // An answer built as a response (not an error) names its code in ARM's header.
    let error = error.or_else(|| {
        let code = resp.headers().get("x-ms-error-code").and_then(|v| v.to_str().ok());
        code.filter(|_| resp.status().as_u16() >= 400).map(|c| (c.to_string(), String::new()))
    });
    if let Some(entry) = ctx.unwritten_activity(resp.status(), error) {
        state.activity.record(entry);
    }
    if ctx.method != Method::GET {
        audit::record(&ctx, path, &resp, request_id);
    }
    let mut resp = resp;
    if let Some(left) = remaining {
        resp.headers_mut().insert(remaining_header(&ctx.method), HeaderValue::from(left));
    }
    resp.extensions_mut().insert(crate::AccessPrincipal(ctx.caller.principal.name.clone()));
    resp
}

/// ARM's `x-ms-ratelimit-remaining-subscription-{reads,writes,deletes}`, by the request's
/// kind: how many more requests the caller may send at once. Slipway's budget is the
/// caller's (one bucket for every kind, `ratelimit`), so each header reports the same one.
fn remaining_header(method: &Method) -> &'static str {
    match *method {
        Method::GET => "x-ms-ratelimit-remaining-subscription-reads",
        Method::DELETE => "x-ms-ratelimit-remaining-subscription-deletes",
        _ => "x-ms-ratelimit-remaining-subscription-writes",
    }
}

async fn dispatch(state: &ApiState, ctx: &Ctx, path: &str, body: Body) -> Result<Response, ArmError> {
    let route = route::parse(path).map_err(|e| match e {
        RouteError::NoMatch => ArmError::not_found("NotFound", format!("No such resource path: {}", echo(path, 200))),
        RouteError::BadName(n) => ArmError::bad_request(
            "InvalidResourceName",
            format!("The resource name '{}' is not valid: {}.", echo(&n, 64), ids::ARM_NAME_RULE),
        ),
        RouteError::BadGroupName(n) => ArmError::bad_request(
            "InvalidResourceName",
            format!("The resource group name '{}' is not valid: {}.", echo(&n, 64), ids::GROUP_NAME_RULE),
        ),
        RouteError::BadScope(why) => ArmError::bad_request(
            "InvalidRoleAssignmentScope",
            format!("The role assignment scope is not valid: {}.", echo(&why, 200)),
        ),
        RouteError::BadSubscription(s) => ArmError::bad_request(
            "InvalidSubscriptionId",
            format!(
                "The subscription id '{}' is not valid: use a GUID such as 00000000-0000-0000-0000-000000000000.",
                echo(&s, 40)
            ),
        ),
    })?;
    match route {
        Route::Resource(id) => {
            let ty = resource_type(state, &id.namespace, &id.type_name)?;
            check_version(ctx, &ty)?;
            let (permission, intent) = match ctx.method {
                Method::GET => (Permission::Read, Intent::Read),
                Method::PUT | Method::PATCH => (Permission::Write, Intent::Change),
                Method::DELETE => (Permission::Delete, Intent::Delete),
                _ => return Err(method_not_allowed(&ctx.method)),
            };
            let subscription = SubscriptionId::new(&id.subscription);
            let grants = access::grants(state, &ctx.caller, Some(&subscription)).await?;
            let action = access::resource_action(&ty.namespace, &ty.type_name, permission);
            grants.require(&ctx.caller, permission, &resource_scope(&id), &action)?;
            let tenant =
                access::check_subscription(state, &subscription, intent).await?.as_ref().map(access::tenant_context);
            match ctx.method {
                Method::GET => get_resource(state, &id, &ty).await,
                Method::PUT => put_resource(state, ctx, id, ty, body, tenant, &grants).await,
                Method::PATCH => patch_resource(state, ctx, id, ty, body, tenant, &grants).await,
                _ => delete_resource(state, ctx, id, ty, tenant, &grants).await,
            }
        }
        // `{resourceId}/jobs` and `POST {resourceId}/{action}` parse as collections under the
        // resource.
        Route::Collection { type_name, parent: Some(id), .. }
            if type_name.rsplit('/').next().is_some_and(|t| t.eq_ignore_ascii_case(JOBS_SEGMENT)) =>
        {
            job_history(state, ctx, id).await
        }
        Route::Collection { type_name, parent: Some(id), .. }
            if type_name.rsplit('/').next().is_some_and(|t| t.eq_ignore_ascii_case(slipway_types::EVENTS_SEGMENT)) =>
        {
            events::resource_events(state, ctx, path, id).await
        }
        Route::Collection { type_name, parent: Some(id), .. } if ctx.method == Method::POST => {
            let action = type_name.rsplit('/').next().unwrap_or_default();
            if action.eq_ignore_ascii_case(slipway_types::RETRY_SEGMENT) {
                return actions::post_retry(state, ctx, id, body).await;
            }
            if action.eq_ignore_ascii_case(slipway_types::WHAT_IF_SEGMENT) {
                return whatif::post_what_if(state, ctx, id, body).await;
            }
            if action.eq_ignore_ascii_case(slipway_types::CHECK_DRIFT_SEGMENT) {
                return whatif::post_check_drift(state, ctx, id, body).await;
            }
            post_action(state, ctx, id, action, body).await
        }
        Route::Collection { subscription, resource_group, namespace, type_name, parent } => {
            let ty = resource_type(state, &namespace, &type_name)?;
            check_version(ctx, &ty)?;
            if ctx.method != Method::GET {
                return Err(method_not_allowed(&ctx.method));
            }
            let sub = SubscriptionId::new(&subscription);
            let grants = access::grants(state, &ctx.caller, Some(&sub)).await?;
            let scope = match &parent {
                Some(p) => resource_scope(p),
                None => match &resource_group {
                    Some(rg) => Scope::resource_group(&subscription, rg),
                    None => Scope::subscription_scope(&sub),
                },
            };
            if !grants.may_read_within(&ctx.caller, &scope) {
                let action = access::resource_action(&ty.namespace, &ty.type_name, Permission::Read);
                return Err(access::forbidden(&ctx.caller, &action, &scope));
            }
            if let Some(p) = &parent
                && state.store.get_resource(&p.key()).await?.is_none()
            {
                return Err(admission::Rejection::ParentNotFound { parent: p.to_string() }.into());
            }
            let visible = Visible { grants: &grants, whole: grants.allows(&ctx.caller, Permission::Read, &scope) };
            let within = ListScope {
                subscription: &subscription,
                resource_group: resource_group.as_deref(),
                parent: parent.as_ref(),
            };
            list(state, ctx, path, within, &ty, visible).await
        }
        Route::OperationStatus { subscription, namespace, id, .. } => {
            operation_check(state, ctx, &namespace, Method::GET)?;
            let op = find_operation(state, ctx, &subscription, &id, Permission::Read).await?;
            Ok(status_response(state, &op))
        }
        Route::OperationCancel { subscription, namespace, id, .. } => {
            operation_check(state, ctx, &namespace, Method::POST)?;
            cancel_operation(state, ctx, &subscription, &id).await
        }
        Route::OperationDecision { subscription, namespace, id, verdict, .. } => {
            operation_check(state, ctx, &namespace, Method::POST)?;
            approvals::decide_operation(state, ctx, &subscription, &id, verdict, body).await
        }
        Route::OperationLogs { subscription, namespace, id, .. } => {
            operation_check(state, ctx, &namespace, Method::GET)?;
            let op = find_operation(state, ctx, &subscription, &id, Permission::Read).await?;
            logs::job_logs(state, ctx, &op).await
        }
        Route::OperationResult { subscription, namespace, id, .. } => {
            operation_check(state, ctx, &namespace, Method::GET)?;
            let op = find_operation(state, ctx, &subscription, &id, Permission::Read).await?;
            operation_result(state, ctx, &op).await
        }
        Route::Activity { subscription } => activity_log::activity(state, ctx, path, subscription.as_deref()).await,
        Route::Subscriptions => admin::list_subscriptions(state, ctx).await,
        Route::Subscription(id) => admin::subscription(state, ctx, &id, body).await,
        Route::RoleAssignments { scope, id: None } => admin::list_assignments(state, ctx, &scope).await,
        Route::RoleAssignments { scope, id: Some(id) } => admin::assignment(state, ctx, &scope, &id, body).await,
        Route::Permissions { scope } => admin::permissions(state, ctx, &scope).await,
        Route::Provider { subscription, namespace } => {
            discovery::provider(state, ctx, subscription.as_deref(), &namespace)
        }
        Route::Providers { subscription } => discovery::providers(state, ctx, subscription.as_deref()),
        Route::ProviderRegistration { subscription, namespace, register } => {
            discovery::registration(state, ctx, &subscription, &namespace, register).await
        }
        Route::ProviderOperations { namespace } => discovery::operations(state, ctx, &namespace),
        Route::ResourceGroups { subscription } => groups::list_groups(state, ctx, path, &subscription).await,
        Route::ResourceGroup { subscription, name } => groups::group(state, ctx, &subscription, &name, body).await,
        Route::Resources { subscription, resource_group } => {
            overview::list_resources(state, ctx, path, &subscription, resource_group.as_deref()).await
        }
        Route::Operations { subscription } => overview::list_operations(state, ctx, path, &subscription).await,
        Route::Events { subscription, resource_group } => {
            events::list_events(state, ctx, path, &subscription, resource_group.as_deref()).await
        }
        Route::ApiTokens { id } => tokens::api_tokens(state, ctx, id.as_deref(), body).await,
        Route::Tags(target) => tags::tags(state, ctx, target, body).await,
        Route::Quota { subscription, resource_group, namespace, location, collection, meter } => {
            let scope = quotas::QuotaScope { subscription, resource_group, namespace, location };
            quotas::quota(state, ctx, scope, collection, meter, body).await
        }
        Route::Locks { scope, path, name } => locks::locks(state, ctx, scope, path, name, body).await,
        Route::Policy { collection, scope, path, name } => {
            policy::policy(state, ctx, collection, scope, path, name, body).await
        }
        Route::PolicyStates { subscription, resource_group, resource } => {
            policy::policy_states(state, ctx, &subscription, resource_group.as_deref(), resource.as_ref()).await
        }
    }
}

/// A new operation's id: a UUID of version 7, whose leading bits are `now`'s milliseconds, so
/// that id order is start order (to the millisecond) and a subscription's operations list
/// newest first by id alone; the other 74 bits are random.
pub(crate) fn new_operation_id(now: slipway_domain::Timestamp) -> OperationId {
    let millis = u64::try_from(now.as_millis()).unwrap_or_default();
    let random = uuid::Uuid::new_v4().as_u64_pair();
    OperationId::version7(millis, random.0 as u16, random.1)
}

/// `?force=true|false` (absent: false); anything else is `400 InvalidParameter`.
pub(crate) fn force_flag(ctx: &Ctx) -> Result<bool, ArmError> {
    bool_param(ctx, "force")
}

/// `?{name}=true|false` (absent: false); anything else is `400 InvalidParameter`.
pub(crate) fn bool_param(ctx: &Ctx, name: &str) -> Result<bool, ArmError> {
    match ctx.query.get(name).map(|v| v.to_ascii_lowercase()).as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(v) => Err(ArmError::bad_request(
            "InvalidParameter",
            format!("{name} must be true or false, not '{}'.", echo(v, 16)),
        )
        .with_target(name)),
    }
}

/// A forced request is the platform Admin's alone; `action` names it in a `403`.
pub(crate) fn require_admin(ctx: &Ctx, grants: &access::Grants, action: &str) -> Result<(), ArmError> {
    grants.require(&ctx.caller, Permission::ManagePlatform, &Scope::platform(), action)
}

/// A resource id as an authorization scope.
pub(crate) fn resource_scope(id: &ArmId) -> Scope {
    Scope::resource(id)
}

pub(crate) fn method_not_allowed(m: &Method) -> ArmError {
    ArmError::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", format!("The method {m} is not allowed here."))
}

pub(crate) fn resource_type(state: &ApiState, namespace: &str, type_name: &str) -> Result<Arc<ResourceType>, ArmError> {
    state.types.get(namespace, type_name).ok_or_else(|| {
        ArmError::not_found(
            "InvalidResourceType",
            format!("The resource type '{type_name}' could not be found in the namespace '{namespace}'."),
        )
    })
}

pub(crate) fn check_version(ctx: &Ctx, ty: &ResourceType) -> Result<(), ArmError> {
    let v = ctx.api_version()?;
    if ty.supports(v) { Ok(()) } else { Err(unsupported_version(v, &ty.api_versions)) }
}

/// What a mutating request records with its operation. An `Azure-AsyncNotificationUri`
/// the callback policy refuses is `400 InvalidAsyncNotificationUri`, before anything is
/// written.
pub(crate) fn request_context(
    state: &ApiState,
    ctx: &Ctx,
    api_version: &str,
    tenant: Option<TenantContext>,
) -> Result<RequestContext, ArmError> {
    let notification_uri = notification_uri(state, ctx)?;
    let initiator = ctx.initiator();
    let (actor, actor_type) = system_data_actor(ctx, &initiator);
    let job_context = JobContext { requested_by: RequestedBy::from(&ctx.caller.principal), tenant };
    let now = state.clock.now();
    Ok(RequestContext {
        job_context: Some(job_context),
        operation_id: new_operation_id(now),
        now,
        notification_uri,
        initiator,
        api_version: api_version.to_string(),
        actor,
        actor_type,
    })
}

/// The request's callback URI, if it names one the policy allows.
pub(crate) fn notification_uri(state: &ApiState, ctx: &Ctx) -> Result<Option<String>, ArmError> {
    let Some(value) = ctx.headers.get("azure-asyncnotificationuri") else { return Ok(None) };
    let refused = |reason: String| {
        ArmError::bad_request(
            "InvalidAsyncNotificationUri",
            format!("The Azure-AsyncNotificationUri header is not accepted: {reason}."),
        )
        .with_target("Azure-AsyncNotificationUri")
    };
    let uri = value.to_str().map_err(|_| refused("it is not readable text".into()))?.trim();
    if uri.is_empty() {
        return Ok(None);
    }
    state.options.callbacks.check_uri(uri).map_err(|r| refused(r.to_string()))?;
    Ok(Some(uri.to_string()))
}

/// Who made the change: ARM's `x-ms-arm-resource-system-data` (from a trusted front end),
/// else the caller's identity.
pub(crate) fn system_data_actor(ctx: &Ctx, initiator: &Initiator) -> (String, String) {
    let principal = &ctx.caller.principal;
    if !ctx.caller.speaks_for_others {
        return (principal.name.clone(), principal.kind.as_arm_type().to_string());
    }
    if let Ok(v) = serde_json::from_str::<Value>(ctx.identity_header("x-ms-arm-resource-system-data")) {
        let by = v.get("lastModifiedBy").or_else(|| v.get("createdBy")).and_then(Value::as_str);
        let ty = v.get("lastModifiedByType").or_else(|| v.get("createdByType")).and_then(Value::as_str);
        if let Some(by) = by {
            return (by.to_string(), ty.unwrap_or("User").to_string());
        }
    }
    let named = ctx.identity_header("x-ms-client-principal-name");
    if !named.is_empty() {
        return (named.to_string(), "User".into());
    }
    if !initiator.client_id.is_empty() {
        return (initiator.client_id.clone(), "Application".into());
    }
    ("unknown".into(), "User".into())
}

pub(crate) fn insert(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        headers.insert(name, v);
    }
}

pub(crate) fn json_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}
