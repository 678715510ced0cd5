//! A PostgreSQL primary lost and its synchronous standby promoted in its place, with child
//! processes of the real binary on a multi-host URL (`target_session_attrs=read-write`) and
//! the AWX-API simulator, loopback only.
//!
//! Clients keep creating resources through every replica the whole time. Until the standby
//! is promoted every replica answers `503` + `Retry-After` (never `500`); afterwards they
//! serve again without a restart, every write they had accepted is there, every operation
//! ends, and no idempotency key has two AAP jobs. The unavailability window is printed.
//!
//! `SLIPWAY_TEST_KEEP=1` keeps the replicas' logs and prints where they are.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::postgres::PrivatePostgres;
use crate::common::replica::{Logs, ReplicaConfig, quick_sim, start_replicas, unique_schema};
use crate::common::{API, path_of, rid};
use serde_json::json;
use slipway_test_support::eventually;

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promoted_standby_serves_every_accepted_write_once() {
    const REPLICAS: usize = 2;
    const LEASE_SECONDS: u64 = 3;
    // Accepted before the primary goes, and after the standby took its place.
    const BEFORE: usize = 30;
    const AFTER: usize = 20;
    let primary = PrivatePostgres::start();
    let standby = PrivatePostgres::standby_of(&primary, "standby");
    primary.require_synchronous_standby("standby");
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/test?target_session_attrs=read-write",
        primary.port(),
        standby.port()
    );
    let dir = Logs::new("failover");
    let sim = quick_sim().await;
    let config = ReplicaConfig { pg_url: url, ..ReplicaConfig::new(&unique_schema("failover"), LEASE_SECONDS) };
    let mut replicas = start_replicas(dir.path(), &sim, &config, REPLICAS).await;
    let pids: Vec<Option<u32>> = replicas.iter().map(|r| r.pid()).collect();
    let bases: Vec<String> = replicas.iter().map(|r| r.base()).collect();

    let load = Load::start(&bases);
    eventually("creates accepted before the failure", T, async || load.accepted_after(None) >= BEFORE).await;
    primary.crash();
    let crashed = Instant::now();
    // What an HA manager notices before it promotes: here, every replica refusing writes.
    eventually("every replica refusing writes after the crash", T, async || {
        (0..REPLICAS).all(|i| load.refused_by_since(i, crashed) > 0)
    })
    .await;
    standby.promote();
    let promoted = Instant::now();
    eventually("creates accepted after the promotion", T, async || load.accepted_after(Some(promoted)) >= AFTER).await;
    let attempts = load.stop().await;

    let unexpected: Vec<String> = attempts
        .iter()
        .filter_map(|a| match &a.outcome {
            Outcome::Other(what) => Some(format!("{} through replica {}: {what}", a.id, a.replica)),
            _ => None,
        })
        .collect();
    assert!(unexpected.is_empty(), "answers other than 201 or 503 + Retry-After: {unexpected:?}; {}", dir.hint());
    let accepted: Vec<(&str, &str)> = attempts
        .iter()
        .filter_map(|a| match &a.outcome {
            Outcome::Accepted(op) => Some((a.id.as_str(), op.as_str())),
            _ => None,
        })
        .collect();
    let last_before =
        attempts.iter().filter(|a| a.accepted() && a.at < crashed).map(|a| a.at).max().expect("accepted before");
    let first_after =
        attempts.iter().filter(|a| a.accepted() && a.at > crashed).map(|a| a.at).min().expect("accepted after");
    let refused = attempts.iter().filter(|a| matches!(a.outcome, Outcome::Refused)).count();

    // Every accepted write survived and its operation ends; read through whichever replica answers.
    let http = client();
    let mut pending: Vec<&str> = accepted.iter().map(|(_, op)| *op).collect();
    eventually("every accepted operation Succeeded", T, async || {
        let mut left = Vec::new();
        for op in pending.drain(..) {
            match operation_status(&http, &bases, op).await {
                Some(OpStatus::Done(s)) if s == "Succeeded" => {}
                Some(OpStatus::Done(s)) => panic!("operation {op} ended {s}; {}", dir.hint()),
                Some(OpStatus::Missing) => panic!("accepted operation {op} was lost in the failover; {}", dir.hint()),
                _ => left.push(op),
            }
        }
        pending = left;
        if pending.is_empty() { Ok(()) } else { Err(format!("{} operations not Succeeded", pending.len())) }
    })
    .await;
    // No operation stuck: every stored resource — those whose create was refused with a 503
    // after it had committed included — settles.
    let list = format!("/subscriptions/{}/providers/Slipway.Example/computeInstances?api-version={API}", common::SUB);
    let stored = eventually("every stored resource Succeeded", T, async || {
        let mut values = Vec::new();
        let mut next = Some(format!("{}{list}", bases[0]));
        while let Some(url) = next.take() {
            let resp = http.get(url).send().await.map_err(|e| e.to_string())?;
            let body: serde_json::Value = resp.json().await.map_err(|e| e.to_string())?;
            values.extend(body["value"].as_array().cloned().unwrap_or_default());
            next = body["nextLink"].as_str().map(str::to_string);
        }
        let unsettled = values.iter().filter(|v| v["properties"]["provisioningState"] != "Succeeded").count();
        if unsettled == 0 { Ok(values.len()) } else { Err(format!("{unsettled} of {} not Succeeded", values.len())) }
    })
    .await;
    assert!(stored >= accepted.len(), "{stored} stored resources, {} accepted; {}", accepted.len(), dir.hint());

    let jobs = jobs_by_key(&sim);
    let duplicates: Vec<_> = jobs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicates.is_empty(), "duplicate AAP jobs: {duplicates:?}; {}", dir.hint());
    assert_eq!(jobs.len(), stored, "one AAP job per stored resource; {}", dir.hint());
    let still: Vec<Option<u32>> = replicas.iter().map(|r| r.pid()).collect();
    assert_eq!(still, pids, "no replica was restarted");
    for r in &mut replicas {
        assert!(r.running(), "{} exited; {}", r.name, dir.hint());
    }
    println!(
        "failover: {} creates accepted ({} before the crash), {refused} refused with 503 + Retry-After, 0 other \
         answers; writes unavailable {:.2} s (last accepted before the crash to first after), of which {:.2} s \
         after the promotion; no accepted write lost; {stored} resources stored ({} committed behind a 503), all \
         Succeeded; {} AAP jobs, 0 duplicates",
        accepted.len(),
        accepted.iter().filter(|(id, _)| attempts.iter().any(|a| a.id == *id && a.at < crashed)).count(),
        first_after.duration_since(last_before).as_secs_f64(),
        first_after.saturating_duration_since(promoted).as_secs_f64(),
        stored - accepted.len(),
        jobs.values().sum::<usize>(),
    );
    for r in &mut replicas {
        r.kill();
    }
    sim.shutdown().await;
    dir.finish();
}

