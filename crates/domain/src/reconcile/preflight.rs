//! Preflight checks (docs/arm-contract.md#preflight-checks): a type's validation job runs
//! before an operation's provisioning job and reports its checks with `set_stats`
//! [`CHECKS_STAT`]: `[{"name": "quota", "passed": false, "message": "…"}, …]`. The
//! operation goes on only when the job succeeded and no check failed; otherwise it fails
//! with [`codes::PREFLIGHT_FAILED`], one `details` entry per failed check (ARO's `OCM4001`
//! inflight-check path, keeping the details its create path drops).

use serde_json::Value;

use crate::composite::{self, Source};
use crate::job::{CHECKS_STAT, Job, JobState};
use crate::operation::{CloudError, codes};
use crate::state::ProvisioningState;

/// The source name of the validation job itself (its own failure, or a malformed report).
pub const JOB_SOURCE: &str = "preflight";

/// Why a finished validation job stops its operation, or `None` when it passed. `stats` is
/// what the job reported (`None`: nothing, or not read).
pub fn failure(job: &Job, stats: Option<&Value>) -> Option<CloudError> {
    let mut sources = checks(stats.and_then(|s| s.get(CHECKS_STAT)));
    let a_check_failed = sources.iter().any(|s| s.state != ProvisioningState::Succeeded);
    // A playbook that fails because its checks did says nothing the checks do not.
    if job.state != JobState::Succeeded && !a_check_failed {
        let text = job.message_with_details();
        let message = if text.is_empty() { "The preflight job failed".to_string() } else { text };
        sources.push(Source::failed(JOB_SOURCE, CloudError::new(codes::PROVISIONING_FAILED, message)));
    }
    match composite::merge(sources, codes::PREFLIGHT_FAILED)? {
        (ProvisioningState::Failed | ProvisioningState::Canceled, error) => error,
        _ => None,
    }
}

/// Each reported check as a source; an entry that is not a check is a failure of the job's
/// report (a validation that cannot be read has not passed).
fn checks(reported: Option<&Value>) -> Vec<Source> {
    let Some(reported) = reported else { return Vec::new() };
    let Some(items) = reported.as_array() else {
        return vec![malformed(format!("{CHECKS_STAT} must be a list of checks"))];
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let name = item.get("name").and_then(Value::as_str).filter(|n| !n.trim().is_empty());
            let passed = item.get("passed").and_then(Value::as_bool);
            match (name, passed) {
                (Some(name), Some(true)) => Source::succeeded(name),
                (Some(name), Some(false)) => {
                    let message = item.get("message").and_then(Value::as_str).unwrap_or("The check failed");
                    Source::failed(name, CloudError::new(codes::PREFLIGHT_CHECK_FAILED, message).with_target(name))
                }
                _ => malformed(format!("{CHECKS_STAT}[{i}] must be {{\"name\": text, \"passed\": true|false}}")),
            }
        })
        .collect()
}

fn malformed(message: String) -> Source {
    Source::failed(JOB_SOURCE, CloudError::new(codes::PREFLIGHT_CHECK_FAILED, message))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::job::JobType;
    use crate::time::Timestamp;

    fn job(state: JobState) -> Job {
        Job::new(JobType::Preflight, state, Timestamp(0)).with_job_id("1").with_message("Failed: task 'assert quota'")
    }

    #[test]
    fn verdict_table() {
        let failed = |name: &str, m: &str| json!({"name": name, "passed": false, "message": m});
        let passed = |name: &str| json!({"name": name, "passed": true});
        struct Case {
            name: &'static str,
            state: JobState,
            stats: Option<Value>,
            want: Option<(&'static str, Vec<&'static str>)>,
        }
        let cases = vec![
            Case { name: "success, no report", state: JobState::Succeeded, stats: None, want: None },
            Case {
                name: "success, every check passed",
                state: JobState::Succeeded,
                stats: Some(json!({CHECKS_STAT: [passed("quota"), passed("dns")]})),
                want: None,
            },
            Case {
                name: "one failed check",
                state: JobState::Succeeded,
                stats: Some(json!({CHECKS_STAT: [passed("dns"), failed("quota", "no cores left")]})),
                want: Some(("[quota] no cores left", vec!["quota"])),
            },
            Case {
                name: "two failed checks, the failing job adds nothing",
                state: JobState::Failed,
                stats: Some(json!({CHECKS_STAT: [failed("quota", "a"), failed("dns", "b")]})),
                want: Some(("[quota] a; [dns] b", vec!["quota", "dns"])),
            },
            Case {
                name: "job failed without a report",
                state: JobState::Failed,
                stats: None,
                want: Some(("[preflight] Failed: task 'assert quota'", vec!["preflight"])),
            },
            Case {
                name: "job failed, its checks passed",
                state: JobState::Failed,
                stats: Some(json!({CHECKS_STAT: [passed("quota")]})),
                want: Some(("[preflight] Failed: task 'assert quota'", vec!["preflight"])),
            },
            Case {
                name: "malformed entry",
                state: JobState::Succeeded,
                stats: Some(json!({CHECKS_STAT: [{"name": "quota"}]})),
                want: Some((
                    "[preflight] slipway_checks[0] must be {\"name\": text, \"passed\": true|false}",
                    vec!["preflight"],
                )),
            },
            Case {
                name: "not a list",
                state: JobState::Succeeded,
                stats: Some(json!({CHECKS_STAT: "ok"})),
                want: Some(("[preflight] slipway_checks must be a list of checks", vec!["preflight"])),
            },
        ];
        for c in cases {
            let got = failure(&job(c.state), c.stats.as_ref());
            let got = got.map(|e| {
                assert_eq!(e.code, codes::PREFLIGHT_FAILED, "{}", c.name);
                (e.message, e.details.into_iter().filter_map(|d| d.target).collect::<Vec<_>>())
            });
            let want = c.want.map(|(m, t)| (m.to_string(), t.into_iter().map(String::from).collect::<Vec<_>>()));
            assert_eq!(got, want, "{}", c.name);
        }
    }
}
