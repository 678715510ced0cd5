//! Slipway API tokens for automation: `slw_<id>_<secret>`. The id is public (listing and
//! revoking name it); the secret is 256 random bits, shown once at creation, and stored only
//! as its SHA-256 — enough for a high-entropy secret, which a slow password hash would not
//! make any stronger. Tokens live in the store, so every replica sees a revocation at once.
//!
//! A token may be confined to subscriptions (the tokens a subscription's Owner makes are):
//! whatever roles its principal holds, it acts only inside them. Its last use is recorded to
//! the hour ([`LAST_USE_RESOLUTION`]): one write per token per hour, not one per request.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use slipway_domain::activity::ActivityEntry;
use slipway_domain::{Principal, PrincipalKind, SubscriptionId, Timestamp};
use slipway_store::PutEntry;
use slipway_store::{Entry, EntryKind, Expect, Store, StoreError};
use subtle::ConstantTimeEq;

use crate::error::AuthError;

const PREFIX: &str = "slw_";
const ID_BYTES: usize = 8;
const SECRET_BYTES: usize = 32;

/// What the store keeps of a token (its on-disk document, version 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiToken {
    #[serde(rename = "id")]
    pub id: String,
    #[serde(rename = "principal")]
    pub principal: String,
    #[serde(rename = "tenant", default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(rename = "groups", default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(rename = "description", default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(rename = "createdAt")]
    pub created_at: Timestamp,
    #[serde(rename = "expiresAt", default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// The subscriptions it is confined to (lowercased); empty: none.
    #[serde(rename = "subscriptions", default, skip_serializing_if = "Vec::is_empty")]
    pub subscriptions: Vec<SubscriptionId>,
    /// When it last authenticated a request, to [`LAST_USE_RESOLUTION`].
    #[serde(rename = "lastUsedAt", default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<Timestamp>,
    /// Lowercase hex SHA-256 of the secret part.
    #[serde(rename = "sha256")]
    sha256: String,
}

impl ApiToken {
    pub fn principal(&self) -> Principal {
        Principal {
            name: self.principal.clone(),
            tenant: self.tenant.clone(),
            groups: self.groups.clone(),
            kind: PrincipalKind::Application,
            confined_to: self.subscriptions.clone(),
        }
    }
}

/// How often a token's last use is written: a use within this long of the recorded one is
/// not recorded again.
pub const LAST_USE_RESOLUTION: std::time::Duration = std::time::Duration::from_secs(3600);

/// What an admin asks for.
#[derive(Clone, Debug, Default)]
pub struct NewApiToken {
    pub principal: String,
    pub tenant: Option<String>,
    pub groups: Vec<String>,
    pub description: String,
    pub expires_at: Option<Timestamp>,
    /// Confine the token to these subscriptions (empty: do not).
    pub subscriptions: Vec<SubscriptionId>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn digest(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn random(n: usize) -> Result<Vec<u8>, StoreError> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).map_err(|e| StoreError::Internal(format!("no randomness: {e}")))?;
    Ok(buf)
}

/// `(id, secret)` of a token's text, if it has the shape of one.
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let hex_id = id.len() == ID_BYTES * 2 && id.bytes().all(|b| b.is_ascii_hexdigit());
    (hex_id && !secret.is_empty()).then_some((id, secret))
}

pub fn looks_like_api_token(token: &str) -> bool {
    token.starts_with(PREFIX)
}

/// Creates a token; returns its text (the only time the secret exists outside the caller)
/// and what was stored.
/// `activity`: the request's activity-log entry, written in the same transaction.
pub async fn create(
    store: &dyn Store,
    new: NewApiToken,
    now: Timestamp,
    activity: Option<ActivityEntry>,
) -> Result<(String, ApiToken), StoreError> {
    let id = hex(&random(ID_BYTES)?);
    let secret = URL_SAFE_NO_PAD.encode(random(SECRET_BYTES)?);
    let token = ApiToken {
        id: id.clone(),
        principal: new.principal,
        tenant: new.tenant,
        groups: new.groups,
        description: new.description,
        created_at: now,
        expires_at: new.expires_at,
        subscriptions: new.subscriptions,
        last_used_at: None,
        sha256: digest(&secret),
    };
    let body = serde_json::to_string(&token).map_err(|e| StoreError::Internal(e.to_string()))?;
    store
        .put_entry(PutEntry {
            kind: EntryKind::ApiToken,
            id: id.to_string(),
            partition: String::new(),
            body: body.to_string(),
            expect: Expect::Absent,
            now,
            activity: activity.map(Box::new),
        })
        .await?;
    Ok((format!("{PREFIX}{id}_{secret}"), token))
}

