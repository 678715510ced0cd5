//! A path as its route's template — ids and names left out, namespaces and types as
//! configured — for access logs and metric labels, whose values must stay few.

use slipway_types::{EVENTS_SEGMENT, TypeRegistry};

use super::{QUOTA_NAMESPACE, RESOURCES_NAMESPACE, Route, decision_segment, parse};

/// A path as its route's template, ids and names left out (`…/providers/Ns/things/{name}`):
/// what access logs group requests by. Paths that are no ARM route keep themselves when they
/// are Slipway's own (`/healthz`), else `unmatched`.
pub fn template(path: &str) -> String {
    template_named(path, &|ns, type_name| Some((ns.to_string(), type_name.to_string())), &|ns| Some(ns.to_string()))
}

/// [`template`] for a metric label: namespaces and types as configured, whatever casing the
/// request used, and `unmatched` for any a client made up — a label's values must stay few.
/// A type's actions and job history count as the type's (`…/things/{name}/restart`).
pub fn metric_template(path: &str, types: &TypeRegistry) -> String {
    let typed = |ns: &str, type_name: &str| {
        if let Some(t) = types.get(ns, type_name) {
            return Some((t.namespace.clone(), t.type_name.clone()));
        }
        let (parent, last) = type_name.rsplit_once('/')?;
        let t = types.get(ns, parent)?;
        let last = match t.action(last) {
            Some(action) => action.name.clone(),
            None if last.eq_ignore_ascii_case(slipway_types::JOBS_SEGMENT) => slipway_types::JOBS_SEGMENT.to_string(),
            None => return None,
        };
        Some((t.namespace.clone(), format!("{}/{last}", t.type_name)))
    };
    let namespace = |ns: &str| types.all().find(|t| t.namespace.eq_ignore_ascii_case(ns)).map(|t| t.namespace.clone());
    template_named(path, &typed, &namespace)
}

/// The configured `(namespace, type)` a route names, or `None` to answer `unmatched`.
type TypeNames<'a> = dyn Fn(&str, &str) -> Option<(String, String)> + 'a;
type NamespaceNames<'a> = dyn Fn(&str) -> Option<String> + 'a;

