//! `jobs_since`: every job AAP still holds that carries a Slipway idempotency key, read from
//! the `jobs/` and `workflow_jobs/` lists (`created__gte` the bound, if any), with the
//! resource and action its extra vars name, oldest first. What a restored store uses to
//! learn which jobs ran after its backup, so nothing here depends on the templates
//! configured now: a job of a renamed or removed template is still listed.

use std::collections::HashSet;

use serde_json::Value;
use slipway_domain::Timestamp;
use slipway_provider::{Launched, ListedJob, ProviderError};

use crate::envelope::{ANNOTATION_ACTION, ANNOTATION_RESOURCE_ID, key_of};
use crate::find::found_job;
use crate::job::{JobKind, job_handle, runs_in_check_mode};
use crate::{AapProvider, append};

impl AapProvider {
    /// Every keyed job created at or after `since` (all of them without it), oldest first
    /// (see the module doc).
    pub(crate) async fn list_keyed_jobs(&self, since: Option<Timestamp>) -> Result<Vec<ListedJob>, ProviderError> {
        let mut listing = Listing::default();
        // Workflow jobs first: a workflow job's own row names its template and creation time,
        // which a slice or node standing for it (listed under `jobs/`) does not.
        for kind in [JobKind::WorkflowJob, JobKind::Job] {
            let mut url = self.http.url(kind.jobs_path());
            {
                let mut q = url.query_pairs_mut();
                q.append_pair("order_by", "id");
                q.append_pair("page_size", &self.page_size);
                // No skew allowance, unlike `find`: the caller chose the bound it wants.
                if let Some(since) = since {
                    q.append_pair("created__gte", &since.to_rfc3339());
                }
            }
            self.http
                .walk(url, |row: Value| {
                    listing.add(&row, kind);
                    false
                })
                .await
                .map_err(|e| {
                    let mut err = e.into_provider();
                    append(&mut err, " while listing jobs");
                    err
                })?;
        }
        let jobs = listing.sorted();
        let since = since.map(Timestamp::to_rfc3339);
        tracing::info!(provider = %self.name, ?since, jobs = jobs.len(), "listed the AAP jobs with a Slipway key");
        Ok(jobs)
    }
}

/// The keyed jobs seen so far, each `(kind, id)` once.
#[derive(Default)]
struct Listing {
    seen: HashSet<(JobKind, u64)>,
    jobs: Vec<(u64, ListedJob)>,
}

impl Listing {
    /// Takes a row of the `listed` kind's list, if it carries a key and names a resource and
    /// its job was not taken yet (a sliced job's slices, a workflow's nodes, and a row a new
    /// job shifted onto the next page all stand for a job already seen).
    fn add(&mut self, row: &Value, listed: JobKind) {
        let Some(vars) = row.get("extra_vars").and_then(extra_vars) else { return };
        let Some(key) = key_of(&vars).filter(|k| !k.is_empty()) else { return };
        let Some((resource_id, action)) = purpose(&vars) else { return };
        let Some((kind, id, state)) = found_job(row, listed) else { return };
        if !self.seen.insert((kind, id)) {
            return;
        }
        let itself = row.get("id").and_then(Value::as_u64) == Some(id);
        let (template_id, template) = if itself {
            template_of(row, kind)
        } else {
            // AWX names a workflow job after its template; its id is not in the child's row.
            let name = row.pointer("/summary_fields/source_workflow_job/name").and_then(Value::as_str);
            (None, name.unwrap_or_default().to_owned())
        };
        // A child's creation stands in for its workflow job's: a little later, never earlier.
        let launched_at = row.get("created").and_then(Value::as_str).and_then(Timestamp::parse_rfc3339);
        let handle = job_handle(kind, id, template_id, &template, runs_in_check_mode(row));
        let job = Launched { handle, state, template };
        self.jobs.push((id, ListedJob { key: key.into(), resource_id, action, job, launched_at }));
    }

