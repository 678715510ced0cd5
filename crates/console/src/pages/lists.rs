//! The lists: subscriptions, then a subscription's (or a group's) resources across types,
//! with ARM's `$filter` by type, state and tag, its groups and its latest operations.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{allowed, operation_href, refused, resource_href, subscription_crumbs};
use crate::api::{segment, uri};
use crate::render::{Crumb, Page};
use crate::session::Visit;
use crate::{Console, PLATFORM_API_VERSION, QUOTA_API_VERSION, api_version};

/// The states a filter offers.
const STATES: [&str; 8] =
    ["Accepted", "WaitingForApproval", "Provisioning", "Updating", "Deleting", "Succeeded", "Failed", "Canceled"];
/// Rows per page of a resource list.
const PAGE_ROWS: &str = "50";

pub(crate) async fn home(State(console): State<Arc<Console>>, visit: Visit) -> Response {
    if console.authentication && !visit.signed_in {
        return Redirect::to("/ui/sign-in").into_response();
    }
    let body = match console.api.get(&visit.visitor, "/subscriptions", PLATFORM_API_VERSION).await {
        Ok(body) => body,
        Err(refusal) => return refused(&console, &visit, refusal),
    };
    let subscriptions: Vec<Value> = body["value"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let id = s["subscriptionId"].as_str().unwrap_or_default();
            json!({
                "id": id,
                "href": uri(&format!("/ui/subscriptions/{id}"), &[]),
                "name": s["properties"]["displayName"],
                "state": s["state"],
                "tenant": s["properties"]["tenantId"],
            })
        })
        .collect();
    let page = Page::new("home.html", "Subscriptions")
        .crumbs(vec![Crumb { label: "Subscriptions".into(), href: "/ui/".into() }]);
    console.render(&visit, page, json!({ "subscriptions": subscriptions }))
}

#[derive(Deserialize)]
pub(crate) struct OpenForm {
    #[serde(default)]
    subscription: String,
}

/// The home page's "open a subscription" form.
pub(crate) async fn open(Query(form): Query<OpenForm>) -> Response {
    Redirect::to(&format!("/ui/subscriptions/{}", segment(form.subscription.trim()))).into_response()
}

#[derive(Deserialize, Default)]
pub(crate) struct Filters {
    #[serde(default, rename = "type")]
    resource_type: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    tag: String,
    #[serde(default, rename = "skipToken")]
    skip_token: String,
}

impl Filters {
    /// ARM's `$filter` text (a quote in a value doubled).
    fn arm(&self) -> String {
        let q = |v: &str| v.replace('\'', "''");
        let mut clauses = Vec::new();
        if !self.resource_type.is_empty() {
            clauses.push(format!("resourceType eq '{}'", q(&self.resource_type)));
        }
        if !self.state.is_empty() {
            clauses.push(format!("provisioningState eq '{}'", q(&self.state)));
        }
        match self.tag.split_once('=') {
            Some((name, value)) => {
                clauses.push(format!("tagName eq '{}' and tagValue eq '{}'", q(name.trim()), q(value.trim())))
            }
            None if !self.tag.trim().is_empty() => clauses.push(format!("tagName eq '{}'", q(self.tag.trim()))),
            None => {}
        }
        clauses.join(" and ")
    }
}

/// The `$skipToken` of a `nextLink`, if there is one.
fn skip_token(body: &Value) -> Option<String> {
    let link = body["nextLink"].as_str()?;
    let query = link.split_once('?')?.1;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("$skipToken="))
        .map(|t| percent_encoding::percent_decode_str(t).decode_utf8_lossy().into_owned())
}

/// Tags as `name=value` texts.
fn tag_pairs(tags: &Value) -> Vec<String> {
    let pairs = tags.as_object().into_iter().flatten();
    pairs.map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect()
}

fn resource_rows(body: &Value) -> Vec<Value> {
    body["value"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let id = r["id"].as_str().unwrap_or_default();
            let group = slipway_domain::ids::ArmId::parse(id).map(|a| a.resource_group).unwrap_or_default();
            let tags = tag_pairs(&r["tags"]);
            json!({
                "href": resource_href(id),
                "name": r["name"],
                "type": r["type"],
                "group": group,
                "state": r["properties"]["provisioningState"],
                "tags": tags,
            })
        })
        .collect()
}

