//! The job lifecycle: what a launch creates, the state machine the ticker drives
//! (`pending → waiting → running → <outcome>` on the plan's timings, held `pending` behind an
//! older job of a template that disallows simultaneous jobs), cancellation, and the statuses
//! tests force. It knows nothing of HTTP or of AWX's JSON: a transition reports its webhook
//! event, and the caller builds the body.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use tokio::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::awx::{Kind, Status, User};
use crate::config::{ResourceEffect, SimTemplate};
use crate::resources::Record;
use crate::util::{format_api, now_micros};

/// What a job will do: decided at launch from the template and the per-launch overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub pending_seconds: f64,
    pub duration_seconds: f64,
    pub outcome: Status,
    /// Why it fails, when it does: becomes `result_traceback`.
    pub failure: String,
    /// `job_type: check`: Ansible's check mode, which reports changes and makes none.
    pub check: bool,
    /// `diff_mode`: the job's task results carry their diffs.
    pub diff_mode: bool,
    /// The simulated tasks it runs (`SimTemplate::tasks`).
    pub tasks: u32,
}

#[derive(Debug, Clone)]
pub struct Job {
    pub id: u64,
    pub kind: Kind,
    pub template_id: u64,
    pub template_name: String,
    pub organization: u64,
    pub allow_simultaneous: bool,
    pub status: Status,
    /// The accepted extra vars (an object).
    pub extra_vars: Value,
    /// What the job reports once successful (the template's, placeholders filled in).
    pub artifacts: Value,
    pub limit: String,
    pub launched_by: User,
    pub created: i64,
    pub modified: i64,
    pub started: Option<i64>,
    pub finished: Option<i64>,
    pub canceled_on: Option<i64>,
    pub job_explanation: String,
    pub result_traceback: String,
    pub plan: Plan,
    /// What the job's playbook does with the resource state (resolved from the template).
    pub effect: ResourceEffect,
    /// What its record task found and did, once it ran to success (see `State::settle`).
    pub record: Option<Record>,
    /// When the current lifecycle phase began (monotonic; phases are timed, not the wall clock).
    pub phase_since: Instant,
    pub cancel_requested: bool,
    /// Set by `set_job_status`: the lifecycle stops driving the job (only a cancel still does).
    pub forced: bool,
    pub launch_lost: bool,
}

impl Job {
    /// AWX's `job_type`: `check` or `run`.
    pub fn job_type(&self) -> &'static str {
        if self.plan.check { "check" } else { "run" }
    }

    /// AWX's `elapsed`: seconds between started and finished (live while running), 3 decimals.
    pub fn elapsed(&self, now: i64) -> f64 {
        let secs = match (self.started, self.finished) {
            (Some(s), Some(f)) => (f - s) as f64 / 1e6,
            (Some(s), None) => (now - s) as f64 / 1e6,
            _ => 0.0,
        };
        (secs.max(0.0) * 1000.0).round() / 1000.0
    }

    /// `(hosts ok, failed)` once the play ran to an outcome; `None` before.
    pub fn host_stats(&self) -> Option<(u64, bool)> {
        if self.started.is_none() || self.status.is_active() || self.status == Status::Canceled {
            return None;
        }
        let failed = matches!(self.status, Status::Failed | Status::Error);
        Some((u64::from(!failed), failed))
    }

    /// The job as the Rust handle and `GET /_sim/jobs` report it.
    pub fn sim_job(&self) -> SimJob {
        SimJob {
            id: self.id,
            kind: self.kind.as_str().into(),
            template_id: self.template_id,
            template_name: self.template_name.clone(),
            status: self.status.as_str().into(),
            job_type: self.job_type().into(),
            diff_mode: self.plan.diff_mode,
            extra_vars: self.extra_vars.clone(),
            created: format_api(self.created),
            finished: self.finished.map(format_api),
            launch_lost: self.launch_lost,
            started: self.started.map(format_api),
            cancel_requested: self.cancel_requested,
        }
    }
}

/// One job or workflow job as the Rust handle and `GET /_sim/jobs` report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimJob {
    pub id: u64,
    /// `job` or `workflow_job`.
    pub kind: String,
    pub template_id: u64,
    pub template_name: String,
    pub status: String,
    /// `run` or `check` (Ansible's check mode); `run` for workflow jobs.
    #[serde(default)]
    pub job_type: String,
    /// Whether the job runs in diff mode.
    #[serde(default)]
    pub diff_mode: bool,
    /// The extra vars the job received (after prompts were applied), as an object.
    pub extra_vars: Value,
    pub created: String,
    pub finished: Option<String>,
    /// The launch was performed but its response was dropped by fault injection.
    pub launch_lost: bool,
    pub started: Option<String>,
    pub cancel_requested: bool,
}

/// A webhook event AWX would notify about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyEvent {
    Started,
    Success,
    Error,
}

impl NotifyEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::Started => "started",
            NotifyEvent::Success => "success",
            NotifyEvent::Error => "error",
        }
    }
}

