//! Which template a request runs and what AAP calls it: the name (from `naming`), its
//! resolution by name among job templates, then workflow job templates (a job template wins;
//! within the configured organization if any), and the cache of resolutions: single-flight
//! (a burst of launches of one uncached template makes one lookup) and dropped when AAP
//! answers that the template is gone or refuses it. A resolution also says what a launch may
//! set beyond the extra vars: the job type and diff mode a check-mode launch needs.

use serde_json::Value;
use slipway_provider::{JobHandle, LaunchRequest, ProviderError};

use crate::job::{JobKind, job_handle};
use crate::{AapProvider, append, lock};

/// A resolved template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Template {
    pub id: u64,
    /// The kind of job it starts (workflow templates start workflow jobs).
    pub kind: JobKind,
    pub name: String,
    /// `ask_variables_on_launch || survey_enabled`: AAP passes our extra vars on.
    pub prompts_for_variables: bool,
    /// `ask_job_type_on_launch` (job templates): a launch may ask for `job_type: check`.
    pub prompts_for_job_type: bool,
    /// `ask_diff_mode_on_launch` (job templates): a launch may ask for `diff_mode: true`.
    pub prompts_for_diff_mode: bool,
    /// `job_slice_count` above 1: a launch starts a workflow job of slices.
    pub sliced: bool,
}

impl Template {
    /// A resolution with the given prompts and nothing else (not sliced).
    pub fn new(id: u64, kind: JobKind, name: &str, prompts_for_variables: bool) -> Template {
        Template {
            id,
            kind,
            name: name.to_owned(),
            prompts_for_variables,
            prompts_for_job_type: false,
            prompts_for_diff_mode: false,
            sliced: false,
        }
    }

    /// The handle of job `id` (of `kind`) this template started: what `parse_handle` reads.
    /// `check`: the job runs in check mode.
    pub fn handle(&self, kind: JobKind, id: u64, check: bool) -> JobHandle {
        job_handle(kind, id, Some(self.id), &self.name, check)
    }
}

impl AapProvider {
    /// The template a request runs (name only; no lookup).
    pub fn template_name(&self, r: &LaunchRequest) -> Result<String, ProviderError> {
        self.naming.template_name(&r.kind, &r.action).map_err(ProviderError::Permanent)
    }

    /// Drops every cached template resolution.
    pub fn clear_template_cache(&self) {
        lock(&self.templates).clear();
    }

    /// Seeds the template cache, e.g. with a resolution AAP no longer has (tests of the
    /// 404-at-launch invalidation), as one that prompts for variables, job type and diff mode.
    #[doc(hidden)]
    pub fn cache_template(&self, name: &str, id: u64, kind: JobKind) {
        let mut t = Template::new(id, kind, name, true);
        t.prompts_for_job_type = kind == JobKind::Job;
        t.prompts_for_diff_mode = kind == JobKind::Job;
        lock(&self.templates).insert(name.to_owned(), t);
    }

    /// The cached resolution of `name`, if any: `(id, kind)`.
    pub fn cached_template(&self, name: &str) -> Option<(u64, JobKind)> {
        lock(&self.templates).get(name).map(|t| (t.id, t.kind))
    }

    pub(crate) fn forget_template(&self, name: &str) {
        lock(&self.templates).remove(name);
    }

    /// The template named `name`, from the cache or AAP.
    pub(crate) async fn template(&self, name: &str) -> Result<Template, ProviderError> {
        if let Some(t) = lock(&self.templates).get(name).cloned() {
            return Ok(t);
        }
        let _one_at_a_time = self.resolving.lock().await;
        if let Some(t) = lock(&self.templates).get(name).cloned() {
            return Ok(t);
        }
        self.resolve(name).await
    }

    /// The template named `name`, if a launch can use it: it must take our extra vars.
    pub(crate) async fn launchable_template(&self, name: &str) -> Result<Template, ProviderError> {
        let t = self.template(name).await?;
        if !t.prompts_for_variables {
            // Not cached as usable: fixing the template in AAP takes effect next time.
            self.forget_template(name);
            return Err(ProviderError::Permanent(format!(
                "{} {name:?} does not prompt for variables on launch (enable 'Prompt on launch' for variables)",
                t.kind.template_noun()
            )));
        }
        Ok(t)
    }

