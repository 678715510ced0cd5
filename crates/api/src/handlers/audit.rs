//! The audit trail: one structured event per mutating request that passed authentication,
//! on its own `tracing` target so operators can route it (`SLIPWAY_LOG=slipway::audit=info`,
//! or a subscriber filtering on the target). No bodies, no credentials.

use axum::response::Response;

use crate::handlers::Ctx;
use crate::route;
use crate::route::Route;

pub(crate) fn record(ctx: &Ctx, path: &str, resp: &Response, request_id: &str) {
    let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok());
    // The operation a write started: the last segment of its status URL's path.
    let operation_id = header("azure-asyncoperation")
        .and_then(|u| u.split('?').next())
        .and_then(|p| p.rsplit('/').next())
        .unwrap_or_default();
    let resource_id = match route::parse(path) {
        Ok(Route::Resource(id)) => id.to_string(),
        _ => String::new(),
    };
    let p = &ctx.caller.principal;
    tracing::info!(
        target: "slipway::audit",
        principal = %p.name,
        tenant = %p.tenant_or_empty(),
        principal_type = %p.kind.as_arm_type(),
        action = %ctx.method,
        force = ctx.query.get("force").is_some_and(|v| v.eq_ignore_ascii_case("true")),
        scope = %path,
        resource_id = %resource_id,
        operation_id = %operation_id,
        status = resp.status().as_u16(),
        error_code = %header("x-ms-error-code").unwrap_or_default(),
        request_id = %request_id,
        "audit"
    );
}
