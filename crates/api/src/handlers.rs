//! The ARM request handlers. Each mutating request is one store transaction running a pure
//! admission function; the answer is built only from what was committed.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use slipway_domain::admission::{self, Admitted, RequestContext};
use slipway_domain::ids::{ArmId, OperationId, ResourceKey, SubscriptionId};
use slipway_domain::operation::is_visible_to;
use slipway_domain::resource::Spec;
use slipway_domain::{Initiator, Operation, OperationRequest, PrincipalKind, ProvisioningState, TypeKey};
use slipway_store::{ChangeRequest, ListQuery, change_with};

use crate::ApiState;
use crate::edge::{self, Caller, PeerAddr};
use crate::error::{ArmError, echo};
use crate::limits;
use crate::route::{self, Route, RouteError};
use crate::types::ResourceType;
use crate::wire::{self, PatchBody, PutBody};

/// Everything a handler needs from the request besides the body.
pub(crate) struct Ctx {
    pub method: Method,
    pub headers: HeaderMap,
    pub query: HashMap<String, String>,
    pub base: String,
    pub caller: Caller,
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
    let (parts, body) = req.into_parts();
    let caller = match edge::authenticate(&state, &parts.headers).await {
        Ok(caller) => caller,
        Err(refusal) => return refusal,
    };
    let query =
        axum::extract::Query::<HashMap<String, String>>::try_from_uri(&parts.uri).map(|q| q.0).unwrap_or_default();
    let peer = parts.extensions.get::<PeerAddr>().map(|p| p.0.ip());
    let base = edge::base_url(&state.edge, &parts.headers, peer, "http");
    let ctx = Ctx { base, method: parts.method, headers: parts.headers, query, caller };
    match dispatch(&state, &ctx, parts.uri.path(), body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn dispatch(state: &ApiState, ctx: &Ctx, path: &str, body: Body) -> Result<Response, ArmError> {
    let route = route::parse(path).map_err(|e| match e {
        RouteError::NoMatch => ArmError::not_found("NotFound", format!("No such resource path: {}", echo(path, 200))),
        RouteError::BadName(n) => ArmError::bad_request(
            "InvalidResourceName",
            format!("The resource name '{}' is not valid: {}.", echo(&n, 64), crate::types::ARM_NAME_RULE),
        ),
        RouteError::BadGroupName(n) => ArmError::bad_request(
            "InvalidResourceName",
            format!(
                "The resource group name '{}' is not valid: use 1-90 letters, digits, '-', '_', '.' or '()', not \
                 ending in '.'.",
                echo(&n, 64)
            ),
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
            match ctx.method {
                Method::GET => get_resource(state, &id, &ty).await,
                Method::PUT => put_resource(state, ctx, id, ty, body).await,
                Method::PATCH => patch_resource(state, ctx, id, ty, body).await,
                Method::DELETE => delete_resource(state, ctx, id).await,
                _ => Err(method_not_allowed(&ctx.method)),
            }
        }
        Route::Collection { subscription, resource_group, namespace, type_name } => {
            let ty = resource_type(state, &namespace, &type_name)?;
            check_version(ctx, &ty)?;
            if ctx.method != Method::GET {
                return Err(method_not_allowed(&ctx.method));
            }
            list(state, ctx, path, &subscription, resource_group.as_deref(), &ty).await
        }
        Route::OperationStatus { subscription, namespace, id, .. } => {
            operation_check(state, ctx, &namespace, Method::GET)?;
            let op = find_operation(state, ctx, &subscription, &id).await?;
            Ok(status_response(state, &op))
        }
        Route::OperationCancel { subscription, namespace, id, .. } => {
            operation_check(state, ctx, &namespace, Method::POST)?;
            cancel_operation(state, ctx, &subscription, &id).await
        }
        Route::OperationResult { subscription, namespace, id, .. } => {
            operation_check(state, ctx, &namespace, Method::GET)?;
            let op = find_operation(state, ctx, &subscription, &id).await?;
            operation_result(state, ctx, &op).await
        }
    }
}

fn method_not_allowed(m: &Method) -> ArmError {
    ArmError::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", format!("The method {m} is not allowed here."))
}

fn resource_type(state: &ApiState, namespace: &str, type_name: &str) -> Result<Arc<ResourceType>, ArmError> {
    state.types.get(namespace, type_name).ok_or_else(|| {
        ArmError::not_found(
            "InvalidResourceType",
            format!("The resource type '{type_name}' could not be found in the namespace '{namespace}'."),
        )
    })
}

fn check_version(ctx: &Ctx, ty: &ResourceType) -> Result<(), ArmError> {
    let v = ctx.api_version()?;
    if ty.supports(v) { Ok(()) } else { Err(unsupported_version(v, &ty.api_versions)) }
}

fn operation_check(state: &ApiState, ctx: &Ctx, namespace: &str, method: Method) -> Result<(), ArmError> {
    if ctx.method != method {
        return Err(method_not_allowed(&ctx.method));
    }
    let versions = state.types.namespace_versions(namespace);
    if versions.is_empty() {
        return Err(ArmError::not_found(
            "InvalidResourceType",
            format!("The namespace '{namespace}' is not served here."),
        ));
    }
    let v = ctx.api_version()?;
    if versions.iter().any(|s| s.eq_ignore_ascii_case(v)) { Ok(()) } else { Err(unsupported_version(v, &versions)) }
}

fn not_found_op(id: &str) -> ArmError {
    ArmError::not_found("ResourceNotFound", format!("The operation '{id}' was not found."))
}

async fn find_operation(state: &ApiState, ctx: &Ctx, subscription: &str, id: &str) -> Result<Operation, ArmError> {
    let op_id = OperationId::parse(id).ok_or_else(|| not_found_op(id))?;
    let subscription = SubscriptionId::new(subscription);
    let op =
        state.store.get_operation(&subscription, &op_id, state.clock.now()).await?.ok_or_else(|| not_found_op(id))?;
    let asking = ctx.initiator();
    if !is_visible_to(&op, &subscription, &asking.tenant_id, &asking.client_id) {
        return Err(not_found_op(id));
    }
    Ok(op)
}

/// Reads and checks a JSON request body.
async fn json_body<T: serde::de::DeserializeOwned>(state: &ApiState, ctx: &Ctx, body: Body) -> Result<T, ArmError> {
    check_content_type(&ctx.headers)?;
    let limit = state.options.max_body_bytes;
    let too_large = || {
        ArmError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            format!("The request body exceeds the limit of {limit} bytes."),
        )
    };
    let declared: Option<usize> = ctx.header("content-length").parse().ok();
    if declared.is_some_and(|n| n > limit.saturating_add(OVERSIZE_DRAIN)) {
        return Err(too_large());
    }
    let bytes = read_limited(body, limit).await.ok_or_else(too_large)?;
    wire::parse_body(&bytes)
}

/// No `Content-Type` (read as JSON), or one `application/json` with well-formed parameters
/// and at most a `utf-8` charset; anything else — unreadable bytes, a malformed media type,
/// several headers — is `415 UnsupportedMediaType`.
fn check_content_type(headers: &HeaderMap) -> Result<(), ArmError> {
    let unsupported = |why: String| {
        ArmError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("{why}; send application/json."),
        )
    };
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    let Some(value) = values.next() else { return Ok(()) };
    if values.next().is_some() {
        return Err(unsupported("The request has more than one Content-Type header".into()));
    }
    let text = value.to_str().map_err(|_| unsupported("The Content-Type header is not readable text".into()))?;
    let mut parts = text.split(';');
    let media = parts.next().unwrap_or_default().trim();
    let is_token =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !media.split_once('/').is_some_and(|(ty, sub)| is_token(ty) && is_token(sub)) {
        return Err(unsupported(format!("The Content-Type '{}' is not a media type", echo(media, 64))));
    }
    if !media.eq_ignore_ascii_case("application/json") {
        return Err(unsupported(format!("The content type '{}' is not supported", echo(media, 64))));
    }
    for param in parts.map(str::trim).filter(|p| !p.is_empty()) {
        let parsed = param.split_once('=').map(|(n, v)| (n.trim(), v.trim())).filter(|(n, v)| {
            is_token(n)
                && (is_token(v)
                    || (v.len() >= 2 && v.starts_with('"') && v.ends_with('"') && !v[1..v.len() - 1].contains('"')))
        });
        let Some((name, value)) = parsed else {
            return Err(unsupported(format!("The Content-Type parameter '{}' is malformed", echo(param, 64))));
        };
        if name.eq_ignore_ascii_case("charset") && !value.trim_matches('"').eq_ignore_ascii_case("utf-8") {
            return Err(unsupported(format!("The charset '{}' is not supported (only utf-8)", echo(value, 32))));
        }
    }
    Ok(())
}

/// How much of an oversized body is read and dropped before the `413` goes out: a client
/// still sending it would otherwise see its connection reset instead of the answer.
const OVERSIZE_DRAIN: usize = 16 * 1024 * 1024;

/// The body if it is at most `limit` bytes; `None` for a larger one (read on, unbuffered,
/// up to [`OVERSIZE_DRAIN`] more) or a body that failed to arrive.
async fn read_limited(mut body: Body, limit: usize) -> Option<Vec<u8>> {
    use axum::body::HttpBody;
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
        let Ok(data) = frame.ok()?.into_data() else { continue };
        seen = seen.saturating_add(data.len());
        if seen <= limit {
            buf.extend_from_slice(&data);
        } else if seen > limit.saturating_add(OVERSIZE_DRAIN) {
            return None;
        }
    }
    (seen <= limit).then_some(buf)
}

