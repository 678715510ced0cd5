//! The event feed over HTTP with the example playbooks (docs/arm-contract.md#event-feed): a
//! resource's life as its events, in commit order, at subscription, group and resource scope;
//! paged and resumed from a cursor; followed as Server-Sent Events and resumed with
//! `Last-Event-ID`; `410` for a cursor the feed cannot continue from. What a caller of another
//! tenant sees of it is in `tenancy.rs`.

use std::time::Duration;

use crate::common::sse::SseReader;
use crate::common::{SUB, TestServer, header};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const FEED: &str = "providers/Slipway.Resources/events";

fn id(group: &str, name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{group}/providers/Slipway.Example/virtualNetworks/{name}")
}

async fn page(s: &TestServer, path: &str) -> Value {
    let (code, body) = s.get_json(path).await;
    assert_eq!(code, 200, "{path}: {body}");
    body
}

/// `(type, provisioningState or operation status)` of each event.
fn story(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            let state = e["provisioningState"].as_str().or(e["operation"]["status"].as_str()).unwrap_or("-");
            (e["type"].as_str().unwrap().to_string(), state.to_string())
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resources_life_is_its_events_in_order_and_a_reader_resumes_from_its_cursor() {
    let mut s = TestServer::start().await;
    let feed = format!("/subscriptions/{SUB}/{FEED}");
    // The groups first: each one's creation is an event of its own (1 and 2).
    for group in ["web", "db"] {
        let url = format!("{}/subscriptions/{SUB}/resourceGroups/{group}?api-version=2025-06-01", s.base);
        assert_eq!(s.http.put(url).json(&json!({"location": "local"})).send().await.unwrap().status(), 201);
    }
    let start = page(&s, &format!("{feed}?since=latest")).await;
    assert_eq!((start["value"].as_array().map(Vec::len), start["cursor"].as_str()), (Some(0), Some("2")));

    let net = id("web", "net1");
    let r = s.put(&net, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    let op = s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    assert_eq!(op["status"], "Succeeded");
    let body = page(&s, &format!("{feed}?since=2")).await;
    let events = body["value"].as_array().unwrap().clone();
    assert_eq!(
        story(&events),
        pairs(&[
            ("resourceCreated", "Accepted"),
            ("resourceStateChanged", "Provisioning"),
            ("resourceStateChanged", "Succeeded")
        ]),
        "{body}"
    );
    let ids: Vec<u64> = events.iter().map(|e| e["id"].as_str().unwrap().parse().unwrap()).collect();
    assert_eq!(ids, [3, 4, 5]);
    assert_eq!(events[0]["resourceId"], net);
    assert_eq!(events[2]["previousProvisioningState"], "Provisioning");
    // The create operation rides on the resource's events.
    assert_eq!(events[0]["operation"]["name"], op["name"]);
    assert_eq!(events[0]["operation"]["id"].as_str(), op["id"].as_str(), "the operation's status path");
    assert_eq!(
        (events[2]["operation"]["status"].as_str(), events[2]["operation"]["previousStatus"].as_str()),
        (Some("Succeeded"), Some("Provisioning"))
    );
    assert!(events.windows(2).all(|w| w[0]["time"].as_str() <= w[1]["time"].as_str()));
    let cursor = body["cursor"].as_str().unwrap().to_string();
    assert_eq!(cursor, "5");
    assert!(body.get("nextLink").is_none(), "the page read to the end");

    // Nothing new: the same cursor back. A change elsewhere, in another group, moves it on.
    let again = page(&s, &format!("{feed}?since={cursor}")).await;
    assert_eq!((again["value"].as_array().unwrap().len(), again["cursor"].as_str()), (0, Some("5")));
    let other = id("db", "net2");
    let r = s.put(&other, json!({"location": "local", "properties": {"addressSpace": "10.1.0.0/16"}})).await;
    s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    let web = page(&s, &format!("/subscriptions/{SUB}/resourceGroups/web/{FEED}?since={cursor}")).await;
    assert_eq!(web["value"].as_array().unwrap().len(), 0, "net2 is in group db: {web}");
    assert_eq!(web["cursor"], "8", "the group's reader moves on past what is not its own");
    let db = page(&s, &format!("/subscriptions/{SUB}/resourceGroups/DB/{FEED}?since={cursor}")).await;
    assert_eq!(db["value"].as_array().unwrap().len(), 3);
    assert!(db["value"].as_array().unwrap().iter().all(|e| e["resourceId"] == other));

    // Pages of two, linked; the resource's own feed, also once it is deleted.
    let (mut seen, mut url) = (Vec::new(), s.url(&format!("{feed}?$top=2")));
    loop {
        let (code, body) = s.follow(&url).await;
        assert_eq!(code, 200, "{body}");
        seen.extend(body["value"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_string()));
        match body["nextLink"].as_str() {
            Some(next) => url = next.to_string(),
            None => break,
        }
    }
    assert_eq!(seen, (1..=8).map(|n| n.to_string()).collect::<Vec<_>>());
    let r = s.http.delete(s.url(&net)).send().await.unwrap();
    s.wait_terminal(&header(&r, "azure-asyncoperation").unwrap(), WAIT).await;
    let own = page(&s, &format!("{net}/events?since=8")).await;
    let told = story(own["value"].as_array().unwrap());
    assert_eq!(told.first(), Some(&("resourceStateChanged".to_string(), "Deleting".to_string())), "{own}");
    let last = own["value"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["type"].as_str(), last["operation"]["status"].as_str()),
        (Some("resourceDeleted"), Some("Succeeded")),
        "{own}"
    );
    assert!(own["value"].as_array().unwrap().iter().all(|e| e["resourceId"] == net));

    // A cursor that is not one, and one past the feed's newest (a restored store's reader).
    let (code, e) = s.get_json(&format!("{feed}?since=soon")).await;
    assert_eq!(
        (code, e["error"]["code"].as_str(), e["error"]["target"].as_str()),
        (400, Some("InvalidParameter"), Some("since"))
    );
    let r = s.get(&format!("{feed}?since=999")).await;
    assert_eq!(r.status().as_u16(), 410);
    let newest = header(&r, "x-slipway-event-cursor").expect("the cursor to resync to");
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "EventCursorExpired");
    assert!(e["error"]["message"].as_str().unwrap().contains(&format!("from cursor {newest}")), "{e}");
    // An EventSource's reconnect names its last event in a header.
    let resumed = s.http.get(s.url(&feed)).header("last-event-id", newest.as_str()).send().await.unwrap();
    assert_eq!(resumed.json::<Value>().await.unwrap()["value"].as_array().map(Vec::len), Some(0));
    s.stop().await;
}