/// Every job and workflow job not purged, by id (AWX's unified jobs share one id space), and
/// the lifecycle that drives them. Reads and purges go through the map it derefs to.
pub struct Jobs {
    map: BTreeMap<u64, Job>,
    next_id: u64,
}

impl Default for Jobs {
    fn default() -> Self {
        Jobs { map: BTreeMap::new(), next_id: 1 }
    }
}

impl Deref for Jobs {
    type Target = BTreeMap<u64, Job>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl DerefMut for Jobs {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.map
    }
}

/// `template` with every string that is exactly `{{ a.b }}` replaced by that path of `vars`.
fn fill_in(template: &Value, vars: &Value) -> Value {
    match template {
        Value::String(s) => match s.trim().strip_prefix("{{").and_then(|r| r.strip_suffix("}}")) {
            Some(path) => path.trim().split('.').try_fold(vars, |v, key| v.get(key)).cloned().unwrap_or(Value::Null),
            None => template.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(|v| fill_in(v, vars)).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), fill_in(v, vars))).collect()),
        other => other.clone(),
    }
}

impl Jobs {
    /// Creates a job the way a launch does (status `pending`, as `signal_start` leaves it
    /// before the response is serialized) and returns its id.
    pub fn launch(
        &mut self,
        kind: Kind,
        template: &SimTemplate,
        extra_vars: Value,
        limit: String,
        plan: Plan,
        user: User,
    ) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let now = now_micros();
        self.map.insert(
            id,
            Job {
                id,
                kind,
                template_id: template.id,
                template_name: template.name.clone(),
                organization: template.organization,
                allow_simultaneous: template.allow_simultaneous,
                status: Status::Pending,
                artifacts: fill_in(&template.artifacts, &extra_vars),
                extra_vars,
                limit,
                launched_by: user,
                created: now,
                modified: now,
                started: None,
                finished: None,
                canceled_on: None,
                job_explanation: String::new(),
                result_traceback: String::new(),
                plan,
                effect: if kind == Kind::Job {
                    template.resource_state.of(&template.name)
                } else {
                    ResourceEffect::None
                },
                record: None,
                phase_since: Instant::now(),
                cancel_requested: false,
                forced: false,
                launch_lost: false,
            },
        );
        id
    }

    /// `POST …/cancel/` on an active job: AWX sets `cancel_flag` and `canceled_on` at once;
    /// the status becomes `canceled` when the job's cleanup runs (the next tick here).
    pub fn request_cancel(&mut self, id: u64) -> bool {
        let Some(job) = self.map.get_mut(&id) else { return false };
        if !job.status.is_active() {
            return false;
        }
        job.cancel_requested = true;
        if job.canceled_on.is_none() {
            let now = now_micros();
            job.canceled_on = Some(now);
            job.modified = now;
        }
        true
    }

    /// Advances every active job; `notify` hears each transition AWX notifies about, with the
    /// job as the transition left it (before any later transition of the same tick).
    pub fn tick(&mut self, now: Instant, mut notify: impl FnMut(NotifyEvent, &Job)) {
        let wall = now_micros();
        let active: Vec<u64> = self.map.values().filter(|j| j.status.is_active()).map(|j| j.id).collect();
        for id in active {
            // A job may cross several phases in one tick when its timings are shorter than one.
            loop {
                let blocked = self.is_blocked(id);
                let job = self.map.get_mut(&id).expect("active job exists");
                let in_phase = now.saturating_duration_since(job.phase_since).as_secs_f64();
                let half_pending = job.plan.pending_seconds / 2.0;
                let event = if job.cancel_requested {
                    finish(job, Status::Canceled, wall);
                    Some(NotifyEvent::Error)
                } else if job.forced {
                    break;
                } else {
                    match job.status {
                        Status::New => {
                            job.status = Status::Pending;
                            job.phase_since = now;
                            None
                        }
                        Status::Pending if blocked => {
                            // The task manager keeps it pending; its own wait starts once unblocked.
                            job.phase_since = now;
                            break;
                        }
                        Status::Pending if in_phase >= half_pending => {
                            job.status = Status::Waiting;
                            job.modified = wall;
                            job.phase_since = now;
                            None
                        }
                        Status::Waiting if in_phase >= half_pending => {
                            job.status = Status::Running;
                            job.started = Some(wall);
                            job.modified = wall;
                            job.phase_since = now;
                            Some(NotifyEvent::Started)
                        }
                        Status::Running if in_phase >= job.plan.duration_seconds => {
                            let outcome = job.plan.outcome;
                            finish(job, outcome, wall);
                            Some(if outcome == Status::Successful { NotifyEvent::Success } else { NotifyEvent::Error })
                        }
                        _ => break,
                    }
                };
                let done = !self.map[&id].status.is_active();
                if let Some(event) = event {
                    notify(event, &self.map[&id]);
                }
                if done {
                    break;
                }
            }
        }
    }

    /// `allow_simultaneous = false`: an older active job of the same template blocks this one.
    fn is_blocked(&self, id: u64) -> bool {
        let job = &self.map[&id];
        job.status == Status::Pending
            && !job.allow_simultaneous
            && self
                .map
                .range(..id)
                .any(|(_, o)| o.kind == job.kind && o.template_id == job.template_id && o.status.is_active())
    }

    /// Forces a status (test hook). The job leaves the automatic lifecycle. Answers the events
    /// AWX would notify about (none for an unknown job).
    pub fn force_status(&mut self, id: u64, status: Status) -> Vec<NotifyEvent> {
        let wall = now_micros();
        let Some(job) = self.map.get_mut(&id) else { return Vec::new() };
        let before = job.status;
        job.forced = true;
        job.modified = wall;
        job.phase_since = Instant::now();
        let mut events = Vec::new();
        if status.is_active() {
            job.status = status;
            job.finished = None;
            if status == Status::Running && job.started.is_none() {
                job.started = Some(wall);
            }
            if status == Status::Running && before != Status::Running {
                events.push(NotifyEvent::Started);
            }
        } else {
            job.finished = None;
            finish(job, status, wall);
            if before.is_active() {
                events.push(if status == Status::Successful { NotifyEvent::Success } else { NotifyEvent::Error });
            }
        }
        events
    }
}

