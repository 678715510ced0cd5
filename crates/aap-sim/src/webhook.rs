//! Webhook notifications, sent the way AWX's `WebhookBackend` sends them: one POST per event,
//! JSON body, `User-Agent: AWX <version> (open)`, the configured headers, no retry.
//!
//! Each configured webhook has its own queue and sender task, so one receiver sees a job's
//! `started` before its `success`/`error` (AWX gives no such guarantee, but a test double that
//! reorders would make receivers' tests flaky for no fidelity gain).

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::config::SimWebhook;
use crate::state::{AWX_VERSION, Notice};
use crate::util::python_json_dumps;

pub struct Notifier {
    queues: Vec<(SimWebhook, mpsc::UnboundedSender<String>)>,
    tasks: Vec<JoinHandle<()>>,
}

impl Notifier {
    pub fn start(webhooks: &[SimWebhook]) -> Notifier {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap_or_default();
        let mut queues = Vec::new();
        let mut tasks = Vec::new();
        for hook in webhooks {
            let (tx, mut rx) = mpsc::unbounded_channel::<String>();
            let client = client.clone();
            let target = hook.clone();
            tasks.push(tokio::spawn(async move {
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
            }));
            queues.push((hook.clone(), tx));
        }
        Notifier { queues, tasks }
    }

    pub fn send(&self, notices: Vec<Notice>) {
        for notice in notices {
            let body = python_json_dumps(&notice.body);
            for (hook, tx) in &self.queues {
                if hook.events.iter().any(|e| e == notice.event.as_str()) {
                    // The receiver only goes away at shutdown, when losing notifications is fine.
                    let _ = tx.send(body.clone());
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