pub async fn list(store: &dyn Store) -> Result<Vec<ApiToken>, StoreError> {
    let entries = store.list_entries(EntryKind::ApiToken, None).await?;
    entries.iter().map(|e| decode(&e.body)).collect()
}

/// One token, by its id.
pub async fn get(store: &dyn Store, id: &str) -> Result<Option<ApiToken>, StoreError> {
    store.get_entry(EntryKind::ApiToken, &id.to_ascii_lowercase()).await?.map(|e| decode(&e.body)).transpose()
}

/// Removes a token; `false` if there was none with that id.
pub async fn revoke(store: &dyn Store, id: &str, activity: Option<ActivityEntry>) -> Result<bool, StoreError> {
    store.delete_entry(EntryKind::ApiToken, &id.to_ascii_lowercase(), Expect::Any, activity).await
}

fn decode(body: &str) -> Result<ApiToken, StoreError> {
    serde_json::from_str(body).map_err(|e| StoreError::Internal(format!("stored API token unreadable: {e}")))
}

/// What a presented token verified as: its principal, and its stored entry when its last use
/// is due to be recorded ([`record_use`]).
pub(crate) struct Verified {
    pub principal: Principal,
    pub stale_use: Option<Entry>,
}

/// Checks a presented token.
pub(crate) async fn verify(store: &dyn Store, token: &str, now: Timestamp) -> Result<Verified, AuthError> {
    let (id, secret) = parse(token).ok_or(AuthError::Malformed)?;
    let entry = store
        .get_entry(EntryKind::ApiToken, &id.to_ascii_lowercase())
        .await
        .map_err(|e| AuthError::Unavailable(format!("token store: {e}")))?
        .ok_or(AuthError::UnknownApiToken)?;
    let stored = decode(&entry.body).map_err(|e| AuthError::Unavailable(e.to_string()))?;
    if !bool::from(digest(secret).as_bytes().ct_eq(stored.sha256.as_bytes())) {
        return Err(AuthError::UnknownApiToken);
    }
    if stored.expires_at.is_some_and(|at| now >= at) {
        return Err(AuthError::ApiTokenExpired);
    }
    let stale = stored.last_used_at.is_none_or(|last| now >= last.add(LAST_USE_RESOLUTION));
    Ok(Verified { principal: stored.principal(), stale_use: stale.then_some(entry) })
}

/// Records `now` as the last use of the token stored as `entry`, unless it changed since it
/// was read (another replica recorded a use, or it was revoked: either way nothing to do).
pub async fn record_use(store: &dyn Store, entry: Entry, now: Timestamp) -> Result<(), StoreError> {
    let mut token = decode(&entry.body)?;
    token.last_used_at = Some(now);
    let body = serde_json::to_string(&token).map_err(|e| StoreError::Internal(e.to_string()))?;
    match store
        .put_entry(PutEntry {
            kind: EntryKind::ApiToken,
            id: entry.id.to_string(),
            partition: entry.partition.to_string(),
            body: body.to_string(),
            expect: Expect::Version(entry.version),
            now,
            activity: None,
        })
        .await
    {
        Ok(_) | Err(StoreError::Precondition(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_text_has_a_public_id_and_a_secret() {
        assert_eq!(parse("slw_0123456789abcdef_s3cr3t"), Some(("0123456789abcdef", "s3cr3t")));
        for bad in
            ["", "slw_", "slw_0123_x", "slw_0123456789abcdef_", "slw_0123456789abcdeg_x", "xyz_0123456789abcdef_x"]
        {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_stored_document_keeps_its_field_names() {
        let t = ApiToken {
            id: "00".into(),
            principal: "ci".into(),
            tenant: Some("t".into()),
            groups: vec![],
            description: String::new(),
            created_at: Timestamp::from_millis(5),
            expires_at: None,
            subscriptions: Vec::new(),
            last_used_at: None,
            sha256: digest("x"),
        };
        let v: serde_json::Value = serde_json::to_value(&t).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"id": "00", "principal": "ci", "tenant": "t", "createdAt": 5,
                "sha256": "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"})
        );
    }
}