/// Opens the feed as Server-Sent Events.
async fn follow(s: &TestServer, path: &str, last_event_id: Option<&str>) -> SseReader {
    let mut req = s.http.get(s.url(path));
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type").as_deref(), Some("text/event-stream"));
    SseReader::new(r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_sees_changes_as_they_commit_and_resumes_after_its_last_event() {
    let mut s = TestServer::start().await;
    let feed = format!("/subscriptions/{SUB}/{FEED}");
    let mut live = follow(&s, &format!("{feed}?follow=true&since=latest"), None).await;
    let net = id("web", "live");
    let r = s.put(&net, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    let op = header(&r, "azure-asyncoperation").unwrap();
    let mut seen = Vec::new();
    let mut ids = Vec::new();
    let done = tokio::time::timeout(WAIT, async {
        loop {
            let (name, data) = live.next().await.expect("the stream ended early");
            let event: Value = serde_json::from_str(&data).unwrap();
            assert_eq!(event["type"], name.as_str(), "the message's event name is the event's type");
            ids.push(live.last_id.clone().expect("every event has an id"));
            seen.push(name.clone());
            if event["operation"]["status"] == "Succeeded" {
                break;
            }
        }
    })
    .await;
    assert!(done.is_ok(), "the create's end never came: {seen:?}");
    assert_eq!(seen.first().map(String::as_str), Some("resourceCreated"));
    assert_eq!(ids.first().map(String::as_str), Some("1"), "from the first change after `latest`");
    assert_eq!(s.wait_terminal(&op, WAIT).await["status"], "Succeeded");

    // A reconnect names the last event it saw: the stream goes on after it, nothing twice.
    let resume_after = &ids[ids.len() / 2];
    let mut resumed = follow(&s, &format!("{feed}?follow=true"), Some(resume_after)).await;
    let (_, data) = resumed.next().await.expect("the events after the last one seen");
    let first: Value = serde_json::from_str(&data).unwrap();
    let expected = resume_after.parse::<u64>().unwrap() + 1;
    assert_eq!(first["id"], expected.to_string());

    // A cursor already gone is refused before the stream starts.
    let r = s.get(&format!("{feed}?follow=true&since=999")).await;
    assert_eq!(r.status().as_u16(), 410);
    s.stop().await;
}
