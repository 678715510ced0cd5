//! Bearer JWTs: which issuer, which key, then signature, audience and time checks, then the
//! claims mapped to a principal. The issuer and key are chosen from the unverified header and
//! payload; the signature check is the JOSE crate's, the choice of what to accept ours. Times
//! are checked against the injected clock. An issuer limited to some tenants mints principals
//! only for them.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};
use slipway_domain::{Principal, PrincipalKind, Timestamp};

use crate::error::AuthError;
use crate::jwks::{ACCEPTED, IssuerKeys};
use crate::options::{ClaimMapping, IssuerOptions};

/// The unverified header fields and payload, read only to choose the issuer and the key.
struct Unverified {
    alg: String,
    kid: Option<String>,
    claims: Map<String, Value>,
}

fn segment_json(segment: &str) -> Result<Map<String, Value>, AuthError> {
    let bytes = URL_SAFE_NO_PAD.decode(segment.trim_end_matches('=')).map_err(|_| AuthError::Malformed)?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(AuthError::Malformed),
    }
}

fn peek(token: &str) -> Result<Unverified, AuthError> {
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(_sig), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed);
    };
    let header = segment_json(header)?;
    let alg = header.get("alg").and_then(Value::as_str).ok_or(AuthError::Malformed)?.to_string();
    let kid = header.get("kid").and_then(Value::as_str).map(str::to_string);
    Ok(Unverified { alg, kid, claims: segment_json(payload)? })
}

fn accepted_algorithm(name: &str) -> Result<Algorithm, AuthError> {
    let refuse = || AuthError::Algorithm(name.chars().take(16).collect());
    let alg: Algorithm = name.parse().map_err(|_| refuse())?;
    if ACCEPTED.contains(&alg) { Ok(alg) } else { Err(refuse()) }
}

/// Verifies `token` against the issuer it names, at `now`: the principal, and the options of
/// the issuer that minted it.
pub(crate) async fn verify<'a>(
    issuers: &'a [IssuerKeys],
    token: &str,
    now: Timestamp,
) -> Result<(Principal, &'a IssuerOptions), AuthError> {
    let peeked = peek(token)?;
    let alg = accepted_algorithm(&peeked.alg)?;
    let iss = peeked.claims.get("iss").and_then(Value::as_str).ok_or(AuthError::UnknownIssuer)?;
    let issuer = issuers.iter().find(|i| i.options.issuer == iss).ok_or(AuthError::UnknownIssuer)?;
    let keys = issuer.keys_for(peeked.kid.as_deref()).await?;
    let mut validation = Validation::new(alg);
    validation.set_issuer(&[&issuer.options.issuer]);
    validation.set_audience(&issuer.options.audiences);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    // Times are checked below against the injected clock.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    let mut last = AuthError::BadSignature;
    for key in keys.iter().filter(|k| k.algorithms.contains(&alg)) {
        match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
            Ok(data) => {
                check_times(&data.claims, now, issuer.options.leeway.as_secs() as i64)?;
                return Ok((
                    issued(principal(&data.claims, &issuer.options.claims)?, &issuer.options)?,
                    &issuer.options,
                ));
            }
            Err(e) => last = map_error(e.kind()),
        }
    }
    Err(last)
}

fn map_error(kind: &ErrorKind) -> AuthError {
    match kind {
        ErrorKind::InvalidSignature | ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidRsaKey(_) => {
            AuthError::BadSignature
        }
        ErrorKind::InvalidAudience => AuthError::WrongAudience,
        ErrorKind::InvalidIssuer => AuthError::UnknownIssuer,
        ErrorKind::MissingRequiredClaim(c) => AuthError::MissingClaim(c.clone()),
        ErrorKind::InvalidAlgorithm | ErrorKind::UnsupportedAlgorithm => AuthError::BadSignature,
        _ => AuthError::Malformed,
    }
}

