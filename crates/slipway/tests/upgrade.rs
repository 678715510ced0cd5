//! Upgrades: a database each released schema version wrote — through that version's own
//! binary, API and engine (`scripts/upgrade-fixture.sh`, fixtures in `tests/fixtures/upgrade/`)
//! — opens with this one, migrates, reads back as it was written, and takes new work; on
//! SQLite and on PostgreSQL. (A database newer than the binary is refused: the store's
//! conformance case `case_a_newer_schema_is_refused`.)
//!
//! The fixtures hold virtual networks a (created), b (created, then updated with tags and DNS
//! servers), f (its create failed), c (created, then deleted: gone), and from version 2 on one
//! API token.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::replica::{pg_url, unique_schema};
use crate::common::{TestServer, config_text, header, rid};
use serde_json::json;
use slipway_store::entries::EntryKind;

const WAIT: Duration = Duration::from_secs(60);
/// Every schema version released so far; the last is this binary's.
const VERSIONS: [u32; 6] = [1, 2, 3, 4, 5, 6];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upgrade").join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_released_sqlite_database_opens_migrates_and_takes_new_work() {
    for version in VERSIONS {
        let source = fixture(&format!("sqlite-v{version}.db"));
        let mut s = TestServer::start_full("", "", "", |dir| {
            std::fs::copy(&source, dir.join("slipway.db")).expect("copy the fixture");
        })
        .await;
        check_upgraded(&s, version).await;
        s.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_released_postgres_database_opens_migrates_and_takes_new_work() {
    let (db, connection) = tokio_postgres::connect(&pg_url(), tokio_postgres::NoTls).await.expect("PostgreSQL");
    tokio::spawn(connection);
    for version in VERSIONS {
        let schema = unique_schema(&format!("upgrade_v{version}"));
        let dump = std::fs::read_to_string(fixture(&format!("postgres-v{version}.sql"))).expect("read the fixture");
        db.batch_execute(&dump.replace("__schema__", &schema)).await.unwrap_or_else(|e| panic!("load v{version}: {e}"));
        let mut s = start_on_postgres(&schema).await;
        check_upgraded(&s, version).await;
        s.stop().await;
        db.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.expect("drop the schema");
    }
}

/// What every version's fixture must read back as, and new work on it.
async fn check_upgraded(s: &TestServer, version: u32) {
    let vnet = |name: &str| rid("virtualNetworks", name);
    let at = format!("v{version}");
    let (code, a) = s.get_json(&vnet("a")).await;
    assert_eq!((code, a["properties"]["provisioningState"].as_str()), (200, Some("Succeeded")), "{at}: {a}");
    assert_eq!(a["properties"]["addressSpace"], "10.1.0.0/16", "{at}: {a}");
    let (_, b) = s.get_json(&vnet("b")).await;
    assert_eq!(b["tags"], json!({"tier": "gold"}), "{at}: the update's tags: {b}");
    assert_eq!(b["properties"]["dnsServers"], json!(["10.2.0.4"]), "{at}: {b}");
    assert_eq!(b["properties"]["provisioningState"], "Succeeded", "{at}: {b}");
    let (_, f) = s.get_json(&vnet("f")).await;
    assert_eq!(f["properties"]["provisioningState"], "Failed", "{at}: {f}");
    let (code, _) = s.get_json(&vnet("c")).await;
    assert_eq!(code, 404, "{at}: deleted before the upgrade");
    let collection = "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/rg1/providers/Slipway.Example/virtualNetworks";
    let (_, list) = s.get_json(collection).await;
    let names: Vec<&str> = list["value"].as_array().into_iter().flatten().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["a", "b", "f"], "{at}: {list}");
    let store = s.app.as_ref().expect("running").store();
    let tokens = store.list_entries(EntryKind::ApiToken, None).await.expect("tokens");
    assert_eq!(tokens.len(), usize::from(version >= 2), "{at}: API tokens came with version 2");

    // New work on the old records: an update, a retry of the failed one, a delete.
    let update = s.put(&vnet("a"), json!({"location": "local", "properties": {"addressSpace": "10.9.0.0/16"}})).await;
    assert!(update.status().is_success(), "{at}: update a: {}", update.status());
    let done = s.wait_terminal(&header(&update, "azure-asyncoperation").expect("status URL"), WAIT).await;
    assert_eq!(done["status"], "Succeeded", "{at}: {done}");
    let retry = s.put(&vnet("f"), json!({"location": "local", "properties": {"addressSpace": "10.4.0.0/16"}})).await;
    let done = s.wait_terminal(&header(&retry, "azure-asyncoperation").expect("status URL"), WAIT).await;
    assert_eq!(done["status"], "Succeeded", "{at}: {done}");
    let delete = s.http.delete(s.url(&vnet("b"))).send().await.expect("DELETE");
    assert_eq!(delete.status().as_u16(), 202, "{at}");
    let done = s.wait_terminal(&header(&delete, "azure-asyncoperation").expect("status URL"), WAIT).await;
    assert_eq!(done["status"], "Succeeded", "{at}: {done}");
    let (code, _) = s.get_json(&vnet("b")).await;
    assert_eq!(code, 404, "{at}");
}

/// [`TestServer`] with its store on `schema` of the test PostgreSQL.
async fn start_on_postgres(schema: &str) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = format!("url = \"sqlite:{}\"", dir.path().join("slipway.db").display());
    let text = config_text(dir.path(), "").replace(&sqlite, &format!("url = \"{}\"\nschema = \"{schema}\"", pg_url()));
    TestServer::start_text(dir, &text).await
}