/// What a mutating request records with its operation. An `Azure-AsyncNotificationUri`
/// the callback policy refuses is `400 InvalidAsyncNotificationUri`, before anything is
/// written.
fn request_context(state: &ApiState, ctx: &Ctx, api_version: &str) -> Result<RequestContext, ArmError> {
    let notification_uri = notification_uri(state, ctx)?;
    let initiator = ctx.initiator();
    let (actor, actor_type) = system_data_actor(ctx, &initiator);
    Ok(RequestContext {
        operation_id: OperationId::parse(&uuid::Uuid::new_v4().to_string()).expect("uuid v4 is a valid operation id"),
        now: state.clock.now(),
        notification_uri,
        initiator,
        api_version: api_version.to_string(),
        actor,
        actor_type,
    })
}

/// The request's callback URI, if it names one the policy allows.
fn notification_uri(state: &ApiState, ctx: &Ctx) -> Result<Option<String>, ArmError> {
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
fn system_data_actor(ctx: &Ctx, initiator: &Initiator) -> (String, String) {
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

fn insert(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        headers.insert(name, v);
    }
}

fn status_path(state: &ApiState, op: &Operation) -> String {
    wire::status_path(op, &state.options.location)
}

fn result_path(state: &ApiState, op: &Operation) -> String {
    status_path(state, op).replace("/operationStatuses/", "/operationResults/")
}

/// `Azure-AsyncOperation`, `Location`, `Retry-After` (and the callback acknowledgement).
fn add_async_headers(state: &ApiState, ctx: &Ctx, op: &Operation, headers: &mut HeaderMap) {
    let q = format!("?api-version={}", op.api_version);
    insert(headers, "azure-asyncoperation", &format!("{}{}{q}", ctx.base, status_path(state, op)));
    insert(headers, "location", &format!("{}{}{q}", ctx.base, result_path(state, op)));
    headers.insert(header::RETRY_AFTER, HeaderValue::from(state.options.retry_after_secs));
    if op.notification_uri.is_some() {
        headers.insert("azure-asyncnotification", HeaderValue::from_static("Enabled"));
    }
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

async fn get_resource(state: &ApiState, id: &ArmId, ty: &ResourceType) -> Result<Response, ArmError> {
    let res =
        state.store.get_resource(&id.key()).await?.ok_or_else(|| ArmError::resource_not_found(&id.to_string()))?;
    Ok(json_response(StatusCode::OK, wire::resource_body(&res, ty)))
}

async fn put_resource(
    state: &ApiState,
    ctx: &Ctx,
    id: ArmId,
    ty: Arc<ResourceType>,
    body: Body,
) -> Result<Response, ArmError> {
    ty.check_name(&id.name)?;
    let input: PutBody = json_body(state, ctx, body).await?;
    let location = wire::required_location(input.location)?;
    let tags = input.tags.unwrap_or_default();
    limits::check_tags(&tags)?;
    let properties = wire::spec_properties(input.properties)?;
    ty.validate(&properties)?;
    let spec = Spec { location: Some(location), tags, properties };
    let rctx = request_context(state, ctx, ctx.api_version()?)?;
    let kind = ty.kind.clone();
    let target = id.clone();
    let (admitted, snap) = change_with(state.store.as_ref(), ChangeRequest::new(id.key(), rctx.now), move |snap| {
        admission::admit_put(snap, &target, &kind, spec, &rctx)
    })
    .await?;
    respond_to_write(state, ctx, &ty, admitted, snap.resource.as_ref())
}

async fn patch_resource(
    state: &ApiState,
    ctx: &Ctx,
    id: ArmId,
    ty: Arc<ResourceType>,
    body: Body,
) -> Result<Response, ArmError> {
    let input: PatchBody = json_body(state, ctx, body).await?;
    if let Some(tags) = &input.tags {
        limits::check_tags(tags)?;
    }
    let patch = wire::patch_properties(input.properties)?;
    let rctx = request_context(state, ctx, ctx.api_version()?)?;
    let validator = ty.clone();
    let (admitted, snap) = change_with(state.store.as_ref(), ChangeRequest::new(id.key(), rctx.now), move |snap| {
        admission::admit_patch(
            snap,
            input.tags,
            patch.as_ref(),
            |props| validator.validate(props).map_err(|e| admission::Rejection::Invalid(e.body)),
            &rctx,
        )
    })
    .await
    .map_err(|e| match e {
        slipway_store::StoreError::Rejected(admission::Rejection::NotFound) => {
            ArmError::resource_not_found(&id.to_string())
        }
        other => other.into(),
    })?;
    respond_to_write(state, ctx, &ty, admitted, snap.resource.as_ref())
}

fn respond_to_write(
    state: &ApiState,
    ctx: &Ctx,
    ty: &ResourceType,
    admitted: Admitted,
    res: Option<&slipway_domain::ResourceRecord>,
) -> Result<Response, ArmError> {
    let res = res.ok_or_else(ArmError::internal)?;
    let body = wire::resource_body(res, ty);
    let (status, op) = match admitted {
        Admitted::Unchanged => return Ok(json_response(StatusCode::OK, body)),
        Admitted::Accepted { operation, created } => {
            (state.on_accept)();
            (write_status(&ctx.method, created), operation)
        }
        Admitted::InProgress { operation } => {
            let created = operation.request == OperationRequest::Create;
            (write_status(&ctx.method, created), operation)
        }
        Admitted::Absent => return Err(ArmError::internal()),
    };
    let mut resp = json_response(status, body);
    add_async_headers(state, ctx, &op, resp.headers_mut());
    Ok(resp)
}

fn write_status(method: &Method, created: bool) -> StatusCode {
    match (method, created) {
        (&Method::PATCH, _) => StatusCode::ACCEPTED,
        (_, true) => StatusCode::CREATED,
        _ => StatusCode::OK,
    }
}

async fn delete_resource(state: &ApiState, ctx: &Ctx, id: ArmId) -> Result<Response, ArmError> {
    let rctx = request_context(state, ctx, ctx.api_version()?)?;
    let (admitted, _) = change_with(state.store.as_ref(), ChangeRequest::new(id.key(), rctx.now), move |snap| {
        admission::admit_delete(snap, &rctx)
    })
    .await?;
    match admitted {
        Admitted::Absent => Ok(StatusCode::NO_CONTENT.into_response()),
        Admitted::Accepted { operation, .. } | Admitted::InProgress { operation } => {
            (state.on_accept)();
            let mut resp = StatusCode::ACCEPTED.into_response();
            add_async_headers(state, ctx, &operation, resp.headers_mut());
            Ok(resp)
        }
        Admitted::Unchanged => Err(ArmError::internal()),
    }
}

async fn list(
    state: &ApiState,
    ctx: &Ctx,
    path: &str,
    subscription: &str,
    resource_group: Option<&str>,
    ty: &ResourceType,
) -> Result<Response, ArmError> {
    let after = match ctx.query.get("$skipToken") {
        Some(token) => Some(
            decode_token(token)
                .ok_or_else(|| ArmError::bad_request("InvalidSkipToken", "The $skipToken is not valid."))?,
        ),
        None => None,
    };
    let limit = match ctx.query.get("$top") {
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| ArmError::bad_request("InvalidParameter", "$top must be an integer from 1 to 1000."))?,
        None => state.options.page_size,
    };
    let page = state
        .store
        .list_resources(&ListQuery {
            subscription: SubscriptionId::new(subscription),
            resource_group: resource_group.map(str::to_ascii_lowercase),
            type_key: TypeKey::new(&ty.namespace, &ty.type_name),
            after,
            limit,
        })
        .await?;
    let value: Vec<Value> = page.items.iter().map(|r| wire::resource_body(r, ty)).collect();
    let mut body = json!({ "value": value });
    if let Some(next) = page.next {
        body["nextLink"] = json!(format!(
            "{}{path}?api-version={}&$top={limit}&$skipToken={}",
            ctx.base,
            ctx.api_version()?,
            encode_token(&next)
        ));
    }
    Ok(json_response(StatusCode::OK, body))
}

/// Continuation tokens are hex so they survive any URL handling untouched.
fn encode_token(key: &ResourceKey) -> String {
    key.as_str().bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_token(token: &str) -> Option<ResourceKey> {
    if !token.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..token.len()).step_by(2).map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(bytes?).ok().map(ResourceKey)
}

fn status_response(state: &ApiState, op: &Operation) -> Response {
    json_response(StatusCode::OK, wire::operation_status_body(op, &status_path(state, op)))
}

async fn cancel_operation(state: &ApiState, ctx: &Ctx, subscription: &str, id: &str) -> Result<Response, ArmError> {
    let op = find_operation(state, ctx, subscription, id).await?;
    let now = state.clock.now();
    let req = ChangeRequest::new(op.resource_key.clone(), now).with_operation(&op.subscription, op.id.clone());
    let op_id = op.id.clone();
    let (canceled, _) =
        change_with(state.store.as_ref(), req, move |snap| admission::admit_cancel(snap, &op_id, now)).await?;
    (state.on_accept)();
    let mut resp = status_response(state, &canceled);
    *resp.status_mut() = StatusCode::ACCEPTED;
    add_async_headers(state, ctx, &canceled, resp.headers_mut());
    Ok(resp)
}

/// The `Location` target: 202 while running; the synchronous equivalent when done. A
/// failed or canceled operation answers with its own error (not a bare 500).
async fn operation_result(state: &ApiState, ctx: &Ctx, op: &Operation) -> Result<Response, ArmError> {
    if !op.is_terminal() {
        let mut resp = StatusCode::ACCEPTED.into_response();
        let q = format!("?api-version={}", op.api_version);
        insert(resp.headers_mut(), "location", &format!("{}{}{q}", ctx.base, result_path(state, op)));
        resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(state.options.retry_after_secs));
        return Ok(resp);
    }
    match op.status {
        ProvisioningState::Succeeded if op.request == OperationRequest::Delete => {
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        ProvisioningState::Succeeded => {
            let id = route::stored_resource_id(&op.resource_id).ok_or_else(ArmError::internal)?;
            let ty = resource_type(state, &id.namespace, &id.type_name)?;
            get_resource(state, &id, &ty).await
        }
        status => {
            let body = op
                .error
                .clone()
                .unwrap_or_else(|| slipway_domain::CloudError::new("InternalServerError", "The operation failed."));
            let code = if status == ProvisioningState::Canceled {
                StatusCode::CONFLICT
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            Err(ArmError { status: code, body, retry_after: None })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_tokens_round_trip() {
        let key = ResourceKey("/subscriptions/s/resourcegroups/rg/providers/ns/t/n-1".into());
        assert_eq!(decode_token(&encode_token(&key)), Some(key));
        assert_eq!(decode_token("zz"), None);
        assert_eq!(decode_token("abc"), None);
    }
}
