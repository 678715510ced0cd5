//! Quotas in `Microsoft.Quota`'s shape (docs/governance.md#quotas): `GET …/quotas[/{meter}]`,
//! `PUT`/`PATCH …/quotas/{meter}` with `properties.limit.value`, and `GET …/usages[/{meter}]`
//! with each meter's `currentValue` beside its `limit`, under
//! `/subscriptions/{s}[/resourceGroups/{g}]/providers/{namespace}/locations/{location}`.
//! Quotas count per subscription (and group) across locations: any location in the path
//! names the same ones.
//!
//! Limits set over the API are registry entries, one per scope and meter, holding the
//! Admin's limit (the ceiling) and the Owner's (at or below it); a resource write reads them
//! in its transaction (`guardrails::Guard`).

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};
use slipway_domain::access::{Permission, Scope};
use slipway_domain::ids::SubscriptionId;
use slipway_domain::quota::{LimitSetting, MeterDefinition, OwnerLimits};
use slipway_domain::subscription::Intent;
use slipway_store::{EntryKind, Expect, PutEntry, StoreError};

use crate::error::ArmError;
use crate::handlers::body::json_body;
use crate::handlers::guardrails::{decode_limit, encode_limit, limit_id};
use crate::handlers::{Ctx, json_response, method_not_allowed, platform_version};
use crate::route::{QUOTA_NAMESPACE, QuotaCollection};
use crate::{ApiState, access};

/// Every limit set for a subscription and its groups, by entry id.
async fn settings(
    state: &ApiState,
    subscription: &SubscriptionId,
) -> Result<BTreeMap<String, LimitSetting>, StoreError> {
    let entries = state.store.list_entries(EntryKind::QuotaLimit, Some(subscription.as_str())).await?;
    Ok(entries.into_iter().map(|e| (e.id, decode_limit(&e.body))).collect())
}

fn entry_id(subscription: &SubscriptionId, group: Option<&str>, meter: &str) -> String {
    limit_id(subscription.as_str(), group, meter)
}

/// A quota path's scope, as its parts.
pub(crate) struct QuotaScope {
    pub subscription: String,
    pub resource_group: Option<String>,
    pub namespace: String,
    pub location: String,
}

impl QuotaScope {
    fn path(&self) -> String {
        let group = self.resource_group.as_ref().map(|g| format!("/resourceGroups/{g}")).unwrap_or_default();
        format!(
            "/subscriptions/{}{group}/providers/{}/locations/{}/providers/{QUOTA_NAMESPACE}",
            self.subscription, self.namespace, self.location
        )
    }

    fn access_scope(&self) -> Scope {
        match &self.resource_group {
            Some(g) => Scope::resource_group(&self.subscription, g),
            None => Scope::subscription_scope(&SubscriptionId::new(&self.subscription)),
        }
    }
}

/// `PUT`/`PATCH` body: `{"properties": {"limit": {"value": n}}}`.
#[derive(Debug, Deserialize)]
struct QuotaBody {
    properties: QuotaProperties,
}

#[derive(Debug, Deserialize)]
struct QuotaProperties {
    limit: LimitObject,
}

#[derive(Debug, Deserialize)]
struct LimitObject {
    value: Value,
}

/// Every method of a quota path.
pub(crate) async fn quota(
    state: &ApiState,
    ctx: &Ctx,
    scope: QuotaScope,
    collection: QuotaCollection,
    meter: Option<String>,
    body: Body,
) -> Result<Response, ArmError> {
    platform_version::check(ctx)?;
    let meters: Vec<&MeterDefinition> = state
        .quotas
        .meters
        .iter()
        .filter(|d| {
            d.meter.type_key.as_str().split_once('/').is_some_and(|(ns, _)| ns.eq_ignore_ascii_case(&scope.namespace))
        })
        .collect();
    if state.types.namespace_versions(&scope.namespace).is_empty() {
        return Err(ArmError::not_found(
            "InvalidResourceNamespace",
            format!("The namespace '{}' is not served here.", scope.namespace),
        ));
    }
    let subscription = SubscriptionId::new(&scope.subscription);
    let grants = access::grants(state, &ctx.caller, Some(&subscription)).await?;
    let action = format!(
        "{QUOTA_NAMESPACE}/{}/{}",
        collection.as_str(),
        if ctx.method == Method::GET { "read" } else { "write" }
    );
    let selected: Vec<&MeterDefinition> = match &meter {
        None => meters,
        Some(name) => match meters.into_iter().find(|d| d.meter.name.as_str().eq_ignore_ascii_case(name)) {
            Some(d) => vec![d],
            None => {
                grants.require(&ctx.caller, Permission::Read, &scope.access_scope(), &action)?;
                return Err(ArmError::not_found(
                    "ResourceNotFound",
                    format!(
                        "The meter '{}' is not defined for {}.",
                        slipway_domain::echo::echo(name, 64),
                        scope.namespace
                    ),
                ));
            }
        },
    };
    match (&ctx.method, collection, meter.is_some()) {
        (&Method::GET, _, _) => {
            grants.require(&ctx.caller, Permission::Read, &scope.access_scope(), &action)?;
            let view = QuotaView::read(state, &subscription).await?;
            let items: Vec<Value> = selected.iter().map(|d| view.body(state, &scope, collection, d)).collect();
            let body = match meter {
                Some(_) => items.into_iter().next().unwrap_or_default(),
                None => json!({ "value": items }),
            };
            Ok(json_response(StatusCode::OK, body))
        }
        (&Method::PUT | &Method::PATCH, QuotaCollection::Quotas, true) => {
            let definition = selected[0];
            let input: QuotaBody = json_body(state, ctx, body).await?;
            let value = input.properties.limit.value.as_u64().ok_or_else(|| {
                ArmError::bad_request("InvalidQuotaLimit", "properties.limit.value must be a whole number, 0 or more.")
                    .with_target("properties.limit.value")
            })?;
            access::check_subscription(state, &subscription, Intent::Change).await?;
            set_limit(state, ctx, &grants, &scope, &subscription, definition, value, &action).await?;
            let view = QuotaView::read(state, &subscription).await?;
            Ok(json_response(StatusCode::OK, view.body(state, &scope, collection, definition)))
        }
        _ => Err(method_not_allowed(&ctx.method)),
    }
}

