//! Creating a resource: a form generated from the type's JSON Schema (or raw JSON), put as an
//! ordinary `PUT`; the visitor then follows its operation. The API's refusal (a schema
//! violation, a name its rule refuses, a missing reference) comes back on the form.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use slipway_domain::ids::ArmId;
use slipway_types::ResourceType;

use super::resource::accepted_operation;
use super::{allowed, bad_request, operation_href, refused, resource_crumbs, resource_href, subscription_crumbs};
use crate::api::{ArmProblem, segment, uri};
use crate::form::{self, Field};
use crate::render::{Crumb, Page};
use crate::session::{Visit, forged, form_is_ours};
use crate::{Console, api_version};

/// Where the new resource goes: a group (top-level types) or a parent resource (children).
#[derive(Deserialize, Default)]
pub(crate) struct Target {
    #[serde(default, rename = "type")]
    resource_type: String,
    #[serde(default)]
    subscription: String,
    #[serde(default)]
    group: String,
    #[serde(default)]
    parent: String,
}

/// The type and the collection path the new resource is put under.
struct Place {
    ty: Arc<ResourceType>,
    collection: String,
    crumbs: Vec<Crumb>,
    scope: String,
}

fn place(console: &Console, target: &Target) -> Result<Place, String> {
    let (ns, type_name) = target
        .resource_type
        .split_once('/')
        .ok_or_else(|| format!("'{}' is not Namespace/type.", target.resource_type))?;
    let ty = console
        .resource_type(ns, type_name)
        .ok_or_else(|| format!("No type {} is configured.", target.resource_type))?;
    if target.parent.is_empty() {
        if ty.type_name.contains('/') {
            return Err(format!("{} lives under a parent resource; create it from the parent's page.", ty.type_name));
        }
        if target.subscription.is_empty() || target.group.is_empty() {
            return Err("Name the subscription and the resource group.".into());
        }
        let (sub, group) = (segment(&target.subscription), segment(&target.group));
        let scope = format!("/subscriptions/{sub}/resourceGroups/{group}");
        let mut crumbs = subscription_crumbs(&sub);
        crumbs.push(Crumb { label: target.group.clone(), href: uri(&format!("/ui{scope}"), &[]) });
        let collection = format!("{scope}/providers/{}/{}", ty.namespace, ty.type_name);
        return Ok(Place { ty, collection, crumbs, scope });
    }
    let parent = ArmId::parse(&target.parent).map_err(|e| format!("'{}' is not a resource id: {e}.", target.parent))?;
    let (parent_type, leaf) =
        ty.type_name.rsplit_once('/').ok_or_else(|| format!("{} is not a child type.", ty.type_name))?;
    if !parent_type.eq_ignore_ascii_case(&parent.type_name) || !ns.eq_ignore_ascii_case(&parent.namespace) {
        return Err(format!("A {} is not a child of a {}.", ty.type_name, parent.type_name));
    }
    let scope = parent.to_string();
    Ok(Place { collection: format!("{scope}/{leaf}"), crumbs: resource_crumbs(&parent), ty, scope })
}

fn form_data(console: &Console, place: &Place, target: &Target, fields: &[Field]) -> Value {
    json!({
        "type": format!("{}/{}", place.ty.namespace, place.ty.type_name),
        "kind": place.ty.kind,
        "target": {"type": target.resource_type, "subscription": target.subscription, "group": target.group, "parent": target.parent},
        "where": place.scope,
        "fields": fields.iter().map(|f| json!({"input": form::input_name(&f.name), "field": f})).collect::<Vec<_>>(),
        "has_schema": place.ty.schema().is_some(),
        "location": place.ty.resource_kind.has_location().then_some(console.location.as_str()),
        "name_rule": place.ty.name_rule().describe(),
    })
}

fn title(place: &Place) -> String {
    format!("Create {}", place.ty.type_name)
}

