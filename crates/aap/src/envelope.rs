//! The `extra_vars` a launched job receives.

use serde_json::{Map, Value, json};
use slipway_domain::OperationId;
use slipway_provider::LaunchRequest;

pub use slipway_provider::KEY_VAR;

/// `apiVersion` of the OSAC-compatible payload (the OSAC CRDs' group/version).
pub const OSAC_API_VERSION: &str = "osac.openshift.io/v1alpha1";

/// Annotations Slipway adds to the OSAC payload's `metadata.annotations` (tags go there too).
pub const ANNOTATION_RESOURCE_ID: &str = "slipway.io/resource-id";
pub const ANNOTATION_RESOURCE_TYPE: &str = "slipway.io/resource-type";
pub const ANNOTATION_LOCATION: &str = "slipway.io/location";
pub const ANNOTATION_OPERATION_ID: &str = "slipway.io/operation-id";
pub const ANNOTATION_ACTION: &str = "slipway.io/action";
pub const ANNOTATION_CONFIG_VERSION: &str = "slipway.io/config-version";
pub const ANNOTATION_IDEMPOTENCY_KEY: &str = "slipway.io/idempotency-key";

/// How the resource is handed to the playbook.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Envelope {
    /// `{"slipway": {"resource": {…}, "operationId", "action", "configVersion",
    /// "idempotencyKey"}, "slipway_idempotency_key": key}` — the local provider's shape.
    #[default]
    Slipway,
    /// `{"ansible_eda": {"event": {"payload": <Kubernetes-style object>}},
    /// "slipway_idempotency_key": key, "slipway_requested_by", "slipway_tenant",
    /// "slipway_action", "slipway_parameters", …}` — for
    /// playbooks written for OSAC (docs/providers.md#launch).
    OsacEda,
}

/// The `extra_vars` object for a launch.
pub fn extra_vars(envelope: Envelope, r: &LaunchRequest) -> Value {
    match envelope {
        Envelope::Slipway => Value::Object(slipway_provider::slipway_extra_vars(r)),
        Envelope::OsacEda => json!({
            "ansible_eda": { "event": { "payload": osac_payload(r) } },
            KEY_VAR: r.idempotency_key.as_str(),
            "slipway_requested_by": r.context.as_ref().map(|c| slipway_provider::requested_by(&c.requested_by)),
            "slipway_tenant": r.context.as_ref().and_then(|c| c.tenant.as_ref()).map(slipway_provider::tenant),
            "slipway_secrets": r.secrets,
            "slipway_parent": r.parent.as_ref().map(slipway_provider::RelatedResource::extra_vars),
            "slipway_references": r.references,
            "slipway_action": r.action.as_str(),
            "slipway_parameters": r.parameters,
        }),
    }
}

/// The Kubernetes-style object OSAC playbooks read as `ansible_eda.event.payload`:
/// `metadata.name` = resource name, `metadata.namespace` = resource group, tags become
/// annotations (string values as they are, others as JSON text) next to `slipway.io/*`
/// annotations describing the request (Slipway's win on a clash), `spec` = properties,
/// `status.outputs` = what earlier jobs reported.
fn osac_payload(r: &LaunchRequest) -> Value {
    let mut annotations = Map::new();
    for (k, v) in &r.tags {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        annotations.insert(k.clone(), Value::String(text));
    }
    let mut put = |k: &str, v: Option<&str>| {
        if let Some(v) = v {
            annotations.insert(k.to_owned(), Value::String(v.to_owned()));
        }
    };
    put(ANNOTATION_RESOURCE_ID, Some(&r.resource_id.to_string()));
    put(ANNOTATION_RESOURCE_TYPE, Some(&r.resource_type));
    put(ANNOTATION_LOCATION, r.location.as_deref());
    put(ANNOTATION_OPERATION_ID, r.operation_id.as_ref().map(OperationId::as_str));
    put(ANNOTATION_ACTION, Some(r.action.as_str()));
    put(ANNOTATION_CONFIG_VERSION, Some(r.config_version.as_str()));
    put(ANNOTATION_IDEMPOTENCY_KEY, Some(r.idempotency_key.as_str()));
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(r.resource_name().to_owned()));
    metadata.insert("namespace".into(), Value::String(r.resource_id.resource_group.clone()));
    metadata.insert("annotations".into(), Value::Object(annotations));
    json!({
        "apiVersion": OSAC_API_VERSION,
        "kind": r.kind,
        "metadata": metadata,
        "spec": r.properties,
        "status": { "outputs": r.outputs },
    })
}

