//! The overview lists, black-box with the example playbooks: a subscription's resource groups,
//! its and a group's resources of every type with ARM's `$filter`, and its operations newest
//! first — each paged through `nextLink` (docs/arm-contract.md#overview-lists). What a caller
//! of another tenant sees of them is in `tenancy.rs`.

use std::time::Duration;

use crate::common::{SUB, TestServer, header};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const PLATFORM: &str = "api-version=2025-06-01";

fn id(group: &str, ty: &str, name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{group}/providers/Slipway.Example/{ty}/{name}")
}

/// Every item of a list, following `nextLink`; and how many pages that took.
async fn every_page(s: &TestServer, first: &str) -> (Vec<Value>, usize) {
    let mut items = Vec::new();
    let mut pages = 0;
    let mut url = s.url(first);
    loop {
        let (code, body) = s.follow(&url).await;
        assert_eq!(code, 200, "{url}: {body}");
        pages += 1;
        items.extend(body["value"].as_array().expect("a value array").iter().cloned());
        match body["nextLink"].as_str() {
            Some(next) => url = next.to_string(),
            None => return (items, pages),
        }
    }
}

fn field<'a>(items: &'a [Value], name: &str) -> Vec<&'a str> {
    items.iter().map(|v| v[name].as_str().unwrap_or_default()).collect()
}

