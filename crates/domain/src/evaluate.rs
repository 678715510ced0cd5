//! The OSAC `EvaluateAction` decision table and `IsConfigApplied`
//! (docs/osac-lifecycle.md#the-decision-table).

use crate::config_version::ConfigVersion;
use crate::job::{Job, JobState, JobType, has_job_id, latest_job_by_type};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Skip,
    Trigger,
    Poll,
    Requeue,
    Backoff,
}

/// Decides what to do about provisioning, exactly as the OSAC table (rows 1–10).
///
/// `non_terminal_elsewhere` is the stale-cache check; it is consulted only on the Trigger
/// path. Slipway reads its store, not a cache, so the engine passes `|| false`.
/// Returns the action and the latest provision job it was based on.
pub fn evaluate_action<'a>(
    jobs: &'a [Job],
    desired: &ConfigVersion,
    non_terminal_elsewhere: impl FnOnce() -> bool,
) -> (Action, Option<&'a Job>) {
    let latest = latest_job_by_type(jobs, JobType::Provision);
    if has_job_id(latest) {
        let l = latest.expect("has_job_id implies present");
        if !l.state.is_terminal() {
            return (Action::Poll, latest);
        }
        if &l.config_version == desired {
            return if l.state == JobState::Succeeded { (Action::Skip, latest) } else { (Action::Backoff, latest) };
        }
        if l.config_version.is_legacy() && l.state == JobState::Succeeded {
            return (Action::Skip, latest);
        }
    }
    if non_terminal_elsewhere() {
        return (Action::Requeue, None);
    }
    (Action::Trigger, latest)
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
        Job::new(id, JobType::Provision, state, Timestamp(t_min * MIN)).with_version(v(ver))
    }

    /// (row, jobs, desired, api result, expected action, expected job id)
    #[test]
    fn decision_table_rows() {
        struct Row {
            name: &'static str,
            jobs: Vec<Job>,
            desired: &'static str,
            api: bool,
            want: Action,
            want_job: Option<&'static str>,
        }
        let rows = vec![
            Row {
                name: "1 none, api false",
                jobs: vec![],
                desired: "v1",
                api: false,
                want: Action::Trigger,
                want_job: None,
            },
            Row {
                name: "2 none, api true",
                jobs: vec![],
                desired: "v1",
                api: true,
                want: Action::Requeue,
                want_job: None,
            },
            Row {
                name: "3 empty id",
                jobs: vec![p("", Failed, "", 0)],
                desired: "v2",
                api: false,
                want: Action::Trigger,
                want_job: Some(""),
            },
            Row {
                name: "3 empty id, non-terminal",
                jobs: vec![p("", Running, "v2", 0)],
                desired: "v2",
                api: false,
                want: Action::Trigger,
                want_job: Some(""),
            },
            Row {
                name: "4 running",
                jobs: vec![p("1", Running, "v0", 0)],
                desired: "v1",
                api: true,
                want: Action::Poll,
                want_job: Some("1"),
            },
            Row {
                name: "4 pending",
                jobs: vec![p("1", Pending, "v1", 0)],
                desired: "v1",
                api: false,
                want: Action::Poll,
                want_job: Some("1"),
            },
            Row {
                name: "4 waiting",
                jobs: vec![p("1", Waiting, "", 0)],
                desired: "v1",
                api: false,
                want: Action::Poll,
                want_job: Some("1"),
            },
            Row {
                name: "4 unknown",
                jobs: vec![p("1", Unknown, "v1", 0)],
                desired: "v1",
                api: false,
                want: Action::Poll,
                want_job: Some("1"),
            },
            Row {
                name: "5 succeeded same",
                jobs: vec![p("1", Succeeded, "v1", 0)],
                desired: "v1",
                api: true,
                want: Action::Skip,
                want_job: Some("1"),
            },
            Row {
                name: "6 failed same",
                jobs: vec![p("1", Failed, "v1", 0)],
                desired: "v1",
                api: true,
                want: Action::Backoff,
                want_job: Some("1"),
            },
            Row {
                name: "7 canceled same",
                jobs: vec![p("1", Canceled, "v1", 0)],
                desired: "v1",
                api: true,
                want: Action::Backoff,
                want_job: Some("1"),
            },
            Row {
                name: "8 legacy succeeded",
                jobs: vec![p("1", Succeeded, "", 0)],
                desired: "v1",
                api: true,
                want: Action::Skip,
                want_job: Some("1"),
            },
            Row {
                name: "9 succeeded other, api false",
                jobs: vec![p("old", Succeeded, "v1", 0)],
                desired: "v2",
                api: false,
                want: Action::Trigger,
                want_job: Some("old"),
            },
            Row {
                name: "9 succeeded other, api true",
                jobs: vec![p("old", Succeeded, "v1", 0)],
                desired: "v2",
                api: true,
                want: Action::Requeue,
                want_job: None,
            },
            Row {
                name: "10 failed other",
                jobs: vec![p("1", Failed, "v1", 0)],
                desired: "v2",
                api: false,
                want: Action::Trigger,
                want_job: Some("1"),
            },
            Row {
                name: "10 canceled other, api true",
                jobs: vec![p("1", Canceled, "v1", 0)],
                desired: "v2",
                api: true,
                want: Action::Requeue,
                want_job: None,
            },
            Row {
                name: "10 legacy failed",
                jobs: vec![p("1", Failed, "", 0)],
                desired: "v2",
                api: false,
                want: Action::Trigger,
                want_job: Some("1"),
            },
            Row {
                name: "D empty: failed legacy backs off",
                jobs: vec![p("1", Failed, "", 0)],
                desired: "",
                api: false,
                want: Action::Backoff,
                want_job: Some("1"),
            },
        ];
        for row in rows {
            let mut asked = false;
            let (action, job) = evaluate_action(&row.jobs, &v(row.desired), || {
                asked = true;
                row.api
            });
            assert_eq!(action, row.want, "{}", row.name);
            assert_eq!(job.map(|j| j.job_id.as_str()), row.want_job, "{}", row.name);
            let trigger_path = matches!(action, Action::Trigger | Action::Requeue);
            assert_eq!(asked, trigger_path, "{}: api consulted only on the trigger path", row.name);
        }
    }

    #[test]
    fn latest_job_decides_not_array_order() {
        let jobs = vec![p("new", Succeeded, "v2", 0), p("old", Failed, "v1", -5)];
        assert_eq!(evaluate_action(&jobs, &v("v2"), || false).0, Action::Skip);
    }

    #[test]
    fn stale_cache_requeues() {
        // The stale-cache check of row 9: in-memory shows only an old succeeded job; the fresh
        // read has a running one.
        let jobs = vec![p("1", Succeeded, "v1", -1)];
        let fresh = [p("1", Succeeded, "v1", -1), p("2", Running, "", 0)];
        let fresh_has_running =
            || latest_job_by_type(&fresh, JobType::Provision).is_some_and(|j| !j.state.is_terminal());
        assert_eq!(evaluate_action(&jobs, &v("v2"), fresh_has_running).0, Action::Requeue);
    }
}
