//! Replica faults on PostgreSQL, with child processes of the real binary and the AWX-API
//! simulator, loopback only:
//!
//! * PostgreSQL restarts in the middle of a run: while it is down every replica reports not
//!   ready and refuses writes with `503` + `Retry-After` (never `500`); when it is back they
//!   recover without a restart, and every accepted operation ends Succeeded with exactly one
//!   AAP job per idempotency key.
//! * A replica paused (SIGSTOP) past its lease is fenced: another replica takes its work over
//!   and finishes it, and once resumed the paused one neither overwrites that work nor starts
//!   a second AAP job — also for a launch that was in flight when it was paused.
//!
//! `SLIPWAY_TEST_KEEP=1` keeps the replicas' logs and prints where they are.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::postgres::PrivatePostgres;
use crate::common::replica::{Logs, Replica, ReplicaConfig, aap_type, pg_url, unique_schema};
use crate::common::{self, API, rid};
use aap_sim::{Faults, Sim, SimConfig};
use serde_json::{Value, json};
use slipway_test_support::{eventually, ready_within};

/// PostgreSQL restarted mid-run (issue 4, proof 3). The cluster is private to this test: the
/// machine's shared PostgreSQL, which other test binaries use, is never touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_run_loses_no_accepted_operation() {
    const OPS: usize = 60;
    const REPLICAS: usize = 3;
    const LEASE_SECONDS: u64 = 3;
    const T: Duration = Duration::from_secs(60);
    let pg = PrivatePostgres::start();
    let dir = Logs::new("pg-restart");
    let mut sim_config = SimConfig { tick_ms: 20, ..SimConfig::default() };
    for t in &mut sim_config.job_templates {
        t.duration_seconds = 1.0;
    }
    let sim = Sim::start("127.0.0.1:0", sim_config).await.unwrap();
    let http = client();
    let config = ReplicaConfig { pg_url: pg.url(), ..ReplicaConfig::new(&unique_schema("pgr"), LEASE_SECONDS) };
    let mut replicas: Vec<Replica> =
        (0..REPLICAS).map(|i| Replica::with_config(dir.path(), i, &sim, &config)).collect();
    for r in &mut replicas {
        r.start();
    }
    for r in &replicas {
        let up = ready_within(&http, &r.base(), T).await;
        up.unwrap_or_else(|e| panic!("{} never became ready ({e}); {}", r.name, dir.hint()));
    }
    let bases: Vec<String> = replicas.iter().map(Replica::base).collect();
    let pids: Vec<Option<u32>> = replicas.iter().map(Replica::pid).collect();

    // Creates spread over every replica's API, each one accepted owed completion: a first
    // wave, and once some of its jobs are done a second wave, right after which PostgreSQL
    // goes down — with operations done, jobs running, launches in flight and intents unclaimed.
    let accepting = Instant::now();
    let mut ops = Vec::new();
    for i in 0..OPS {
        if i == OPS * 2 / 3 {
            let finished = || sim.handle().jobs().iter().filter(|j| j.finished.is_some()).count();
            eventually("some jobs of the first wave finished", T, async || finished() >= OPS / 6).await;
        }
        let base = &bases[i % REPLICAS];
        let resp = put(
            &http,
            base,
            &rid("computeInstances", &format!("vm{i}")),
            &json!({"location": "local", "properties": {}}),
        )
        .await;
        assert_eq!(resp.status().as_u16(), 201, "create {i} through {base}");
        ops.push(operation_path(&resp));
    }
    let accepted_in = accepting.elapsed();

    // Down for longer than a lease: on its return every lease has expired, so replicas also
    // take over each other's work. Probed all along.
    let jobs_at_stop = sim.handle().jobs();
    let finished_at_stop = jobs_at_stop.iter().filter(|j| j.finished.is_some()).count();
    pg.stop();
    let stopped = Instant::now();
    let renewals_failed = |r: &Replica| r.log().matches("lease renewal failed").count();
    let failed_before: Vec<usize> = replicas.iter().map(renewals_failed).collect();
    let mut refused = Vec::new();
    eventually("every replica without a lease renewal for longer than a lease", T, async || {
        for (i, base) in bases.iter().enumerate() {
            let resp = http.get(format!("{base}/readyz")).send().await.expect("readyz while down");
            assert_eq!(resp.status().as_u16(), 503, "{base}/readyz while PostgreSQL is down");
            let id = rid("computeInstances", &format!("refused{}-{i}", refused.len()));
            let resp = put(&http, base, &id, &json!({"location": "local", "properties": {}})).await;
            expect_unavailable(resp, &format!("PUT {id} through {base} while PostgreSQL is down")).await;
            let resp = http.get(format!("{base}{}", ops[i])).send().await.expect("GET while down");
            expect_unavailable(resp, &format!("GET {} through {base} while PostgreSQL is down", ops[i])).await;
            refused.push(id);
        }
        // A replica renews every third of a lease (and logs each failure): its fourth failed
        // renewal comes more than a lease after its last good one, and after any claim it
        // made before the database went away.
        let failed: Vec<usize> =
            replicas.iter().zip(&failed_before).map(|(r, before)| renewals_failed(r) - before).collect();
        if failed.iter().all(|n| *n >= 4) { Ok(()) } else { Err(format!("failed renewals so far: {failed:?}")) }
    })
    .await;
    pg.start_again();
    let restarted = Instant::now();
    let down_for = stopped.elapsed();

    // Ready again without being restarted.
    let mut ready_after = Duration::ZERO;
    for r in &replicas {
        let up = ready_within(&http, &r.base(), T).await;
        up.unwrap_or_else(|e| panic!("{} not ready again after the restart ({e}); {}", r.name, dir.hint()));
        ready_after = ready_after.max(restarted.elapsed());
    }
    let still: Vec<Option<u32>> = replicas.iter().map(Replica::pid).collect();
    assert_eq!(still, pids, "no replica was restarted");
    for r in &mut replicas {
        assert!(r.running(), "{} exited; {}", r.name, dir.hint());
    }

    // Every accepted operation completes; read through whichever replica answers.
    let mut pending: Vec<&String> = ops.iter().collect();
    eventually("every accepted operation Succeeded", T.saturating_sub(restarted.elapsed()), async || {
        let mut left = Vec::new();
        for op in pending.drain(..) {
            match operation_status(&http, &bases, op).await.as_deref() {
                Some("Succeeded") => {}
                Some(s @ ("Failed" | "Canceled")) => panic!("operation {op} ended {s}; {}", dir.hint()),
                _ => left.push(op),
            }
        }
        pending = left;
        match pending.len() {
            0 => Ok(()),
            n => Err(format!("{n} operations not Succeeded; {}", dir.hint())),
        }
    })
    .await;
    let settled_after = restarted.elapsed();
    for r in &replicas {
        let resp = http.get(format!("{}/readyz", r.base())).send().await.expect("readyz");
        assert_eq!(resp.status().as_u16(), 200, "{} ready at the end", r.name);
    }

    let jobs = jobs_by_key(&sim);
    let duplicates: Vec<_> = jobs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicates.is_empty(), "duplicate AAP jobs: {duplicates:?}");
    assert_eq!(jobs.len(), OPS, "one AAP job per accepted operation");
    // A write refused with 503 did not happen.
    for id in &refused {
        let resp = http.get(format!("{}{id}?api-version={API}", bases[0])).send().await.expect("GET refused");
        assert_eq!(resp.status().as_u16(), 404, "{id} was refused with 503 yet exists");
    }
    // The activity log, written in each create's transaction, has each accepted create once
    // and none of those refused.
    let mut logged = logged_creates(&http, &bases[0]).await;
    logged.sort();
    let mut expected: Vec<String> = (0..OPS).map(|i| format!("vm{i}")).collect();
    expected.sort();
    assert_eq!(logged, expected, "one logged create per accepted create");
    println!(
        "pg-restart: {OPS} operations accepted in {:.1} s through {REPLICAS} replicas; PostgreSQL stopped with {} jobs \
         launched, {finished_at_stop} finished; down {:.1} s ({} readiness, write and read probes, all 503 + \
         Retry-After); all replicas ready {:.2} s after it started again, all operations Succeeded after {:.1} s; \
         {} AAP jobs, 0 duplicates",
        accepted_in.as_secs_f64(),
        jobs_at_stop.len(),
        down_for.as_secs_f64(),
        refused.len() * 3,
        ready_after.as_secs_f64(),
        settled_after.as_secs_f64(),
        jobs.values().sum::<usize>(),
    );
    for r in &mut replicas {
        r.kill();
    }
    sim.shutdown().await;
    dir.finish();
}

