//! Webhook notifications, sent the way AWX's `WebhookBackend` sends them: one POST per event,
//! JSON body (AWX's default, [`notification_body`]), `User-Agent: AWX <version> (open)`, the
//! configured headers, no retry.
//!
//! Each configured webhook has [`LANES`] queues, each with its own sender task, and all of one
//! job's notifications go through the same queue, so one receiver sees a job's `started`
//! before its `success`/`error` (AWX gives no such guarantee, but a test double that reorders
//! would make receivers' tests flaky for no fidelity gain). Several jobs' notifications are
//! sent at once, as AWX's dispatcher workers send them: one sender for everything capped a
//! benchmark's 400 notifications a second at one round trip each, and a job's end reached
//! Slipway only after every notification queued before it.

use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::awx::{AWX_VERSION, Kind};
use crate::config::SimWebhook;
use crate::lifecycle::{Job, NotifyEvent};
use crate::util::{format_python, python_json_dumps};

/// A notification to send: the event and the body, made when the job made the transition.
#[derive(Debug, Clone)]
pub struct Notice {
    pub event: NotifyEvent,
    pub body: Value,
}

/// Senders per configured webhook.
const LANES: usize = 8;

pub struct Notifier {
    /// Per webhook, its lanes' queues.
    queues: Vec<(SimWebhook, Vec<mpsc::UnboundedSender<String>>)>,
    tasks: Vec<JoinHandle<()>>,
}

impl Notifier {
    pub fn start(webhooks: &[SimWebhook]) -> Notifier {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap_or_default();
        let mut queues = Vec::new();
        let mut tasks = Vec::new();
        for hook in webhooks {
            let mut lanes = Vec::with_capacity(LANES);
            for _ in 0..LANES {
                let (tx, rx) = mpsc::unbounded_channel::<String>();
                tasks.push(tokio::spawn(send_each(client.clone(), hook.clone(), rx)));
                lanes.push(tx);
            }
            queues.push((hook.clone(), lanes));
        }
        Notifier { queues, tasks }
    }

    pub fn send(&self, notices: Vec<Notice>) {
        for notice in notices {
            let body = python_json_dumps(&notice.body);
            let lane = notice.body["id"].as_u64().unwrap_or_default() as usize % LANES;
            for (hook, lanes) in &self.queues {
                if hook.events.iter().any(|e| e == notice.event.as_str()) {
                    // The receiver only goes away at shutdown, when losing notifications is fine.
                    let _ = lanes[lane].send(body.clone());
                }
            }
        }
    }

    pub fn shutdown(&self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One lane's sender: its notifications one after the other, in the order queued.
async fn send_each(client: reqwest::Client, target: SimWebhook, mut rx: mpsc::UnboundedReceiver<String>) {
    while let Some(body) = rx.recv().await {
        let mut req = client
            .post(&target.url)
            .header("Content-Type", "application/json")
            .header("User-Agent", format!("AWX {AWX_VERSION} (open)"));
        for (k, v) in &target.headers {
            req = req.header(k, v);
        }
        match req.body(body).send().await {
            Ok(resp) if resp.status().as_u16() >= 400 => {
                tracing::warn!(url = %target.url, status = %resp.status(), "webhook notification rejected (not retried)")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(url = %target.url, error = %e, "webhook notification failed (not retried)"),
        }
    }
}

/// AWX's default webhook body: `json.dumps(job.notification_data())`.
pub fn notification_body(base_url: &str, job: &Job) -> Value {
    let ui_kind = match job.kind {
        Kind::Job => "playbook",
        Kind::WorkflowJob => "workflow",
    };
    let mut body = Map::new();
    body.insert("id".into(), json!(job.id));
    body.insert("name".into(), json!(job.template_name));
    body.insert("url".into(), json!(format!("{base_url}/#/jobs/{ui_kind}/{}", job.id)));
    body.insert("created_by".into(), json!(job.launched_by.username));
    body.insert("started".into(), json!(job.started.map(format_python)));
    body.insert("finished".into(), json!(job.finished.map(format_python)));
    body.insert("status".into(), json!(job.status.as_str()));
    body.insert("traceback".into(), json!(job.result_traceback));
    let extra_vars = python_json_dumps(&job.extra_vars);
    match job.kind {
        Kind::Job => {
            let hosts = match job.host_stats() {
                Some((ok, failed)) => json!({"localhost": {
                    "failed": failed, "changed": 0, "dark": 0, "failures": u64::from(failed), "ok": ok,
                    "processed": 1, "skipped": 0, "rescued": 0, "ignored": 0}}),
                None => json!({}),
            };
            body.insert("inventory".into(), Value::Null);
            body.insert("project".into(), Value::Null);
            body.insert("playbook".into(), json!(format!("{}.yml", job.template_name)));
            body.insert("credential".into(), Value::Null);
            body.insert("limit".into(), json!(job.limit));
            body.insert("extra_vars".into(), json!(extra_vars));
            body.insert("hosts".into(), hosts);
        }
        Kind::WorkflowJob => {
            body.insert("body".into(), json!("Workflow job summary:\n"));
            body.insert("inventory".into(), Value::Null);
            body.insert("limit".into(), if job.limit.is_empty() { Value::Null } else { json!(job.limit) });
            body.insert("extra_vars".into(), json!(extra_vars));
        }
    }
    Value::Object(body)
}