/// Clients creating resources through each replica, one request at a time per replica, each
/// under a new name; a refused create is not retried (its name may still have committed).
struct Load {
    attempts: Arc<Mutex<Vec<Attempt>>>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

#[derive(Debug)]
struct Attempt {
    replica: usize,
    id: String,
    /// When the answer came.
    at: Instant,
    outcome: Outcome,
}

impl Attempt {
    fn accepted(&self) -> bool {
        matches!(self.outcome, Outcome::Accepted(_))
    }
}

#[derive(Debug)]
enum Outcome {
    /// 201 with this operation-status path.
    Accepted(String),
    /// 503 with `Retry-After` and an ARM error body.
    Refused,
    Other(String),
}

impl Load {
    fn start(bases: &[String]) -> Load {
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let tasks = bases
            .iter()
            .enumerate()
            .map(|(replica, base)| {
                let (attempts, stopped, base) = (Arc::clone(&attempts), stopped.clone(), base.clone());
                tokio::spawn(async move {
                    let http = client();
                    for n in 0.. {
                        if *stopped.borrow() {
                            return;
                        }
                        let id = rid("computeInstances", &format!("vm{replica}-{n}"));
                        let outcome = create(&http, &base, &id).await;
                        let refused = matches!(outcome, Outcome::Refused);
                        attempts.lock().unwrap().push(Attempt { replica, id, at: Instant::now(), outcome });
                        if refused {
                            // A client honouring a short Retry-After; the replicas are set to 0.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                })
            })
            .collect();
        Load { attempts, stop, tasks }
    }

    fn accepted_after(&self, since: Option<Instant>) -> usize {
        let attempts = self.attempts.lock().unwrap();
        attempts.iter().filter(|a| a.accepted() && since.is_none_or(|t| a.at > t)).count()
    }

    fn refused_by_since(&self, replica: usize, since: Instant) -> usize {
        let attempts = self.attempts.lock().unwrap();
        attempts
            .iter()
            .filter(|a| a.replica == replica && a.at > since && matches!(a.outcome, Outcome::Refused))
            .count()
    }

    async fn stop(self) -> Vec<Attempt> {
        self.stop.send_replace(true);
        for t in self.tasks {
            t.await.expect("load task");
        }
        Arc::try_unwrap(self.attempts).expect("load tasks done").into_inner().unwrap()
    }
}

async fn create(http: &reqwest::Client, base: &str, id: &str) -> Outcome {
    let body = json!({"location": "local", "properties": {}});
    let resp = match http.put(format!("{base}{id}?api-version={API}")).json(&body).send().await {
        Ok(resp) => resp,
        Err(e) => return Outcome::Other(format!("no answer: {e}")),
    };
    let code = resp.status().as_u16();
    let retry_after = resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
    let operation = resp.headers().get("azure-asyncoperation").and_then(|v| v.to_str().ok()).map(path_of);
    let body: serde_json::Value = resp.json().await.unwrap_or_default();
    match code {
        201 => operation.map_or_else(|| Outcome::Other("201 without Azure-AsyncOperation".into()), Outcome::Accepted),
        503 if retry_after.as_deref().is_some_and(|s| s.parse::<u64>().is_ok())
            && body["error"]["code"] == "ServiceUnavailable" =>
        {
            Outcome::Refused
        }
        _ => Outcome::Other(format!("{code} Retry-After {retry_after:?}: {body}")),
    }
}

enum OpStatus {
    Done(String),
    Running,
    /// 404: the store does not know the operation.
    Missing,
}

/// An operation's status read through the first replica that answers it; `None` while none
/// does (503).
async fn operation_status(http: &reqwest::Client, bases: &[String], op: &str) -> Option<OpStatus> {
    for base in bases {
        let Ok(resp) = http.get(format!("{base}{op}")).send().await else { continue };
        match resp.status().as_u16() {
            503 => continue,
            404 => return Some(OpStatus::Missing),
            200 => {}
            code => panic!("GET {op} through {base}: {code}"),
        }
        let body: serde_json::Value = resp.json().await.expect("operation body");
        return Some(match body["status"].as_str() {
            Some(s @ ("Succeeded" | "Failed" | "Canceled")) => OpStatus::Done(s.to_string()),
            _ => OpStatus::Running,
        });
    }
    None
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
}

/// AAP jobs launched per idempotency key.
fn jobs_by_key(sim: &aap_sim::Sim) -> BTreeMap<String, usize> {
    let mut by_key = BTreeMap::new();
    for job in sim.handle().jobs() {
        let key = job.extra_vars["slipway_idempotency_key"].as_str().unwrap_or_default().to_string();
        *by_key.entry(key).or_default() += 1;
    }
    by_key
}