/// A replica paused past its lease (issue 4, proof 4), on the shared PostgreSQL.
///
/// A launches a long job for `vm-a`, then starts the first launch of a virtual network: the
/// template lookup that precedes the launch `POST` is held by the simulator, and A is paused
/// with it in flight, its `Launching` intent committed. B starts, takes both over once A's
/// lease expires, adopts vm-a's job, resolves the intent (no such job) and launches it itself.
/// When A resumes, its in-flight launch must not reach AAP, and none of its writes may land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_replica_is_fenced_and_launches_no_duplicate() {
    const LEASE_SECONDS: u64 = 3;
    const T: Duration = Duration::from_secs(45);
    let dir = Logs::new("pause");
    let schema = unique_schema("pause");
    let sim = Sim::start("127.0.0.1:0", SimConfig { tick_ms: 20, ..SimConfig::default() }).await.unwrap();
    let sim_handle = sim.handle();
    let http = client();
    let db = Db::connect(&pg_url(), &schema).await;
    let config = ReplicaConfig {
        statement_timeout_seconds: 2,
        extra_toml: aap_type("virtualNetworks", "VirtualNetwork"),
        ..ReplicaConfig::new(&schema, LEASE_SECONDS)
    };
    let mut a = Replica::with_config(dir.path(), 0, &sim, &config);
    let mut b = Replica::with_config(dir.path(), 1, &sim, &config);
    a.start();
    ready_within(&http, &a.base(), T).await.unwrap_or_else(|e| panic!("A never became ready ({e}); {}", dir.hint()));

    // A launches vm-a's job, which runs for a while.
    let vm = rid("computeInstances", "vm-a");
    let resp = put(&http, &a.base(), &vm, &json!({"location": "local", "properties": {"delaySeconds": 6}})).await;
    assert_eq!(resp.status().as_u16(), 201, "create vm-a");
    let vm_op = operation_path(&resp);
    let base_a = a.base();
    eventually("A launched vm-a's job", T, async || {
        jobs_of(&sim, &vm_op) == 1
            && operation_status(&http, std::slice::from_ref(&base_a), &vm_op).await.as_deref() == Some("Provisioning")
    })
    .await;

    // A starts vnet-a's launch; the simulator holds its template lookup (any GET of a job
    // template precedes the launch POST), and A is paused then.
    let lookups = || -> u64 {
        let requests = sim_handle.requests();
        requests.iter().filter(|(k, _)| k.starts_with("GET ") && k.contains("/job_templates/")).map(|(_, n)| n).sum()
    };
    let lookups_before = lookups();
    sim_handle.set_faults(Faults { latency_ms: 1500, ..Faults::default() });
    let vnet = rid("virtualNetworks", "vnet-a");
    let resp = put(&http, &a.base(), &vnet, &json!({"location": "local", "properties": {"delaySeconds": 1}})).await;
    assert_eq!(resp.status().as_u16(), 201, "create vnet-a");
    let vnet_op = operation_path(&resp);
    eventually("A's template lookup for vnet-a", T, async || lookups() > lookups_before).await;
    a.signal("STOP");
    let paused = Instant::now();
    sim_handle.set_faults(Faults::default());
    let vnet_key = resource_key(&vnet);
    let intent = db.resource(&vnet).await.expect("vnet-a is stored");
    assert_eq!(intent.lease_owner.as_deref(), Some("replica-0"), "A holds vnet-a");
    let launching = &intent.body["jobs"][0];
    assert_eq!(launching["state"], "Launching", "A committed its launch intent first: {}", intent.body);
    assert_eq!(jobs_of(&sim, &vnet_op), 0, "no vnet-a job yet");

    // B takes both over once A's lease has expired, and finishes them.
    b.start();
    ready_within(&http, &b.base(), T).await.unwrap_or_else(|e| panic!("B never became ready ({e}); {}", dir.hint()));
    let base_b = b.base();
    let through_b = std::slice::from_ref(&base_b);
    eventually("B resolved vnet-a's launch and finished it", T, async || {
        operation_status(&http, through_b, &vnet_op).await.as_deref() == Some("Succeeded")
    })
    .await;
    let vnet_after = paused.elapsed();
    eventually("B finished vm-a with A's job", T, async || {
        operation_status(&http, through_b, &vm_op).await.as_deref() == Some("Succeeded")
    })
    .await;
    let vm_after = paused.elapsed();
    let vm_done = db.resource(&vm).await.expect("vm-a");
    let vnet_done = db.resource(&vnet).await.expect("vnet-a");
    let ops_done = (db.operations(&vm).await, db.operations(&vnet).await);
    assert!(vnet_done.epoch > intent.epoch, "B claimed vnet-a under a newer lease epoch");
    assert_eq!(jobs_of(&sim, &vm_op), 1, "B adopted vm-a's job");
    assert_eq!(jobs_of(&sim, &vnet_op), 1, "B launched vnet-a's job once");
    let seen: Vec<&str> =
        [&vm_done, &vnet_done].iter().map(|r| r.body["provisioningState"].as_str().unwrap()).collect();
    assert_eq!(seen, ["Succeeded", "Succeeded"]);
    let resources_b = (get_json(&http, &base_b, &vm).await, get_json(&http, &base_b, &vnet).await);

    // A resumes: it must find out it lost both leases, by being fenced.
    a.signal("CONT");
    let resumed = Instant::now();
    let vm_key = resource_key(&vm);
    eventually("A's writes for vm-a and vnet-a fenced", T, async || {
        let log = a.log();
        lease_lost(&log, &vm_key) && lease_lost(&log, &vnet_key)
    })
    .await;
    let fenced_after = resumed.elapsed();
    // And it works normally again: a new resource created through it completes.
    let vm_c = rid("computeInstances", "vm-c");
    let resp = put(&http, &a.base(), &vm_c, &json!({"location": "local", "properties": {}})).await;
    assert_eq!(resp.status().as_u16(), 201, "create vm-c through A after the pause");
    let vm_c_op = operation_path(&resp);
    eventually("vm-c Succeeded after A resumed", T, async || {
        operation_status(&http, std::slice::from_ref(&base_a), &vm_c_op).await.as_deref() == Some("Succeeded")
    })
    .await;

    // Nothing A did after its pause landed: B's documents, job history included, stand.
    assert_eq!(db.resource(&vm).await.expect("vm-a").body, vm_done.body, "vm-a's stored resource");
    assert_eq!(db.resource(&vnet).await.expect("vnet-a").body, vnet_done.body, "vnet-a's stored resource");
    assert_eq!((db.operations(&vm).await, db.operations(&vnet).await), ops_done, "the stored operations");
    for base in [&base_a, &base_b] {
        assert_eq!((get_json(&http, base, &vm).await, get_json(&http, base, &vnet).await), resources_b);
        for op in [&vm_op, &vnet_op] {
            let status = operation_status(&http, std::slice::from_ref(base), op).await;
            assert_eq!(status.as_deref(), Some("Succeeded"), "{op} through {base}");
        }
    }
    let jobs = jobs_by_key(&sim);
    assert!(jobs.values().all(|n| *n == 1), "one AAP job per key: {jobs:?}; {}", dir.hint());
    assert_eq!(jobs.len(), 3, "vm-a, vnet-a, vm-c: {jobs:?}");
    let vnet_job_key = launching["idempotencyKey"].as_str().expect("idempotency key").to_string();
    let log_a = a.log();
    assert!(
        !log_a.lines().any(|l| l.contains("launched AAP job") && l.contains(&vnet_job_key)),
        "A launched vnet-a's job after its pause; {}",
        dir.hint()
    );
    let abandoned = log_a.lines().any(|l| l.contains("lease may have expired") && l.contains(&vnet_key));
    println!(
        "pause: A paused (lease {LEASE_SECONDS} s) with vm-a's job running and vnet-a's launch in flight; B \
         resolved and relaunched vnet-a's job, Succeeded {:.1} s after the pause, and finished vm-a with A's job \
         {:.1} s after it (the job ran 6 s); after SIGCONT A was fenced on both within {:.2} s{}; {} AAP jobs, \
         one per key; stored resources and operations unchanged",
        vnet_after.as_secs_f64(),
        vm_after.as_secs_f64(),
        fenced_after.as_secs_f64(),
        if abandoned { " and abandoned the in-flight launch" } else { "" },
        jobs.len(),
    );
    a.kill();
    b.kill();
    sim.shutdown().await;
    db.drop_schema().await;
    dir.finish();
}