    /// Oldest first; a job without a creation time last.
    fn sorted(mut self) -> Vec<ListedJob> {
        self.jobs.sort_by_key(|(id, j)| (j.launched_at.is_none(), j.launched_at, *id));
        self.jobs.into_iter().map(|(_, j)| j).collect()
    }
}

/// A row's `extra_vars`: JSON text in AWX (an object is accepted too).
fn extra_vars(v: &Value) -> Option<Value> {
    match v {
        Value::String(text) => serde_json::from_str::<Value>(text).ok().filter(Value::is_object),
        Value::Object(_) => Some(v.clone()),
        _ => None,
    }
}

/// `(resource id, action)` from whichever envelope launched the job: the provider's
/// envelope may have been reconfigured since. `None` without a resource id.
fn purpose(vars: &Value) -> Option<(String, String)> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    if let Some(slipway) = vars.get("slipway").filter(|s| s.is_object()) {
        let id = text(slipway.pointer("/resource/id"))?;
        return Some((id, text(slipway.get("action")).unwrap_or_default()));
    }
    let annotations = vars.pointer("/ansible_eda/event/payload/metadata/annotations");
    let id = text(annotations.and_then(|a| a.get(ANNOTATION_RESOURCE_ID)))?;
    let action = text(vars.get("slipway_action")).or_else(|| text(annotations.and_then(|a| a.get(ANNOTATION_ACTION))));
    Some((id, action.unwrap_or_default()))
}

