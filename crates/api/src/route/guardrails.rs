//! The paths of the platform's guardrails: quotas and usages in `Microsoft.Quota`'s shape
//! (`{scope}/providers/Microsoft.Quota/{quotas|usages}[/{meter}]`, where `{scope}` is
//! `/subscriptions/{s}[/resourceGroups/{g}]/providers/{namespace}/locations/{location}`), and
//! management locks (`{scope}/providers/Microsoft.Authorization/locks[/{name}]`, at a
//! subscription, a resource group or a resource), admission policy
//! (`{scope}/providers/Microsoft.Authorization/{policyDefinitions|policyAssignments|
//! policyExemptions}[/{name}]`) and its findings
//! (`…/providers/Microsoft.PolicyInsights/policyStates/latest/queryResults`).

use slipway_domain::ids;

use super::{Route, RouteError, is, scope_of, subscription};

/// The namespace of ARM's quota API.
pub const QUOTA_NAMESPACE: &str = "Microsoft.Quota";

/// Which of a quota scope's collections a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaCollection {
    /// `…/quotas`: the limits.
    Quotas,
    /// `…/usages`: what is consumed, beside the limits.
    Usages,
}

impl QuotaCollection {
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaCollection::Quotas => "quotas",
            QuotaCollection::Usages => "usages",
        }
    }
}

/// A quota path, if `segs` is one.
pub(super) fn quota(segs: &[&str]) -> Option<Result<Route, RouteError>> {
    let at = segs.windows(2).rposition(|w| is(w[0], "providers") && is(w[1], QUOTA_NAMESPACE))?;
    let (collection, meter) = match &segs[at + 2..] {
        [c] => (*c, None),
        [c, m] => (*c, Some(m.to_string())),
        _ => return Some(Err(RouteError::NoMatch)),
    };
    let collection = if is(collection, "quotas") {
        QuotaCollection::Quotas
    } else if is(collection, "usages") {
        QuotaCollection::Usages
    } else {
        return Some(Err(RouteError::NoMatch));
    };
    let (sub, group, rest) = match &segs[..at] {
        [s, sub, r, rg, rest @ ..] if is(s, "subscriptions") && is(r, "resourceGroups") => (sub, Some(rg), rest),
        [s, sub, rest @ ..] if is(s, "subscriptions") => (sub, None, rest),
        _ => return Some(Err(RouteError::NoMatch)),
    };
    let [p, namespace, l, location] = rest else { return Some(Err(RouteError::NoMatch)) };
    if !(is(p, "providers") && is(l, "locations")) {
        return Some(Err(RouteError::NoMatch));
    }
    Some((|| {
        let subscription = subscription(sub)?;
        if let Some(rg) = group {
            ids::check_group(rg)?;
        }
        Ok(Route::Quota {
            subscription,
            resource_group: group.map(|g| g.to_string()),
            namespace: namespace.to_string(),
            location: location.to_string(),
            collection,
            meter,
        })
    })())
}

/// A locks path, if `segs` is one: the scope (canonical, and as written) and the lock's name.
pub(super) fn locks(segs: &[&str]) -> Option<Result<Route, RouteError>> {
    let at = segs
        .windows(3)
        .rposition(|w| is(w[0], "providers") && is(w[1], "Microsoft.Authorization") && is(w[2], "locks"))?;
    let name = match &segs[at + 3..] {
        [] => None,
        [name] => Some(name.to_string()),
        _ => return Some(Err(RouteError::NoMatch)),
    };
    Some(match scope_of(&segs[..at]) {
        Ok((scope, _)) if scope.is_platform() => Err(RouteError::NoMatch),
        Ok((scope, path)) => Ok(Route::Locks { scope, path, name }),
        Err(e) => Err(e),
    })
}

/// Which of a scope's policy collections a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyCollection {
    Definitions,
    Assignments,
    Exemptions,
}

impl PolicyCollection {
    pub const ALL: [PolicyCollection; 3] =
        [PolicyCollection::Definitions, PolicyCollection::Assignments, PolicyCollection::Exemptions];

    /// The path segment, and the ARM type's last part.
    pub fn segment(self) -> &'static str {
        match self {
            PolicyCollection::Definitions => "policyDefinitions",
            PolicyCollection::Assignments => "policyAssignments",
            PolicyCollection::Exemptions => "policyExemptions",
        }
    }
}

/// A policy path, if `segs` is one.
pub(super) fn policy(segs: &[&str]) -> Option<Result<Route, RouteError>> {
    let (at, collection) = segs.windows(3).enumerate().rev().find_map(|(i, w)| {
        let collection = PolicyCollection::ALL.into_iter().find(|c| is(w[2], c.segment()))?;
        (is(w[0], "providers") && is(w[1], "Microsoft.Authorization")).then_some((i, collection))
    })?;
    let name = match &segs[at + 3..] {
        [] => None,
        [name] => Some(name.to_string()),
        _ => return Some(Err(RouteError::NoMatch)),
    };
    Some(scope_of(&segs[..at]).map(|(scope, path)| Route::Policy { collection, scope, path, name }))
}

/// `{scope}/providers/Microsoft.PolicyInsights/policyStates/latest/queryResults` at a
/// subscription, a resource group or a resource, if `segs` is one.
pub(super) fn policy_states(segs: &[&str]) -> Option<Result<Route, RouteError>> {
    let tail = ["providers", "Microsoft.PolicyInsights", "policyStates", "latest", "queryResults"];
    let at = segs.len().checked_sub(tail.len())?;
    if !segs[at..].iter().zip(tail).all(|(s, w)| is(s, w)) {
        return None;
    }
    Some(match &segs[..at] {
        [s, sub] if is(s, "subscriptions") => subscription(sub).map(|subscription| Route::PolicyStates {
            subscription,
            resource_group: None,
            resource: None,
        }),
        [s, sub, r, rg] if is(s, "subscriptions") && is(r, "resourceGroups") => (|| {
            let subscription = subscription(sub)?;
            ids::check_group(rg)?;
            Ok(Route::PolicyStates { subscription, resource_group: Some(rg.to_string()), resource: None })
        })(),
        [s, sub, r, rg, p, ns, pairs @ ..]
            if is(s, "subscriptions") && is(r, "resourceGroups") && is(p, "providers") && pairs.len() % 2 == 0 =>
        {
            (|| {
                let id = ids::ArmId::from_segments(sub, rg, ns, pairs)?;
                Ok(Route::PolicyStates {
                    subscription: subscription(sub)?,
                    resource_group: Some(rg.to_string()),
                    resource: Some(id),
                })
            })()
        }
        _ => Err(RouteError::NoMatch),
    })
}
