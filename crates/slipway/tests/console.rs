//! The web console in a real browser (headless Chromium over WebDriver) against a whole
//! Slipway: pages load without a console error under the strict CSP, navigation works, a
//! resource created from a generated form reaches Succeeded, a running job's output appears
//! live and the job can be canceled; with authentication, a Reader signs in and sees no
//! create, delete or action controls, and another tenant's resources never appear.
//! Screenshots land in `target/tmp/console-screenshots/`.

use crate::common;

use std::time::Duration;

use crate::common::browser::Browser;
use crate::common::{SUB, TestServer};
use serde_json::{Value, json};
use slipway_auth::test_idp::TestIdp;
use slipway_domain::{Clock, SystemClock};

const VNETS: &str = "Slipway.Example/virtualNetworks";

fn group_url(s: &TestServer, group: &str) -> String {
    format!("{}/ui/subscriptions/{SUB}/resourceGroups/{group}", s.base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_made_in_the_console_succeeds_and_a_running_job_streams_its_output() {
    let s = TestServer::start().await;
    let b = Browser::start("local").await;

    // Home → open a subscription by id → its (empty) page.
    b.goto(&format!("{}/ui", s.base)).await;
    assert_eq!(b.text("h1").await, "Subscriptions");
    assert!(b.text(".who").await.contains("local mode"));
    b.assert_clean("home").await;
    b.submit("#open-subscription", &[("subscription", SUB)]).await;
    assert!(b.text("#no-resources").await.contains("No resources"));
    b.assert_clean("empty subscription").await;

    // The create form is generated from the type's schema; the API's refusal comes back on it.
    b.submit("#create", &[("group", "web"), ("type", VNETS)]).await;
    assert_eq!(b.text("h1").await, "Create virtualNetworks");
    assert!(b.has("input[name='p.addressSpace']").await && b.has("input[name='p.simulateFailure']").await);
    b.submit("#create-form", &[("name", "net1"), ("p.addressSpace", "nope")]).await;
    let problem = b.text(".problem").await;
    assert!(problem.contains("InvalidRequestContent") && problem.contains("properties.addressSpace"), "{problem}");
    b.assert_clean("create form with the API's error").await;
    b.submit("#create-form", &[("name", "net1"), ("p.addressSpace", "10.0.0.0/16"), ("tags", "team=net")]).await;
    // The operation page follows the operation until it ends.
    b.wait_text("#status .badge", "the create operation succeeds", |t| t == "Succeeded").await;
    b.wait_text("#output", "the job's output is shown", |t| t.contains("PLAY [")).await;
    b.assert_clean("operation page").await;
    b.screenshot("operation-succeeded").await;

    // The group lists it; its page shows state, spec, tags, timeline and job history.
    b.goto(&group_url(&s, "web")).await;
    b.click("#resources a").await;
    assert_eq!(b.text(".summary .badge").await, "Succeeded");
    assert!(b.text("#spec").await.contains("10.0.0.0/16"));
    assert!(b.text(".summary").await.contains("team=net"));
    assert!(b.text("#timeline").await.contains("provision job"));
    assert!(b.has("#delete").await);
    b.assert_clean("resource page").await;
    b.screenshot("resource").await;

    // Filters are ARM's $filter: a state nothing is in lists nothing.
    b.goto(&format!("{}/ui/subscriptions/{SUB}?state=Failed", s.base)).await;
    assert!(b.text("#no-resources").await.contains("match"));
    b.goto(&format!("{}/ui/subscriptions/{SUB}?type={VNETS}&tag=team%3Dnet", s.base)).await;
    assert!(b.text("#resources").await.contains("net1"));
    b.assert_clean("filtered lists").await;

    // A long job: its output appears while it runs; cancel ends it Canceled. Its security
    // group goes in as JSON, and the group's page then says who references it.
    let sg = format!("/subscriptions/{SUB}/resourceGroups/web/providers/Slipway.Example/securityGroups/sg1");
    let accepted = s.put(&sg, json!({"location": "local", "properties": {}})).await;
    s.wait_terminal(&common::header(&accepted, "azure-asyncoperation").unwrap(), Duration::from_secs(60)).await;
    let create = format!("{}/ui/create?subscription={SUB}&group=web&type=Slipway.Example/computeInstances", s.base);
    b.goto(&create).await;
    let groups = format!("[\"{sg}\"]");
    let fields = [
        ("name", "vm1"),
        ("p.size", "small"),
        ("p.image", "debian"),
        ("p.delaySeconds", "120"),
        ("p.securityGroupIds", &groups),
    ];
    b.submit("#create-form", &fields).await;
    b.wait_text("#output", "output while the job runs", |t| t.contains("TASK [")).await;
    // Its progress: the task that sleeps, two of the playbook's tasks done.
    b.wait_text("#progress", "the job's progress", |t| t.contains("% · task Run for the requested time")).await;
    let status = b.text("#status .badge").await;
    assert!(["Accepted", "Provisioning"].contains(&status.as_str()), "still running: {status}");
    b.screenshot("live-output").await;
    b.click("#cancel").await;
    b.wait_text("#status .badge", "the canceled operation", |t| t == "Canceled").await;
    b.assert_clean("canceled operation").await;
    b.goto(&format!("{}/ui/resource?id={sg}", s.base)).await;
    assert!(b.text("#referenced-by").await.contains("vm1"));
    // A Succeeded resource's page polls nothing, yet shows a change someone else makes at
    // once: the event feed tells the page.
    assert_eq!(b.text(".summary .badge").await, "Succeeded");
    let patched = s.http.patch(s.url(&sg)).json(&json!({"tags": {"team": "edge"}})).send().await.unwrap();
    assert_eq!(patched.status().as_u16(), 202);
    b.wait_text(".summary", "the change, told by the event feed", |t| t.contains("team=edge")).await;
    b.assert_clean("resource page followed by its event feed").await;
    // The canceled machine is retried now from its page: its create runs again, as a retry.
    b.goto(&format!("{}/ui/resource?id={}", s.base, sg.replace("securityGroups/sg1", "computeInstances/vm1"))).await;
    assert_eq!(b.text(".summary .badge").await, "Canceled");
    b.click("#retry").await;
    b.wait_text("#output", "the retried job's output", |t| t.contains("TASK [")).await;
    b.click("#cancel").await;
    b.wait_text("#status .badge", "the canceled retry", |t| t == "Canceled").await;
    b.assert_clean("retried operation").await;

    // Delete from the resource page (after the browser's confirm).
    b.goto(&group_url(&s, "web")).await;
    b.screenshot("group").await;
    b.goto(&format!("{}/ui/resource?id=/subscriptions/{SUB}/resourceGroups/web/providers/{VNETS}/net1", s.base)).await;
    b.click("#delete").await;
    b.client.accept_alert().await.unwrap();
    b.wait_text("#status .badge", "the delete operation succeeds", |t| t == "Succeeded").await;
    let (status, _) = s.get_json(&format!("/subscriptions/{SUB}/resourceGroups/web/providers/{VNETS}/net1")).await;
    assert_eq!(status, 404);
    b.assert_clean("delete").await;

    // A group of its own, made from the subscription's page; then the group "web" shown with
    // its location and state, and deleted with what it holds after a confirm that names it.
    b.goto(&format!("{}/ui/subscriptions/{SUB}", s.base)).await;
    b.submit("#create-group", &[("group", "made-here"), ("location", "local")]).await;
    assert!(b.text("#group").await.contains("local"), "the new group's page");
    b.goto(&group_url(&s, "web")).await;
    let about = b.text("#group").await;
    assert!(about.contains("local") && about.contains("Succeeded"), "{about}");
    b.submit("#group-tags-form", &[("tags", "owner=ops\ncost=7")]).await;
    b.wait_text("#group-tags", "the group's new tags", |t| t.contains("cost=7") && t.contains("owner=ops")).await;
    b.click("#delete-group").await;
    let question = b.client.get_alert_text().await.unwrap();
    assert!(question.contains("vm1") && question.contains("sg1"), "the confirm names what goes: {question}");
    b.client.accept_alert().await.unwrap();
    b.wait_text("#status .badge", "the group's delete succeeds", |t| t == "Succeeded").await;
    let (status, _) = s.get_json(&format!("/subscriptions/{SUB}/resourceGroups/web")).await;
    assert_eq!(status, 404);
    b.assert_clean("group delete").await;
    b.close().await;
}

const AUD: &str = "api://slipway";
const SUB_A: &str = "aaaaaaaa-0000-0000-0000-000000000001";
const SUB_B: &str = "bbbbbbbb-0000-0000-0000-000000000002";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_signs_in_sees_no_controls_and_never_another_tenants_resources() {
    let idp = TestIdp::start().await;
    let tables = format!(
        "\n[auth]\nadmins = [\"root\"]\n\n[[auth.issuers]]\nissuer = \"{}\"\naudiences = [\"{AUD}\"]\n\
         console_client_id = \"slipway-console\"\n",
        idp.issuer
    );
    let s = TestServer::start_full("", "", &tables, |_| {}).await;
    let jwt = |who: &str, tenant: &str| {
        idp.sign("key-1", &idp.claims(AUD, who, tenant, SystemClock.now().as_millis() / 1000))
    };
    let send = async |method: &str, path: &str, token: &str, body: Value| {
        let url = format!("{}{path}?api-version=2025-06-01", s.base);
        let resp = s.http.request(method.parse().unwrap(), url).bearer_auth(token).json(&body).send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json::<Value>().await.unwrap_or_default())
    };
    let root = jwt("root", "platform");
    for (sub, tenant) in [(SUB_A, "tenant-a"), (SUB_B, "tenant-b")] {
        let body = json!({"state": "Registered", "properties": {"tenantId": tenant}});
        assert_eq!(send("PUT", &format!("/subscriptions/{sub}"), &root, body).await.0, 201);
    }
    for (i, (sub, role, who)) in
        [(SUB_A, "Owner", "a-owner"), (SUB_A, "Reader", "a-reader"), (SUB_B, "Owner", "b-owner")]
            .into_iter()
            .enumerate()
    {
        let path = format!(
            "/subscriptions/{sub}/providers/Slipway.Authorization/roleAssignments/00000000-0000-0000-0000-00000000000{i}"
        );
        let body = json!({"properties": {"roleDefinitionId": role, "principalId": who}});
        assert_eq!(send("PUT", &path, &root, body).await.0, 201);
    }
    let vnet = |sub: &str, name: &str| format!("/subscriptions/{sub}/resourceGroups/rg/providers/{VNETS}/{name}");
    let body = json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}});
    assert_eq!(send("PUT", &vnet(SUB_A, "a-net"), &jwt("a-owner", "tenant-a"), body.clone()).await.0, 201);
    assert_eq!(send("PUT", &vnet(SUB_B, "b-secret-net"), &jwt("b-owner", "tenant-b"), body).await.0, 201);

    let b = Browser::start("reader").await;
    // Without a session the console asks for one; a credential the API refuses is not kept.
    b.goto(&format!("{}/ui/", s.base)).await;
    assert_eq!(b.text("h1").await, "Sign in");
    b.submit("#sign-in", &[("token", "not-a-token")]).await;
    assert!(b.text(".problem").await.len() > 3);
    b.assert_clean("sign-in refused").await;
    // (the refused sign-in answers 401, which the browser logs as a failed load)
    let _ = b.console_errors().await;
    b.goto(&format!("{}/ui/sign-in", s.base)).await;
    b.submit("#sign-in", &[("token", &jwt("a-reader", "tenant-a"))]).await;

    // The Reader's subscriptions: A only.
    let subs = b.text("#subscriptions").await;
    assert!(subs.contains(SUB_A) && !subs.contains(SUB_B), "{subs}");
    b.click("#subscriptions a").await;
    assert!(b.text("#resources").await.contains("a-net"));
    assert!(!b.has("#create").await, "a Reader is offered no create form");
    b.assert_clean("reader's subscription").await;
    b.screenshot("reader-subscription").await;
    b.goto(&format!("{}/ui/resource?id={}", s.base, vnet(SUB_A, "a-net"))).await;
    assert!(!b.text(".summary .badge").await.is_empty());
    assert!(!b.has("#delete").await && !b.has("form.action").await, "a Reader is offered no delete or action");
    b.assert_clean("reader's resource").await;

    // Another tenant's subscription and resource never show, however they are asked for.
    for url in [
        format!("{}/ui/subscriptions/{SUB_B}", s.base),
        format!("{}/ui/resource?id={}", s.base, vnet(SUB_B, "b-secret-net")),
    ] {
        b.goto(&url).await;
        let page = b.client.source().await.unwrap();
        assert!(!page.contains("b-secret-net") || page.contains("AuthorizationFailed"), "{url}: {page}");
        assert!(page.contains("AuthorizationFailed"), "{url} is refused: {page}");
    }
    let _ = b.console_errors().await; // the refusals' 403s

    // A form posted from elsewhere (no CSRF value) changes nothing.
    let forged = s
        .http
        .post(format!("{}/ui/resource/delete", s.base))
        .form(&[("id", vnet(SUB_A, "a-net")), ("csrf", "guess".into())])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);

    // The Owner of A signs in and is offered the controls. (Each step waits for the page it
    // leads to: a click or a post returns before the browser has the next page.)
    b.click("#sign-out").await;
    b.wait_text("h1", "the sign-in page, signed out", |t| t == "Sign in").await;
    b.submit("#sign-in", &[("token", &jwt("a-owner", "tenant-a"))]).await;
    b.wait_text("h1", "a page for the signed-in Owner", |t| t != "Sign in").await;
    b.goto(&format!("{}/ui/resource?id={}", s.base, vnet(SUB_A, "a-net"))).await;
    assert_eq!(b.text("#delete").await, "Delete", "the Owner may delete");
    b.goto(&format!("{}/ui/subscriptions/{SUB_A}", s.base)).await;
    assert!(b.has("#create").await, "the Owner may create");
    b.assert_clean("owner's pages").await;

    // Signing in on the identity provider's own page (authorization code with PKCE).
    b.click("#sign-out").await;
    idp.approve_as("a-reader", "tenant-a", AUD);
    b.click("#providers a").await;
    let subs = b.text("#subscriptions").await;
    assert!(subs.contains(SUB_A) && !subs.contains(SUB_B), "signed in through the issuer as the Reader: {subs}");
    b.assert_clean("signed in through the issuer").await;
    tokio::time::timeout(Duration::from_secs(30), b.close()).await.unwrap();
}

