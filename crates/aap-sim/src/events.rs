//! A job's events, as AWX's `jobs/{id}/job_events/` lists them, and the standard output AWX
//! builds from them: `playbook_on_start` once the job runs; its simulated tasks
//! (`SimTemplate::tasks`), each a `playbook_on_task_start` when its share of the running time
//! starts and a `runner_on_ok` when the next starts — listed as they happen, as AWX saves
//! events while a job runs; once its play has an outcome, the last task's `runner_on_ok` (or
//! `runner_on_failed`), the record task's start and `runner_on_ok` when the job's playbook
//! keeps resource state (`resources`: `changed`, and in diff mode the diff), and
//! `playbook_on_stats`. Those last events of a finished job are listed once AWX would have
//! processed them (`Faults::event_processing_delay_ms`). Reading only.

use serde_json::{Value, json};

use crate::awx::Kind;
use crate::lifecycle::Job;
use crate::state::State;
use crate::util::{format_api, now_micros};

/// The name of the task every simulated playbook runs first.
const SIMULATED_TASK: &str = "simulated task";

/// What differs from one event to the next.
struct Event<'a> {
    name: &'a str,
    display: &'a str,
    at: i64,
    /// 0: playbook events, 3: task results on a host.
    level: u64,
    task: &'a str,
    host: &'a str,
    failed: bool,
    changed: bool,
    stdout: String,
    data: Value,
}

impl State {
    /// Whether a job's events are all saved (`event_processing_finished`): it ended, at least
    /// `event_processing_delay_ms` ago.
    pub fn events_processed(&self, job: &Job) -> bool {
        let delay = i64::try_from(self.faults.event_processing_delay_ms.saturating_mul(1000)).unwrap_or(i64::MAX);
        !job.status.is_active() && job.finished.is_none_or(|f| now_micros() >= f.saturating_add(delay))
    }