// ---------------------------------------------------------------------------------------
// Reading what the replicas stored

/// A direct connection to the replicas' schema, to read what they stored (job history
/// included, which the API does not show).
struct Db {
    client: tokio_postgres::Client,
    schema: String,
}

#[derive(Debug)]
struct StoredResource {
    body: Value,
    lease_owner: Option<String>,
    epoch: i64,
}

impl Db {
    async fn connect(url: &str, schema: &str) -> Db {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL {url}: {e}"));
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Db { client, schema: schema.to_string() }
    }

    async fn resource(&self, id: &str) -> Option<StoredResource> {
        let sql = format!("SELECT body, lease_owner, lease_epoch FROM {}.resources WHERE key = $1", self.schema);
        let row = self.client.query_opt(&sql, &[&resource_key(id)]).await.expect("read resource")?;
        let body: String = row.get(0);
        Some(StoredResource {
            body: serde_json::from_str(&body).expect("resource body"),
            lease_owner: row.get(1),
            epoch: row.get(2),
        })
    }

    /// Leaves the shared database as it was (a failed run keeps the schema to look at).
    async fn drop_schema(&self) {
        let sql = format!("DROP SCHEMA {} CASCADE", self.schema);
        self.client.batch_execute(&sql).await.expect("drop the test schema");
    }