/// The Admin sets the ceiling; an Owner, where the platform allows it, a limit at or below it.
#[allow(clippy::too_many_arguments)]
async fn set_limit(
    state: &ApiState,
    ctx: &Ctx,
    grants: &access::Grants,
    scope: &QuotaScope,
    subscription: &SubscriptionId,
    definition: &MeterDefinition,
    value: u64,
    action: &str,
) -> Result<(), ArmError> {
    let id = entry_id(subscription, scope.resource_group.as_deref(), definition.meter.name.as_str());
    let stored = state.store.get_entry(EntryKind::QuotaLimit, &id).await?;
    let mut setting = stored.as_ref().map(|e| decode_limit(&e.body)).unwrap_or_default();
    let default = match scope.resource_group {
        Some(_) => definition.defaults.group,
        None => definition.defaults.subscription,
    };
    if grants.allows(&ctx.caller, Permission::ManagePlatform, &Scope::platform()) {
        setting.admin = Some(value);
    } else if state.quotas.owner_limits == OwnerLimits::BelowCeiling
        && grants.allows(&ctx.caller, Permission::ManageAccess, &scope.access_scope())
    {
        if let Some(ceiling) = LimitSetting::ceiling(Some(&setting), default)
            && value > ceiling
        {
            return Err(ArmError::bad_request(
                "InvalidQuotaLimit",
                format!("The limit of '{}' can be set to at most {ceiling}, the platform's.", definition.meter.name),
            )
            .with_target("properties.limit.value"));
        }
        setting.owner = Some(value);
    } else {
        grants.require(&ctx.caller, Permission::ManagePlatform, &scope.access_scope(), action)?;
    }
    let expect = stored.map_or(Expect::Absent, |e| Expect::Version(e.version));
    ctx.put_entry(
        state,
        PutEntry {
            kind: EntryKind::QuotaLimit,
            id,
            partition: subscription.as_str().to_string(),
            body: encode_limit(&setting),
            expect,
            now: state.clock.now(),
            activity: None,
        },
    )
    .await?;
    Ok(())
}

/// A scope's limits and usage, read once for a response.
struct QuotaView {
    settings: BTreeMap<String, LimitSetting>,
    /// (meter, group) → value.
    usage: BTreeMap<(String, String), u64>,
}

impl QuotaView {
    async fn read(state: &ApiState, subscription: &SubscriptionId) -> Result<QuotaView, ArmError> {
        let settings = settings(state, subscription).await?;
        let rows = state.store.usage(subscription).await?;
        let usage = rows.into_iter().map(|r| ((r.meter.as_str().to_string(), r.group), r.value)).collect();
        Ok(QuotaView { settings, usage })
    }

    fn body(&self, state: &ApiState, scope: &QuotaScope, collection: QuotaCollection, d: &MeterDefinition) -> Value {
        let name = d.meter.name.as_str();
        let resource_type = state
            .types
            .all()
            .find(|t| t.key() == d.meter.type_key)
            .map_or_else(|| d.meter.type_key.to_string(), |t| format!("{}/{}", t.namespace, t.type_name));
        let subscription = SubscriptionId::new(&scope.subscription);
        let group = scope.resource_group.as_deref();
        let setting = self.settings.get(&entry_id(&subscription, group, name));
        let default = if group.is_some() { d.defaults.group } else { d.defaults.subscription };
        let limit = LimitSetting::effective(setting, default);
        let current: u64 = self
            .usage
            .iter()
            .filter(|((m, g), _)| m == name && group.is_none_or(|want| g.eq_ignore_ascii_case(want)))
            .map(|(_, v)| *v)
            .sum();
        let mut properties = json!({
            "name": {"value": name, "localizedValue": name},
            "resourceType": resource_type,
            "unit": d.meter.unit,
            "isQuotaApplicable": true,
        });
        match collection {
            QuotaCollection::Quotas => {
                if let Some(limit) = limit {
                    properties["limit"] = json!({"limitObjectType": "LimitValue", "value": limit});
                }
                if let Some(ceiling) = LimitSetting::ceiling(setting, default) {
                    properties["ceiling"] = json!(ceiling);
                }
                if let Some(owner) = setting.and_then(|s| s.owner) {
                    properties["ownerLimit"] = json!(owner);
                }
            }
            QuotaCollection::Usages => {
                properties["usages"] = json!({"value": current, "usagesType": "Individual"});
                properties["currentValue"] = json!(current);
                if let Some(limit) = limit {
                    properties["limit"] = json!(limit);
                }
            }
        }
        let kind = match collection {
            QuotaCollection::Quotas => "Microsoft.Quota/Quotas",
            QuotaCollection::Usages => "Microsoft.Quota/Usages",
        };
        json!({
            "id": format!("{}/{}/{name}", scope.path(), collection.as_str()),
            "name": name,
            "type": kind,
            "properties": properties,
        })
    }
}
