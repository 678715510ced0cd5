//! Pure naming rules: playbook names from resource kinds, job directory names from
//! idempotency keys. Playbook names follow the rule every provider shares
//! (`slipway_provider::{explicit_name, conventional_name}`); the ansible provider's own part is
//! the `.yml` file name (and that the file must exist, checked at launch).

pub use slipway_provider::kebab;
use slipway_provider::{ExplicitNames, JobAction, conventional_name, explicit_name};

/// The conventional playbook file name: `{prefix}-{action}-{kebab(kind)}.yml`
/// (`{action}-{kebab(kind)}.yml` without a prefix).
pub fn conventional_playbook(prefix: Option<&str>, action: &str, kind: &str) -> String {
    format!("{}.yml", conventional_name(prefix, action, &kebab(kind)))
}

/// The playbook that runs `action` for `kind`: the explicit name (a blank one counts as not
/// given), else the conventional one.
pub fn playbook_name(playbooks: &ExplicitNames, prefix: Option<&str>, kind: &str, action: &JobAction) -> String {
    explicit_name(playbooks, kind, action)
        .map(str::to_owned)
        .unwrap_or_else(|| conventional_playbook(prefix, action.as_str(), kind))
}

/// Longest idempotency key we accept; keeps the directory name far below NAME_MAX (255).
pub const MAX_KEY_CHARS: usize = 200;

/// The job directory name for an idempotency key (`<uuid>:<n>` → `<uuid>_<n>`), or `None`
/// when the key cannot name a directory (empty or too long).
///
/// Every character outside `[A-Za-z0-9._-]` becomes `_`, so the name is one plain path
/// component; a leading `.` also becomes `_` so no key can name `.`, `..` or a hidden dir.
pub fn job_dir_name(key: &str) -> Option<String> {
    let len = key.chars().count();
    if len == 0 || len > MAX_KEY_CHARS {
        return None;
    }
    let mut name: String =
        key.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect();
    if name.starts_with('.') {
        name.replace_range(0..1, "_");
    }
    Some(name)
}

/// Whether `name` is something [`job_dir_name`] could have produced (a handle's job id is
/// joined onto the work dir, so it must never contain a separator or be `..`).
pub fn is_job_dir_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_KEY_CHARS
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conventional_names() {
        assert_eq!(
            conventional_playbook(Some("slipway"), "create", "VirtualNetwork"),
            "slipway-create-virtual-network.yml"
        );
        assert_eq!(conventional_playbook(None, "delete", "PublicIPPool"), "delete-public-ip-pool.yml");
        assert_eq!(conventional_playbook(Some(""), "create", "Subnet"), "create-subnet.yml");
    }

    #[test]
    fn key_sanitising() {
        assert_eq!(
            job_dir_name("0b9d1f3e-52a4-4c38-9d7e-1f1b7a1c2d3e:2").as_deref(),
            Some("0b9d1f3e-52a4-4c38-9d7e-1f1b7a1c2d3e_2")
        );
        assert_eq!(job_dir_name("a/b\\c d").as_deref(), Some("a_b_c_d"));
        assert_eq!(job_dir_name("..").as_deref(), Some("_."));
        assert_eq!(job_dir_name(".hidden").as_deref(), Some("_hidden"));
        assert_eq!(job_dir_name("op.1_x-y").as_deref(), Some("op.1_x-y"));
        assert_eq!(job_dir_name("é:1").as_deref(), Some("__1"));
        assert_eq!(job_dir_name(""), None);
        assert_eq!(job_dir_name(&"k".repeat(MAX_KEY_CHARS + 1)), None);
        assert!(job_dir_name(&"k".repeat(MAX_KEY_CHARS)).is_some());
    }

    #[test]
    fn job_dir_names_are_single_components() {
        for key in ["a:1", "..", "../../etc", "/abs", ".x"] {
            let name = job_dir_name(key).unwrap();
            assert!(is_job_dir_name(&name), "{name}");
            assert!(!name.contains('/'));
            assert_ne!(name, "..");
        }
        assert!(!is_job_dir_name(".."));
        assert!(!is_job_dir_name("a/b"));
        assert!(!is_job_dir_name(""));
    }
}
