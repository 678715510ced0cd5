//! The format's rules: enum spellings, document versions, what stays corrupt, canonical ids.

use super::*;

#[test]
fn enums_are_stored_as_these_strings() {
    use crate::documents::job::{JobStateDocument, JobTypeDocument};
    use crate::documents::operation::{OperationRequestDocument, ProvisioningStateDocument};
    fn text<T: serde::Serialize>(v: T) -> String {
        serde_json::to_value(v).unwrap().as_str().unwrap().to_string()
    }
    fn back<T: serde::de::DeserializeOwned>(s: &str) -> T {
        serde_json::from_value(json!(s)).unwrap()
    }
    use ProvisioningState as P;
    for (s, want) in [
        (P::Accepted, "Accepted"),
        (P::Provisioning, "Provisioning"),
        (P::Updating, "Updating"),
        (P::Deleting, "Deleting"),
        (P::Canceling, "Canceling"),
        (P::Succeeded, "Succeeded"),
        (P::Failed, "Failed"),
        (P::Canceled, "Canceled"),
    ] {
        assert_eq!(text(ProvisioningStateDocument::from(s)), want);
        assert_eq!(P::from(back::<ProvisioningStateDocument>(want)), s);
    }
    use JobState as J;
    for (s, want) in [
        (J::Launching, "Launching"),
        (J::Pending, "Pending"),
        (J::Waiting, "Waiting"),
        (J::Running, "Running"),
        (J::Unknown, "Unknown"),
        (J::Succeeded, "Succeeded"),
        (J::Failed, "Failed"),
        (J::Canceled, "Canceled"),
    ] {
        assert_eq!(text(JobStateDocument::from(s)), want);
        assert_eq!(J::from(back::<JobStateDocument>(want)), s);
    }
    for (t, want) in [
        (JobType::Provision, "provision"),
        (JobType::Deprovision, "deprovision"),
        (JobType::Action, "action"),
        (JobType::Preflight, "preflight"),
    ] {
        assert_eq!(text(JobTypeDocument::from(t)), want);
        assert_eq!(JobType::from(back::<JobTypeDocument>(want)), t);
    }
    use OperationRequest as R;
    for (r, want) in [(R::Create, "Create"), (R::Update, "Update"), (R::Delete, "Delete"), (R::Action, "Action")] {
        assert_eq!(text(OperationRequestDocument::from(r)), want);
        assert_eq!(R::from(back::<OperationRequestDocument>(want)), r);
    }
    // Spelled exactly: no case folding, no alternative spelling.
    assert!(serde_json::from_value::<ProvisioningStateDocument>(json!("succeeded")).is_err());
    assert!(serde_json::from_value::<ProvisioningStateDocument>(json!("Cancelled")).is_err());
}

#[test]
fn versions() {
    assert!(!encode_resource(&full_record()).unwrap().contains(r#""v":"#), "version 1 is written without a marker");
    assert!(!encode_operation(&full_operation()).unwrap().contains(r#""v":"#));
    assert_eq!(decode_resource(&with(MINIMAL_RESOURCE_V1, "v", json!(1))), Ok(minimal_record()));
    assert_eq!(decode_operation(&with(MINIMAL_OPERATION_V1, "v", json!(1))), Ok(minimal_operation()));
    for v in [0, 2] {
        let err = decode_resource(&with(MINIMAL_RESOURCE_V1, "v", json!(v))).unwrap_err().to_string();
        assert!(err.contains(&format!("document version {v} ")), "{err}");
        let err = decode_operation(&with(MINIMAL_OPERATION_V1, "v", json!(v))).unwrap_err().to_string();
        assert!(err.contains(&format!("document version {v} ")), "{err}");
    }
    // A newer document of another shape is reported by its version, not by the shape.
    let err = decode_resource(r#"{"v":2,"resource":{}}"#).unwrap_err().to_string();
    assert!(err.contains("document version 2 "), "{err}");
    let err = decode_operation(r#"{"v":2,"id":7}"#).unwrap_err().to_string();
    assert!(err.contains("document version 2 "), "{err}");
    // A broken version 1 document is reported by what is wrong with it.
    let err = decode_operation(r#"{"id":"00000000-0000-4000-8000-000000000001"}"#).unwrap_err().to_string();
    assert!(err.contains("missing field `subscription`"), "{err}");
}

#[test]
fn bodies_that_today_are_corrupt_stay_corrupt() {
    for body in ["{not json", "[]", "null", r#"{"kind":"Thing"}"#] {
        assert!(decode_resource(body).is_err(), "{body}");
        assert!(decode_operation(body).is_err(), "{body}");
    }
    // Lease and schedule in a body are read as strictly as before, then dropped.
    let lease = json!({"owner": "x", "until": 1, "epoch": 2});
    assert_eq!(decode_resource(&with(MINIMAL_RESOURCE_V1, "lease", lease)), Ok(minimal_record()));
    assert!(decode_resource(&with(MINIMAL_RESOURCE_V1, "lease", json!({"owner": "x"}))).is_err());
    let schedule = json!({"nextDue": 5, "intent": true});
    assert_eq!(decode_resource(&with(MINIMAL_RESOURCE_V1, "schedule", schedule)), Ok(minimal_record()));
    assert!(decode_resource(&with(MINIMAL_RESOURCE_V1, "schedule", json!({"nextDue": 5}))).is_err());
    assert!(decode_resource(&with(MINIMAL_RESOURCE_V1, "jobs", json!(null))).is_err());
    assert!(decode_operation(&with(MINIMAL_OPERATION_V1, "percentComplete", json!(256))).is_err());
}

#[test]
fn operation_ids_must_be_canonical() {
    let upper = with(MINIMAL_OPERATION_V1, "id", json!("00000000-0000-4000-8000-00000000000A"));
    let err = decode_operation(&upper).unwrap_err().to_string();
    assert!(err.contains("not an operation id"), "{err}");
    assert!(decode_operation(&with(MINIMAL_OPERATION_V1, "id", json!("op-1"))).is_err());
    assert!(decode_resource(&with(MINIMAL_RESOURCE_V1, "lastOperationId", json!("x"))).is_err());
    assert!(decode_resource(&with(MINIMAL_RESOURCE_V1, "activeOperationId", json!("x"))).is_err());
    let job = json!([{"jobID": "1", "type": "provision", "state": "Running", "timestamp": 7, "operationId": "x"}]);
    let err = decode_resource(&with(MINIMAL_RESOURCE_V1, "jobs", job)).unwrap_err().to_string();
    assert!(err.contains(r#"job "1": operationId"#), "{err}");
}