/// A subscription's or a group's page: the resources (filtered, paged), and around them
/// the groups or the latest operations.
async fn listing(
    console: &Console,
    visit: &Visit,
    subscription: &str,
    group: Option<&str>,
    filters: Filters,
) -> Response {
    let (subscription, group) = (segment(subscription), group.map(segment));
    let (subscription, group) = (subscription.as_str(), group.as_deref());
    let scope = match group {
        Some(g) => format!("/subscriptions/{subscription}/resourceGroups/{g}"),
        None => format!("/subscriptions/{subscription}"),
    };
    let filter = filters.arm();
    let mut query = vec![("api-version", PLATFORM_API_VERSION), ("$top", PAGE_ROWS)];
    if !filter.is_empty() {
        query.push(("$filter", &filter));
    }
    if !filters.skip_token.is_empty() {
        query.push(("$skipToken", &filters.skip_token));
    }
    let resources = match console.api.get_with(&visit.visitor, &format!("{scope}/resources"), &query).await {
        Ok(body) => body,
        Err(refusal) => return refused(console, visit, refusal),
    };
    let next = skip_token(&resources).map(|token| {
        let here = match group {
            Some(g) => format!("/ui/subscriptions/{subscription}/resourceGroups/{g}"),
            None => format!("/ui/subscriptions/{subscription}"),
        };
        uri(
            &here,
            &[
                ("type", &filters.resource_type),
                ("state", &filters.state),
                ("tag", &filters.tag),
                ("skipToken", &token),
            ],
        )
    });
    let groups: Vec<Value> = match group {
        Some(_) => Vec::new(),
        None => {
            let body = console
                .api
                .get(&visit.visitor, &format!("{scope}/resourceGroups"), PLATFORM_API_VERSION)
                .await
                .unwrap_or_default();
            body["value"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| g["name"].as_str())
                .map(|g| json!({"name": g, "href": uri(&format!("/ui/subscriptions/{subscription}/resourceGroups/{g}"), &[])}))
                .collect()
        }
    };
    let ops_query = [("api-version", PLATFORM_API_VERSION), ("$top", "15")];
    let ops = console
        .api
        .get_with(&visit.visitor, &format!("/subscriptions/{subscription}/operationStatuses"), &ops_query)
        .await
        .unwrap_or_default();
    let operations: Vec<Value> = ops["value"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            json!({
                "href": operation_href(o["id"].as_str().unwrap_or_default()),
                "name": o["name"],
                "status": o["status"],
                "action": o["properties"]["action"],
                "startTime": o["startTime"],
                "error": o["error"]["code"],
            })
        })
        .collect();
    let about_group = match group {
        Some(g) => group_summary(console, visit, &scope, g, &resources).await,
        None => Value::Null,
    };
    let usage = usage_rows(console, visit, &scope).await;
    let may = allowed(console, visit, &scope).await;
    let creatable: Vec<Value> = console
        .sorted_types()
        .iter()
        .filter(|t| !t.type_name.contains('/'))
        .map(|t| json!({"name": format!("{}/{}", t.namespace, t.type_name), "version": api_version(t)}))
        .collect();
    let mut crumbs = subscription_crumbs(subscription);
    if let Some(g) = group {
        crumbs.push(Crumb {
            label: g.into(),
            href: uri(&format!("/ui/subscriptions/{subscription}/resourceGroups/{g}"), &[]),
        });
    }
    let title = match group {
        Some(g) => format!("Resource group {g}"),
        None => format!("Subscription {subscription}"),
    };
    let data = json!({
        "subscription": subscription,
        "group": group,
        "resources": resource_rows(&resources),
        "next": next,
        "groups": groups,
        "operations": operations,
        "types": creatable.iter().map(|t| t["name"].clone()).collect::<Vec<_>>(),
        "creatable": creatable,
        "states": STATES,
        "filters": {"type": filters.resource_type, "state": filters.state, "tag": filters.tag},
        "allowed": may,
        "about_group": about_group,
        "usage": usage,
    });
    console.render(visit, Page::new("resources.html", title).crumbs(crumbs), data)
}

