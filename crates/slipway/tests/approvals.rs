//! Approvals end to end on both providers (docs/governance.md#approvals): a `requireApproval`
//! policy holds a large instance's create in `WaitingForApproval` with what it would change
//! attached; the requester cannot approve it; it holds its quota while it waits; an Owner's
//! approval runs the job, a denial runs nothing and leaves nothing; time running out ends it
//! as the policy says; the requester may withdraw it.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use slipway_auth::test_idp::TestIdp;
use slipway_domain::{Clock, SystemClock};
use slipway_test_support::eventually;

use crate::common::replica::{aap_type, quick_sim};
use crate::common::{API, SUB, TestServer, config_text, header, rid};

const AUD: &str = "api://slipway";
const T: Duration = Duration::from_secs(90);
const POLICY_VERSION: &str = "2023-04-01";

const METERS: &str = r#"
[[quota.meters]]
name = "instances"
type = "Slipway.Example/computeInstances"
limit = 3
"#;

struct World {
    s: TestServer,
    idp: TestIdp,
    /// Without kept-alive connections: a jump in time lets the server close idle ones.
    http: reqwest::Client,
}

/// An answer: status, body and the operation's status URL when one started.
struct Answer {
    code: u16,
    body: Value,
    operation: Option<String>,
}

impl World {
    /// Slipway on `config` with authentication on: `root` the platform Admin, `alice` a
    /// Contributor and `bob` an Owner of the subscription, and a policy that holds every
    /// create of a large instance for an Owner's approval (`on_timeout`, within `timeout`).
    async fn start(config: String, idp: TestIdp, timeout: &str, on_timeout: &str) -> World {
        let tables = format!(
            "{METERS}\n[auth]\nadmins = [\"root\"]\n\n[[auth.issuers]]\nissuer = \"{}\"\naudiences = [\"{AUD}\"]\n",
            idp.issuer
        );
        let dir = tempfile::tempdir().unwrap();
        let text = config.replace("{DIR}", &dir.path().display().to_string()) + &tables;
        let s = TestServer::start_text(dir, &text).await;
        let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
        let w = World { s, idp, http };
        let registered = json!({"state": "Registered", "properties": {"tenantId": "tenant-a"}});
        assert_eq!(w.call("root", "PUT", &format!("/subscriptions/{SUB}"), API, Some(registered)).await.code, 201);
        for (n, (who, role)) in [("alice", "Contributor"), ("bob", "Owner"), ("carol", "Reader")].iter().enumerate() {
            let path = format!(
                "/subscriptions/{SUB}/providers/Slipway.Authorization/roleAssignments/00000000-0000-0000-0000-00000000000{n}"
            );
            let grant = json!({"properties": {"roleDefinitionId": role, "principalId": who}});
            assert_eq!(w.call("root", "PUT", &path, API, Some(grant)).await.code, 201);
        }
        let definition = json!({"properties": {"displayName": "Large instances need an Owner", "policyRule": {
            "if": {"field": "Slipway.Example/computeInstances/size", "equals": "large"},
            "then": {"effect": "requireApproval", "details": {"requests": ["create", "update"], "timeout": timeout, "onTimeout": on_timeout}}}}});
        let policies = format!("/subscriptions/{SUB}/providers/Microsoft.Authorization");
        let answer = w
            .call(
                "root",
                "PUT",
                &format!("{policies}/policyDefinitions/approve-large"),
                POLICY_VERSION,
                Some(definition),
            )
            .await;
        assert_eq!(answer.code, 201, "{}", answer.body);
        let assignment =
            json!({"properties": {"policyDefinitionId": format!("{policies}/policyDefinitions/approve-large")}});
        let answer = w
            .call(
                "root",
                "PUT",
                &format!("{policies}/policyAssignments/approve-large"),
                POLICY_VERSION,
                Some(assignment),
            )
            .await;
        assert_eq!(answer.code, 201, "{}", answer.body);
        w
    }

    fn token(&self, who: &str) -> String {
        self.idp.sign("key-1", &self.idp.claims(AUD, who, "tenant-a", SystemClock.now().as_millis() / 1000))
    }

    async fn call(&self, who: &str, method: &str, path: &str, version: &str, body: Option<Value>) -> Answer {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = format!("{}{path}{sep}api-version={version}", self.s.base);
        let mut req = self.http.request(method.parse().unwrap(), url).bearer_auth(self.token(who));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let operation = header(&r, "azure-asyncoperation");
        Answer { code: r.status().as_u16(), operation, body: r.json().await.unwrap_or(Value::Null) }
    }

