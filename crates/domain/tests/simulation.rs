//! Randomised property test of the engine core (ARCHITECTURE.md invariants, docs/exactly-once.md): long seeded
//! sequences of client requests, `decide`, provider effects with arbitrary outcomes
//! (including lost answers and crashes between effect and record), and `apply`, against a
//! simulated provider that does NOT deduplicate launches by idempotency key and, like AWX,
//! finishes a launch request it has received even after the client gave up on it: such a
//! request creates its job later, within the policy's launch-ambiguity window minus the
//! replicas' clock skew. Checked after every step:
//!
//! * the provider never holds two jobs with the same idempotency key;
//! * a `Launch` effect repeats a key only after the provider positively reported that key
//!   absent (`Find` → nothing) or refused the previous attempt outright (`Transient`,
//!   `RateLimited`: "nothing happened");
//! * at most one job is non-terminal, both in the snapshot and at the provider;
//! * at most one operation is non-terminal, it is the resource's active one, and the
//!   resource shows its status; each operation is notified at most once.
//!
//! Then, with a well-behaved provider and time running past every deadline, every operation
//! ends, and every job the provider ever started is known to the resource (no orphans).

mod common;
#[path = "simulation/invariants.rs"]
mod invariants;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use slipway_domain::admission;
use slipway_domain::progress::JobProgress;
use slipway_domain::reconcile::{Effect, Failure, FailureKind, JobStart, Observation, Outcome};
use slipway_domain::{IdempotencyKey, JobId, JobState, Timestamp};

/// SplitMix64: small, deterministic, good enough to explore interleavings.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pct(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

/// A job as the provider sees it. Its state is a function of the provider's clock.
struct SimJob {
    key: IdempotencyKey,
    id: JobId,
    ends_at: Timestamp,
    final_state: JobState,
    purged: bool,
}

impl SimJob {
    fn state(&self, t: Timestamp) -> JobState {
        if t >= self.ends_at { self.final_state } else { JobState::Running }
    }
}

#[derive(Default, Debug)]
struct Stats {
    launches: u64,
    relaunches: u64,
    finds: u64,
    found_none: u64,
    crashes: u64,
    cancels: u64,
    user_cancels: u64,
    deletes_done: u64,
    timeouts: u64,
    ops: u64,
    late_landings: u64,
    poll_waits: u64,
    /// Operations that succeeded at 100% after showing progress.
    progressed: u64,
}

/// A launch request the provider received and will process at `lands_at`.
struct InFlight {
    key: IdempotencyKey,
    lands_at: Timestamp,
}

/// Largest clock skew between replicas in this simulation.
const MAX_SKEW_MS: u64 = 10_000;