pub(crate) async fn create_page(
    State(console): State<Arc<Console>>,
    visit: Visit,
    Query(target): Query<Target>,
) -> Response {
    let place = match place(&console, &target) {
        Ok(p) => p,
        Err(why) => return bad_request(&console, &visit, ArmProblem::new("InvalidCreateTarget", why)),
    };
    let fields = form::fields(place.ty.schema());
    let mut data = form_data(&console, &place, &target, &fields);
    data["allowed"] = json!(allowed(&console, &visit, &place.scope).await);
    console.render(&visit, Page::new("create.html", title(&place)).crumbs(place.crumbs.clone()), data)
}

/// A value posted in the form.
fn posted<'a>(form: &'a [(String, String)], name: &str) -> &'a str {
    form.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str())
}

pub(crate) async fn create(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    visit: Visit,
    Form(posted_form): Form<Vec<(String, String)>>,
) -> Response {
    if !form_is_ours(&visit, &headers, posted(&posted_form, "csrf")) {
        return forged(&console, &visit);
    }
    let target = Target {
        resource_type: posted(&posted_form, "type").into(),
        subscription: posted(&posted_form, "subscription").into(),
        group: posted(&posted_form, "group").into(),
        parent: posted(&posted_form, "parent").into(),
    };
    let place = match place(&console, &target) {
        Ok(p) => p,
        Err(why) => return bad_request(&console, &visit, ArmProblem::new("InvalidCreateTarget", why)),
    };
    let mut fields = form::fields(place.ty.schema());
    let name = posted(&posted_form, "name").trim().to_string();
    let raw = posted(&posted_form, "properties_json").trim().to_string();
    let built = (|| -> Result<Value, String> {
        let properties = if raw.is_empty() {
            form::properties(&mut fields, &posted_form)?
        } else {
            match serde_json::from_str::<Value>(&raw) {
                Ok(Value::Object(m)) => m,
                Ok(_) => return Err("Properties as JSON must be an object.".into()),
                Err(e) => return Err(format!("Properties as JSON is not JSON: {e}.")),
            }
        };
        let mut body = Map::new();
        body.insert("properties".into(), Value::Object(properties));
        let tags = form::tags(posted(&posted_form, "tags"))?;
        if !tags.is_empty() {
            body.insert("tags".into(), Value::Object(tags));
        }
        if place.ty.resource_kind.has_location() {
            let location = posted(&posted_form, "location").trim();
            body.insert(
                "location".into(),
                json!(if location.is_empty() { console.location.as_str() } else { location }),
            );
        }
        if name.is_empty() {
            return Err("Give the resource a name.".into());
        }
        Ok(Value::Object(body))
    })();
    // The form again with what was wrong (a 200: the page itself loaded fine).
    let again = |problem: ArmProblem, fields: &[Field]| {
        let mut data = form_data(&console, &place, &target, fields);
        data["problem"] = json!(problem);
        data["posted"] = json!({
            "name": name, "tags": posted(&posted_form, "tags"), "properties_json": raw,
            "location": posted(&posted_form, "location"),
        });
        data["allowed"] = json!({"write": true});
        console.render(&visit, Page::new("create.html", title(&place)).crumbs(place.crumbs.clone()), data)
    };
    let body = match built {
        Ok(body) => body,
        Err(why) => {
            return again(ArmProblem::new("InvalidForm", why), &fields);
        }
    };
    let path = format!("{}/{}", place.collection, segment(&name));
    let version = api_version(&place.ty);
    let answer = console.api.call(&visit.visitor, Method::PUT, &path, &[("api-version", &version)], Some(&body)).await;
    let operation = accepted_operation(&answer);
    match answer.ok() {
        Ok(_) => match operation {
            Some(op) => Redirect::to(&operation_href(&op)).into_response(),
            None => Redirect::to(&resource_href(&path)).into_response(),
        },
        Err(refusal) if refusal.status == StatusCode::UNAUTHORIZED => refused(&console, &visit, refusal),
        Err(refusal) => again(refusal.problem, &fields),
    }
}