    /// `(id, status, body)` of every operation of the resource, oldest first.
    async fn operations(&self, id: &str) -> Vec<(String, String, Value)> {
        let sql =
            format!("SELECT id, status, body FROM {}.operations WHERE resource_key = $1 ORDER BY seq", self.schema);
        let rows = self.client.query(&sql, &[&resource_key(id)]).await.expect("read operations");
        rows.iter()
            .map(|r| (r.get(0), r.get(1), serde_json::from_str(r.get::<_, &str>(2)).expect("operation body")))
            .collect()
    }
}

// ---------------------------------------------------------------------------------------
// HTTP and simulator helpers

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
}

async fn put(http: &reqwest::Client, base: &str, id: &str, body: &Value) -> reqwest::Response {
    http.put(format!("{base}{id}?api-version={API}"))
        .json(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("PUT {id}: {e}"))
}

async fn get_json(http: &reqwest::Client, base: &str, id: &str) -> Value {
    let resp = http.get(format!("{base}{id}?api-version={API}")).send().await.expect("GET");
    assert_eq!(resp.status().as_u16(), 200, "GET {id} through {base}");
    resp.json().await.expect("resource body")
}

/// The operation-status path from `Azure-AsyncOperation`.
fn operation_path(resp: &reqwest::Response) -> String {
    let url = resp.headers().get("azure-asyncoperation").and_then(|v| v.to_str().ok()).expect("Azure-AsyncOperation");
    format!("/{}", url.splitn(4, '/').nth(3).unwrap_or_default())
}