    async fn create(&self, who: &str, name: &str, size: &str) -> Answer {
        let body = json!({"location": "westeurope", "properties": {"size": size, "image": "debian-12"}});
        self.call(who, "PUT", &rid("computeInstances", name), API, Some(body)).await
    }

    async fn status(&self, who: &str, status_url: &str) -> Value {
        let r = self.http.get(status_url).bearer_auth(self.token(who)).send().await.unwrap();
        r.json().await.unwrap()
    }

    /// `POST {operation}/approve|deny` by `who`.
    async fn decide(&self, who: &str, status_url: &str, verb: &str, comment: &str) -> Answer {
        let path = crate::common::path_of(status_url.split('?').next().unwrap());
        self.call(who, "POST", &format!("{path}/{verb}"), API, Some(json!({"comment": comment}))).await
    }

    async fn terminal(&self, status_url: &str) -> Value {
        eventually("the operation to end", T, async || {
            let op = self.status("root", status_url).await;
            if ["Succeeded", "Failed", "Canceled"].contains(&op["status"].as_str().unwrap_or_default()) {
                Ok(op)
            } else {
                Err(op.to_string())
            }
        })
        .await
    }

    async fn pending_for(&self, who: &str) -> Vec<Value> {
        let filter = "approver%20eq%20%27me%27";
        let list =
            self.call(who, "GET", &format!("/subscriptions/{SUB}/operationStatuses?$filter={filter}"), API, None).await;
        assert_eq!(list.code, 200, "{}", list.body);
        list.body["value"].as_array().cloned().unwrap_or_default()
    }
}

fn local_config() -> String {
    config_text(Path::new("{DIR}"), "")
}

/// The example instance's schema without its references (the simulator serves no other type).
const INSTANCE_SCHEMA: &str = r#"{"type": "object", "additionalProperties": false,
  "properties": {"size": {"type": "string", "enum": ["small", "medium", "large"]}, "image": {"type": "string"}}}"#;

fn aap_config(sim: &aap_sim::Sim, schema: &Path) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:0"
retry_after_seconds = 0
[store]
url = "sqlite:{{DIR}}/slipway.db"
[engine]
node_name = "approvals"
shutdown_grace_seconds = 5
[[providers]]
name = "aap"
type = "aap"
url = "{url}"
template_prefix = "slipway"
request_timeout_seconds = 5
{compute}"#,
        url = sim.base_url(),
        compute = aap_type("computeInstances", "ComputeInstance") + &format!("schema = \"{}\"\n", schema.display()),
    )
}

