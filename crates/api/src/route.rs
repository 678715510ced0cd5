//! ARM paths, matched segment by segment and case-insensitively (ARM's keywords and names
//! are case-insensitive; the original casing is kept for echoing).
//!
//! Every path keeps to the resource-id grammar of [`slipway_domain::ids`]: under
//! `/subscriptions/{sub}/` a GUID, a resource group by ARM's resource-group rule and a
//! resource name by ARM's common rule (a type's own rule is checked where the type is known).
//!
//! Segments are percent-decoded after the path is split, as ARM does (clients such as the
//! Azure SDKs encode every reserved character of a name: `x(1)` arrives as `x%281%29`); a
//! decoded `/` never splits a segment, and no rule lets one into a name or a scope.

use std::borrow::Cow;

use slipway_domain::access::Scope;
use slipway_domain::approval::Verdict;
use slipway_domain::ids::{self, ArmId, IdError};
use slipway_types::EVENTS_SEGMENT;

mod escapes;
mod guardrails;
mod template;

use escapes::decode;
pub(crate) use escapes::decoded_path;
pub use guardrails::{PolicyCollection, QUOTA_NAMESPACE, QuotaCollection};
pub use template::{metric_template, template};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Resource(ArmId),
    /// A collection of one type, in a resource group or a whole subscription; for a child
    /// type (`type_name` `virtualNetworks/subnets`), the children of `parent`. A `POST` to
    /// such a path is a resource's action instead (`…/computeInstances/vm1/restart`).
    Collection {
        subscription: String,
        resource_group: Option<String>,
        namespace: String,
        type_name: String,
        parent: Option<ArmId>,
    },
    OperationStatus {
        subscription: String,
        namespace: String,
        location: String,
        id: String,
    },
    OperationCancel {
        subscription: String,
        namespace: String,
        location: String,
        id: String,
    },
    /// `…/operationStatuses/{id}/approve|deny`: a decision on a request waiting for approval
    /// (a Slipway extension).
    OperationDecision {
        subscription: String,
        namespace: String,
        location: String,
        id: String,
        verdict: Verdict,
    },
    /// `…/operationStatuses/{id}/logs`: the output of the operation's job (a Slipway
    /// extension).
    OperationLogs {
        subscription: String,
        namespace: String,
        location: String,
        id: String,
    },
    OperationResult {
        subscription: String,
        namespace: String,
        location: String,
        id: String,
    },
    /// `GET /subscriptions`: the registry, as far as the caller may see it.
    Subscriptions,
    /// `/subscriptions/{id}`: one registration.
    Subscription(String),
    /// `{scope}/providers/Slipway.Authorization/roleAssignments[/{id}]`.
    RoleAssignments {
        scope: Scope,
        id: Option<String>,
    },
    /// `{scope}/providers/Slipway.Authorization/permissions`: what the caller may do there
    /// (ARM's permissions list).
    Permissions {
        scope: Scope,
    },
    /// `/providers/{namespace}` or `/subscriptions/{sub}/providers/{namespace}`: the resource
    /// provider's registration (ARM's provider shape).
    Provider {
        subscription: Option<String>,
        namespace: String,
    },
    /// `/providers` or `/subscriptions/{sub}/providers`: every namespace served, each in the
    /// provider shape.
    Providers {
        subscription: Option<String>,
    },
    /// `POST /subscriptions/{sub}/providers/{namespace}/register` (`register: true`) or
    /// `…/unregister`: ARM's provider registration, for a namespace that is always served.
    ProviderRegistration {
        subscription: String,
        namespace: String,
        register: bool,
    },
    /// `/providers/{namespace}/operations`: every action a role can grant in the namespace.
    ProviderOperations {
        namespace: String,
    },
    /// `/subscriptions/{sub}/resourceGroups`: the groups that hold resources.
    ResourceGroups {
        subscription: String,
    },
    /// `/subscriptions/{sub}/resourceGroups/{name}`.
    ResourceGroup {
        subscription: String,
        name: String,
    },
    /// `/subscriptions/{sub}[/resourceGroups/{rg}]/resources`: resources of every type.
    Resources {
        subscription: String,
        resource_group: Option<String>,
    },
    /// `/subscriptions/{sub}/operationStatuses`: the subscription's operations (a Slipway
    /// extension).
    Operations {
        subscription: String,
    },
    /// `/providers/Slipway.Authorization/apiTokens[/{id}]` (a Slipway extension).
    ApiTokens {
        id: Option<String>,
    },
    /// `/subscriptions/{sub}[/resourceGroups/{rg}]/providers/Slipway.Resources/events`: the
    /// event feed (a Slipway extension; a resource's own is `{resourceId}/events`).
    Events {
        subscription: String,
        resource_group: Option<String>,
    },
    /// `[/subscriptions/{sub}]/providers/Microsoft.Insights/eventtypes/management/values`: the
    /// activity log of a subscription, or (with none) the platform's own.
    Activity {
        subscription: Option<String>,
    },
    /// `{scope}/providers/Microsoft.Resources/tags/default`: the tags of a resource or a
    /// resource group (`ArmId::group`).
    Tags(ArmId),
    /// `/subscriptions/{s}[/resourceGroups/{g}]/providers/{namespace}/locations/{location}/
    /// providers/Microsoft.Quota/{quotas|usages}[/{meter}]`: limits and usage of the meters
    /// of the namespace's types.
    Quota {
        subscription: String,
        resource_group: Option<String>,
        namespace: String,
        location: String,
        collection: QuotaCollection,
        meter: Option<String>,
    },
    /// `{scope}/providers/Microsoft.Authorization/locks[/{name}]`: management locks at a
    /// subscription, a resource group or a resource (`path`: the scope as written).
    Locks {
        scope: Scope,
        path: String,
        name: Option<String>,
    },
    /// `{scope}/providers/Microsoft.Authorization/{policyDefinitions|policyAssignments|
    /// policyExemptions}[/{name}]`: admission policy (`path`: the scope as written).
    Policy {
        collection: PolicyCollection,
        scope: Scope,
        path: String,
        name: Option<String>,
    },
    /// `{scope}/providers/Microsoft.PolicyInsights/policyStates/latest/queryResults` at a
    /// subscription, a resource group or a resource: what policies found not compliant.
    PolicyStates {
        subscription: String,
        resource_group: Option<String>,
        resource: Option<ArmId>,
    },
}

