//! Secret properties: a type's schema marks top-level properties secret (`writeOnly: true`
//! or `x-slipway-secret: true`); their values are sealed with AES-256-GCM before they are
//! stored, never returned, and unsealed only to hand them to a job — the engine moves them
//! out of `properties` into `LaunchRequest::secrets` — or, inside the API's change, to check a
//! PATCH's merged properties against the schema.
//!
//! A sealed value is `{"$slipwaySecret": "<key id>:<base64 nonce‖ciphertext‖tag>"}`. The
//! key id (the first 8 bytes of the key's SHA-256, hex) names which key sealed it, so keys
//! rotate without downtime: put the new key first in `key_files` (it seals from then on),
//! keep the old ones after it (they still open what they sealed). The AEAD's associated
//! data binds a sealed value to its property name, so a value cannot be moved to another
//! property. Sealing the same plaintext twice gives different bytes (random nonce); a
//! caller that wants an unchanged secret to stay unchanged reuses the stored sealed value
//! ([`Keyring::seal_properties`] does).

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::{Map, Value};

/// The key of a sealed value's JSON object.
pub const SEALED: &str = "$slipwaySecret";

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("secret key file {0}: {1}")]
    KeyFile(PathBuf, String),
    #[error("no secret key is configured ([secrets] key_files)")]
    NoKey,
    #[error("a sealed value for '{0}' cannot be opened: {1}")]
    Open(String, &'static str),
    #[error("cannot seal: {0}")]
    Seal(&'static str),
}

struct Key {
    id: String,
    key: LessSafeKey,
}

/// The keys Slipway seals and opens secrets with; the first seals.
pub struct Keyring {
    keys: Vec<Key>,
    rng: SystemRandom,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring").field("key_ids", &self.keys.iter().map(|k| &k.id).collect::<Vec<_>>()).finish()
    }
}

fn key_id(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

impl Keyring {
    /// Keys from raw 32-byte values (first seals).
    pub fn from_keys(keys: &[[u8; 32]]) -> Result<Self, SecretError> {
        if keys.is_empty() {
            return Err(SecretError::NoKey);
        }
        let keys = keys
            .iter()
            .map(|k| {
                let unbound = UnboundKey::new(&AES_256_GCM, k).map_err(|_| SecretError::Seal("bad key length"))?;
                Ok(Key { id: key_id(k), key: LessSafeKey::new(unbound) })
            })
            .collect::<Result<_, SecretError>>()?;
        Ok(Keyring { keys, rng: SystemRandom::new() })
    }

    /// Key files hold 32 random bytes as 64 hex digits or base64 (`openssl rand -hex 32`);
    /// they must not be readable by others.
    pub fn from_files(paths: &[PathBuf]) -> Result<Self, SecretError> {
        let mut keys = Vec::new();
        for path in paths {
            keys.push(read_key(path)?);
        }
        Self::from_keys(&keys)
    }

    /// A new random key, for tests and for `openssl rand`-less installs.
    pub fn generate_key() -> [u8; 32] {
        let mut k = [0u8; 32];
        SystemRandom::new().fill(&mut k).expect("the system's random source");
        k
    }

    fn seal(&self, property: &str, plaintext: &Value) -> Result<Value, SecretError> {
        let key = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| SecretError::Seal("no randomness"))?;
        let mut data = serde_json::to_vec(plaintext).map_err(|_| SecretError::Seal("unencodable value"))?;
        key.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(property.as_bytes()), &mut data)
            .map_err(|_| SecretError::Seal("encryption failed"))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        let mut sealed = Map::new();
        sealed.insert(SEALED.into(), Value::String(format!("{}:{}", key.id, STANDARD.encode(out))));
        Ok(Value::Object(sealed))
    }

    fn open(&self, property: &str, sealed: &str) -> Result<Value, SecretError> {
        let err = |why| SecretError::Open(property.to_string(), why);
        let (id, body) = sealed.split_once(':').ok_or(err("malformed"))?;
        let key = self.keys.iter().find(|k| k.id == id).ok_or(err("sealed with a key that is not configured"))?;
        let mut bytes = STANDARD.decode(body).map_err(|_| err("malformed"))?;
        if bytes.len() < NONCE_LEN {
            return Err(err("malformed"));
        }
        let mut data = bytes.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&bytes).map_err(|_| err("malformed"))?;
        let plain = key
            .key
            .open_in_place(nonce, Aad::from(property.as_bytes()), &mut data)
            .map_err(|_| err("tampered or wrong key"))?;
        serde_json::from_slice(plain).map_err(|_| err("not JSON"))
    }

    /// `properties` with each secret's plaintext sealed. A secret whose plaintext equals what
    /// `stored` holds sealed keeps the stored sealed value (so an unchanged secret leaves the
    /// spec — and its config version — unchanged); values already sealed stay as they are.
    pub fn seal_properties(
        &self,
        secrets: &[String],
        properties: &Value,
        stored: Option<&Value>,
    ) -> Result<Value, SecretError> {
        let mut out = properties.clone();
        let Some(map) = out.as_object_mut() else { return Ok(out) };
        for name in secrets {
            let Some(value) = map.get(name) else { continue };
            if sealed_text(value).is_some() || value.is_null() {
                continue;
            }
            let kept = stored
                .and_then(|s| s.get(name))
                .filter(|old| sealed_text(old).is_some_and(|t| self.open(name, t).ok().as_ref() == Some(value)))
                .cloned();
            let sealed = match kept {
                Some(old) => old,
                None => self.seal(name, value)?,
            };
            map.insert(name.clone(), sealed);
        }
        Ok(out)
    }

    /// `properties` with every sealed value opened (for the job, and for validation).
    pub fn open_properties(&self, properties: &Value) -> Result<Value, SecretError> {
        let mut out = properties.clone();
        if let Some(map) = out.as_object_mut() {
            for (name, value) in map.iter_mut() {
                if let Some(text) = sealed_text(value) {
                    *value = self.open(name, text)?;
                }
            }
        }
        Ok(out)
    }
}

