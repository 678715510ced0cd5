//! An exclusive hold on one idempotency key's job directory across processes that share the
//! work dir (several Slipway processes on one host). Within a process the provider's launch
//! lock already serialises launches and finds; between processes nothing else would: a
//! process paused after preparing a job directory could otherwise have it replaced and
//! launched by another, then spawn into it when it resumes — two runners for one key.
//!
//! The hold is an advisory `flock` on `{work_dir}/.locks/{name}`: taken without waiting
//! (a key held elsewhere makes the caller answer "outcome unknown", and the engine looks
//! again later), released when dropped, and by the kernel when its process dies.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use slipway_provider::ProviderError;

/// Held while a launch or a find of the key is under way.
#[derive(Debug)]
pub(crate) struct KeyLock {
    _file: File,
}

impl KeyLock {
    /// Blocking (file I/O).
    pub(crate) fn try_take(work_dir: &Path, name: &str) -> Result<KeyLock, ProviderError> {
        let dir = work_dir.join(".locks");
        let unavailable = |e: std::io::Error| {
            ProviderError::Transient(format!("cannot take the launch lock of job {name} in {}: {e}", dir.display()))
        };
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(unavailable(e)),
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(dir.join(name))
            .map_err(unavailable)?;
        match file.try_lock() {
            Ok(()) => Ok(KeyLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(ProviderError::Indeterminate(format!(
                "another process sharing the work dir is launching or looking for job {name}"
            ))),
            Err(TryLockError::Error(e)) => Err(unavailable(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let held = KeyLock::try_take(dir.path(), "k_1").unwrap();
        assert!(matches!(KeyLock::try_take(dir.path(), "k_1"), Err(ProviderError::Indeterminate(_))));
        let other = KeyLock::try_take(dir.path(), "k_2").expect("another key is independent");
        drop(held);
        KeyLock::try_take(dir.path(), "k_1").expect("free again once dropped");
        drop(other);
    }
}