    /// The job's events, in counter order (see the module doc).
    pub fn job_events(&self, job: &Job) -> Vec<Value> {
        if job.kind != Kind::Job {
            return Vec::new();
        }
        let Some(started) = job.started else { return Vec::new() };
        let playbook = format!("{}.yml", job.template_name);
        let job_url = self.api(&format!("jobs/{}/", job.id));
        let summary_job = json!({"id": job.id, "name": job.template_name, "description": "", "status": job.status.as_str(),
            "failed": job.status.is_failed(), "elapsed": job.elapsed(now_micros()), "type": "job",
            "job_template_id": job.template_id, "job_template_name": job.template_name});
        let uuid = |counter: u64| format!("{:08x}-0000-4000-8000-{:012x}", job.id, counter);
        let mut out: Vec<Value> = Vec::new();
        // Where the next event's output starts in the job's stdout (lines, as AWX counts).
        let mut line = 0u64;
        let mut push = |e: Event| {
            let counter = out.len() as u64 + 1;
            let id = job.id * 100 + counter;
            let start_line = line;
            line += e.stdout.lines().count() as u64;
            out.push(json!({
                "id": id, "type": "job_event", "url": self.api(&format!("job_events/{id}/")),
                "related": {"job": job_url, "children": self.api(&format!("job_events/{id}/children/"))},
                "summary_fields": {"job": summary_job},
                "created": format_api(e.at), "modified": format_api(e.at),
                "job": job.id, "event": e.name, "counter": counter, "event_display": e.display,
                "event_data": e.data, "event_level": e.level, "failed": e.failed, "changed": e.changed,
                "uuid": uuid(counter), "parent_uuid": if counter == 1 { String::new() } else { uuid(1) },
                "host": Value::Null, "host_name": e.host, "playbook": playbook,
                "play": if counter == 1 { "" } else { "aap-sim" }, "task": e.task,
                "role": "", "stdout": e.stdout, "start_line": start_line, "end_line": line,
                "verbosity": 0,
            }));
        };
        push(Event {
            name: "playbook_on_start",
            display: "Playbook Started",
            at: started,
            level: 0,
            task: "",
            host: "",
            failed: false,
            changed: false,
            stdout: String::new(),
            data: json!({"playbook": playbook}),
        });
        // The simulated tasks split the running time evenly; what happened by now (or by the
        // job's end) is listed while it runs, the rest once AWX processed its events.
        let tasks = job.plan.tasks.max(1);
        let names: Vec<String> = (1..=tasks)
            .map(|i| if tasks == 1 { SIMULATED_TASK.to_owned() } else { format!("{SIMULATED_TASK} {i} of {tasks}") })
            .collect();
        let step = (job.plan.duration_seconds * 1e6 / f64::from(tasks)) as i64;
        let seen_until = job.finished.map_or(now_micros(), |f| f.min(now_micros()));
        let mut started_tasks = 0;
        for (i, name) in names.iter().enumerate() {
            let at = started.saturating_add(step.saturating_mul(i as i64));
            if at > seen_until {
                break;
            }
            if i > 0 {
                push(ok_on(&names[i - 1], at));
            }
            push(task_start(name, at));
            started_tasks += 1;
        }
        let (Some((_, failed)), Some(finished)) = (job.host_stats(), job.finished) else { return out };
        if !self.events_processed(job) {
            return out;
        }
        let last = &names[started_tasks.max(1) - 1];
        if started_tasks == 0 {
            push(task_start(last, finished));
        }
        if failed {
            let res = json!({"failed": true, "msg": job.result_traceback, "changed": false});
            let msg = serde_json::to_string(&job.result_traceback).unwrap_or_default();
            push(Event {
                name: "runner_on_failed",
                display: "Host Failed",
                at: finished,
                level: 3,
                task: last,
                host: "localhost",
                failed: true,
                changed: false,
                stdout: format!("fatal: [localhost]: FAILED! => {{\"msg\": {msg}}}"),
                data: task_data(last, res),
            });
        } else {
            push(ok_on(last, finished));
        }
        let mut ok = if failed { started_tasks.saturating_sub(1) } else { started_tasks.max(1) } as u64;
        let mut changed = 0;
        if let Some(r) = job.record.as_ref().filter(|_| !failed) {
            let mut res = json!({"changed": r.changed(), "dest": r.path});
            let mut stdout = String::new();
            if job.plan.diff_mode {
                res["diff"] = r.diff();
                if r.changed() {
                    stdout = r.diff_text();
                }
            }
            stdout.push_str(if r.changed() { "changed: [localhost]" } else { "ok: [localhost]" });
            ok += 1;
            changed += u64::from(r.changed());
            push(task_start(r.task, finished));
            push(Event {
                name: "runner_on_ok",
                display: "Host OK",
                at: finished,
                level: 3,
                task: r.task,
                host: "localhost",
                failed: false,
                changed: r.changed(),
                stdout,
                data: task_data(r.task, res),
            });
        }
        let f = u64::from(failed);
        let per_host = |n: u64| if n == 0 { json!({}) } else { json!({"localhost": n}) };
        let stats = json!({"ok": {"localhost": ok}, "failures": {"localhost": f}, "changed": per_host(changed),
                           "dark": {}, "skipped": {}, "processed": {"localhost": 1}, "rescued": {}, "ignored": {},
                           "artifact_data": {}});
        let recap = format!("PLAY RECAP *********\nlocalhost : ok={ok} changed={changed} unreachable=0 failed={f}");
        push(Event {
            name: "playbook_on_stats",
            display: "Playbook Complete",
            at: finished,
            level: 0,
            task: "",
            host: "",
            // AWX sets a stats event's flags from its counts.
            failed,
            changed: changed > 0,
            stdout: recap,
            data: stats,
        });
        out
    }

    /// A job's standard output as AWX's `stdout` endpoint builds it: its events' `stdout`,
    /// one per line, in counter order.
    pub fn job_stdout(&self, job: &Job) -> String {
        let mut out = String::new();
        for event in self.job_events(job) {
            if let Some(line) = event["stdout"].as_str().filter(|s| !s.is_empty()) {
                out.push_str(line.trim_end_matches('\n'));
                out.push('\n');
            }
        }
        out
    }
}

fn task_data(task: &str, res: Value) -> Value {
    json!({"host": "localhost", "task": task, "res": res})
}

fn task_start(task: &str, at: i64) -> Event<'_> {
    Event {
        name: "playbook_on_task_start",
        display: "Task Started",
        at,
        level: 2,
        task,
        host: "",
        failed: false,
        changed: false,
        stdout: format!("TASK [{task}] ***"),
        data: json!({"task": task, "name": task, "is_conditional": false}),
    }
}

fn ok_on(task: &str, at: i64) -> Event<'_> {
    Event {
        name: "runner_on_ok",
        display: "Host OK",
        at,
        level: 3,
        task,
        host: "localhost",
        failed: false,
        changed: false,
        stdout: "ok: [localhost]".into(),
        data: task_data(task, json!({"changed": false, "msg": "ok"})),
    }
}
