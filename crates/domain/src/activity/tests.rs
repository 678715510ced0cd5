use std::collections::BTreeMap;

use serde_json::json;

use super::diff::spec_changes;
use super::*;
use crate::resource::Spec;

fn spec(properties: serde_json::Value) -> Spec {
    Spec { location: Some("westeurope".into()), tags: BTreeMap::new(), properties }
}

fn paths(changes: &[PropertyChange]) -> Vec<(&str, ChangeKind)> {
    changes.iter().map(|c| (c.path.as_str(), c.kind)).collect()
}

#[test]
fn a_change_lists_each_altered_path_with_its_values() {
    let old = spec(json!({"addressSpace": {"prefixes": ["10.0.0.0/16"]}, "dns": "a", "gone": 1}));
    let mut new = spec(json!({"addressSpace": {"prefixes": ["10.0.0.0/16", "10.1.0.0/16"]}, "dns": "b"}));
    new.tags.insert("env".into(), "prod".into());
    let (changes, truncated) = spec_changes(Some(&old), Some(&new));
    assert!(!truncated);
    assert_eq!(
        paths(&changes),
        [
            ("properties.addressSpace.prefixes[1]", ChangeKind::Insert),
            ("properties.dns", ChangeKind::Update),
            ("properties.gone", ChangeKind::Remove),
            ("tags.env", ChangeKind::Insert),
        ]
    );
    let dns = &changes[1];
    assert_eq!((dns.previous.clone(), dns.new.clone()), (Some(json!("a")), Some(json!("b"))));
    assert_eq!(changes[2].new, None);
}

#[test]
fn a_create_lists_every_leaf_and_an_unchanged_spec_nothing() {
    let new = spec(json!({"size": "small", "nested": {"a": 1}}));
    let (changes, _) = spec_changes(None, Some(&new));
    assert_eq!(
        paths(&changes),
        [
            ("location", ChangeKind::Insert),
            ("properties.nested.a", ChangeKind::Insert),
            ("properties.size", ChangeKind::Insert)
        ]
    );
    assert!(spec_changes(Some(&new), Some(&new)).0.is_empty());
}

#[test]
fn a_secret_is_shown_by_path_only_even_when_created_inside_an_object() {
    let sealed = |n: u8| json!({ SEALED_MARKER: format!("k1:{n}") });
    let old = spec(json!({"admin": {"password": sealed(1)}}));
    let new = spec(json!({"admin": {"password": sealed(2)}}));
    let (changes, _) = spec_changes(Some(&old), Some(&new));
    assert_eq!(changes.len(), 1);
    let c = &changes[0];
    assert_eq!((c.path.as_str(), c.secret, &c.previous, &c.new), ("properties.admin.password", true, &None, &None));
    let (created, _) = spec_changes(None, Some(&new));
    let secret = created.iter().find(|c| c.path == "properties.admin.password").expect("listed");
    assert!(secret.secret && secret.new.is_none());
    let text = format!("{created:?}");
    assert!(!text.contains("k1:2"), "no sealed value shown: {text}");
}

#[test]
fn a_change_of_more_paths_than_kept_says_it_was_truncated() {
    let many: serde_json::Map<String, serde_json::Value> = (0..150).map(|i| (format!("p{i:03}"), json!(i))).collect();
    let (changes, truncated) = spec_changes(None, Some(&spec(serde_json::Value::Object(many))));
    assert_eq!(changes.len(), MAX_CHANGES);
    assert!(truncated);
}

#[test]
fn filters_parse_azure_activity_log_clauses() {
    let f = ActivityFilter::parse(
        "eventTimestamp ge '2026-12-01T00:00:00Z' AND eventTimestamp le '2026-12-02T00:00:00.5Z' and \
         resourceGroupName eq 'RG1' and resourceUri eq '/subscriptions/S/resourceGroups/RG1/x/' and \
         correlationId eq 'AB' and caller eq 'O''Brien' and status eq 'failed' and eventChannels eq 'Admin, Operation'",
    )
    .expect("parses");
    assert_eq!(f.since, crate::time::Timestamp::parse_rfc3339("2026-12-01T00:00:00Z"));
    assert_eq!(f.until.map(|t| t.0 % 1000), Some(500));
    assert_eq!(f.resource_group.as_deref(), Some("rg1"));
    assert_eq!(f.resource.as_deref(), Some("/subscriptions/s/resourcegroups/rg1/x"));
    assert_eq!((f.correlation_id.as_deref(), f.caller.as_deref()), (Some("ab"), Some("o'brien")));
    assert_eq!(f.status, Some(ActivityStatus::Failed));
    assert_eq!(ActivityFilter::parse("  ").expect("empty"), ActivityFilter::default());
    let gt = ActivityFilter::parse("eventTimestamp gt '2026-12-01T00:00:00Z'").expect("gt");
    assert_eq!(gt.since.map(|t| t.0 % 1000), Some(1));
}

#[test]
fn malformed_filters_say_what_is_wrong() {
    let err = |f: &str| ActivityFilter::parse(f).expect_err(f).0;
    assert!(err("level eq 'x'").contains("cannot be filtered on"));
    assert!(err("caller ge 'x'").contains("only 'eq'"));
    assert!(err("eventTimestamp eq '2026-12-01T00:00:00Z'").contains("ge, gt, le or lt"));
    assert!(err("eventTimestamp ge 'yesterday'").contains("RFC 3339"));
    assert!(err("caller eq 'x' or status eq 'Failed'").contains("'and'"));
    assert!(err("caller eq x").contains("quoted"));
    assert!(err("caller eq 'x").contains("not closed"));
    assert!(err("status eq 'Done'").contains("Accepted, Succeeded, Failed"));
}

#[test]
fn entries_know_their_group_and_outcome() {
    let entry = ActivityEntry {
        time: crate::time::Timestamp(0),
        subscription: None,
        target: "/subscriptions/s/resourceGroups/RG/providers/X/y/z".into(),
        operation_name: "X/y/write".into(),
        caller: ActivityCaller::default(),
        request: RequestInfo::default(),
        status: 409,
        error: None,
        operation_id: None,
        changes: Vec::new(),
        changes_truncated: false,
    };
    assert_eq!(entry.resource_group().as_deref(), Some("rg"));
    assert_eq!(entry.resource_group_as_written(), Some("RG"));
    assert_eq!(entry.outcome(), ActivityStatus::Failed);
    assert_eq!(ActivityEntry { status: 200, ..entry.clone() }.outcome(), ActivityStatus::Succeeded);
    let sub = ActivityEntry { target: "/subscriptions/s".into(), ..entry };
    assert_eq!(sub.resource_group(), None);
}
