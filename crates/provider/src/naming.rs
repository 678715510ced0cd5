//! The naming rule every provider shares for its playbooks and templates: an explicit name
//! unless it is blank, else the convention `{prefix}-{word}-{kebab(kind)}`. One rule, so one kind
//! names the same job in the local provider and in AAP.

use std::collections::HashMap;

use crate::JobAction;

/// Kebab-case a resource kind the way OSAC (go-strcase) does, so one kind names the same
/// playbook or template in every provider: `VirtualNetwork` → `virtual-network`,
/// `PublicIPPool` → `public-ip-pool`, `NATGateway` → `nat-gateway`.
///
/// A `-` goes before an uppercase letter that follows a lowercase one, or that follows an
/// uppercase one and is followed by a lowercase one (the last capital of an acronym starts
/// the next word).
pub fn kebab(kind: &str) -> String {
    let chars: Vec<char> = kind.chars().collect();
    let mut out = String::with_capacity(kind.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || (prev.is_uppercase() && next_is_lower) {
                out.push('-');
            }
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Explicit playbook or template names: kind → job word (`create`, `delete`, `validate`, an
/// action's name) → name.
pub type ExplicitNames = HashMap<String, HashMap<String, String>>;

/// The explicit name configured for `kind` and `action`, if any. A blank one (empty or only
/// whitespace) counts as not given, so the convention applies: the rule every provider
/// shares (with [`conventional_name`]), the same for playbooks and templates.
pub fn explicit_name<'a>(names: &'a ExplicitNames, kind: &str, action: &JobAction) -> Option<&'a str> {
    names.get(kind)?.get(action.as_str()).map(String::as_str).filter(|n| !n.trim().is_empty())
}

/// The conventional name of the job that runs `action` (`create` / `delete`):
/// `{prefix}-{action}-{suffix}`, or `{action}-{suffix}` without a prefix (or with an empty
/// one). `suffix` is normally [`kebab`] of the kind; a provider may substitute its own (the AAP
/// kind overrides) or append to the name (the ansible `.yml`).
pub fn conventional_name(prefix: Option<&str>, action: &str, suffix: &str) -> String {
    match prefix {
        Some(p) if !p.is_empty() => format!("{p}-{action}-{suffix}"),
        _ => format!("{action}-{suffix}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kebab_matches_go_strcase() {
        for (kind, want) in [
            ("VirtualNetwork", "virtual-network"),
            ("Subnet", "subnet"),
            ("SecurityGroup", "security-group"),
            ("ComputeInstance", "compute-instance"),
            ("PublicIPPool", "public-ip-pool"),
            ("PublicIP", "public-ip"),
            ("NATGateway", "nat-gateway"),
            ("ExternalIPPool", "external-ip-pool"),
        ] {
            assert_eq!(kebab(kind), want, "{kind}");
        }
    }

    /// The naming rule both providers share: the explicit name unless blank, else
    /// `{prefix}-{action}-{kebab(kind)}`.
    #[test]
    fn job_names() {
        let names: ExplicitNames = [
            ("Subnet", vec![("create", "my-subnet")]),
            ("SecurityGroup", vec![("create", ""), ("delete", "  ")]),
            ("PublicIPPool", vec![("create", "\t\n"), ("delete", " rm pool ")]),
            ("ComputeInstance", vec![("restart", "reboot-vm")]),
        ]
        .into_iter()
        .map(|(kind, names)| (kind.to_owned(), names.into_iter().map(|(w, n)| (w.to_owned(), n.to_owned())).collect()))
        .collect();
        let name = |prefix: Option<&str>, kind: &str, action: &JobAction| {
            explicit_name(&names, kind, action)
                .map(str::to_owned)
                .unwrap_or_else(|| conventional_name(prefix, action.as_str(), &kebab(kind)))
        };
        let run = |name: &str| JobAction::Run(name.to_owned());
        for (prefix, kind, action, want) in [
            // Explicit names win, per action; the other action keeps the convention.
            (Some("osac"), "Subnet", JobAction::Create, "my-subnet"),
            (Some("osac"), "Subnet", JobAction::Delete, "osac-delete-subnet"),
            // Blank explicit names are not given: the convention applies.
            (Some("osac"), "SecurityGroup", JobAction::Create, "osac-create-security-group"),
            (Some("osac"), "SecurityGroup", JobAction::Delete, "osac-delete-security-group"),
            (None, "PublicIPPool", JobAction::Create, "create-public-ip-pool"),
            // A non-blank explicit name is used as configured.
            (None, "PublicIPPool", JobAction::Delete, " rm pool "),
            // No explicit names for the kind; no prefix, or an empty one.
            (Some("slipway"), "VirtualNetwork", JobAction::Create, "slipway-create-virtual-network"),
            (None, "VirtualNetwork", JobAction::Delete, "delete-virtual-network"),
            (Some(""), "NATGateway", JobAction::Create, "create-nat-gateway"),
            // Preflight checks and actions follow the same rule, by their word.
            (None, "ComputeInstance", JobAction::Validate, "validate-compute-instance"),
            (None, "ComputeInstance", run("restart"), "reboot-vm"),
            (Some("osac"), "ComputeInstance", run("stop"), "osac-stop-compute-instance"),
        ] {
            assert_eq!(name(prefix, kind, &action), want, "{prefix:?} {kind} {action:?}");
        }
        assert_eq!(conventional_name(Some("p"), "create", "hosted-cluster"), "p-create-hosted-cluster");
    }
}
