//! `/providers/Slipway.Authorization/apiTokens[/{id}]`: API tokens over the API, kept as the
//! `api-token` command keeps them (hashed in the store, so no downtime on SQLite). The
//! platform Admin manages every token. A subscription's Owner manages tokens confined to
//! subscriptions they own: such a token acts only inside them, whatever its principal's roles
//! elsewhere, so it can never do more there than its maker could, nor anything outside.

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use slipway_auth::api_tokens::{self, ApiToken, NewApiToken};
use slipway_domain::access::{Permission, Scope};
use slipway_domain::echo::echo;
use slipway_domain::ids;
use slipway_domain::ids::SubscriptionId;
use slipway_store::registry;

use crate::error::ArmError;
use crate::handlers::body::json_body;
use crate::handlers::{Ctx, json_response, method_not_allowed, platform_version};
use crate::{ApiState, access};

pub(crate) const TOKENS: &str = "Slipway.Authorization/apiTokens";
/// The longest principal, group or description a token may carry.
const MAX_NAME: usize = 256;
const MAX_GROUPS: usize = 64;
const MAX_SUBSCRIPTIONS: usize = 64;
const MAX_DAYS: u32 = 36_500;

/// Whose tokens the caller manages.
enum Authority {
    Admin,
    /// Owner of these subscriptions (and no Admin).
    Owner(BTreeSet<SubscriptionId>),
}

impl Authority {
    async fn of(state: &ApiState, ctx: &Ctx, write: bool) -> Result<Authority, ArmError> {
        let platform = access::platform_grants(state, &ctx.caller).await?;
        if platform.allows(&ctx.caller, Permission::ManagePlatform, &Scope::platform()) {
            return Ok(Authority::Admin);
        }
        let mut owned = BTreeSet::new();
        for s in registry::list_subscriptions(state.store.as_ref()).await? {
            let mut grants = platform.clone();
            grants.add_subscription(state, &s.id).await?;
            if grants.allows(&ctx.caller, Permission::ManageAccess, &Scope::subscription_scope(&s.id)) {
                owned.insert(s.id);
            }
        }
        if owned.is_empty() {
            let action = format!("{TOKENS}/{}", if write { "write" } else { "read" });
            return Err(access::forbidden(&ctx.caller, &action, &Scope::platform()));
        }
        Ok(Authority::Owner(owned))
    }