async fn error_code(s: &TestServer, path: &str) -> (u16, String) {
    let (code, body) = s.get_json(path).await;
    (code, body["error"]["code"].as_str().unwrap_or_default().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_lists_its_groups_resources_of_every_type_and_operations() {
    let mut s = TestServer::start_with("backoff_base_seconds = 600\nbackoff_max_seconds = 600").await;
    let network = id("rg1", "virtualNetworks", "v1");
    let tagged = id("RG-Two", "virtualNetworks", "v2");
    let group = id("rg1", "securityGroups", "sg1");
    let failing = id("rg1", "virtualNetworks", "v0-fails");
    let mut operations = Vec::new();
    for (path, body) in [
        (&network, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})),
        (&tagged, json!({"location": "local", "tags": {"Env": "prod"}, "properties": {"addressSpace": "10.1.0.0/16"}})),
        (&group, json!({"location": "local", "tags": {"env": "dev"}, "properties": {}})),
        (
            &failing,
            json!({"location": "local", "properties": {"addressSpace": "10.2.0.0/16", "simulateFailure": true}}),
        ),
    ] {
        let r = s.put(path, body).await;
        assert_eq!(r.status().as_u16(), 201);
        operations.push(header(&r, "azure-asyncoperation").unwrap());
    }
    let mut ended = Vec::new();
    for url in &operations {
        ended.push(s.wait_terminal(url, WAIT).await);
    }
    assert_eq!(field(&ended, "status"), ["Succeeded", "Succeeded", "Succeeded", "Failed"]);

    // Groups exist while they hold resources; `-` sorts before `1`, as in the keys.
    let groups = format!("/subscriptions/{SUB}/resourceGroups?{PLATFORM}&$top=1");
    let (items, pages) = every_page(&s, &groups).await;
    assert_eq!((field(&items, "name"), pages), (vec!["RG-Two", "rg1"], 2));
    assert_eq!(items[1]["id"], format!("/subscriptions/{SUB}/resourceGroups/rg1"));
    assert_eq!(items[1]["type"], "Microsoft.Resources/resourceGroups");
    let (code, one) = s.get_json(&format!("/subscriptions/{SUB}/resourceGroups/RG1?{PLATFORM}")).await;
    assert_eq!((code, one["name"].as_str()), (200, Some("rg1")), "{one}");
    let missing = format!("/subscriptions/{SUB}/resourceGroups/nothing-here?{PLATFORM}");
    assert_eq!(error_code(&s, &missing).await, (404, "ResourceGroupNotFound".into()));

    // Every type, in key order; filters by type, tag and provisioning state.
    let resources = |filter: &str| format!("/subscriptions/{SUB}/resources?{PLATFORM}&$top=2{filter}");
    let ids = |items: &[Value]| field(items, "id").into_iter().map(str::to_string).collect::<Vec<_>>();
    let mut all = vec![network.clone(), tagged.clone(), group.clone(), failing.clone()];
    all.sort_by_key(|id| id.to_ascii_lowercase());
    let (items, pages) = every_page(&s, &resources("")).await;
    assert_eq!((ids(&items), pages), (all, 2));
    let (sg, _) = every_page(&s, &resources("&$filter=resourceType eq 'Slipway.Example/securityGroups'")).await;
    assert_eq!(ids(&sg), vec![group.clone()]);
    assert_eq!(sg[0]["properties"]["provisioningState"], "Succeeded", "each as its type's GET shows it");
    let (prod, _) = every_page(&s, &resources("&$filter=tagName eq 'env' and tagValue eq 'prod'")).await;
    assert_eq!(ids(&prod), vec![tagged.clone()]);
    let (env, _) = every_page(&s, &resources("&$filter=tagName eq 'ENV'")).await;
    assert_eq!(ids(&env).len(), 2, "tag names match whatever their case");
    let (broken, _) = every_page(&s, &resources("&$filter=provisioningState eq 'failed'")).await;
    assert_eq!(ids(&broken), vec![failing.clone()]);
    let in_group = format!("/subscriptions/{SUB}/resourceGroups/rg1/resources?{PLATFORM}");
    let (items, _) = every_page(&s, &in_group).await;
    assert_eq!(items.len(), 3, "the group's three, not RG-Two's: {items:?}");
    for (filter, code) in [
        ("&$filter=color eq 'red'", "InvalidFilter"),
        ("&$filter=tagValue eq 'prod'", "InvalidFilter"),
        ("&$filter=provisioningState eq 'Melting'", "InvalidFilter"),
        ("&$filter=resourceType eq 'virtualNetworks'", "InvalidFilter"),
        ("&$filter=name ne 'x'", "InvalidFilter"),
        ("&$skipToken=zz", "InvalidSkipToken"),
    ] {
        assert_eq!(error_code(&s, &resources(filter)).await, (400, code.into()), "{filter}");
    }
    let (code, body) = s.follow(&format!("{}/subscriptions/{SUB}/resources", s.base)).await;
    assert_eq!((code, body["error"]["code"].as_str()), (400, Some("MissingApiVersionParameter")));

    // Operations newest first (ids are time-ordered), each as its status reads.
    let list = |filter: &str| format!("/subscriptions/{SUB}/operationStatuses?{PLATFORM}&$top=3{filter}");
    let (items, pages) = every_page(&s, &list("")).await;
    assert_eq!(pages, 2);
    let starts = field(&items, "startTime");
    assert!(starts.windows(2).all(|w| w[0] >= w[1]), "newest first: {starts:?}");
    let mut listed: Vec<&str> = field(&items, "name");
    let mut started: Vec<&str> = field(&ended, "name");
    listed.sort();
    started.sort();
    assert_eq!(listed, started);
    assert_eq!(items.iter().find(|o| o["status"] == "Failed"), ended.last(), "as the status URL reads it");
    let (failed, _) = every_page(&s, &list("&$filter=status eq 'Failed'")).await;
    assert_eq!(field(&failed, "name"), [ended[3]["name"].as_str().unwrap()]);
    assert_eq!(error_code(&s, &list("&$filter=state eq 'Failed'")).await, (400, "InvalidFilter".into()));
    assert_eq!(error_code(&s, &list("&$skipToken=not-an-id")).await, (400, "InvalidSkipToken".into()));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resources_list_says_what_references_a_resource() {
    let s = TestServer::start().await;
    let sg = id("rg1", "securityGroups", "sg1");
    let vm = id("rg2", "computeInstances", "vm1");
    let other = id("rg1", "securityGroups", "sg2");
    let mut operations = Vec::new();
    for (path, body) in [
        (&sg, json!({"location": "local", "properties": {}})),
        (&other, json!({"location": "local", "properties": {}})),
        (
            &vm,
            json!({"location": "local", "properties": {"size": "small", "image": "debian", "securityGroupIds": [sg]}}),
        ),
    ] {
        let r = s.put(path, body).await;
        assert_eq!(r.status().as_u16(), 201);
        operations.push(header(&r, "azure-asyncoperation").unwrap());
    }
    for url in &operations {
        s.wait_terminal(url, WAIT).await;
    }
    let referring = |scope: &str, target: &str| {
        format!("{scope}/resources?{PLATFORM}&$filter=referencedResourceId eq '{}'", target.to_uppercase())
    };
    let whole = format!("/subscriptions/{SUB}");
    let (items, _) = every_page(&s, &referring(&whole, &sg)).await;
    assert_eq!(field(&items, "name"), ["vm1"], "any spelling of the id");
    assert!(every_page(&s, &referring(&whole, &other)).await.0.is_empty());
    assert!(
        every_page(&s, &referring(&format!("{whole}/resourceGroups/rg1"), &sg)).await.0.is_empty(),
        "vm1 is in rg2"
    );
    let elsewhere = sg.replace(SUB, "99999999-9999-9999-9999-999999999999");
    assert_eq!(error_code(&s, &referring(&whole, &elsewhere)).await, (400, "InvalidFilter".into()));
}