struct Sim {
    rng: Rng,
    in_flight: Vec<InFlight>,
    w: World,
    /// The provider's (true, monotonic) clock; the domain sees it minus a replica's skew.
    t: Timestamp,
    jobs: Vec<SimJob>,
    next_job: u64,
    next_op: u32,
    faults: bool,
    launched_keys: HashSet<IdempotencyKey>,
    armed: HashSet<IdempotencyKey>,
    known_ids: HashSet<JobId>,
    stats: Stats,
    trace: Vec<String>,
    /// Each operation's `percentComplete` as last seen.
    percents: HashMap<slipway_domain::OperationId, u8>,
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut rng = Rng(seed);
        let mut w = World::new();
        w.notify = true;
        w.policy.create_deadline = secs(600);
        w.policy.update_deadline = secs(600);
        w.policy.delete_deadline = secs(1200);
        w.policy.max_history = 1 + rng.below(5) as usize;
        if rng.pct(20) {
            w.policy.backoff = None;
        }
        w.policy.block_deletion_on_failure = !rng.pct(30);
        Sim {
            rng,
            in_flight: Vec::new(),
            w,
            t: T0,
            jobs: Vec::new(),
            next_job: 0,
            next_op: 0,
            faults: true,
            launched_keys: HashSet::new(),
            armed: HashSet::new(),
            known_ids: HashSet::new(),
            stats: Stats::default(),
            trace: Vec::new(),
            percents: HashMap::new(),
        }
    }

    fn fail(&self, what: &str) -> ! {
        let n = if std::env::var_os("SIM_FULL_TRACE").is_some() { usize::MAX } else { 40 };
        let tail: Vec<&String> = self.trace.iter().rev().take(n).collect();
        panic!(
            "{what}\nsnapshot: {:#?}\nprovider jobs: {:?}\nlast steps (newest first): {tail:#?}",
            self.w.snap.resource,
            self.jobs.iter().map(|j| (&j.key, &j.id, j.state(self.t))).collect::<Vec<_>>()
        );
    }

    fn client_action(&mut self) {
        self.next_op += 1;
        let n = self.next_op;
        let specs: [Value; 3] = [v1(), v2(), json!({"addressSpace": "10.2.0.0/16"})];
        let roll = self.rng.below(100);
        let result = match roll {
            0..=39 => {
                let s = specs[self.rng.below(3) as usize].clone();
                format!("PUT op{n}: {:?}", self.w.put(n, s).map(|_| ()))
            }
            40..=49 => {
                let c = self.w.ctx(n);
                let tags = [("env".to_string(), format!("e{}", self.rng.below(3)))].into();
                let r = admission::admit_patch(&mut self.w.snap, Some(tags), None, |_| Ok(()), &c);
                format!("PATCH op{n}: {:?}", r.map(|_| ()))
            }
            50..=69 => format!("DELETE op{n}: {:?}", self.w.delete(n).map(|_| ())),
            _ => {
                let active = self.w.snap.active_operation().map(|o| o.id.clone());
                let any = (!self.w.snap.operations.is_empty()).then(|| {
                    let i = self.rng.below(self.w.snap.operations.len() as u64) as usize;
                    self.w.snap.operations[i].id.clone()
                });
                let target = match active {
                    Some(a) if self.rng.pct(70) => Some(a),
                    _ => any,
                };
                match target {
                    Some(id) => {
                        let r = admission::admit_cancel(&mut self.w.snap, &id, self.w.now);
                        if r.is_ok() {
                            self.stats.user_cancels += 1;
                        }
                        format!("CANCEL {id}: {:?}", r.map(|o| o.status))
                    }
                    None => "CANCEL nothing".into(),
                }
            }
        };
        if result.contains("Ok(") {
            self.stats.ops += 1;
        }
        self.trace.push(format!("[{}] {result}", self.w.now.0 - T0.0));
    }

    fn start_job(&mut self, key: &IdempotencyKey) -> JobStart {
        if self.jobs.iter().any(|j| j.key == *key) {
            self.fail(&format!("the provider started a second job for key {key}"));
        }
        self.next_job += 1;
        let id = JobId::from(format!("j{}", self.next_job));
        // Mostly minutes; some instant (same-millisecond relaunches), some long enough to
        // run into the operation deadlines.
        let max_ms = match self.rng.below(100) {
            0..=14 => 1,
            15..=29 => 1_200_000,
            _ => 300_000,
        };
        let runtime = Duration::from_millis(self.rng.below(max_ms));
        let final_state = if !self.faults {
            JobState::Succeeded
        } else {
            match self.rng.below(100) {
                0..=59 => JobState::Succeeded,
                60..=94 => JobState::Failed,
                _ => JobState::Canceled,
            }
        };
        self.jobs.push(SimJob {
            key: key.clone(),
            id: id.clone(),
            ends_at: self.t.add(runtime),
            final_state,
            purged: false,
        });
        JobStart { job_id: id, handle: Value::Null, state: JobState::Pending, template: "t".into() }
    }

    fn failure(kind: FailureKind, message: &str) -> Option<Outcome> {
        Some(Outcome::Failed(Failure { kind, message: message.into() }))
    }

    /// Performs `effect` at the provider; `None` when the engine crashed before recording.
    fn perform(&mut self, effect: &Effect) -> Option<Outcome> {
        let roll = if self.faults { self.rng.below(100) } else { 99 };
        let rate_limited = FailureKind::RateLimited { retry_after: secs(1 + self.rng.below(30)) };
        match effect {
            Effect::Sleep { .. }
            | Effect::PollDuplicate { .. }
            | Effect::CancelDuplicate { .. }
            | Effect::Kill { .. }
            | Effect::DeleteChildren { .. } => unreachable!(),
            Effect::Launch { key } => {
                self.stats.launches += 1;
                match roll {
                    0..=7 => Self::failure(FailureKind::Transient, "connection refused"),
                    8..=11 => Self::failure(rate_limited, "429"),
                    12..=14 => Self::failure(FailureKind::Permanent, "template missing"),
                    15..=19 => {
                        self.start_job(key);
                        Self::failure(FailureKind::Indeterminate, "response lost")
                    }
                    20..=23 => Self::failure(FailureKind::Indeterminate, "response lost"),
                    // Received, processed later: the client timed out (or died) meanwhile.
                    33..=40 => {
                        let window = self.w.policy.launch_ambiguity.as_millis() as u64 - MAX_SKEW_MS;
                        let lands_at = self.t.add(Duration::from_millis(1 + self.rng.below(window)));
                        self.in_flight.push(InFlight { key: key.clone(), lands_at });
                        if self.rng.pct(50) {
                            self.stats.crashes += 1;
                            None
                        } else {
                            Self::failure(FailureKind::Indeterminate, "no answer within the request timeout")
                        }
                    }
                    24..=29 => {
                        self.start_job(key);
                        self.stats.crashes += 1;
                        None
                    }
                    30..=32 => {
                        self.stats.crashes += 1;
                        None
                    }
                    _ => Some(Outcome::Launched(self.start_job(key))),
                }
            }
            Effect::Find { key } => {
                self.stats.finds += 1;
                match roll {
                    0..=9 => Self::failure(FailureKind::Transient, "timeout"),
                    10..=12 => Self::failure(FailureKind::Permanent, "unauthorized"),
                    13..=14 => Self::failure(FailureKind::NotFound, "no such template"),
                    15..=16 => Self::failure(rate_limited, "429"),
                    17..=19 => {
                        self.stats.crashes += 1;
                        None
                    }
                    _ => {
                        let t = self.t;
                        let found: Vec<JobStart> = self
                            .jobs
                            .iter()
                            .filter(|j| &j.key == key && !j.purged)
                            .map(|j| JobStart {
                                job_id: j.id.clone(),
                                handle: Value::Null,
                                state: j.state(t),
                                template: "t".into(),
                            })
                            .collect();
                        if found.is_empty() {
                            self.stats.found_none += 1;
                        }
                        Some(Outcome::Found(found))
                    }
                }
            }
            Effect::Poll { key } | Effect::Cancel { key } => {
                let job_id = self.w.job(key).job_id.clone();
                let t = self.t;
                let Some(i) = self.jobs.iter().position(|j| Some(&j.id) == job_id.as_ref() && !j.purged) else {
                    return Self::failure(FailureKind::NotFound, "no such job");
                };
                match roll {
                    0..=7 => return Self::failure(FailureKind::Transient, "502"),
                    8..=9 => return Self::failure(rate_limited, "429"),
                    10..=11 => {
                        self.stats.crashes += 1;
                        if matches!(effect, Effect::Cancel { .. }) && !self.jobs[i].state(t).is_terminal() {
                            self.jobs[i].final_state = JobState::Canceled;
                        }
                        return None;
                    }
                    12 if self.jobs[i].state(t).is_terminal() => {
                        // The provider cleaned up a finished job.
                        self.jobs[i].purged = true;
                        return Self::failure(FailureKind::NotFound, "purged");
                    }
                    _ => {}
                }
                let job = &mut self.jobs[i];
                if matches!(effect, Effect::Poll { .. }) {
                    let state = job.state(t);
                    let details = if state == JobState::Failed { "task failed" } else { "" };
                    // Task counts as a provider reads them: sometimes none, sometimes an older
                    // reading than the last (events still arriving), sometimes past the total.
                    let tasks = self.rng.below(9) as u32;
                    let progress = (tasks > 0).then(|| JobProgress {
                        tasks_started: tasks,
                        current_task: format!("task {tasks}"),
                        expected_tasks: Some(6),
                    });
                    return Some(Outcome::Observed(Observation {
                        state,
                        message: state.as_str().to_ascii_lowercase(),
                        error_details: details.into(),
                        stats: None,
                        changes: None,
                        progress,
                    }));
                }
                self.stats.cancels += 1;
                if job.state(t).is_terminal() {
                    return Some(Outcome::CancelNotNeeded);
                }
                job.final_state = JobState::Canceled;
                let soon = t.add(Duration::from_millis(self.rng.below(20_000)));
                job.ends_at = job.ends_at.min(soon);
                Some(Outcome::CancelRequested)
            }
        }
    }

    /// Where the engine would keep only a poll wait, it answers as the whole snapshot would.
    fn check_poll_wait(&mut self) {
        match common::poll_wait::check(&self.w.snap, &self.w.policy, self.w.now) {
            Ok(checked) => self.stats.poll_waits += u64::from(checked),
            Err(e) => self.fail(&e),
        }
    }

    /// One engine round: maybe a client request, `decide`, the effect, maybe a concurrent
    /// client request, `apply` (unless the engine crashed), and time moving on.
    fn step(&mut self, clients: bool) -> Effect {
        // Another replica's clock, up to 10 s behind.
        let skew = if self.rng.pct(15) { self.rng.below(MAX_SKEW_MS) as i64 } else { 0 };
        self.w.now = Timestamp(self.t.0 - skew);
        self.land_requests();
        if clients && self.rng.pct(12) {
            self.client_action();
            self.check("after a client request");
        }
        let had_resource = self.w.snap.resource.is_some();
        let timed_out_before = self.count_timeouts();
        let effect = self.w.decide();
        self.stats.timeouts += self.count_timeouts() - timed_out_before;
        if had_resource && self.w.snap.resource.is_none() {
            self.stats.deletes_done += 1;
        }
        self.trace.push(format!("[{}] decide → {effect:?}", self.w.now.0 - T0.0));
        self.check("after decide");
        if let Effect::Launch { key } = &effect {
            if self.launched_keys.contains(key) {
                if !self.armed.remove(key) {
                    self.fail(&format!("Launch repeated key {key} without proof of absence"));
                }
                self.stats.relaunches += 1;
            }
            self.launched_keys.insert(key.clone());
        }
        let key = match &effect {
            Effect::Sleep { until } => {
                match until {
                    Some(u) => self.t = self.t.max(*u).add(Duration::from_millis(self.rng.below(500))),
                    None => {
                        let ms = match self.rng.below(100) {
                            0..=2 => 7_200_000,
                            3..=42 => self.rng.below(5000),
                            _ => 1000 + self.rng.below(1_200_000),
                        };
                        self.t = self.t.add(Duration::from_millis(ms));
                    }
                }
                return effect;
            }
            Effect::Launch { key } | Effect::Find { key } | Effect::Poll { key } | Effect::Cancel { key } => {
                key.clone()
            }
            Effect::PollDuplicate { key, .. } | Effect::CancelDuplicate { key, .. } => {
                self.fail(&format!("a duplicate job of key {key} exists"))
            }
            Effect::DeleteChildren { .. } => self.fail("a resource without children cascaded"),
            Effect::Kill { key } => self.fail(&format!("job {key} killed without a forced cancel")),
        };
        let outcome = self.perform(&effect);
        self.check("after the effect");
        if clients && self.rng.pct(5) {
            self.client_action();
            self.check("after a concurrent client request");
        }
        let Some(outcome) = outcome else {
            self.trace.push("crash before recording".into());
            self.t = self.t.add(Duration::from_millis(self.rng.below(30_000)));
            return effect;
        };
        self.trace.push(format!("outcome {outcome:?}"));
        let rearm = match (&effect, &outcome) {
            (Effect::Launch { .. }, Outcome::Failed(f)) => {
                matches!(f.kind, FailureKind::Transient | FailureKind::RateLimited { .. })
            }
            _ => false,
        };
        if let Outcome::Launched(s) = &outcome {
            self.known_ids.insert(s.job_id.clone());
        }
        if let Outcome::Found(found) = &outcome {
            self.known_ids.extend(found.iter().map(|s| s.job_id.clone()));
        }
        let hold = self.w.apply(&effect, outcome);
        // Proof of absence is what the engine recorded: "none yet" inside the ambiguity
        // window is not.
        let proven_absent = matches!(effect, Effect::Find { .. })
            && self
                .w
                .snap
                .resource
                .iter()
                .flat_map(|r| &r.jobs)
                .any(|j| j.idempotency_key == key && j.absent_confirmed);
        if rearm || proven_absent {
            self.armed.insert(key);
        }
        self.check("after apply");
        self.check_progress();
        self.check_poll_wait();
        match hold {
            Some(h) => self.t = self.t.max(h),
            None => self.t = self.t.add(Duration::from_millis(self.rng.below(2))),
        }
        effect
    }

    /// Launch requests the provider received earlier create their jobs when their time comes.
    fn land_requests(&mut self) {
        let t = self.t;
        let (landed, waiting): (Vec<InFlight>, Vec<InFlight>) =
            std::mem::take(&mut self.in_flight).into_iter().partition(|r| r.lands_at <= t);
        self.in_flight = waiting;
        for r in landed {
            self.trace.push(format!("[{}] a late launch request of {} creates its job", t.0 - T0.0, r.key));
            self.stats.late_landings += 1;
            self.start_job(&r.key);
        }
    }

    fn count_timeouts(&self) -> u64 {
        self.w
            .snap
            .operations
            .iter()
            .filter(|o| o.error.as_ref().is_some_and(|e| e.code == "OperationTimedOut"))
            .count() as u64
    }

    /// Well-behaved provider, no more requests: everything must settle.
    fn settle(&mut self) {
        self.faults = false;
        for _ in 0..20_000 {
            let effect = self.step(false);
            if effect == (Effect::Sleep { until: None }) {
                break;
            }
        }
        // Whatever the provider still holds lands now: it must not be a job nobody follows.
        self.t = self.t.add(self.w.policy.launch_ambiguity);
        self.land_requests();
        if let Some(op) = self.w.snap.operations.iter().find(|o| !o.is_terminal()) {
            self.fail(&format!("operation {} never ended ({:?})", op.id, op.status));
        }
        let mut jobs = self.w.snap.resource.iter().flat_map(|r| &r.jobs);
        if let Some(j) = jobs.find(|j| !j.state.is_terminal()) {
            let what = format!("job {} still {:?} after settling", j.idempotency_key, j.state);
            self.fail(&what);
        }
        if let Some(orphan) = self.jobs.iter().find(|j| !self.known_ids.contains(&j.id)) {
            self.fail(&format!("provider job {} ({}) is unknown to the resource", orphan.id, orphan.key));
        }
    }
}