/// The scope's quota usage beside its limits, one row per meter of every served namespace
/// (a bar's width is its share of the limit); none when no meter is configured or the
/// visitor may not read it.
async fn usage_rows(console: &Console, visit: &Visit, scope: &str) -> Vec<Value> {
    let mut namespaces: Vec<String> = console.sorted_types().iter().map(|t| t.namespace.clone()).collect();
    namespaces.dedup();
    let mut rows = Vec::new();
    for ns in namespaces {
        let path =
            format!("{scope}/providers/{ns}/locations/{}/providers/Microsoft.Quota/usages", segment(&console.location));
        let Ok(body) = console.api.get(&visit.visitor, &path, QUOTA_API_VERSION).await else { continue };
        for u in body["value"].as_array().into_iter().flatten() {
            let p = &u["properties"];
            let (used, limit) = (p["currentValue"].as_u64().unwrap_or(0), p["limit"].as_u64());
            let percent = limit.map(|l| used.saturating_mul(100).checked_div(l).map_or(100, |p| p.min(100)));
            rows.push(json!({
                "meter": u["name"], "type": p["resourceType"], "used": used, "limit": limit,
                "unit": p["unit"], "percent": percent, "full": limit.is_some_and(|l| used >= l),
            }));
        }
    }
    rows
}

/// A group's own record as its page shows it — location, state, tags — and the question its
/// delete asks, naming what goes with it (the first page of its resources); `null` for a
/// group the visitor cannot read or that does not exist.
async fn group_summary(console: &Console, visit: &Visit, scope: &str, name: &str, resources: &Value) -> Value {
    let Ok(group) = console.api.get(&visit.visitor, scope, PLATFORM_API_VERSION).await else { return Value::Null };
    let held: Vec<&str> =
        resources["value"].as_array().into_iter().flatten().filter_map(|r| r["name"].as_str()).collect();
    let more = if resources["nextLink"].is_string() { ", and more" } else { "" };
    let confirm = match held.len() {
        0 => format!("Delete the resource group {name}? It holds nothing."),
        n => format!(
            "Delete the resource group {name} and the {n} resource(s) in it ({}{more})? Each is deleted through its \
             own delete job; the group goes once it is empty.",
            held.join(", ")
        ),
    };
    let tags = tag_pairs(&group["tags"]);
    json!({
        "name": group["name"],
        "location": group["location"],
        "state": group["properties"]["provisioningState"],
        "tags": tags,
        "confirm": confirm,
    })
}

pub(crate) async fn subscription(
    State(console): State<Arc<Console>>,
    visit: Visit,
    Path(subscription): Path<String>,
    Query(filters): Query<Filters>,
) -> Response {
    listing(&console, &visit, &subscription, None, filters).await
}

pub(crate) async fn group(
    State(console): State<Arc<Console>>,
    visit: Visit,
    Path((subscription, group)): Path<(String, String)>,
    Query(filters): Query<Filters>,
) -> Response {
    listing(&console, &visit, &subscription, Some(&group), filters).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_become_arm_filter_text() {
        let f = Filters {
            resource_type: "A.B/c".into(),
            state: "Failed".into(),
            tag: "team = o'neil".into(),
            ..Default::default()
        };
        assert_eq!(
            f.arm(),
            "resourceType eq 'A.B/c' and provisioningState eq 'Failed' and tagName eq 'team' and tagValue eq 'o''neil'"
        );
        assert_eq!(Filters { tag: "env".into(), ..Default::default() }.arm(), "tagName eq 'env'");
        assert_eq!(Filters::default().arm(), "");
    }

    #[test]
    fn the_next_page_is_the_next_links_skip_token() {
        let body = json!({"nextLink": "http://h/subscriptions/s/resources?api-version=1&$top=2&$skipToken=a%2Fb"});
        assert_eq!(skip_token(&body).as_deref(), Some("a/b"));
        assert_eq!(skip_token(&json!({})), None);
    }
}
