//! Pure naming rules: which AAP template a request runs. The rule is the one every provider
//! shares (`slipway_provider::{explicit_name, conventional_name}`: an explicit name unless
//! blank, else `{prefix}-{action}-{kebab(kind)}`); AAP's own are the per-kind suffix overrides
//! and refusing to derive a name for a resource without a kind.

use std::collections::HashMap;

use slipway_provider::{ExplicitNames, JobAction, conventional_name, explicit_name};

pub use slipway_provider::kebab;

/// Template naming configuration of one provider instance.
#[derive(Clone, Debug, Default)]
pub struct TemplateNaming {
    pub prefix: Option<String>,
    /// Explicit names per kind and job word; they win over the convention.
    pub templates: ExplicitNames,
    /// Per-kind suffix replacing `kebab(kind)` (OSAC: `ClusterOrder` → `hosted-cluster`).
    pub kind_overrides: HashMap<String, String>,
}

impl TemplateNaming {
    /// The template name for `kind`/`action`: the explicit name (unless blank), else
    /// `{prefix}-{action}-{suffix}` (`{action}-{suffix}` without a prefix), where suffix is
    /// the kind override or `kebab(kind)`.
    pub fn template_name(&self, kind: &str, action: &JobAction) -> Result<String, String> {
        if let Some(name) = explicit_name(&self.templates, kind, action) {
            return Ok(name.to_owned());
        }
        if kind.is_empty() {
            return Err(format!("the resource has no kind; cannot derive the {} template name", action.as_str()));
        }
        let suffix = self.kind_overrides.get(kind).cloned().unwrap_or_else(|| kebab(kind));
        Ok(conventional_name(self.prefix.as_deref(), action.as_str(), &suffix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osac_template_names() {
        let mut n = TemplateNaming { prefix: Some("osac".into()), ..Default::default() };
        n.kind_overrides.insert("ClusterOrder".into(), "hosted-cluster".into());
        n.templates.insert("ComputeInstance".into(), [("create".to_owned(), "my-ci-create".to_owned())].into());
        let name = |k: &str, a: JobAction| n.template_name(k, &a).unwrap();
        assert_eq!(name("VirtualNetwork", JobAction::Create), "osac-create-virtual-network");
        assert_eq!(name("Subnet", JobAction::Delete), "osac-delete-subnet");
        assert_eq!(name("SecurityGroup", JobAction::Create), "osac-create-security-group");
        assert_eq!(name("ClusterOrder", JobAction::Create), "osac-create-hosted-cluster");
        assert_eq!(name("ClusterOrder", JobAction::Delete), "osac-delete-hosted-cluster");
        // Explicit create, delete from the convention (mixing is allowed).
        assert_eq!(name("ComputeInstance", JobAction::Create), "my-ci-create");
        assert_eq!(name("ComputeInstance", JobAction::Delete), "osac-delete-compute-instance");
        let e = n.template_name("", &JobAction::Create).unwrap_err();
        assert!(e.contains("no kind"), "{e}");
    }

    #[test]
    fn names_without_prefix() {
        let n = TemplateNaming::default();
        assert_eq!(n.template_name("PublicIPPool", &JobAction::Delete).unwrap(), "delete-public-ip-pool");
        let n = TemplateNaming { prefix: Some(String::new()), ..Default::default() };
        assert_eq!(n.template_name("Subnet", &JobAction::Create).unwrap(), "create-subnet");
    }

    #[test]
    fn blank_explicit_name_falls_back_to_convention() {
        let mut n = TemplateNaming { prefix: Some("osac".into()), ..Default::default() };
        n.templates.insert(
            "Subnet".into(),
            [("create".to_owned(), " ".to_owned()), ("delete".to_owned(), "rm-subnet".to_owned())].into(),
        );
        assert_eq!(n.template_name("Subnet", &JobAction::Create).unwrap(), "osac-create-subnet");
        assert_eq!(n.template_name("Subnet", &JobAction::Delete).unwrap(), "rm-subnet");
    }
}
