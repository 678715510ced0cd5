//! Which resource a command means — a full id, or `--type Namespace/type --name n` with the
//! profile's subscription and resource group — and the api-version to ask it with: the
//! type's newest, from its namespace's discovery document, unless `--api-version` says.

use clap::Args;
use serde_json::Value;
use slipway_domain::ArmId;

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

/// A resource id, checked by the server's own grammar (`slipway_domain::ids`), so a
/// mistyped id is refused here with the reason the server would give.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceId {
    pub arm: ArmId,
    /// The id as a request path, each segment percent-encoded.
    pub id: String,
}

impl ResourceId {
    /// An id as a user writes it, percent-encoded or not.
    pub fn parse(id: &str) -> Result<ResourceId, CliError> {
        let decoded = percent_encoding::percent_decode_str(id).decode_utf8_lossy();
        let arm = ArmId::parse(&decoded).map_err(|e| {
            CliError::Usage(format!(
                "'{id}' is not a resource id (/subscriptions/…/resourceGroups/…/providers/Ns/type/name): {e}"
            ))
        })?;
        Ok(ResourceId::of(arm))
    }

    /// From `--type Ns/type[/child]` and `--name n[/child]`.
    pub fn build(subscription: &str, group: &str, resource_type: &str, name: &str) -> Result<ResourceId, CliError> {
        let (namespace, types) = resource_type
            .split_once('/')
            .ok_or_else(|| CliError::Usage(format!("--type '{resource_type}' is not Namespace/type")))?;
        let types: Vec<&str> = types.split('/').collect();
        let names: Vec<&str> = name.split('/').collect();
        if types.len() != names.len() {
            return Err(CliError::Usage(format!(
                "--type '{resource_type}' has {} type segment(s) but --name '{name}' has {} name(s)",
                types.len(),
                names.len()
            )));
        }
        let pairs: Vec<&str> = types.iter().zip(&names).flat_map(|(t, n)| [*t, *n]).collect();
        let arm = ArmId::from_segments(subscription, group, namespace, &pairs)
            .map_err(|e| CliError::Usage(format!("--type '{resource_type}' --name '{name}': {e}")))?;
        Ok(ResourceId::of(arm))
    }

    fn of(arm: ArmId) -> ResourceId {
        let mut id = format!(
            "/subscriptions/{}/resourceGroups/{}/providers/{}",
            segment(&arm.subscription),
            segment(&arm.resource_group),
            arm.namespace
        );
        let names = arm.parent_names.iter().chain(std::iter::once(&arm.name));
        for (t, n) in arm.type_name.split('/').zip(names) {
            id.push_str(&format!("/{t}/{}", segment(n)));
        }
        ResourceId { arm, id }
    }

    pub fn namespace(&self) -> &str {
        &self.arm.namespace
    }

    /// The type below the namespace: `type`, or `parent/child`.
    pub fn type_path(&self) -> &str {
        &self.arm.type_name
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
            None => api_version_of(client, resource.namespace(), resource.type_path()).await?,
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
        let id = format!("/subscriptions/{SUB}/resourceGroups/rg/providers/Ns.A/nets/n1/subnets/s1");
        let r = ResourceId::parse(&id).unwrap();
        assert_eq!((r.namespace(), r.type_path(), r.arm.resource_group.as_str()), ("Ns.A", "nets/subnets", "rg"));
        assert_eq!(r.id, id);
        assert!(ResourceId::parse(&format!("/subscriptions/{SUB}/resourceGroups/rg/providers/Ns.A/nets")).is_err());
        assert!(ResourceId::parse("nets/n1").is_err());
        let not_a_guid = ResourceId::parse("/subscriptions/x/resourceGroups/rg/providers/Ns.A/nets/n1").unwrap_err();
        assert!(not_a_guid.to_string().contains("not a GUID"), "the server's reason: {not_a_guid}");
        let encoded = ResourceId::parse(&format!("/subscriptions/{SUB}/resourceGroups/rg/providers/Ns.A/nets/n%201"));
        assert_eq!(encoded.unwrap().arm.name, "n 1", "a percent-encoded name is read decoded");
    }

    #[test]
    fn type_and_name_build_the_same_id() {
        let r = ResourceId::build(SUB, "rg", "Ns.A/nets/subnets", "n1/s 1").unwrap();
        assert_eq!(r.id, format!("/subscriptions/{SUB}/resourceGroups/rg/providers/Ns.A/nets/n1/subnets/s%201"));
        assert!(ResourceId::build(SUB, "rg", "Ns.A/nets/subnets", "n1").is_err());
        assert!(ResourceId::build(SUB, "rg", "nets", "n1").is_err());
    }

    #[test]
    fn discovery_matches_types_ignoring_case() {
        let doc = serde_json::json!({"resourceTypes": [{"resourceType": "virtualNetworks", "apiVersions": ["2"]}]});
        assert!(type_entry(&doc, "VirtualNetworks").is_some());
        assert!(type_entry(&doc, "subnets").is_none());
    }
}
