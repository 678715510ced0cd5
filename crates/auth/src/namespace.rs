//! Whose names are whose. A principal is (issuer, subject): every issuer puts its prefix
//! before the subject and the groups it mints, so `partner:alice` and `alice` are two
//! principals and no trusted issuer can mint a name another issuer owns. The home issuer (the
//! first configured, unprefixed unless configured otherwise) and Slipway's API tokens share
//! the unprefixed names; a name of theirs that starts with another issuer's prefix is refused,
//! so the prefixes partition every name a credential can carry.

use slipway_domain::Principal;

use crate::error::AuthError;
use crate::options::IssuerOptions;

/// Written before a group in `auth.admins`; no prefix may start with it.
const GROUP_MARKER: &str = "group:";

/// The configured issuers' prefixes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Namespace {
    /// `(issuer, prefix)` for every issuer with a non-empty prefix.
    prefixed: Vec<(String, String)>,
}

impl Namespace {
    pub(crate) fn new(issuers: &[IssuerOptions]) -> Self {
        Namespace {
            prefixed: issuers
                .iter()
                .filter(|i| !i.prefix.is_empty())
                .map(|i| (i.issuer.clone(), i.prefix.clone()))
                .collect(),
        }
    }

    /// Refuses a principal of an issuer whose prefix is `own` when its name or a group
    /// carries another issuer's prefix. Only the unprefixed sources can: prefixed ones start
    /// with their own prefix, which [`check_prefixes`] keeps apart from every other.
    pub(crate) fn refuse_foreign(&self, principal: &Principal, own: &str) -> Result<(), AuthError> {
        for name in std::iter::once(&principal.name).chain(&principal.groups) {
            if let Some((issuer, _)) = self.prefixed.iter().find(|(_, p)| p != own && name.starts_with(p.as_str())) {
                return Err(AuthError::ForeignName { name: shorten(name), issuer: issuer.clone() });
            }
        }
        Ok(())
    }

    /// The issuer whose prefix `name` carries, if any.
    pub(crate) fn owner(&self, name: &str) -> Option<&str> {
        self.prefixed.iter().find(|(_, p)| name.starts_with(p.as_str())).map(|(issuer, _)| issuer.as_str())
    }
}

/// The issuer whose prefix `name` carries, if any: an API token may not be made for such a
/// principal or group, since the name is that issuer's.
pub fn prefix_owner<'a>(issuers: &'a [IssuerOptions], name: &str) -> Option<&'a str> {
    issuers.iter().find(|i| !i.prefix.is_empty() && name.starts_with(&i.prefix)).map(|i| i.issuer.as_str())
}

fn shorten(name: &str) -> String {
    name.chars().take(64).collect()
}

/// The prefixes must keep names apart: at most one issuer unprefixed, none a prefix of
/// another (`p:` and `p:x:` would let the first mint the second's names), none starting with
/// `group:` (which marks a group in `auth.admins`), no whitespace or control characters.
pub fn check_prefixes(issuers: &[IssuerOptions]) -> Result<(), String> {
    let unprefixed: Vec<&str> = issuers.iter().filter(|i| i.prefix.is_empty()).map(|i| i.issuer.as_str()).collect();
    if unprefixed.len() > 1 {
        return Err(format!(
            "issuers {} are all unprefixed: at most one issuer may mint unprefixed names (set `prefix`)",
            unprefixed.join(", ")
        ));
    }
    for (i, a) in issuers.iter().enumerate() {
        if a.prefix.starts_with(GROUP_MARKER) {
            return Err(format!("the prefix '{}' of {} starts with '{GROUP_MARKER}'", a.prefix, a.issuer));
        }
        if a.prefix.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("the prefix of {} has whitespace or control characters", a.issuer));
        }
        for b in issuers.iter().skip(i + 1) {
            let (short, long) = if a.prefix.len() <= b.prefix.len() { (a, b) } else { (b, a) };
            if !short.prefix.is_empty() && long.prefix.starts_with(&short.prefix) {
                return Err(format!(
                    "the prefix '{}' of {} begins the prefix '{}' of {}: the first could mint the second's names",
                    short.prefix, short.issuer, long.prefix, long.issuer
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::KeySource;
    use slipway_domain::PrincipalKind;

    fn issuer(iss: &str, prefix: &str) -> IssuerOptions {
        let mut i = IssuerOptions::new(iss, vec!["aud".into()], KeySource::Discovery);
        i.prefix = prefix.into();
        i
    }

    fn principal(name: &str, groups: &[&str]) -> Principal {
        Principal {
            name: name.into(),
            tenant: None,
            groups: groups.iter().map(|g| g.to_string()).collect(),
            kind: PrincipalKind::User,
            confined_to: Vec::new(),
        }
    }

    #[test]
    fn prefixes_must_keep_names_apart() {
        let table = [
            (vec![("home", ""), ("partner", "partner:")], None),
            (vec![("a", "a#"), ("b", "b#")], None),
            (vec![("home", ""), ("other", "")], Some("at most one")),
            (vec![("p", "p:"), ("q", "p:eu:")], Some("begins the prefix")),
            (vec![("p", "p:eu:"), ("q", "p:")], Some("begins the prefix")),
            (vec![("p", "x:"), ("q", "x:")], Some("begins the prefix")),
            (vec![("p", "group:x")], Some("group:")),
            (vec![("p", "a b:")], Some("whitespace")),
        ];
        for (issuers, refused) in table {
            let issuers: Vec<_> = issuers.iter().map(|(i, p)| issuer(i, p)).collect();
            let r = check_prefixes(&issuers);
            match refused {
                None => assert!(r.is_ok(), "{r:?}"),
                Some(why) => assert!(r.as_ref().err().is_some_and(|e| e.contains(why)), "{why}: {r:?}"),
            }
        }
    }

    #[test]
    fn an_unprefixed_name_may_not_carry_another_issuers_prefix() {
        let ns = Namespace::new(&[issuer("home", ""), issuer("https://partner", "partner:")]);
        assert_eq!(ns.refuse_foreign(&principal("alice", &["ops"]), ""), Ok(()));
        assert_eq!(ns.refuse_foreign(&principal("partner:alice", &["ops"]), "partner:"), Ok(()));
        for forged in [principal("partner:alice", &[]), principal("alice", &["partner:admins"])] {
            let e = ns.refuse_foreign(&forged, "").unwrap_err();
            assert!(matches!(&e, AuthError::ForeignName { issuer, .. } if issuer == "https://partner"), "{e:?}");
        }
        let issuers = [issuer("home", ""), issuer("https://partner", "partner:")];
        assert_eq!(prefix_owner(&issuers, "partner:ci"), Some("https://partner"));
        assert_eq!(prefix_owner(&issuers, "ci"), None);
    }
}