/// An operation's status read through the first replica that answers it; `None` while none
/// does (503). Any other failure status fails the test.
async fn operation_status(http: &reqwest::Client, bases: &[String], op: &str) -> Option<String> {
    for base in bases {
        let Ok(resp) = http.get(format!("{base}{op}")).send().await else { continue };
        let code = resp.status().as_u16();
        if code == 503 {
            continue;
        }
        assert_eq!(code, 200, "GET {op} through {base}");
        let body: Value = resp.json().await.expect("operation body");
        return body["status"].as_str().map(str::to_string);
    }
    None
}

/// `503` with `Retry-After` and an ARM error body.
async fn expect_unavailable(resp: reqwest::Response, what: &str) {
    let code = resp.status().as_u16();
    let retry_after = resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    assert_eq!(code, 503, "{what}: {body}");
    assert!(retry_after.as_deref().is_some_and(|s| s.parse::<u64>().is_ok()), "{what}: Retry-After {retry_after:?}");
    assert_eq!(body["error"]["code"], "ServiceUnavailable", "{what}: {body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
}

/// AAP jobs launched per idempotency key.
fn jobs_by_key(sim: &Sim) -> BTreeMap<String, usize> {
    let mut by_key = BTreeMap::new();
    for job in sim.handle().jobs() {
        let key = job.extra_vars["slipway_idempotency_key"].as_str().unwrap_or_default().to_string();
        *by_key.entry(key).or_default() += 1;
    }
    by_key
}

/// AAP jobs of one operation (keys are `{operation id}:{n}`).
fn jobs_of(sim: &Sim, operation_path: &str) -> usize {
    let path = operation_path.split('?').next().unwrap_or_default();
    let id = path.rsplit('/').next().unwrap_or_default().to_ascii_lowercase();
    jobs_by_key(sim).iter().filter(|(k, _)| k.split_once(':').is_some_and(|(op, _)| op == id)).map(|(_, n)| n).sum()
}

fn resource_key(id: &str) -> String {
    id.to_ascii_lowercase()
}

/// Whether the log shows a write for `key` refused by the fence.
fn lease_lost(log: &str, key: &str) -> bool {
    log.lines().any(|l| l.contains("lease lost") && l.contains(key))
}

/// The names of the compute instances whose create the activity log records as created.
async fn logged_creates(http: &reqwest::Client, base: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut next = Some(format!(
        "{base}/subscriptions/{}/providers/Microsoft.Insights/eventtypes/management/values?api-version=2015-04-01",
        common::SUB
    ));
    while let Some(page_url) = next {
        let page: Value = http.get(&page_url).send().await.unwrap().json().await.unwrap();
        for e in page["value"].as_array().unwrap_or_else(|| panic!("{page}")) {
            let write = e["operationName"]["value"] == "Slipway.Example/computeInstances/write";
            if write && e["subStatus"]["value"] == "Created" {
                names.push(e["resourceId"].as_str().unwrap().rsplit('/').next().unwrap().to_string());
            }
        }
        next = page["nextLink"].as_str().map(str::to_string);
    }
    names
}