/// Ends a job with `status` at `wall`, filling the fields AWX fills for it.
fn finish(job: &mut Job, status: Status, wall: i64) {
    job.status = status;
    job.modified = wall;
    if job.finished.is_none() {
        job.finished = Some(wall);
    }
    match status {
        Status::Failed => {
            job.result_traceback = job.plan.failure.clone();
            job.job_explanation = format!("Job failed: {}", job.plan.failure);
        }
        Status::Error => {
            job.result_traceback = job.plan.failure.clone();
            job.job_explanation = "Job terminated due to error".into();
        }
        Status::Canceled if !job.cancel_requested => {
            // A configured `canceled` outcome: canceled by "someone else" while running.
            job.canceled_on.get_or_insert(wall);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn template(allow_simultaneous: bool) -> SimTemplate {
        SimTemplate { id: 1, name: "t".into(), allow_simultaneous, ..SimTemplate::default() }
    }

    fn launch(jobs: &mut Jobs, t: &SimTemplate, pending_seconds: f64, duration_seconds: f64) -> u64 {
        let plan = Plan {
            pending_seconds,
            duration_seconds,
            outcome: Status::Successful,
            failure: String::new(),
            check: false,
            diff_mode: false,
            tasks: 1,
        };
        let user = User { id: 1, username: "admin".into() };
        jobs.launch(Kind::Job, t, json!({}), String::new(), plan, user)
    }

    /// Every transition is reported with the job as that transition left it, even when one
    /// tick crosses several phases.
    #[test]
    fn one_tick_reports_each_transition_it_crosses() {
        let mut jobs = Jobs::default();
        let id = launch(&mut jobs, &template(true), 0.0, 0.0);
        assert_eq!(jobs[&id].status, Status::Pending);
        let mut seen = Vec::new();
        jobs.tick(Instant::now() + Duration::from_secs(1), |event, job| seen.push((event, job.status)));
        assert_eq!(seen, vec![(NotifyEvent::Started, Status::Running), (NotifyEvent::Success, Status::Successful)]);
        assert!(jobs[&id].started.is_some() && jobs[&id].finished.is_some());
    }

    /// `allow_simultaneous = false`: a job waits `pending` behind an older active job of its
    /// template; a cancel ends that one at the next tick, and the waiting job moves on.
    #[test]
    fn jobs_wait_behind_an_older_job_and_cancels_end_at_the_next_tick() {
        let mut jobs = Jobs::default();
        let t = template(false);
        let first = launch(&mut jobs, &t, 0.0, 600.0);
        let second = launch(&mut jobs, &t, 0.0, 600.0);
        let later = Instant::now() + Duration::from_secs(1);
        jobs.tick(later, |_, _| {});
        assert_eq!((jobs[&first].status, jobs[&second].status), (Status::Running, Status::Pending));
        assert!(jobs.request_cancel(first));
        assert!(!jobs.request_cancel(404));
        let mut seen = Vec::new();
        jobs.tick(later + Duration::from_secs(1), |event, job| seen.push((job.id, event, job.status)));
        assert_eq!(
            seen,
            vec![(first, NotifyEvent::Error, Status::Canceled), (second, NotifyEvent::Started, Status::Running)]
        );
        assert!(jobs[&first].canceled_on.is_some());
        assert!(!jobs.request_cancel(first), "a finished job cannot be canceled");
        assert_eq!(jobs.force_status(second, Status::Failed), vec![NotifyEvent::Error]);
        assert_eq!(jobs.force_status(404, Status::Failed), vec![]);
    }
}