fn template_named(path: &str, typed_names: &TypeNames<'_>, namespace_names: &NamespaceNames<'_>) -> String {
    const UNMATCHED: &str = "unmatched";
    let typed = |ns: &str, type_name: &str, leaf_named: bool| {
        let (ns, type_name) = typed_names(ns, type_name)?;
        let segs: Vec<&str> = type_name.split('/').collect();
        let mut out = format!("/providers/{ns}");
        for (i, seg) in segs.iter().enumerate() {
            out.push_str(&format!("/{seg}"));
            if i + 1 < segs.len() || leaf_named {
                out.push_str("/{name}");
            }
        }
        Some(out)
    };
    let group = |rg: bool| {
        if rg {
            "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}"
        } else {
            "/subscriptions/{subscriptionId}"
        }
    };
    let operations = |namespace: &str, tail: &str| {
        namespace_names(namespace).map(|namespace| {
            format!("/subscriptions/{{subscriptionId}}/providers/{namespace}/locations/{{location}}/{tail}")
        })
    };
    let templated = match parse(path) {
        Ok(Route::Resource(id)) => typed(&id.namespace, &id.type_name, true).map(|t| format!("{}{t}", group(true))),
        Ok(Route::Collection { resource_group, namespace, type_name, parent, .. }) => {
            typed(&namespace, &type_name, false)
                .map(|t| format!("{}{t}", group(resource_group.is_some() || parent.is_some())))
        }
        Ok(Route::OperationStatus { namespace, .. }) => operations(&namespace, "operationStatuses/{operationId}"),
        Ok(Route::OperationCancel { namespace, .. }) => {
            operations(&namespace, "operationStatuses/{operationId}/cancel")
        }
        Ok(Route::OperationLogs { namespace, .. }) => operations(&namespace, "operationStatuses/{operationId}/logs"),
        Ok(Route::OperationDecision { namespace, verdict, .. }) => {
            operations(&namespace, &format!("operationStatuses/{{operationId}}/{}", decision_segment(verdict)))
        }
        Ok(Route::OperationResult { namespace, .. }) => operations(&namespace, "operationResults/{operationId}"),
        Ok(Route::Subscriptions) => Some("/subscriptions".into()),
        Ok(Route::Subscription(_)) => Some("/subscriptions/{subscriptionId}".into()),
        Ok(Route::RoleAssignments { id, .. }) => {
            let tail = if id.is_some() { "/{roleAssignmentName}" } else { "" };
            Some(format!("{{scope}}/providers/Slipway.Authorization/roleAssignments{tail}"))
        }
        Ok(Route::Permissions { .. }) => Some("{scope}/providers/Slipway.Authorization/permissions".into()),
        Ok(Route::Providers { subscription }) => {
            Some(if subscription.is_some() { format!("{}/providers", group(false)) } else { "/providers".into() })
        }
        Ok(Route::Provider { namespace, .. }) => namespace_names(&namespace).map(|ns| format!("/providers/{ns}")),
        Ok(Route::ProviderRegistration { namespace, register, .. }) => namespace_names(&namespace)
            .map(|ns| format!("{}/providers/{ns}/{}", group(false), if register { "register" } else { "unregister" })),
        Ok(Route::ProviderOperations { namespace }) => {
            namespace_names(&namespace).map(|ns| format!("/providers/{ns}/operations"))
        }
        Ok(Route::ResourceGroups { .. }) => Some(format!("{}/resourceGroups", group(false))),
        Ok(Route::ResourceGroup { .. }) => Some(group(true).into()),
        Ok(Route::Resources { resource_group, .. }) => Some(format!("{}/resources", group(resource_group.is_some()))),
        Ok(Route::Operations { .. }) => Some(format!("{}/operationStatuses", group(false))),
        Ok(Route::Events { resource_group, .. }) => {
            Some(format!("{}/providers/{RESOURCES_NAMESPACE}/{EVENTS_SEGMENT}", group(resource_group.is_some())))
        }
        Ok(Route::ApiTokens { id }) => {
            Some(format!("/providers/Slipway.Authorization/apiTokens{}", if id.is_some() { "/{tokenId}" } else { "" }))
        }
        Ok(Route::Activity { subscription }) => Some(format!(
            "{}/providers/Microsoft.Insights/eventtypes/management/values",
            if subscription.is_some() { group(false) } else { "" }
        )),
        Ok(Route::Tags(id)) => {
            let scope = if id.is_group() {
                Some(group(true).to_string())
            } else {
                typed(&id.namespace, &id.type_name, true).map(|t| format!("{}{t}", group(true)))
            };
            scope.map(|s| format!("{s}/providers/Microsoft.Resources/tags/default"))
        }
        Ok(Route::Quota { resource_group, namespace, collection, meter, .. }) => {
            namespace_names(&namespace).map(|ns| {
                let tail = if meter.is_some() { "/{meterName}" } else { "" };
                format!(
                    "{}/providers/{ns}/locations/{{location}}/providers/{QUOTA_NAMESPACE}/{}{tail}",
                    group(resource_group.is_some()),
                    collection.as_str()
                )
            })
        }
        Ok(Route::Policy { collection, scope, name, .. }) => {
            let scope = if scope.is_platform() { "" } else { "{scope}" };
            let tail = if name.is_some() { "/{name}" } else { "" };
            Some(format!("{scope}/providers/Microsoft.Authorization/{}{tail}", collection.segment()))
        }
        Ok(Route::PolicyStates { resource_group, resource, .. }) => {
            let scope = match resource {
                Some(id) => typed(&id.namespace, &id.type_name, true).map(|t| format!("{}{t}", group(true))),
                None => Some(group(resource_group.is_some()).to_string()),
            };
            scope.map(|s| format!("{s}/providers/Microsoft.PolicyInsights/policyStates/latest/queryResults"))
        }
        Ok(Route::Locks { name, .. }) => {
            let tail = if name.is_some() { "/{lockName}" } else { "" };
            Some(format!("{{scope}}/providers/Microsoft.Authorization/locks{tail}"))
        }
        Err(_) if ["/healthz", "/readyz", "/openapi.json", "/metrics"].contains(&path) => Some(path.to_string()),
        Err(_) if path.starts_with("/hooks/") => Some("/hooks/{provider}".into()),
        Err(_) => None,
    };
    templated.unwrap_or_else(|| UNMATCHED.into())
}