    /// Looks `name` up at AAP (job templates first) and caches the result.
    pub(crate) async fn resolve(&self, name: &str) -> Result<Template, ProviderError> {
        for kind in [JobKind::Job, JobKind::WorkflowJob] {
            if let Some(t) = self.lookup(kind, name).await? {
                lock(&self.templates).insert(name.to_owned(), t.clone());
                return Ok(t);
            }
        }
        let scope = match &self.organization {
            Some(org) => format!(" in organization {org:?}"),
            None => String::new(),
        };
        Err(ProviderError::Permanent(format!(
            "template {name:?} not found as a job template or workflow job template{scope}"
        )))
    }

    /// One lookup by name: `None` only for a successful answer with no match.
    async fn lookup(&self, kind: JobKind, name: &str) -> Result<Option<Template>, ProviderError> {
        let mut url = self.http.url(kind.templates_path());
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("name", name);
            if let Some(org) = &self.organization {
                q.append_pair("organization__name", org);
            }
            q.append_pair("page_size", &self.page_size);
        }
        let page: Value = self.http.get_json(&url).await.map_err(|e| {
            let hint = if e.status() == Some(404) { " (check base_url and api_prefix)" } else { "" };
            let mut err = e.into_provider();
            append(&mut err, &format!("{hint} while looking up template {name:?}"));
            err
        })?;
        let rows = page.get("results").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        // Names match exactly in AWX; compare anyway, in case a server treats `name` loosely.
        let matches: Vec<&Value> =
            rows.iter().filter(|r| r.get("name").and_then(Value::as_str) == Some(name)).collect();
        let count = page.get("count").and_then(Value::as_u64).unwrap_or(matches.len() as u64);
        let all_seen = rows.len() as u64 >= count;
        match matches.as_slice() {
            [] if all_seen => Ok(None),
            [row] if all_seen => {
                let id = row.get("id").and_then(Value::as_u64).filter(|id| *id > 0).ok_or_else(|| {
                    ProviderError::Transient(format!("AAP {} {name:?} has no numeric id", kind.template_noun()))
                })?;
                let flag = |f: &str| row.get(f).and_then(Value::as_bool).unwrap_or(false);
                // Workflow job templates have no job type: their flags stay false.
                let job_template = kind == JobKind::Job;
                Ok(Some(Template {
                    id,
                    kind,
                    name: name.to_owned(),
                    prompts_for_variables: flag("ask_variables_on_launch") || flag("survey_enabled"),
                    prompts_for_job_type: job_template && flag("ask_job_type_on_launch"),
                    prompts_for_diff_mode: job_template && flag("ask_diff_mode_on_launch"),
                    sliced: job_template && row.get("job_slice_count").and_then(Value::as_u64).is_some_and(|n| n > 1),
                }))
            }
            _ => {
                let mut orgs: Vec<String> = rows.iter().map(organization_of).collect();
                orgs.sort();
                orgs.dedup();
                let advice = match &self.organization {
                    Some(org) => format!("even within organization {org:?}"),
                    None => "set the provider's organization to choose one".to_owned(),
                };
                let count = count.max(matches.len() as u64);
                Err(ProviderError::Permanent(format!(
                    "template {name:?} is ambiguous: {count} {}s have this name (organizations: {}); {advice}",
                    kind.template_noun(),
                    orgs.join(", ")
                )))
            }
        }
    }
}

fn organization_of(row: &Value) -> String {
    let summary = row.pointer("/summary_fields/organization/name").and_then(Value::as_str);
    match (summary, row.get("organization")) {
        (Some(name), _) => name.to_owned(),
        (None, Some(Value::Null) | None) => "none".to_owned(),
        (None, Some(id)) => format!("#{id}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::job::{is_check, parse_handle};

    #[test]
    fn handles() {
        let t = Template::new(9, JobKind::WorkflowJob, "wf", true);
        let made = t.handle(JobKind::WorkflowJob, 5, false);
        assert_eq!(made.job_id, "5");
        assert_eq!(made.data, json!({"kind": "workflow_job", "template_id": 9, "template": "wf"}));
        assert_eq!(parse_handle(&made).unwrap(), (JobKind::WorkflowJob, 5));
        assert!(!is_check(&made));
        let check = Template::new(3, JobKind::Job, "jt", true).handle(JobKind::Job, 6, true);
        assert_eq!(check.data, json!({"kind": "job", "template_id": 3, "template": "jt", "check": true}));
        assert_eq!(parse_handle(&check).unwrap(), (JobKind::Job, 6));
        assert!(is_check(&check));
    }
}
