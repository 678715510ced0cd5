//! Version 1 of a resource body's `jobContext`: who asked and for which tenant.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use slipway_domain::identity::{JobContext, RequestedBy, TenantContext};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JobContextDocument {
    #[serde(rename = "requestedBy")]
    requested_by: RequestedByDocument,
    #[serde(rename = "tenant", default, skip_serializing_if = "Option::is_none")]
    tenant: Option<TenantDocument>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RequestedByDocument {
    #[serde(rename = "name")]
    name: String,
    #[serde(rename = "tenant", default, skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
    #[serde(rename = "groups", default, skip_serializing_if = "Vec::is_empty")]
    groups: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TenantDocument {
    #[serde(rename = "tenantId")]
    tenant_id: String,
    #[serde(rename = "displayName", default)]
    display_name: String,
    #[serde(rename = "attributes", default, skip_serializing_if = "Map::is_empty")]
    attributes: Map<String, Value>,
}

impl From<&JobContext> for JobContextDocument {
    fn from(c: &JobContext) -> Self {
        let JobContext { requested_by: RequestedBy { name, tenant, groups }, tenant: t } = c;
        JobContextDocument {
            requested_by: RequestedByDocument { name: name.clone(), tenant: tenant.clone(), groups: groups.clone() },
            tenant: t.as_ref().map(|TenantContext { tenant_id, display_name, attributes }| TenantDocument {
                tenant_id: tenant_id.clone(),
                display_name: display_name.clone(),
                attributes: attributes.clone(),
            }),
        }
    }
}

impl From<JobContextDocument> for JobContext {
    fn from(d: JobContextDocument) -> Self {
        let JobContextDocument { requested_by: RequestedByDocument { name, tenant, groups }, tenant: t } = d;
        JobContext {
            requested_by: RequestedBy { name, tenant, groups },
            tenant: t.map(|TenantDocument { tenant_id, display_name, attributes }| TenantContext {
                tenant_id,
                display_name,
                attributes,
            }),
        }
    }
}
