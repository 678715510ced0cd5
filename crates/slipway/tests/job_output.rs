//! `GET …/operationStatuses/{id}/logs` with the example playbooks: a job's output as text,
//! its last lines, and followed as Server-Sent Events that carry lines while the job runs
//! and end when it ends (docs/arm-contract.md#job-output).

use std::time::{Duration, Instant};

use crate::common::sse::SseReader;
use crate::common::{TestServer, header, rid};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn logs_url(status_url: &str) -> String {
    status_url.replace("?api-version", "/logs?api-version")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_output_reads_as_text_and_its_last_lines() {
    let mut s = TestServer::start().await;
    let id = rid("virtualNetworks", "printed");
    let r = s.put(&id, json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}})).await;
    let op = header(&r, "azure-asyncoperation").unwrap();
    assert_eq!(s.wait_terminal(&op, WAIT).await["status"], "Succeeded");

    let r = s.http.get(logs_url(&op)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type").as_deref(), Some("text/plain; charset=utf-8"));
    let job_id = header(&r, "x-slipway-job-id").unwrap();
    let text = r.text().await.unwrap();
    // The playbook's own task names, in order, then the recap.
    let record = text.find("TASK [Record the resource]").unwrap_or_else(|| panic!("{text}"));
    let recap = text.find("PLAY RECAP").unwrap_or_else(|| panic!("{text}"));
    assert!(record < recap, "{text}");
    let (_, history) = s.get_json(&format!("{id}/jobs")).await;
    assert_eq!(history["value"][0]["jobId"], job_id.as_str(), "{history}");

    let r = s.http.get(format!("{}&tail=2", logs_url(&op))).send().await.unwrap();
    let tail = r.text().await.unwrap();
    let last: Vec<&str> = text.lines().rev().take(2).collect::<Vec<_>>().into_iter().rev().collect();
    assert_eq!(tail, format!("{}\n", last.join("\n")), "the last two lines");
    assert!(tail.contains("localhost"), "the recap's host line is last: {tail}");

    for (query, code, target) in [("&tail=0", 400, "tail"), ("&tail=x", 400, "tail"), ("&follow=maybe", 400, "follow")]
    {
        let r = s.http.get(format!("{}{query}", logs_url(&op))).send().await.unwrap();
        assert_eq!(r.status().as_u16(), code, "{query}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["target"], target, "{body}");
    }
    let r = s.http.get(format!("{}&job=nope", logs_url(&op))).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let unknown =
        op.replace(&op[op.rfind('/').unwrap() + 1..op.find('?').unwrap()], "00000000-0000-4000-8000-000000000000");
    assert_eq!(s.http.get(logs_url(&unknown)).send().await.unwrap().status(), 404);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn following_streams_lines_while_the_job_runs_and_ends_with_it() {
    let mut s = TestServer::start().await;
    let id = rid("computeInstances", "followed");
    let body = json!({"location": "local", "properties": {"size": "small", "image": "x", "delaySeconds": 4}});
    let r = s.put(&id, body).await;
    let op = header(&r, "azure-asyncoperation").unwrap();
    let r = s.http.get(format!("{}&follow=true", logs_url(&op))).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type").as_deref(), Some("text/event-stream"));
    let mut events = SseReader::new(r);
    let start = Instant::now();
    // The task that sleeps is announced before it sleeps: seen while the operation runs.
    loop {
        let (name, data) = events.next().await.expect("the stream ended before the sleeping task");
        assert_eq!(name, "message", "{data}");
        if data.contains("TASK [Run for the requested time") {
            break;
        }
        assert!(start.elapsed() < WAIT, "no such line");
    }
    let (_, status) = s.follow(&op).await;
    assert_eq!(status["status"], "Provisioning", "the line came while the job ran: {status}");
    let mut lines = Vec::new();
    let end = loop {
        match events.next().await.expect("the stream ended without an end event") {
            (name, data) if name == "end" => break data,
            (_, data) => lines.push(data),
        }
    };
    assert_eq!(end, "Succeeded");
    assert!(lines.iter().any(|l| l.starts_with("PLAY RECAP")), "the rest of the output came before the end: {lines:?}");
    assert!(events.next().await.is_none(), "nothing after the end event");
    assert_eq!(s.wait_terminal(&op, WAIT).await["status"], "Succeeded");
    s.stop().await;
}
