//! Where the local provider's programs are — `ansible-runner`, and a pinned Python when one is
//! configured — in one documented order, so that the same configuration finds them from any
//! working directory: a path (it has a `/`) is taken as written, resolved against the
//! configuration's directory; a bare name is looked for in the `.venv/bin` of the
//! configuration's directory and of each directory above it, nearest first (the checkout's
//! `.venv` for `examples/slipway.toml`), then in each directory on `PATH`. Not finding it
//! names every path tried.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The paths to try for `configured`, in order, each once.
pub(super) fn candidates(configured: &Path, config_dir: &Path, path_var: Option<&OsStr>) -> Vec<PathBuf> {
    if configured.components().count() != 1 || configured.is_absolute() {
        let path = if configured.is_absolute() { configured.to_path_buf() } else { config_dir.join(configured) };
        return vec![path];
    }
    let beside = config_dir.ancestors().map(|dir| dir.join(".venv/bin").join(configured));
    let on_path = path_var.into_iter().flat_map(std::env::split_paths).map(|dir| dir.join(configured));
    let mut tried: Vec<PathBuf> = Vec::new();
    for p in beside.chain(on_path) {
        if !tried.contains(&p) {
            tried.push(p);
        }
    }
    tried
}

/// The first of [`candidates`] that is an executable file, made absolute (not canonical: a
/// venv's `bin` must stay the venv's, though its `python` links outside it); else what was
/// tried, for the problem's text.
pub(super) fn find(
    key: &str,
    configured: &Path,
    config_dir: &Path,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, String> {
    let config_dir = std::path::absolute(config_dir).unwrap_or_else(|_| config_dir.to_path_buf());
    let tried = candidates(configured, &config_dir, path_var);
    if let Some(found) = tried.iter().find(|p| is_executable(p)) {
        return Ok(found.clone());
    }
    let list: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
    Err(format!(
        "{key} = \"{}\": no executable found; tried {} (docs/install.md: a venv beside the configuration, or \
         {key} set to its path)",
        configured.display(),
        if list.is_empty() { "nothing".to_string() } else { list.join(", ") }
    ))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_the_only_candidate_and_a_bare_name_tries_venvs_upwards_then_path() {
        let dir = Path::new("/srv/slipway/conf");
        assert_eq!(candidates(Path::new("/opt/runner"), dir, None), [PathBuf::from("/opt/runner")]);
        assert_eq!(candidates(Path::new("bin/runner"), dir, None), [dir.join("bin/runner")]);
        assert_eq!(candidates(Path::new("./runner"), dir, None), [dir.join("./runner")]);
        let path = std::ffi::OsString::from("/usr/local/bin:/usr/bin:/usr/local/bin");
        let tried: Vec<String> =
            candidates(Path::new("ansible-runner"), dir, Some(&path)).iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            tried,
            [
                "/srv/slipway/conf/.venv/bin/ansible-runner",
                "/srv/slipway/.venv/bin/ansible-runner",
                "/srv/.venv/bin/ansible-runner",
                "/.venv/bin/ansible-runner",
                "/usr/local/bin/ansible-runner",
                "/usr/bin/ansible-runner",
            ]
        );
    }

    #[test]
    fn the_nearest_venv_wins_and_not_finding_names_every_path_tried() {
        let root = tempfile::tempdir().unwrap();
        let conf = root.path().join("a/b");
        let on_path = root.path().join("bin");
        for dir in [conf.join(".venv/bin"), root.path().join("a/.venv/bin"), on_path.clone()] {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let make = |p: &Path| {
            std::fs::write(p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        let path_var = on_path.clone().into_os_string();
        make(&on_path.join("tool"));
        assert_eq!(find("runner", Path::new("tool"), &conf, Some(&path_var)), Ok(on_path.join("tool")));
        make(&root.path().join("a/.venv/bin/tool"));
        assert_eq!(find("runner", Path::new("tool"), &conf, Some(&path_var)), Ok(root.path().join("a/.venv/bin/tool")));
        // Not executable: passed over.
        std::fs::write(conf.join(".venv/bin/tool"), "").unwrap();
        assert_eq!(find("runner", Path::new("tool"), &conf, Some(&path_var)), Ok(root.path().join("a/.venv/bin/tool")));

        let err = find("runner", Path::new("missing"), &conf, Some(&path_var)).unwrap_err();
        for tried in [conf.join(".venv/bin/missing"), root.path().join("a/.venv/bin/missing"), on_path.join("missing")]
        {
            assert!(err.contains(&tried.display().to_string()), "{err}");
        }
        assert!(err.starts_with("runner = \"missing\": no executable found; tried "), "{err}");
    }
}