/// The guardrails in the console: the subscription's usage against its limits as bars, a
/// resource's locks and what the policies found, and a refusal on the create form saying
/// which guardrail refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guardrails_show_where_they_apply_and_say_why_a_create_was_refused() {
    let meters = "\n[[quota.meters]]\nname = \"networks\"\ntype = \"Slipway.Example/virtualNetworks\"\nlimit = 1\n";
    let s = TestServer::start_full("", "", meters, |_| {}).await;
    let net = format!("/subscriptions/{SUB}/resourceGroups/web/providers/{VNETS}/net1");
    let put = s.put(&net, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    let op = common::header(&put, "azure-asyncoperation").expect("an operation");
    s.wait_terminal(&op, Duration::from_secs(90)).await;
    let authz = |tail: &str| format!("{}{net}/providers/Microsoft.Authorization/{tail}?api-version=2023-04-01", s.base);
    let lock = json!({"properties": {"level": "CanNotDelete", "notes": "production"}});
    assert!(s.http.put(authz("locks/keep")).json(&lock).send().await.unwrap().status().is_success());
    let rule = json!({"properties": {"policyRule": {"if": {"field": "tags['owner']", "exists": "false"}, "then": {"effect": "audit"}}}});
    let definitions = format!(
        "{}/subscriptions/{SUB}/providers/Microsoft.Authorization/policyDefinitions/owner?api-version=2023-04-01",
        s.base
    );
    let created: Value = s.http.put(definitions).json(&rule).send().await.unwrap().json().await.unwrap();
    let assignment = json!({"properties": {"policyDefinitionId": created["id"]}});
    let assign = format!(
        "{}/subscriptions/{SUB}/providers/Microsoft.Authorization/policyAssignments/owner?api-version=2023-04-01",
        s.base
    );
    assert!(s.http.put(assign).json(&assignment).send().await.unwrap().status().is_success());
    let patch = s.http.patch(s.url(&net)).json(&json!({"tags": {"env": "dev"}})).send().await.unwrap();
    s.wait_terminal(&common::header(&patch, "azure-asyncoperation").unwrap(), Duration::from_secs(90)).await;

    let b = Browser::start("guardrails").await;
    b.goto(&format!("{}/ui/subscriptions/{SUB}", s.base)).await;
    let usage = b.text("#usage").await;
    assert!(usage.contains("networks") && usage.contains("1 / 1"), "{usage}");
    assert!(b.has("#usage .bar.full").await, "a meter at its limit shows full");
    b.assert_clean("usage bars").await;
    b.screenshot("quota-usage").await;
    b.goto(&format!("{}/ui/resource?id={net}", s.base)).await;
    assert!(b.text("#locks").await.contains("CanNotDelete"), "the resource's locks");
    assert!(b.text("#policy-findings").await.contains("audit"), "what the policies found");
    b.assert_clean("resource guardrails").await;
    b.screenshot("resource-guardrails").await;
    // Its history: who changed what, the newest change's properties before and after.
    let history = b.text("#history").await;
    assert!(history.contains("write") && history.contains("Created") && history.contains("Accepted"), "{history}");
    assert!(b.text("#history li:first-child table.diff").await.contains("tags.env"), "the PATCH's diff: {history}");
    b.screenshot("resource-history").await;
    b.goto(&format!("{}/ui/subscriptions/{SUB}/resourceGroups/web", s.base)).await;
    b.submit("#create", &[("type", VNETS)]).await;
    b.submit("#create-form", &[("name", "net2"), ("p.addressSpace", "10.1.0.0/16")]).await;
    let refused = b.text("#guardrail").await;
    assert!(refused.contains("refused by the quota 'networks'"), "{refused}");
    b.assert_clean("create refused by a quota").await;
    b.screenshot("create-refused-by-quota").await;
    b.close().await;
}
