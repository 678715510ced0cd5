//! ARM paths, matched segment by segment and case-insensitively (ARM's keywords and names
//! are case-insensitive; the original casing is kept for echoing).

use slipway_domain::ids::{ArmId, IdError};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Resource(ArmId),
    /// A collection of one type, in a resource group or a whole subscription.
    Collection {
        subscription: String,
        resource_group: Option<String>,
        namespace: String,
        type_name: String,
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
    OperationResult {
        subscription: String,
        namespace: String,
        location: String,
        id: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteError {
    NoMatch,
    BadName(String),
}

impl From<IdError> for RouteError {
    fn from(e: IdError) -> Self {
        match e {
            IdError::InvalidName(n) => RouteError::BadName(n),
            IdError::NotAResourceId => RouteError::NoMatch,
        }
    }
}

fn is(seg: &str, word: &str) -> bool {
    seg.eq_ignore_ascii_case(word)
}

pub fn parse(path: &str) -> Result<Route, RouteError> {
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    if segs.iter().any(|s| s.is_empty()) {
        return Err(RouteError::NoMatch);
    }
    let op = |sub: &&str, ns: &&str, loc: &&str, id: &&str| {
        (sub.to_string(), ns.to_string(), loc.to_string(), id.to_string())
    };
    match segs.as_slice() {
        [s, sub, p, ns, l, loc, kind, id] if is(s, "subscriptions") && is(p, "providers") && is(l, "locations") => {
            let (subscription, namespace, location, id) = op(sub, ns, loc, id);
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
                && is(c, "cancel") =>
        {
            let (subscription, namespace, location, id) = op(sub, ns, loc, id);
            Ok(Route::OperationCancel { subscription, namespace, location, id })
        }
        [s, sub, r, rg, p, ns, ty, name] if is(s, "subscriptions") && is(r, "resourceGroups") && is(p, "providers") => {
            Ok(Route::Resource(ArmId::new(*sub, *rg, *ns, *ty, *name)?))
        }
        [s, sub, r, rg, p, ns, ty] if is(s, "subscriptions") && is(r, "resourceGroups") && is(p, "providers") => {
            Ok(Route::Collection {
                subscription: sub.to_string(),
                resource_group: Some(rg.to_string()),
                namespace: ns.to_string(),
                type_name: ty.to_string(),
            })
        }
        [s, sub, p, ns, ty] if is(s, "subscriptions") && is(p, "providers") => Ok(Route::Collection {
            subscription: sub.to_string(),
            resource_group: None,
            namespace: ns.to_string(),
            type_name: ty.to_string(),
        }),
        _ => Err(RouteError::NoMatch),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_arm_paths_case_insensitively() {
        let r = parse("/SUBSCRIPTIONS/s1/resourcegroups/RG/Providers/Slipway.Example/virtualNetworks/v1").unwrap();
        let Route::Resource(id) = r else { panic!("{r:?}") };
        assert_eq!(id.resource_group, "RG");
        assert_eq!(id.name, "v1");
        assert!(matches!(
            parse("/subscriptions/s1/resourceGroups/rg/providers/ns/t").unwrap(),
            Route::Collection { resource_group: Some(_), .. }
        ));
        assert!(matches!(
            parse("/subscriptions/s1/providers/ns/t/").unwrap(),
            Route::Collection { resource_group: None, .. }
        ));
        assert!(matches!(
            parse("/subscriptions/s1/providers/ns/locations/local/OPERATIONSTATUSES/abc").unwrap(),
            Route::OperationStatus { .. }
        ));
        assert!(matches!(
            parse("/subscriptions/s1/providers/ns/locations/local/operationStatuses/abc/cancel").unwrap(),
            Route::OperationCancel { .. }
        ));
        assert!(matches!(
            parse("/subscriptions/s1/providers/ns/locations/local/operationResults/abc").unwrap(),
            Route::OperationResult { .. }
        ));
    }

    #[test]
    fn rejects_other_paths() {
        for p in [
            "/",
            "/subscriptions",
            "/subscriptions/s1/resourceGroups/rg",
            "/subscriptions//providers/ns/t",
            "/foo/s1/providers/ns/t",
        ] {
            assert_eq!(parse(p), Err(RouteError::NoMatch), "{p}");
        }
        assert!(matches!(
            parse("/subscriptions/s1/resourceGroups/rg/providers/ns/t/bad%20name"),
            Err(RouteError::BadName(_))
        ));
    }
}