    /// Whether the caller manages `token`: a confined one inside the caller's subscriptions.
    fn manages(&self, token: &ApiToken) -> bool {
        match self {
            Authority::Admin => true,
            Authority::Owner(owned) => {
                !token.subscriptions.is_empty() && token.subscriptions.iter().all(|s| owned.contains(s))
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenPost {
    properties: TokenProperties,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TokenProperties {
    principal: String,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    expires_in_days: Option<u32>,
    #[serde(default)]
    subscriptions: Vec<String>,
}

/// `GET|POST …/apiTokens`, `GET|DELETE …/apiTokens/{id}`.
pub(crate) async fn api_tokens(
    state: &ApiState,
    ctx: &Ctx,
    id: Option<&str>,
    body: Body,
) -> Result<Response, ArmError> {
    platform_version::check(ctx)?;
    let write = match (&ctx.method, id) {
        (&Method::GET, _) => false,
        (&Method::POST, None) | (&Method::DELETE, Some(_)) => true,
        _ => return Err(method_not_allowed(&ctx.method)),
    };
    let authority = Authority::of(state, ctx, write).await?;
    match id {
        None if write => create(state, ctx, &authority, json_body(state, ctx, body).await?).await,
        None => {
            let mut tokens: Vec<ApiToken> =
                api_tokens::list(state.store.as_ref()).await?.into_iter().filter(|t| authority.manages(t)).collect();
            tokens.sort_by_key(|t| t.created_at);
            let value: Vec<Value> = tokens.iter().map(|t| token_body(t, None)).collect();
            Ok(json_response(StatusCode::OK, json!({ "value": value })))
        }
        Some(id) if write => {
            managed(state, &authority, id).await?;
            ctx.logged(|a| api_tokens::revoke(state.store.as_ref(), id, a)).await?;
            Ok(StatusCode::OK.into_response())
        }
        Some(id) => Ok(json_response(StatusCode::OK, token_body(&managed(state, &authority, id).await?, None))),
    }
}

/// The token `id`, if the caller manages it; `404` alike for one that does not exist and one
/// of somebody else's (a `403` would confirm it exists).
async fn managed(state: &ApiState, authority: &Authority, id: &str) -> Result<ApiToken, ArmError> {
    match api_tokens::get(state.store.as_ref(), id).await? {
        Some(token) if authority.manages(&token) => Ok(token),
        _ => Err(ArmError::not_found("ApiTokenNotFound", format!("No API token '{}' is yours to see.", echo(id, 40)))),
    }
}

async fn create(state: &ApiState, ctx: &Ctx, authority: &Authority, post: TokenPost) -> Result<Response, ArmError> {
    let p = post.properties;
    let invalid = |target: &str, message: String| ArmError::invalid_content(message, format!("properties.{target}"));
    let name_ok = |n: &str| !n.trim().is_empty() && n.chars().count() <= MAX_NAME && !n.chars().any(char::is_control);
    if !name_ok(&p.principal) {
        return Err(invalid(
            "principal",
            format!("The principal must be 1 to {MAX_NAME} characters, none a control character."),
        ));
    }
    if p.groups.len() > MAX_GROUPS || !p.groups.iter().all(|g| name_ok(g)) {
        return Err(invalid("groups", format!("At most {MAX_GROUPS} groups, each 1 to {MAX_NAME} characters.")));
    }
    if p.description.chars().count() > MAX_NAME || p.tenant.as_deref().is_some_and(|t| !name_ok(t)) {
        return Err(invalid("description", format!("The description and tenant are at most {MAX_NAME} characters.")));
    }
    if let Some(auth) = &state.auth {
        for name in std::iter::once(&p.principal).chain(&p.groups) {
            if let Some(issuer) = auth.prefix_owner(name) {
                return Err(invalid(
                    "principal",
                    format!(
                        "'{}' carries the prefix of the issuer {issuer}: an API token cannot name it.",
                        echo(name, 64)
                    ),
                ));
            }
        }
    }
    if p.expires_in_days.is_some_and(|d| d > MAX_DAYS) {
        return Err(invalid("expiresInDays", format!("A token expires within {MAX_DAYS} days, or never.")));
    }
    if p.subscriptions.len() > MAX_SUBSCRIPTIONS {
        return Err(invalid("subscriptions", format!("At most {MAX_SUBSCRIPTIONS} subscriptions.")));
    }
    let mut subscriptions = Vec::new();
    for s in &p.subscriptions {
        ids::check_subscription(s)
            .map_err(|_| invalid("subscriptions", format!("'{}' is not a subscription id (a GUID).", echo(s, 40))))?;
        subscriptions.push(SubscriptionId::new(s));
    }
    subscriptions.sort();
    subscriptions.dedup();
    let new = NewApiToken {
        principal: p.principal,
        tenant: p.tenant.filter(|t| !t.is_empty()),
        groups: p.groups,
        description: p.description,
        expires_at: p
            .expires_in_days
            .map(|d| state.clock.now().add(std::time::Duration::from_secs(u64::from(d) * 86_400))),
        subscriptions,
    };
    if let Authority::Owner(owned) = authority {
        let outside = new.subscriptions.iter().find(|s| !owned.contains(*s));
        if new.subscriptions.is_empty() || outside.is_some() {
            let scope = outside.map_or_else(Scope::platform, Scope::subscription_scope);
            return Err(access::forbidden(&ctx.caller, &format!("{TOKENS}/write"), &scope));
        }
    }
    let (text, token) = ctx.logged(|a| api_tokens::create(state.store.as_ref(), new, state.clock.now(), a)).await?;
    let mut resp = json_response(StatusCode::CREATED, token_body(&token, Some(&text)));
    // The one answer that holds the secret: no cache keeps it.
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(resp)
}

/// A token as the API shows it: never its hash; its text only in the answer that made it.
fn token_body(t: &ApiToken, text: Option<&str>) -> Value {
    let time = |at: Option<slipway_domain::Timestamp>| at.map(|a| a.to_rfc3339());
    let mut properties = json!({
        "principal": t.principal,
        "tenant": t.tenant,
        "groups": t.groups,
        "description": t.description,
        "subscriptions": t.subscriptions,
        "createdAt": t.created_at.to_rfc3339(),
        "expiresAt": time(t.expires_at),
        "lastUsedAt": time(t.last_used_at),
    });
    if let Some(text) = text {
        properties["token"] = json!(text);
    }
    json!({
        "id": format!("/providers/{TOKENS}/{}", t.id),
        "name": t.id,
        "type": TOKENS,
        "properties": properties,
    })
}
