//! Which resource a command means — a full id, or `--type Namespace/type --name n` with the
//! profile's subscription and resource group — and the api-version to ask it with: the
//! type's newest, from its namespace's discovery document, unless `--api-version` says.

use clap::Args;
use serde_json::Value;

use crate::client::{Client, PLATFORM_API, segment};
use crate::error::CliError;
use crate::profile::Settings;

#[derive(Args, Clone, Debug, Default)]
pub struct ResourceArgs {
    /// The resource's full id (`/subscriptions/…/providers/Ns/type/name`).
    #[arg(value_name = "ID", conflicts_with_all = ["resource_type", "name"])]
    pub id: Option<String>,
    /// The type, `Namespace/type` (a child: `Namespace/parent/child`), with --name.
    #[arg(long = "type", short = 't', requires = "name")]
    pub resource_type: Option<String>,
    /// The name (a child: `parent/child`), with --type.
    #[arg(long, short = 'n', requires = "resource_type")]
    pub name: Option<String>,
    /// The api-version to use instead of the type's newest.
    #[arg(long)]
    pub api_version: Option<String>,
}

/// A resource id taken apart.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceId {
    pub subscription: String,
    pub resource_group: String,
    pub namespace: String,
    /// `type` or `parent/child`.
    pub type_path: String,
    pub id: String,
}

impl ResourceId {
    pub fn parse(id: &str) -> Result<ResourceId, CliError> {
        let bad = || {
            CliError::Usage(format!(
                "'{id}' is not a resource id (/subscriptions/…/resourceGroups/…/providers/Ns/type/name)"
            ))
        };
        let parts: Vec<&str> = id.trim_end_matches('/').split('/').collect();
        let is = |i: usize, word: &str| parts.get(i).is_some_and(|p| p.eq_ignore_ascii_case(word));
        if !(parts.first() == Some(&"") && is(1, "subscriptions") && is(3, "resourceGroups") && is(5, "providers")) {
            return Err(bad());
        }
        let pairs = parts.get(7..).unwrap_or_default();
        if pairs.is_empty() || pairs.len() % 2 != 0 || pairs.iter().any(|p| p.is_empty()) {
            return Err(bad());
        }
        let types: Vec<&str> = pairs.iter().step_by(2).copied().collect();
        Ok(ResourceId {
            subscription: parts[2].to_string(),
            resource_group: parts[4].to_string(),
            namespace: parts[6].to_string(),
            type_path: types.join("/"),
            id: parts.join("/"),
        })
    }

    /// From `--type Ns/type[/child]` and `--name n[/child]`.
    pub fn build(subscription: &str, group: &str, resource_type: &str, name: &str) -> Result<ResourceId, CliError> {
        let (namespace, types) = resource_type
            .split_once('/')
            .ok_or_else(|| CliError::Usage(format!("--type '{resource_type}' is not Namespace/type")))?;
        let types: Vec<&str> = types.split('/').collect();
        let names: Vec<&str> = name.split('/').collect();
        if types.len() != names.len() || types.iter().chain(&names).any(|s| s.is_empty()) {
            return Err(CliError::Usage(format!(
                "--type '{resource_type}' has {} type segment(s) but --name '{name}' has {} name(s)",
                types.len(),
                names.len()
            )));
        }
        let mut id =
            format!("/subscriptions/{}/resourceGroups/{}/providers/{namespace}", segment(subscription), segment(group));
        for (t, n) in types.iter().zip(&names) {
            id.push_str(&format!("/{t}/{}", segment(n)));
        }
        ResourceId::parse(&id)
    }
}

/// A resource and the api-version to speak to it with.
#[derive(Clone, Debug)]
pub struct Address {
    pub resource: ResourceId,
    pub api_version: String,
}

impl ResourceArgs {
    pub fn resource_id(&self, settings: &Settings) -> Result<ResourceId, CliError> {
        match (&self.id, &self.resource_type, &self.name) {
            (Some(id), _, _) => ResourceId::parse(id),
            (None, Some(t), Some(n)) => ResourceId::build(settings.subscription()?, settings.resource_group()?, t, n),
            _ => Err(CliError::Usage("name the resource: its ID, or --type and --name".into())),
        }
    }

    pub async fn resolve(&self, settings: &Settings, client: &Client) -> Result<Address, CliError> {
        let resource = self.resource_id(settings)?;
        let api_version = match &self.api_version {
            Some(v) => v.clone(),
            None => api_version_of(client, &resource.namespace, &resource.type_path).await?,
        };
        Ok(Address { resource, api_version })
    }
}

/// The namespace's discovery document (`GET /providers/{ns}`).
pub async fn discovery(client: &Client, namespace: &str) -> Result<Value, CliError> {
    client.get(&format!("/providers/{}", segment(namespace)), PLATFORM_API).await
}

/// The type's entry in a discovery document, matched as ARM matches types: ignoring case.
pub fn type_entry<'a>(discovery: &'a Value, type_path: &str) -> Option<&'a Value> {
    discovery["resourceTypes"]
        .as_array()?
        .iter()
        .find(|t| t["resourceType"].as_str().is_some_and(|name| name.eq_ignore_ascii_case(type_path)))
}

/// The type's newest api-version (discovery lists them newest first).
pub async fn api_version_of(client: &Client, namespace: &str, type_path: &str) -> Result<String, CliError> {
    let doc = discovery(client, namespace).await?;
    type_entry(&doc, type_path)
        .and_then(|t| t["apiVersions"].as_array()?.first()?.as_str().map(str::to_string))
        .ok_or_else(|| CliError::Usage(format!("the server serves no type '{namespace}/{type_path}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUB: &str = "11111111-1111-1111-1111-111111111111";

    #[test]
    fn an_id_names_its_namespace_and_nested_type() {
        let id = format!("/subscriptions/{SUB}/resourceGroups/rg/providers/Ns/nets/n1/subnets/s1");
        let r = ResourceId::parse(&id).unwrap();
        assert_eq!(
            (r.namespace.as_str(), r.type_path.as_str(), r.resource_group.as_str()),
            ("Ns", "nets/subnets", "rg")
        );
        assert!(ResourceId::parse("/subscriptions/x/resourceGroups/rg/providers/Ns/nets").is_err());
        assert!(ResourceId::parse("nets/n1").is_err());
    }

    #[test]
    fn type_and_name_build_the_same_id() {
        let r = ResourceId::build(SUB, "rg", "Ns/nets/subnets", "n1/s 1").unwrap();
        assert_eq!(r.id, format!("/subscriptions/{SUB}/resourceGroups/rg/providers/Ns/nets/n1/subnets/s%201"));
        assert!(ResourceId::build(SUB, "rg", "Ns/nets/subnets", "n1").is_err());
        assert!(ResourceId::build(SUB, "rg", "nets", "n1").is_err());
    }

    #[test]
    fn discovery_matches_types_ignoring_case() {
        let doc = serde_json::json!({"resourceTypes": [{"resourceType": "virtualNetworks", "apiVersions": ["2"]}]});
        assert!(type_entry(&doc, "VirtualNetworks").is_some());
        assert!(type_entry(&doc, "subnets").is_none());
    }
}