/// The idempotency key recorded in a job's `extra_vars`, which AWX returns as JSON text
/// (an object is accepted too).
pub fn key_of(extra_vars: &Value) -> Option<String> {
    let parsed;
    let vars = match extra_vars {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s).ok()?;
            &parsed
        }
        v => v,
    };
    vars.get(KEY_VAR)?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slipway_domain::{ArmId, ConfigVersion};
    use slipway_provider::{JobAction, RunMode};

    const OPERATION: &str = "0190b6a4-7c1e-7000-8000-000000000001";

    pub(crate) fn request() -> LaunchRequest {
        let mut tags = Map::new();
        tags.insert("env".into(), json!("prod"));
        tags.insert("osac.openshift.io/implementation-strategy".into(), json!("metallb-l2"));
        LaunchRequest {
            idempotency_key: "op-1:1".into(),
            action: JobAction::Create,
            kind: "VirtualNetwork".into(),
            resource_type: "osac.network/virtualnetworks".into(),
            resource_id: ArmId::parse(
                "/subscriptions/6f1c2a3e-0000-4000-8000-000000000001/resourceGroups/rg-a/providers/OSAC.Network/virtualNetworks/test-resource",
            )
            .unwrap(),
            location: Some("eu-1".into()),
            tags,
            properties: json!({"cidr": "10.0.0.0/16", "templateID": "t1"}),
            outputs: serde_json::Map::new(),
            operation_id: OperationId::parse(OPERATION),
            config_version: ConfigVersion::new("cv1"),
            intended_at: None,
            context: None,
            secrets: Default::default(),
            parent: None,
            references: Default::default(),
            parameters: Value::Null,
            mode: RunMode::Run,
        }
    }

    #[test]
    fn slipway_envelope_matches_the_local_provider_shape() {
        let v = extra_vars(Envelope::Slipway, &request());
        assert_eq!(v["slipway_idempotency_key"], "op-1:1");
        let s = &v["slipway"];
        assert_eq!(s["idempotencyKey"], "op-1:1");
        assert_eq!(s["action"], "create");
        assert_eq!(s["operationId"], OPERATION);
        assert_eq!(s["configVersion"], "cv1");
        assert_eq!(s["resource"]["kind"], "VirtualNetwork");
        assert_eq!(s["resource"]["name"], "test-resource");
        assert_eq!(s["resource"]["type"], "osac.network/virtualnetworks");
        assert_eq!(s["resource"]["location"], "eu-1");
        assert_eq!(s["resource"]["tags"]["env"], "prod");
        assert_eq!(s["resource"]["properties"]["cidr"], "10.0.0.0/16");
        assert_eq!(v.as_object().unwrap().len(), 2);
    }

    /// The OSAC envelope (docs/providers.md#launch): `ansible_eda.event.payload.metadata.name`
    /// and `namespace`.
    #[test]
    fn osac_envelope() {
        let v = extra_vars(Envelope::OsacEda, &request());
        assert_eq!(v["slipway_idempotency_key"], "op-1:1");
        let p = &v["ansible_eda"]["event"]["payload"];
        assert_eq!(p["apiVersion"], OSAC_API_VERSION);
        assert_eq!(p["kind"], "VirtualNetwork");
        assert_eq!(p["metadata"]["name"], "test-resource");
        assert_eq!(p["metadata"]["namespace"], "rg-a");
        assert_eq!(p["spec"]["templateID"], "t1");
        let a = &p["metadata"]["annotations"];
        assert_eq!(a["osac.openshift.io/implementation-strategy"], "metallb-l2");
        assert_eq!(a["env"], "prod");
        assert_eq!(a[ANNOTATION_IDEMPOTENCY_KEY], "op-1:1");
        assert_eq!(a[ANNOTATION_ACTION], "create");
        assert_eq!(a[ANNOTATION_OPERATION_ID], OPERATION);
        assert_eq!(a[ANNOTATION_RESOURCE_ID], request().resource_id.to_string());
        // OSAC omits `tenant_storage_classes` for a tenant without any; Slipway never has any.
        assert!(v["ansible_eda"]["event"].get("tenant_storage_classes").is_none());
    }

    #[test]
    fn keys_from_awx_extra_vars() {
        let v = extra_vars(Envelope::Slipway, &request());
        assert_eq!(key_of(&Value::String(v.to_string())).as_deref(), Some("op-1:1"));
        assert_eq!(key_of(&v).as_deref(), Some("op-1:1"));
        assert_eq!(key_of(&json!("{}")), None);
        assert_eq!(key_of(&json!("not: json")), None);
        assert_eq!(key_of(&json!({"slipway_idempotency_key": 5})), None);
        assert_eq!(key_of(&Value::Null), None);
    }
}