fn numeric(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, AuthError> {
    match claims.get(name) {
        None => Ok(None),
        Some(v) => v.as_f64().map(|f| Some(f as i64)).ok_or(AuthError::Malformed),
    }
}

fn check_times(claims: &Map<String, Value>, now: Timestamp, leeway: i64) -> Result<(), AuthError> {
    let now = now.as_millis().div_euclid(1000);
    let exp = numeric(claims, "exp")?.ok_or_else(|| AuthError::MissingClaim("exp".into()))?;
    if now > exp.saturating_add(leeway) {
        return Err(AuthError::Expired);
    }
    if numeric(claims, "nbf")?.is_some_and(|nbf| now < nbf.saturating_sub(leeway)) {
        return Err(AuthError::NotYetValid);
    }
    Ok(())
}

/// A principal as its issuer names it: the issuer's prefix before its name and each group,
/// and only for a tenant the issuer may speak for.
fn issued(mut p: Principal, issuer: &IssuerOptions) -> Result<Principal, AuthError> {
    if !issuer.tenants.is_empty() {
        let tenant = p.tenant.as_deref().unwrap_or_default();
        if !issuer.tenants.iter().any(|t| t.eq_ignore_ascii_case(tenant)) {
            return Err(AuthError::TenantNotAllowed(tenant.chars().take(64).collect()));
        }
    }
    if !issuer.prefix.is_empty() {
        p.name.insert_str(0, &issuer.prefix);
        for g in &mut p.groups {
            g.insert_str(0, &issuer.prefix);
        }
    }
    Ok(p)
}

/// Claims to a principal, by the issuer's mapping.
pub(crate) fn principal(claims: &Map<String, Value>, mapping: &ClaimMapping) -> Result<Principal, AuthError> {
    let text = |name: &str| claims.get(name).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    let name = text(&mapping.subject).ok_or_else(|| AuthError::MissingClaim(mapping.subject.clone()))?;
    let tenant = mapping.tenant.as_deref().and_then(text);
    let groups = match claims.get(&mapping.groups) {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        Some(Value::String(one)) => one.split_whitespace().map(str::to_string).collect(),
        _ => Vec::new(),
    };
    // Entra ID marks application (client-credential) tokens `idtyp: app`.
    let kind = if text("idtyp").as_deref() == Some("app") { PrincipalKind::Application } else { PrincipalKind::User };
    Ok(Principal { name, tenant, groups, kind, confined_to: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn claims_map_to_principals_by_configuration() {
        let entra = ClaimMapping { subject: "oid".into(), tenant: Some("tid".into()), groups: "roles".into() };
        let keycloak = ClaimMapping { subject: "sub".into(), tenant: Some("org".into()), groups: "groups".into() };
        let no_tenant = ClaimMapping { tenant: None, ..ClaimMapping::default() };
        let c = claims(
            json!({"sub": "u-1", "oid": "o-1", "tid": "t-1", "org": "acme", "groups": ["g1", "g2"], "roles": "r1 r2"}),
        );
        let table = [
            (&entra, "o-1", Some("t-1"), vec!["r1", "r2"]),
            (&keycloak, "u-1", Some("acme"), vec!["g1", "g2"]),
            (&no_tenant, "u-1", None, vec!["g1", "g2"]),
        ];
        for (mapping, name, tenant, groups) in table {
            let p = principal(&c, mapping).unwrap();
            assert_eq!(
                (p.name.as_str(), p.tenant.as_deref(), p.groups),
                (name, tenant, groups.iter().map(|g| g.to_string()).collect())
            );
            assert_eq!(p.kind, PrincipalKind::User);
        }
        let app = principal(&claims(json!({"sub": "svc", "idtyp": "app"})), &ClaimMapping::default()).unwrap();
        assert_eq!((app.kind, app.tenant, app.groups.len()), (PrincipalKind::Application, None, 0));
        assert_eq!(principal(&claims(json!({"tid": "t"})), &entra), Err(AuthError::MissingClaim("oid".into())));
        assert_eq!(
            principal(&claims(json!({"sub": ""})), &ClaimMapping::default()),
            Err(AuthError::MissingClaim("sub".into()))
        );
    }

    #[test]
    fn an_issuer_prefixes_its_names_and_speaks_only_for_its_tenants() {
        let mut partner = IssuerOptions::new("https://partner", vec!["a".into()], crate::KeySource::Discovery);
        partner.prefix = "partner:".into();
        let alice = || Principal {
            name: "alice".into(),
            tenant: Some("Contoso".into()),
            groups: vec!["ops".into()],
            kind: PrincipalKind::User,
            confined_to: Vec::new(),
        };
        let p = issued(alice(), &partner).unwrap();
        assert_eq!((p.name.as_str(), p.groups), ("partner:alice", vec!["partner:ops".to_string()]));
        partner.tenants = vec!["contoso".into()];
        assert!(issued(alice(), &partner).is_ok(), "tenants compare case-insensitively");
        partner.tenants = vec!["fabrikam".into()];
        assert_eq!(issued(alice(), &partner), Err(AuthError::TenantNotAllowed("Contoso".into())));
        let no_tenant = Principal { tenant: None, ..alice() };
        assert_eq!(issued(no_tenant, &partner), Err(AuthError::TenantNotAllowed(String::new())));
        let derived = IssuerOptions::new("https://idp", vec![], crate::KeySource::Discovery);
        assert_eq!(issued(alice(), &derived).unwrap().name, "https://idp#alice");
    }

    #[test]
    fn times_are_checked_with_leeway_against_the_given_clock() {
        let at = |s: i64| Timestamp::from_millis(s * 1000);
        let c = claims(json!({"exp": 1000, "nbf": 900}));
        assert_eq!(check_times(&c, at(950), 0), Ok(()));
        assert_eq!(check_times(&c, at(1001), 0), Err(AuthError::Expired));
        assert_eq!(check_times(&c, at(1001), 5), Ok(()));
        assert_eq!(check_times(&c, at(899), 0), Err(AuthError::NotYetValid));
        assert_eq!(check_times(&c, at(899), 5), Ok(()));
        assert_eq!(check_times(&claims(json!({})), at(1), 0), Err(AuthError::MissingClaim("exp".into())));
        assert_eq!(check_times(&claims(json!({"exp": "soon"})), at(1), 0), Err(AuthError::Malformed));
    }

    #[test]
    fn only_asymmetric_algorithms_are_accepted() {
        for ok in ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"] {
            assert!(accepted_algorithm(ok).is_ok(), "{ok}");
        }
        for bad in ["none", "HS256", "HS384", "HS512", "", "rs256"] {
            assert!(matches!(accepted_algorithm(bad), Err(AuthError::Algorithm(_))), "{bad}");
        }
    }

    #[test]
    fn malformed_tokens_are_named_so() {
        for t in ["", "abc", "a.b", "a.b.c.d", "!!.!!.!!", "e30.e30.x"] {
            assert!(peek(t).is_err() || accepted_algorithm(&peek(t).unwrap().alg).is_err(), "{t}");
        }
    }
}