/// The namespace of the platform's own lists that are not a resource type's (the event feed).
pub const RESOURCES_NAMESPACE: &str = "Slipway.Resources";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteError {
    NoMatch,
    /// A resource name that breaks ARM's common rule.
    BadName(String),
    /// A resource group name that breaks ARM's resource-group rule.
    BadGroupName(String),
    /// A subscription id that is not a GUID.
    BadSubscription(String),
    /// A role assignment's scope that is not a canonical scope, and why.
    BadScope(String),
}

impl From<IdError> for RouteError {
    fn from(e: IdError) -> Self {
        match e {
            IdError::BadSubscription(s) => RouteError::BadSubscription(s),
            IdError::BadGroupName(g) => RouteError::BadGroupName(g),
            IdError::BadName(n) => RouteError::BadName(n),
            // No type can be configured under such a namespace or type: nothing is there.
            IdError::NotAResourceId
            | IdError::NotAnOperationPath
            | IdError::BadNamespace(_)
            | IdError::BadTypeSegment(_) => RouteError::NoMatch,
        }
    }
}

fn subscription(sub: &str) -> Result<String, RouteError> {
    ids::check_subscription(sub)?;
    Ok(sub.to_string())
}

fn is(seg: &str, word: &str) -> bool {
    seg.eq_ignore_ascii_case(word)
}

/// The resource or resource group whose tags `{scope}/providers/Microsoft.Resources/tags/default`
/// names (a subscription's tags are not served).
fn tags_scope(scope: &[&str]) -> Result<ArmId, RouteError> {
    match scope {
        [s, sub, r, rg] if is(s, "subscriptions") && is(r, "resourceGroups") => {
            subscription(sub)?;
            Ok(ArmId::group(*sub, *rg)?)
        }
        [s, sub, r, rg, p, ns, pairs @ ..]
            if is(s, "subscriptions") && is(r, "resourceGroups") && is(p, "providers") && pairs.len() % 2 == 0 =>
        {
            Ok(ArmId::from_segments(sub, rg, ns, pairs)?)
        }
        _ => Err(RouteError::NoMatch),
    }
}

/// `{scope}/providers/Slipway.Authorization/roleAssignments[/{id}]` or
/// `{scope}/providers/Slipway.Authorization/permissions`, if `segs` is one.
fn scoped_authorization(segs: &[&str]) -> Option<Result<Route, RouteError>> {
    let at = segs.windows(3).rposition(|w| {
        is(w[0], "providers")
            && is(w[1], "Slipway.Authorization")
            && (is(w[2], "roleAssignments") || is(w[2], "permissions"))
    })?;
    let permissions = is(segs[at + 2], "permissions");
    let id = match &segs[at + 3..] {
        [] => None,
        [id] if !permissions => Some(id.to_string()),
        _ => return None,
    };
    Some(match scope_of(&segs[..at]) {
        Ok((scope, _)) if permissions => Ok(Route::Permissions { scope }),
        Ok((scope, _)) => Ok(Route::RoleAssignments { scope, id }),
        Err(e) => Err(e),
    })
}