#[test]
fn exactly_once_launch_and_liveness_under_random_interleavings() {
    // `SIM_SEEDS=20000 cargo test --release -p slipway-domain --test simulation` for a long hunt.
    let seeds = std::env::var("SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(300u64);
    let mut total = Stats::default();
    for seed in 0..seeds {
        let mut sim = Sim::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5EED);
        // Every run starts with a create so the engine has work at once.
        sim.next_op = 1;
        sim.w.put(1, v1()).expect("create");
        for _ in 0..400 {
            sim.step(true);
        }
        sim.settle();
        let s = &sim.stats;
        total.launches += s.launches;
        total.relaunches += s.relaunches;
        total.finds += s.finds;
        total.found_none += s.found_none;
        total.crashes += s.crashes;
        total.cancels += s.cancels;
        total.user_cancels += s.user_cancels;
        total.deletes_done += s.deletes_done;
        total.timeouts += s.timeouts;
        total.ops += s.ops;
        total.late_landings += s.late_landings;
        total.poll_waits += s.poll_waits;
        total.progressed += s.progressed;
    }
    // The runs must actually have exercised the interesting paths.
    let t = &total;
    assert!(t.launches > 2_000, "{t:?}");
    assert!(t.relaunches > 300, "{t:?}");
    assert!(t.finds > 400, "{t:?}");
    assert!(t.found_none > 100, "{t:?}");
    assert!(t.crashes > 1_000, "{t:?}");
    assert!(t.cancels > 500, "{t:?}");
    assert!(t.user_cancels > 400, "{t:?}");
    assert!(t.deletes_done > 400, "{t:?}");
    assert!(t.timeouts > 25, "{t:?}");
    assert!(t.ops > 2_000, "{t:?}");
    assert!(t.late_landings > 150, "{t:?}");
    assert!(t.poll_waits > 1_000, "{t:?}");
    assert!(t.progressed > 500, "{t:?}");
}
