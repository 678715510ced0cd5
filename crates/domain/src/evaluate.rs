//! The OSAC `EvaluateAction` decision table (docs/osac-lifecycle.md#the-decision-table).

use crate::config_version::ConfigVersion;
use crate::job::{Job, JobState, JobType, latest_job_by_type};

/// What to do about provisioning, with the latest provision job it was decided on wherever
/// there is one to act on (`J`: a borrowed or an owned job).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action<J> {
    /// The latest job applied the desired version.
    Skip(J),
    /// Launch a job (the latest one, if any, did not apply the desired version).
    Trigger(Option<J>),
    /// The latest job is still running.
    Poll(J),
    /// Another reader sees a job running: look again later.
    Requeue,
    /// The latest job failed at the desired version: retry after the backoff.
    Backoff(J),
}

impl Action<&Job> {
    pub fn cloned(&self) -> Action<Job> {
        match *self {
            Action::Skip(j) => Action::Skip(j.clone()),
            Action::Trigger(j) => Action::Trigger(j.cloned()),
            Action::Poll(j) => Action::Poll(j.clone()),
            Action::Requeue => Action::Requeue,
            Action::Backoff(j) => Action::Backoff(j.clone()),
        }
    }
}

/// Decides what to do about provisioning, exactly as the OSAC table (rows 1–10).
///
/// `non_terminal_elsewhere` is the stale-cache check; it is consulted only on the Trigger
/// path. Slipway reads its store, not a cache, so the engine passes `|| false`.
pub fn evaluate_action<'a>(
    jobs: &'a [Job],
    desired: &ConfigVersion,
    non_terminal_elsewhere: impl FnOnce() -> bool,
) -> Action<&'a Job> {
    let latest = latest_job_by_type(jobs, JobType::Provision);
    // A job without an id (a launch that never produced one) counts as no job.
    if let Some(l) = latest.filter(|l| l.job_id.is_some()) {
        if !l.state.is_terminal() {
            return Action::Poll(l);
        }
        if &l.config_version == desired {
            return if l.state == JobState::Succeeded { Action::Skip(l) } else { Action::Backoff(l) };
        }
        if l.config_version.is_legacy() && l.state == JobState::Succeeded {
            return Action::Skip(l);
        }
    }
    if non_terminal_elsewhere() {
        return Action::Requeue;
    }
    Action::Trigger(latest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;
    use JobState::*;

    const MIN: i64 = 60_000;

    fn v(s: &str) -> ConfigVersion {
        ConfigVersion::new(s)
    }

    fn p(id: &str, state: JobState, ver: &str, t_min: i64) -> Job {
        let job = Job::new(JobType::Provision, state, Timestamp(t_min * MIN)).with_version(v(ver));
        // "" is a job its provider never confirmed: it has no id.
        if id.is_empty() { job } else { job.with_job_id(id) }
    }

    /// The action's name and the job it carries.
    fn named<'a>(action: &Action<&'a Job>) -> (&'static str, Option<&'a Job>) {
        match *action {
            Action::Skip(j) => ("Skip", Some(j)),
            Action::Trigger(j) => ("Trigger", j),
            Action::Poll(j) => ("Poll", Some(j)),
            Action::Requeue => ("Requeue", None),
            Action::Backoff(j) => ("Backoff", Some(j)),
        }
    }

    /// (row, jobs, desired, api result, expected action, expected job id)
    #[test]
    fn decision_table_rows() {
        struct Row {
            name: &'static str,
            jobs: Vec<Job>,
            desired: &'static str,
            api: bool,
            want: &'static str,
            want_job: Option<&'static str>,
        }
        let rows = vec![
            Row { name: "1 none, api false", jobs: vec![], desired: "v1", api: false, want: "Trigger", want_job: None },
            Row { name: "2 none, api true", jobs: vec![], desired: "v1", api: true, want: "Requeue", want_job: None },
            Row {
                name: "3 empty id",
                jobs: vec![p("", Failed, "", 0)],
                desired: "v2",
                api: false,
                want: "Trigger",
                want_job: Some(""),
            },
            Row {
                name: "3 empty id, non-terminal",
                jobs: vec![p("", Running, "v2", 0)],
                desired: "v2",
                api: false,
                want: "Trigger",
                want_job: Some(""),
            },
            Row {
                name: "4 running",
                jobs: vec![p("1", Running, "v0", 0)],
                desired: "v1",
                api: true,
                want: "Poll",
                want_job: Some("1"),
            },
            Row {
                name: "4 pending",
                jobs: vec![p("1", Pending, "v1", 0)],
                desired: "v1",
                api: false,
                want: "Poll",
                want_job: Some("1"),
            },
            Row {
                name: "4 waiting",
                jobs: vec![p("1", Waiting, "", 0)],
                desired: "v1",
                api: false,
                want: "Poll",
                want_job: Some("1"),
            },
            Row {
                name: "4 unknown",
                jobs: vec![p("1", Unknown, "v1", 0)],
                desired: "v1",
                api: false,
                want: "Poll",
                want_job: Some("1"),
            },
            Row {
                name: "5 succeeded same",
                jobs: vec![p("1", Succeeded, "v1", 0)],
                desired: "v1",
                api: true,
                want: "Skip",
                want_job: Some("1"),
            },
            Row {
                name: "6 failed same",
                jobs: vec![p("1", Failed, "v1", 0)],
                desired: "v1",
                api: true,
                want: "Backoff",
                want_job: Some("1"),
            },
            Row {
                name: "7 canceled same",
                jobs: vec![p("1", Canceled, "v1", 0)],
                desired: "v1",
                api: true,
                want: "Backoff",
                want_job: Some("1"),
            },
            Row {
                name: "8 legacy succeeded",
                jobs: vec![p("1", Succeeded, "", 0)],
                desired: "v1",
                api: true,
                want: "Skip",
                want_job: Some("1"),
            },
            Row {
                name: "9 succeeded other, api false",
                jobs: vec![p("old", Succeeded, "v1", 0)],
                desired: "v2",
                api: false,
                want: "Trigger",
                want_job: Some("old"),
            },
            Row {
                name: "9 succeeded other, api true",
                jobs: vec![p("old", Succeeded, "v1", 0)],
                desired: "v2",
                api: true,
                want: "Requeue",
                want_job: None,
            },
            Row {
                name: "10 failed other",
                jobs: vec![p("1", Failed, "v1", 0)],
                desired: "v2",
                api: false,
                want: "Trigger",
                want_job: Some("1"),
            },
            Row {
                name: "10 canceled other, api true",
                jobs: vec![p("1", Canceled, "v1", 0)],
                desired: "v2",
                api: true,
                want: "Requeue",
                want_job: None,
            },
            Row {
                name: "10 legacy failed",
                jobs: vec![p("1", Failed, "", 0)],
                desired: "v2",
                api: false,
                want: "Trigger",
                want_job: Some("1"),
            },
            Row {
                name: "D empty: failed legacy backs off",
                jobs: vec![p("1", Failed, "", 0)],
                desired: "",
                api: false,
                want: "Backoff",
                want_job: Some("1"),
            },
        ];
        for row in rows {
            let mut asked = false;
            let action = evaluate_action(&row.jobs, &v(row.desired), || {
                asked = true;
                row.api
            });
            let (name, job) = named(&action);
            assert_eq!(name, row.want, "{}", row.name);
            assert_eq!(job.map(Job::job_id_text), row.want_job, "{}", row.name);
            let trigger_path = matches!(action, Action::Trigger(_) | Action::Requeue);
            assert_eq!(asked, trigger_path, "{}: api consulted only on the trigger path", row.name);
        }
    }

    #[test]
    fn latest_job_decides_not_array_order() {
        let jobs = vec![p("new", Succeeded, "v2", 0), p("old", Failed, "v1", -5)];
        assert_eq!(named(&evaluate_action(&jobs, &v("v2"), || false)), ("Skip", Some(&jobs[0])));
    }

    #[test]
    fn stale_cache_requeues() {
        // The stale-cache check of row 9: in-memory shows only an old succeeded job; the fresh
        // read has a running one.
        let jobs = vec![p("1", Succeeded, "v1", -1)];
        let fresh = [p("1", Succeeded, "v1", -1), p("2", Running, "", 0)];
        let fresh_has_running =
            || latest_job_by_type(&fresh, JobType::Provision).is_some_and(|j| !j.state.is_terminal());
        assert_eq!(evaluate_action(&jobs, &v("v2"), fresh_has_running), Action::Requeue);
    }
}