/// The scope the segments before a scope's `providers/{namespace}/…` spell: canonical, and
/// as written (for echoing ids).
fn scope_of(prefix: &[&str]) -> Result<(Scope, String), RouteError> {
    if let Some(s) = prefix.iter().find(|s| s.contains(['/', '\\'])) {
        return Err(RouteError::BadScope(format!("the segment '{s}' holds an encoded separator")));
    }
    if let [s, sub, ..] = prefix
        && is(s, "subscriptions")
    {
        subscription(sub)?;
    }
    let path = format!("/{}", prefix.join("/"));
    match Scope::parse(&path) {
        Ok(scope) => Ok((scope, path)),
        Err(why) => Err(RouteError::BadScope(why.to_string())),
    }
}

pub fn parse(path: &str) -> Result<Route, RouteError> {
    let mut raw: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    // The Azure SDKs address a top-level resource by its parts with an empty parent path:
    // `…/providers/{ns}//{type}/{name}`. ARM reads that as the resource; so does Slipway, and
    // no other empty segment.
    let mut at = 2;
    while at < raw.len() {
        if raw[at].is_empty() && is(raw[at - 2], "providers") && !raw[at - 1].is_empty() {
            raw.remove(at);
        } else {
            at += 1;
        }
    }
    if raw.iter().any(|s| s.is_empty()) {
        return Err(RouteError::NoMatch);
    }
    let decoded: Vec<Cow<str>> = raw.iter().map(|s| decode(s)).collect();
    let segs: Vec<&str> = decoded.iter().map(|s| s.as_ref()).collect();
    if let Some(route) = scoped_authorization(&segs) {
        return route;
    }
    let guardrail = guardrails::quota(&segs)
        .or_else(|| guardrails::locks(&segs))
        .or_else(|| guardrails::policy(&segs))
        .or_else(|| guardrails::policy_states(&segs));
    if let Some(route) = guardrail {
        return route;
    }
    if let [scope @ .., p, ns, t, d] = segs.as_slice()
        && is(p, "providers")
        && is(ns, ids::GROUP_NAMESPACE)
        && is(t, "tags")
        && is(d, "default")
    {
        return tags_scope(scope).map(Route::Tags);
    }
    let op = |sub: &&str, ns: &&str, loc: &&str, id: &&str| {
        Ok::<_, RouteError>((subscription(sub)?, ns.to_string(), loc.to_string(), id.to_string()))
    };
    let tokens =
        |p: &str, ns: &str, t: &str| is(p, "providers") && is(ns, "Slipway.Authorization") && is(t, "apiTokens");
    let events =
        |p: &str, ns: &str, e: &str| is(p, "providers") && is(ns, RESOURCES_NAMESPACE) && is(e, EVENTS_SEGMENT);
    let activity = |p: &str, ns: &str, e: &str, m: &str, v: &str| {
        is(p, "providers")
            && is(ns, "Microsoft.Insights")
            && is(e, "eventtypes")
            && is(m, "management")
            && is(v, "values")
    };
    match segs.as_slice() {
        [p, ns, e, m, v] if activity(p, ns, e, m, v) => Ok(Route::Activity { subscription: None }),
        [s, sub, p, ns, e, m, v] if is(s, "subscriptions") && activity(p, ns, e, m, v) => {
            Ok(Route::Activity { subscription: Some(subscription(sub)?) })
        }
        [s, sub, p, ns, e] if is(s, "subscriptions") && events(p, ns, e) => {
            Ok(Route::Events { subscription: subscription(sub)?, resource_group: None })
        }
        [s, sub, r, rg, p, ns, e] if is(s, "subscriptions") && is(r, "resourceGroups") && events(p, ns, e) => {
            let subscription = subscription(sub)?;
            ids::check_group(rg)?;
            Ok(Route::Events { subscription, resource_group: Some(rg.to_string()) })
        }
        [p, ns, t] if tokens(p, ns, t) => Ok(Route::ApiTokens { id: None }),
        [p, ns, t, id] if tokens(p, ns, t) => Ok(Route::ApiTokens { id: Some(id.to_string()) }),
        [p] if is(p, "providers") => Ok(Route::Providers { subscription: None }),
        [s, sub, p] if is(s, "subscriptions") && is(p, "providers") => {
            Ok(Route::Providers { subscription: Some(subscription(sub)?) })
        }
        [p, ns] if is(p, "providers") => Ok(Route::Provider { subscription: None, namespace: ns.to_string() }),
        [p, ns, o] if is(p, "providers") && is(o, "operations") => {
            Ok(Route::ProviderOperations { namespace: ns.to_string() })
        }
        [s, sub, p, ns] if is(s, "subscriptions") && is(p, "providers") => {
            Ok(Route::Provider { subscription: Some(subscription(sub)?), namespace: ns.to_string() })
        }
        [s] if is(s, "subscriptions") => Ok(Route::Subscriptions),
        [s, sub] if is(s, "subscriptions") => Ok(Route::Subscription(subscription(sub)?)),
        [s, sub, r] if is(s, "subscriptions") && is(r, "resourceGroups") => {
            Ok(Route::ResourceGroups { subscription: subscription(sub)? })
        }
        [s, sub, r] if is(s, "subscriptions") && is(r, "resources") => {
            Ok(Route::Resources { subscription: subscription(sub)?, resource_group: None })
        }
        [s, sub, o] if is(s, "subscriptions") && is(o, "operationStatuses") => {
            Ok(Route::Operations { subscription: subscription(sub)? })
        }
        [s, sub, r, rg] if is(s, "subscriptions") && is(r, "resourceGroups") => {
            let subscription = subscription(sub)?;
            ids::check_group(rg)?;
            Ok(Route::ResourceGroup { subscription, name: rg.to_string() })
        }
        [s, sub, r, rg, x] if is(s, "subscriptions") && is(r, "resourceGroups") && is(x, "resources") => {
            let subscription = subscription(sub)?;
            ids::check_group(rg)?;
            Ok(Route::Resources { subscription, resource_group: Some(rg.to_string()) })
        }
        [s, sub, p, ns, l, loc, kind, id] if is(s, "subscriptions") && is(p, "providers") && is(l, "locations") => {
            let (subscription, namespace, location, id) = op(sub, ns, loc, id)?;
            if is(kind, "operationStatuses") {
                Ok(Route::OperationStatus { subscription, namespace, location, id })
            } else if is(kind, "operationResults") {
                Ok(Route::OperationResult { subscription, namespace, location, id })
            } else {
                Err(RouteError::NoMatch)
            }
        }
        [s, sub, p, ns, l, loc, kind, id, c]
            if is(s, "subscriptions")
                && is(p, "providers")
                && is(l, "locations")
                && is(kind, "operationStatuses")
                && ["cancel", "logs", "approve", "deny"].iter().any(|w| is(c, w)) =>
        {
            let (subscription, namespace, location, id) = op(sub, ns, loc, id)?;
            if is(c, "cancel") {
                Ok(Route::OperationCancel { subscription, namespace, location, id })
            } else if is(c, "logs") {
                Ok(Route::OperationLogs { subscription, namespace, location, id })
            } else {
                let verdict = if is(c, "approve") { Verdict::Approved } else { Verdict::Denied };
                Ok(Route::OperationDecision { subscription, namespace, location, id, verdict })
            }
        }
        [s, sub, r, rg, p, ns, pairs @ ..]
            if is(s, "subscriptions") && is(r, "resourceGroups") && is(p, "providers") && !pairs.is_empty() =>
        {
            if pairs.len() % 2 == 0 {
                return Ok(Route::Resource(ArmId::from_segments(sub, rg, ns, pairs)?));
            }
            let (last, parent_pairs) = pairs.split_last().expect("not empty");
            let parent =
                if parent_pairs.is_empty() { None } else { Some(ArmId::from_segments(sub, rg, ns, parent_pairs)?) };
            let type_name = match &parent {
                Some(p) => format!("{}/{last}", p.type_name),
                None => last.to_string(),
            };
            if parent.is_none() {
                ids::check_group(rg)?;
            }
            Ok(Route::Collection {
                subscription: subscription(sub)?,
                resource_group: Some(rg.to_string()),
                namespace: ns.to_string(),
                type_name,
                parent,
            })
        }
        [s, sub, p, ns, r]
            if is(s, "subscriptions") && is(p, "providers") && (is(r, "register") || is(r, "unregister")) =>
        {
            Ok(Route::ProviderRegistration {
                subscription: subscription(sub)?,
                namespace: ns.to_string(),
                register: is(r, "register"),
            })
        }
        [s, sub, p, ns, ty] if is(s, "subscriptions") && is(p, "providers") => Ok(Route::Collection {
            subscription: subscription(sub)?,
            resource_group: None,
            namespace: ns.to_string(),
            type_name: ty.to_string(),
            parent: None,
        }),
        _ => Err(RouteError::NoMatch),
    }
}

#[cfg(test)]
mod tests;

/// The last segment of a decision's path.
pub(crate) fn decision_segment(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Approved => "approve",
        Verdict::Denied => "deny",
    }
}