/// The whole story on one provider; `launches` counts the jobs the provider started.
async fn approve_deny_and_hold_quota(w: &World, launches: impl Fn() -> usize) {
    // A small instance is not held.
    let small = w.create("alice", "small1", "small").await;
    assert_eq!(small.code, 201, "{}", small.body);
    assert_eq!(w.terminal(small.operation.as_ref().unwrap()).await["status"], "Succeeded");
    let ran_before = launches();

    // A large one is accepted and waits, with what it would change attached.
    let big = w.create("alice", "big1", "large").await;
    assert_eq!(
        (big.code, big.body["properties"]["provisioningState"].as_str()),
        (201, Some("WaitingForApproval")),
        "{}",
        big.body
    );
    let op_url = big.operation.clone().expect("an operation");
    let waiting = w.status("alice", &op_url).await;
    assert_eq!(waiting["status"], "WaitingForApproval", "{waiting}");
    let approval = &waiting["properties"]["approval"];
    assert_eq!(
        (
            approval["state"].as_str(),
            approval["request"].as_str(),
            approval["requestedBy"].as_str(),
            approval["approverRole"].as_str()
        ),
        (Some("Pending"), Some("Create"), Some("alice"), Some("Owner")),
        "{approval}"
    );
    let change = &approval["whatIf"]["changes"][0];
    assert_eq!(change["changeType"], "Create", "{approval}");
    assert_eq!(change["after"]["properties"]["size"], "large", "{approval}");
    let quota = approval["whatIf"]["guardrails"].as_array().unwrap().iter().find(|g| g["kind"] == "quota").cloned();
    assert!(
        quota.is_some_and(|q| q["message"].as_str().unwrap().contains("1 → 2 of the subscription's 3")),
        "{approval}"
    );

    // Who may decide: not the requester, not a Reader; the Owner sees it in their list.
    let own = w.decide("alice", &op_url, "approve", "mine").await;
    assert_eq!((own.code, own.body["error"]["code"].as_str()), (403, Some("ApproverIsRequester")), "{}", own.body);
    let reader = w.decide("carol", &op_url, "approve", "").await;
    assert_eq!(
        (reader.code, reader.body["error"]["code"].as_str()),
        (403, Some("AuthorizationFailed")),
        "{}",
        reader.body
    );
    assert!(w.pending_for("alice").await.is_empty(), "the requester may not decide it");
    let listed = w.pending_for("bob").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["name"], waiting["name"]);

    // It holds its quota: one more instance fits, a third does not.
    let small2 = w.create("alice", "small2", "small").await;
    assert_eq!(small2.code, 201, "{}", small2.body);
    assert_eq!(w.terminal(small2.operation.as_ref().unwrap()).await["status"], "Succeeded");
    let over = w.create("alice", "small3", "small").await;
    assert_eq!((over.code, over.body["error"]["code"].as_str()), (409, Some("QuotaExceeded")), "{}", over.body);
    assert_eq!(launches(), ran_before + 1, "only small2 ran; the held create ran nothing");

    // Approved with a comment: its job runs.
    let approved = w.decide("bob", &op_url, "approve", "ok for the demo").await;
    assert_eq!((approved.code, approved.body["status"].as_str()), (202, Some("Accepted")), "{}", approved.body);
    let done = w.terminal(&op_url).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    let decision = &done["properties"]["approval"]["decision"];
    assert_eq!(
        (decision["verdict"].as_str(), decision["by"].as_str(), decision["comment"].as_str()),
        (Some("Approved"), Some("bob"), Some("ok for the demo"))
    );
    let again = w.decide("bob", &op_url, "deny", "").await;
    assert_eq!(again.code, 409, "a decided request cannot be decided again: {}", again.body);
    let ran_after_approval = launches();
    assert!(ran_after_approval > ran_before + 1, "the approved create ran");

    // Denied: nothing runs, nothing is left, its quota is free again.
    assert_eq!(w.call("alice", "DELETE", &rid("computeInstances", "small2"), API, None).await.code, 202);
    eventually("small2 to go", T, async || {
        let code = w.call("alice", "GET", &rid("computeInstances", "small2"), API, None).await.code;
        if code == 404 { Ok(()) } else { Err(code.to_string()) }
    })
    .await;
    let ran_before_denial = launches();
    let big2 = w.create("alice", "big2", "large").await;
    assert_eq!(big2.code, 201, "{}", big2.body);
    let denied = w.decide("bob", big2.operation.as_ref().unwrap(), "deny", "too big for a test").await;
    assert_eq!((denied.code, denied.body["status"].as_str()), (202, Some("Failed")), "{}", denied.body);
    assert_eq!(denied.body["error"]["code"], "ApprovalDenied");
    assert!(denied.body["error"]["message"].as_str().unwrap().contains("too big for a test"));
    assert_eq!(w.call("alice", "GET", &rid("computeInstances", "big2"), API, None).await.code, 404);
    assert_eq!(launches(), ran_before_denial, "a denied request runs nothing");
    assert_eq!(w.create("alice", "small3", "small").await.code, 201, "the denied create's quota is free");

    // Each decision is in the activity log, in its change's transaction.
    let log_path = format!("/subscriptions/{SUB}/providers/Microsoft.Insights/eventtypes/management/values");
    let log = w.call("root", "GET", &log_path, "2015-04-01", None).await;
    assert_eq!(log.code, 200, "{}", log.body);
    let decided: Vec<(String, String)> = log.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["caller"] == "bob")
        .filter_map(|e| {
            e["operationName"]["value"].as_str().map(|n| {
                (
                    n.rsplit('/').nth(1).unwrap().to_owned(),
                    e["subStatus"]["value"].as_str().unwrap_or_default().to_owned(),
                )
            })
        })
        .collect();
    assert!(
        decided.contains(&("approve".into(), "Accepted".into()))
            && decided.contains(&("deny".into(), "Accepted".into())),
        "{decided:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_create_waits_for_an_owner_with_its_change_attached_local_provider() {
    let idp = TestIdp::start().await;
    let w = World::start(local_config(), idp, "PT1H", "Canceled").await;
    let jobs = w.s.dir.path().join("jobs");
    let count = move || std::fs::read_dir(&jobs).map(|d| d.count()).unwrap_or(0);
    approve_deny_and_hold_quota(&w, count).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_create_waits_for_an_owner_with_its_change_attached_aap_provider() {
    let sim = quick_sim().await;
    let idp = TestIdp::start().await;
    let schema = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(schema.path(), INSTANCE_SCHEMA).unwrap();
    let w = World::start(aap_config(&sim, schema.path()), idp, "PT1H", "Canceled").await;
    let handle = sim.handle();
    approve_deny_and_hold_quota(&w, || handle.job_count()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_update_shows_what_the_automation_would_change_and_a_denial_keeps_the_old_spec() {
    let idp = TestIdp::start().await;
    let w = World::start(local_config(), idp, "PT1H", "Canceled").await;
    let vm = rid("computeInstances", "vm");
    let small = w.create("alice", "vm", "small").await;
    assert_eq!(w.terminal(small.operation.as_ref().unwrap()).await["status"], "Succeeded");
    let resize = w.call("alice", "PATCH", &vm, API, Some(json!({"properties": {"size": "large"}}))).await;
    assert_eq!(resize.body["properties"]["provisioningState"], "WaitingForApproval", "{}", resize.body);
    let op_url = resize.operation.expect("an operation");
    // Its prediction: the create job in check mode on the proposed spec.
    let predicted = eventually("the prediction", T, async || {
        let op = w.status("bob", &op_url).await;
        let automation = &op["properties"]["approval"]["whatIf"]["changes"][0]["automation"];
        if automation["changedTasks"].is_array() { Ok(op) } else { Err(op.to_string()) }
    })
    .await;
    assert_eq!(predicted["status"], "WaitingForApproval", "a prediction does not start it: {predicted}");
    let delta = &predicted["properties"]["approval"]["whatIf"]["changes"][0]["delta"];
    assert!(
        delta.as_array().unwrap().iter().any(|d| d["path"] == "properties.size" && d["before"] == "small"),
        "{delta}"
    );

    let denied = w.decide("bob", &op_url, "deny", "stay small").await;
    assert_eq!(denied.code, 202, "{}", denied.body);
    let back = w.call("alice", "GET", &vm, API, None).await.body;
    assert_eq!(
        (back["properties"]["size"].as_str(), back["properties"]["provisioningState"].as_str()),
        (Some("small"), Some("Succeeded")),
        "{back}"
    );
}

/// Time running out ends the request as the policy says, on paused time.
#[tokio::test]
async fn a_request_nobody_decides_ends_as_its_policy_says() {
    for (on_timeout, status, code) in [("Failed", "Failed", "ApprovalTimedOut"), ("Canceled", "Canceled", "Canceled")] {
        let idp = TestIdp::start().await;
        let w = World::start(local_config(), idp, "PT10M", on_timeout).await;
        let big = w.create("alice", "big", "large").await;
        let op_url = big.operation.expect("an operation");
        slipway_test_support::jump(Duration::from_secs(9 * 60)).await;
        assert_eq!(w.status("alice", &op_url).await["status"], "WaitingForApproval");
        slipway_test_support::jump(Duration::from_secs(61)).await;
        let ended = w.terminal(&op_url).await;
        assert_eq!((ended["status"].as_str(), ended["error"]["code"].as_str()), (Some(status), Some(code)), "{ended}");
        assert_eq!(ended["properties"]["approval"]["state"], "TimedOut");
        assert!(w.pending_for("bob").await.is_empty(), "nothing left to decide");
        assert_eq!(w.decide("bob", &op_url, "approve", "").await.code, 409, "too late");
        assert_eq!(w.call("alice", "GET", &rid("computeInstances", "big"), API, None).await.code, 404);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requester_may_withdraw_a_waiting_request() {
    let idp = TestIdp::start().await;
    let w = World::start(local_config(), idp, "PT1H", "Canceled").await;
    let big = w.create("alice", "big", "large").await;
    let op_url = big.operation.expect("an operation");
    let path = crate::common::path_of(op_url.split('?').next().unwrap());
    let canceled = w.call("alice", "POST", &format!("{path}/cancel"), API, None).await;
    assert_eq!((canceled.code, canceled.body["status"].as_str()), (202, Some("Canceled")), "{}", canceled.body);
    assert_eq!(w.status("alice", &op_url).await["properties"]["approval"]["state"], "Canceled");
    assert_eq!(w.call("alice", "GET", &rid("computeInstances", "big"), API, None).await.code, 404);
}

/// `slipway approval` as `who`: exit code and stdout.
async fn cli(w: &World, who: &str, args: &[&str]) -> (i32, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_slipway"));
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("SLIPWAY_")) {
        c.env_remove(k);
    }
    let config = profile.path().join("config.toml");
    c.args(args).stdin(std::process::Stdio::null()).envs([
        ("SLIPWAY_CONFIG", config.display().to_string()),
        ("SLIPWAY_URL", w.s.base.clone()),
        ("SLIPWAY_SUBSCRIPTION", SUB.to_string()),
        ("SLIPWAY_TOKEN", w.token(who)),
    ]);
    let out = c.output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    (out.status.code().unwrap(), text + &String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_shows_and_decides_approvals() {
    let idp = TestIdp::start().await;
    let w = World::start(local_config(), idp, "PT1H", "Canceled").await;
    let big = w.create("alice", "big", "large").await;
    let op_url = big.operation.expect("an operation");
    let id = w.status("alice", &op_url).await["name"].as_str().unwrap().to_string();

    let (code, listed) = cli(&w, "bob", &["approval", "list", "-o", "json"]).await;
    assert_eq!(code, 0, "{listed}");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["name"], id.as_str());
    let (code, mine) = cli(&w, "alice", &["approval", "list"]).await;
    assert_eq!(code, 0, "{mine}");
    assert!(!mine.contains(&id), "nothing for the requester to decide: {mine}");
    let (_, all) = cli(&w, "alice", &["approval", "list", "--all"]).await;
    assert!(all.contains(&id) && all.contains("Pending"), "{all}");

    let (code, shown) = cli(&w, "bob", &["approval", "show", &id]).await;
    assert_eq!(code, 0, "{shown}");
    for part in ["alice", "Owner", "Create", "properties.size", "large", "Why:"] {
        assert!(shown.contains(part), "{part} in:\n{shown}");
    }
    let (code, refused) = cli(&w, "alice", &["approval", "approve", &id]).await;
    assert_eq!(code, 6, "refused: {refused}");
    assert!(refused.contains("ApproverIsRequester"), "{refused}");
    let (code, denied) = cli(&w, "bob", &["approval", "deny", &id, "-m", "not this week"]).await;
    assert_eq!(code, 0, "{denied}");
    assert!(denied.contains("Denied"), "{denied}");
    let (_, shown) = cli(&w, "bob", &["approval", "show", &id]).await;
    assert!(shown.contains("Decision: Denied by bob") && shown.contains("not this week"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_lists_a_request_shows_its_change_and_decides_it() {
    use crate::common::browser::Browser;
    let idp = TestIdp::start().await;
    let w = World::start(local_config(), idp, "PT1H", "Canceled").await;
    let big = w.create("alice", "big", "large").await;
    let op_url = big.operation.expect("an operation");

    let b = Browser::start("approvals").await;
    b.goto(&format!("{}/ui/sign-in", w.s.base)).await;
    b.submit("#sign-in", &[("token", &w.token("bob"))]).await;
    b.goto(&format!("{}/ui/subscriptions/{SUB}", w.s.base)).await;
    b.click("#approvals-link").await;
    let mine = b.text("#approvals-mine").await;
    assert!(mine.contains("Create") && mine.contains("big") && mine.contains("alice"), "{mine}");
    b.assert_clean("approvals").await;
    b.screenshot("approvals").await;
    b.click("#approvals-mine a").await;
    let changes = b.text("#approval-changes").await;
    assert!(changes.contains("properties.size") && changes.contains("large"), "{changes}");
    assert!(b.text("#approval-guardrails").await.contains("requireApproval"));
    b.assert_clean("a request waiting for approval").await;
    b.screenshot("approval-pending").await;
    b.submit("#approve-form", &[("comment", "ok from the console")]).await;
    let decision = b.text("#decision").await;
    assert!(
        decision.contains("Approved") && decision.contains("bob") && decision.contains("ok from the console"),
        "{decision}"
    );
    assert!(!b.has("#approve-form").await && !b.has("#deny-form").await, "a decided request offers no buttons");
    b.assert_clean("an approved request").await;
    assert_eq!(w.terminal(&op_url).await["status"], "Succeeded");
    b.close().await;
}