/// The sealed text of a sealed value.
pub fn sealed_text(v: &Value) -> Option<&str> {
    let map = v.as_object()?;
    if map.len() != 1 {
        return None;
    }
    map.get(SEALED)?.as_str()
}

/// `properties` without sealed values: what clients are shown.
pub fn without_secrets(properties: &Map<String, Value>) -> Map<String, Value> {
    properties.iter().filter(|(_, v)| sealed_text(v).is_none()).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The top-level properties a schema marks secret (`writeOnly: true` or
/// `x-slipway-secret: true`).
pub fn secret_properties(schema: &Value) -> Vec<String> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return Vec::new() };
    let marked = |p: &Value| {
        p.get("writeOnly").and_then(Value::as_bool) == Some(true)
            || p.get("x-slipway-secret").and_then(Value::as_bool) == Some(true)
    };
    let mut names: Vec<String> = props.iter().filter(|(_, p)| marked(p)).map(|(k, _)| k.clone()).collect();
    names.sort();
    names
}

fn read_key(path: &Path) -> Result<[u8; 32], SecretError> {
    use std::os::unix::fs::PermissionsExt;
    let bad = |why: String| SecretError::KeyFile(path.to_path_buf(), why);
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(bad("readable by others: chmod 600 it".into()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let text = text.trim();
    let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        (0..32).map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex digits")).collect()
    } else {
        STANDARD.decode(text).map_err(|_| bad("not 64 hex digits or base64".into()))?
    };
    bytes.try_into().map_err(|_| bad("a key is 32 bytes".into()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ring(keys: &[[u8; 32]]) -> Keyring {
        Keyring::from_keys(keys).unwrap()
    }

    #[test]
    fn sealed_values_open_with_any_configured_key_and_only_for_their_property() {
        let (old, new) = (Keyring::generate_key(), Keyring::generate_key());
        let secrets = vec!["password".to_string()];
        let props = json!({"user": "admin", "password": "hunter2-marker"});
        let sealed = ring(&[old]).seal_properties(&secrets, &props, None).unwrap();
        assert!(!sealed.to_string().contains("hunter2-marker"));
        assert_eq!(sealed["user"], "admin");
        // After a rotation the old key still opens what it sealed.
        let rotated = ring(&[new, old]);
        assert_eq!(rotated.open_properties(&sealed).unwrap(), props);
        // Without the old key: a clear error, never the plaintext.
        let e = ring(&[new]).open_properties(&sealed).unwrap_err().to_string();
        assert!(e.contains("not configured"), "{e}");
        // Moved to another property: the associated data no longer matches.
        let moved = json!({"other": sealed["password"].clone()});
        assert!(rotated.open_properties(&moved).unwrap_err().to_string().contains("tampered"));
    }

    #[test]
    fn an_unchanged_secret_keeps_its_stored_sealed_value() {
        let k = ring(&[Keyring::generate_key()]);
        let secrets = vec!["password".to_string()];
        let first = k.seal_properties(&secrets, &json!({"password": "a"}), None).unwrap();
        let again = k.seal_properties(&secrets, &json!({"password": "a"}), Some(&first)).unwrap();
        assert_eq!(first, again, "same plaintext: same bytes, so the config version stays");
        let changed = k.seal_properties(&secrets, &json!({"password": "b"}), Some(&first)).unwrap();
        assert_ne!(first, changed);
        // Clients never see sealed values.
        let shown = without_secrets(changed.as_object().unwrap());
        assert!(shown.is_empty());
    }

    #[test]
    fn schemas_mark_secrets_and_key_files_are_checked() {
        let schema = json!({"properties": {"a": {"type": "string", "writeOnly": true}, "b": {"x-slipway-secret": true}, "c": {}}});
        assert_eq!(secret_properties(&schema), vec!["a".to_string(), "b".to_string()]);
        let dir = std::env::temp_dir().join(format!("slipway-secrets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("k");
        std::fs::write(&path, "00".repeat(32)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(Keyring::from_files(std::slice::from_ref(&path)).unwrap_err().to_string().contains("chmod 600"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Keyring::from_files(std::slice::from_ref(&path)).is_ok());
        std::fs::write(&path, "short").unwrap();
        let e = Keyring::from_files(std::slice::from_ref(&path)).unwrap_err().to_string();
        assert!(e.contains("hex") && !e.contains("short"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
