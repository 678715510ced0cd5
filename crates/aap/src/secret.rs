//! Credentials that never show up in logs, errors or status.

use std::fmt;
use std::path::Path;

/// A credential (token or password). `Debug` and `Display` print `***`; the value is only
/// reachable through [`Secret::expose`], which the HTTP layer calls to build the
/// `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

/// Why a secret could not be read. Messages name where it was looked for, never its value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read secret file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("environment variable {0} is not set or not valid UTF-8")]
    Env(String),
    #[error("secret from {0} is empty")]
    Empty(String),
}

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// Reads a secret file; surrounding whitespace (a trailing newline) is dropped.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, SecretError> {
        let path = path.as_ref();
        let raw = std::fs::read_to_string(path)
            .map_err(|e| SecretError::File { path: path.display().to_string(), reason: e.kind().to_string() })?;
        Self::non_empty(raw.trim().to_owned(), || path.display().to_string())
    }

    /// Reads a secret from an environment variable; surrounding whitespace is dropped.
    pub fn from_env(var: &str) -> Result<Self, SecretError> {
        let raw = std::env::var(var).map_err(|_| SecretError::Env(var.to_owned()))?;
        Self::non_empty(raw.trim().to_owned(), || format!("${var}"))
    }

    fn non_empty(value: String, source: impl FnOnce() -> String) -> Result<Self, SecretError> {
        if value.is_empty() { Err(SecretError::Empty(source())) } else { Ok(Secret(value)) }
    }

    /// The plain value. Only for building credentials on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Standard base64 (RFC 4648, padded), for the Basic `Authorization` header.
pub(crate) fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_print_as_stars() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some(***)");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn from_file_trims_and_never_echoes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, "tok-123\n").unwrap();
        assert_eq!(Secret::from_file(&p).unwrap().expose(), "tok-123");
        std::fs::write(&p, "  \n").unwrap();
        let e = Secret::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = Secret::from_file(dir.path().join("missing")).unwrap_err().to_string();
        assert!(e.contains("missing") && e.contains("cannot read"), "{e}");
    }

    #[test]
    fn from_env_reads_and_never_echoes() {
        // A variable name unique to this test: the test binary runs tests in parallel.
        assert!(matches!(Secret::from_env("SLIPWAY_AAP_TEST_SURELY_UNSET_VAR"), Err(SecretError::Env(_))));
        let path = std::env::var("PATH").unwrap();
        assert_eq!(Secret::from_env("PATH").unwrap().expose(), path.trim());
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
            ("admin:p@ss", "YWRtaW46cEBzcw=="),
        ] {
            assert_eq!(base64(i.as_bytes()), o, "{i}");
        }
    }
}