/// `(template id, template name)` of a job from its own row: `unified_job_template` (a sliced
/// job template's workflow job names the job template there), else the kind's template field.
fn template_of(row: &Value, kind: JobKind) -> (Option<u64>, String) {
    let summary = |field: &str| row.get("summary_fields").and_then(|s| s.get(field)).filter(|s| s.is_object());
    let field = kind.template_filter();
    let id = ["unified_job_template", field].iter().find_map(|f| row.get(*f).and_then(Value::as_u64));
    let name = ["unified_job_template", field]
        .iter()
        .find_map(|f| summary(f).and_then(|s| s.get("name")).and_then(Value::as_str));
    (id, name.unwrap_or_default().to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use slipway_domain::JobState;

    use super::*;
    use crate::job::parse_handle;

    const RESOURCE: &str = "/subscriptions/s/resourceGroups/rg/providers/P.N/things/a";

    fn slipway_vars(key: &str, action: &str) -> Value {
        let vars = json!({"slipway": {"resource": {"id": RESOURCE}, "action": action}, "slipway_idempotency_key": key});
        Value::String(vars.to_string())
    }

    fn row(id: u64, kind: &str, created: &str, vars: Value) -> Value {
        json!({"id": id, "type": kind, "status": "running", "launch_type": "manual", "created": created,
               "extra_vars": vars, "unified_job_template": 7,
               "summary_fields": {"unified_job_template": {"id": 7, "name": "tpl", "unified_job_type": kind}}})
    }

    #[test]
    fn purposes_from_either_envelope() {
        let slipway = json!({"slipway": {"resource": {"id": RESOURCE}, "action": "delete"}});
        assert_eq!(purpose(&slipway), Some((RESOURCE.to_owned(), "delete".to_owned())));
        let osac = json!({"ansible_eda": {"event": {"payload": {"metadata": {"annotations": {
            ANNOTATION_RESOURCE_ID: RESOURCE, ANNOTATION_ACTION: "create"}}}}}, "slipway_action": "restart"});
        assert_eq!(purpose(&osac), Some((RESOURCE.to_owned(), "restart".to_owned())));
        let mut annotated = osac.clone();
        annotated.as_object_mut().unwrap().remove("slipway_action");
        assert_eq!(purpose(&annotated), Some((RESOURCE.to_owned(), "create".to_owned())));
        assert_eq!(purpose(&json!({"slipway": {"resource": {"id": ""}, "action": "create"}})), None);
        assert_eq!(purpose(&json!({"slipway_action": "create"})), None);
    }

    #[test]
    fn keyed_rows_are_listed_once_oldest_first() {
        let mut l = Listing::default();
        let wf = row(10, "workflow_job", "2025-01-01T00:00:02.000000Z", slipway_vars("k-wf", "create"));
        l.add(&wf, JobKind::WorkflowJob);
        // A node of that workflow, carrying its vars: it stands for the workflow job.
        let mut node = row(11, "job", "2025-01-01T00:00:03.000000Z", slipway_vars("k-wf", "create"));
        node["launch_type"] = json!("workflow");
        node["summary_fields"]["source_workflow_job"] = json!({"id": 10, "name": "wf", "status": "running"});
        l.add(&node, JobKind::Job);
        l.add(&row(12, "job", "2025-01-01T00:00:01.500Z", slipway_vars("k-a", "create")), JobKind::Job);
        // Listed again (a page shifted under the walk): still once.
        l.add(&row(12, "job", "2025-01-01T00:00:01.500Z", slipway_vars("k-a", "create")), JobKind::Job);
        l.add(&row(13, "job", "2025-01-01T00:00:00Z", json!("{\"other\": 1}")), JobKind::Job);
        l.add(&row(14, "job", "2025-01-01T00:00:00Z", json!("not json")), JobKind::Job);
        l.add(&row(15, "job", "2025-01-01T00:00:00Z", json!("{\"slipway_idempotency_key\": \"k-x\"}")), JobKind::Job);
        let jobs = l.sorted();
        let seen: Vec<_> = jobs.iter().map(|j| (j.key.as_str(), parse_handle(&j.job.handle).unwrap())).collect();
        assert_eq!(seen, vec![("k-a", (JobKind::Job, 12)), ("k-wf", (JobKind::WorkflowJob, 10))]);
        assert_eq!(jobs[0].launched_at, Some(Timestamp::from_millis(1_735_689_601_500)));
        assert_eq!(jobs[0].resource_id, RESOURCE);
        assert_eq!(jobs[0].action, "create");
        assert_eq!(jobs[0].job.state, JobState::Running);
        assert_eq!(jobs[1].job.template, "tpl");
        assert_eq!(jobs[1].job.handle.data, json!({"kind": "workflow_job", "template_id": 7, "template": "tpl"}));
    }

    /// A check-mode job is listed with a check handle, as its launch made it.
    #[test]
    fn check_jobs_keep_their_check_handle() {
        let mut l = Listing::default();
        let mut check = row(30, "job", "2025-01-01T00:00:01Z", slipway_vars("k-c", "create"));
        check["job_type"] = json!("check");
        l.add(&check, JobKind::Job);
        let mut run = row(31, "job", "2025-01-01T00:00:02Z", slipway_vars("k-r", "create"));
        run["job_type"] = json!("run");
        l.add(&run, JobKind::Job);
        let jobs = l.sorted();
        assert_eq!(jobs[0].job.handle.data, json!({"kind": "job", "template_id": 7, "template": "tpl", "check": true}));
        assert_eq!(jobs[1].job.handle.data, json!({"kind": "job", "template_id": 7, "template": "tpl"}));
    }

    /// A slice whose workflow job was not listed (created before the bound) stands for it,
    /// with what the slice's row says of it.
    #[test]
    fn a_slice_stands_for_an_unlisted_workflow_job() {
        let mut l = Listing::default();
        let mut slice = row(21, "job", "2025-01-01T00:00:03Z", slipway_vars("k-s", "delete"));
        slice["launch_type"] = json!("workflow");
        slice["summary_fields"]["source_workflow_job"] = json!({"id": 20, "name": "jt", "status": "successful"});
        l.add(&slice, JobKind::Job);
        let jobs = l.sorted();
        assert_eq!(jobs.len(), 1);
        assert_eq!(parse_handle(&jobs[0].job.handle).unwrap(), (JobKind::WorkflowJob, 20));
        assert_eq!(jobs[0].job.state, JobState::Succeeded);
        assert_eq!(jobs[0].job.template, "jt");
        assert_eq!(jobs[0].action, "delete");
        assert_eq!(jobs[0].launched_at, Timestamp::parse_rfc3339("2025-01-01T00:00:03Z"));
    }
}
