//! AWX's JSON views of the simulated controller, field for field as AWX 24.6.1's serializers
//! write them: users, organizations, job templates and workflow job templates (with their
//! summary fields: last job, recent jobs), jobs and workflow jobs (detail and launch views).
//! Job events are in `events`. Reading only: nothing here changes the state.

use serde_json::{Value, json};

use crate::awx::{Kind, User};
use crate::config::SimTemplate;
use crate::lifecycle::Job;
use crate::state::State;
use crate::util::{format_api, now_micros, python_json_dumps};

/// Which serializer shapes a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// `JobDetailSerializer` / `WorkflowJobSerializer` (detail).
    Detail,
    /// `JobSerializer` as the launch response uses it.
    Launch,
}

impl State {
    fn organization_summary(&self, id: u64) -> Value {
        json!({"id": id, "name": self.organization_name(id), "description": ""})
    }

    fn user_summary(&self, user: &User) -> Value {
        json!({"id": user.id, "username": user.username, "first_name": "", "last_name": ""})
    }

    pub fn user_json(&self, user: &User) -> Value {
        json!({
            "id": user.id, "type": "user", "url": self.api(&format!("users/{}/", user.id)),
            "related": {}, "summary_fields": {}, "created": format_api(self.boot), "modified": format_api(self.boot),
            "username": user.username, "first_name": "", "last_name": "", "email": "",
            "is_superuser": true, "is_system_auditor": false, "password": "$encrypted$",
            "ldap_dn": "", "last_login": Value::Null, "external_account": Value::Null,
        })
    }

    pub fn organization_json(&self, id: u64) -> Value {
        let prefix = format!("organizations/{id}/");
        json!({
            "id": id, "type": "organization", "url": self.api(&prefix),
            "related": {
                "job_templates": self.api(&format!("{prefix}job_templates/")),
                "workflow_job_templates": self.api(&format!("{prefix}workflow_job_templates/")),
            },
            "summary_fields": {}, "created": format_api(self.boot), "modified": format_api(self.boot),
            "name": self.organization_name(id), "description": "", "max_hosts": 0,
            "custom_virtualenv": Value::Null, "default_environment": Value::Null,
        })
    }

    /// `status`, `last_job_run`, `last_job_failed` and the last job of a template, as AWX
    /// keeps them (`_get_current_status`).
    fn template_job_summary(&self, kind: Kind, template_id: u64) -> (String, Option<i64>, bool, Value) {
        let mine = || self.jobs.values().rev().filter(|j| j.kind == kind && j.template_id == template_id);
        let current = mine().find(|j| j.status.is_active());
        let last = mine().find(|j| !j.status.is_active());
        let status = match (current, last) {
            (Some(c), _) => c.status.as_str().to_string(),
            (None, None) => "never updated".into(),
            (None, Some(l)) if l.status.is_failed() => "failed".into(),
            (None, Some(_)) => "successful".into(),
        };
        let last_job = last.map(|l| {
            json!({"id": l.id, "name": l.template_name, "description": "", "finished": l.finished.map(format_api),
                   "status": l.status.as_str(), "failed": l.status.is_failed()})
        });
        (
            status,
            last.and_then(|l| l.finished),
            last.is_some_and(|l| l.status.is_failed()),
            last_job.unwrap_or(Value::Null),
        )
    }

    pub fn template_json(&self, kind: Kind, t: &SimTemplate) -> Value {
        let base = format!("{}/{}/", kind.template_collection(), t.id);
        let (status, last_run, last_failed, last_job) = self.template_job_summary(kind, t.id);
        let mut summary = json!({
            "organization": self.organization_summary(t.organization),
            "user_capabilities": {"edit": true, "delete": true, "start": true, "schedule": true, "copy": true},
            "labels": {"count": 0, "results": []},
            "recent_jobs": self.jobs.values().rev()
                .filter(|j| j.kind == kind && j.template_id == t.id).take(10)
                .map(|j| json!({"id": j.id, "status": j.status.as_str(), "finished": j.finished.map(format_api),
                                "canceled_on": j.canceled_on.map(format_api), "type": kind.as_str()}))
                .collect::<Vec<_>>(),
        });
        if !last_job.is_null() {
            summary["last_job"] = last_job;
        }
        let mut v = json!({
            "id": t.id,
            "type": kind.template_type(),
            "url": self.api(&base),
            "summary_fields": summary,
            "created": format_api(self.boot),
            "modified": format_api(self.boot),
            "name": t.name,
            "description": "",
            "last_job_run": last_run.map(format_api),
            "last_job_failed": last_failed,
            "next_job_run": Value::Null,
            "status": status,
            "organization": t.organization,
            "survey_enabled": t.survey_enabled,
            "allow_simultaneous": t.allow_simultaneous,
            "ask_variables_on_launch": t.ask_variables_on_launch,
            "ask_inventory_on_launch": false,
            "ask_scm_branch_on_launch": false,
            "ask_limit_on_launch": false,
            "ask_labels_on_launch": false,
            "ask_tags_on_launch": false,
            "ask_skip_tags_on_launch": false,
            "extra_vars": "",
            "webhook_service": "",
            "webhook_credential": Value::Null,
        });
        let m = v.as_object_mut().expect("object");
        match kind {
            Kind::Job => {
                m.insert(
                    "related".into(),
                    json!({
                        "launch": self.api(&format!("{base}launch/")),
                        "jobs": self.api(&format!("{base}jobs/")),
                        "organization": self.api(&format!("organizations/{}/", t.organization)),
                        "notification_templates_started": self.api(&format!("{base}notification_templates_started/")),
                        "notification_templates_success": self.api(&format!("{base}notification_templates_success/")),
                        "notification_templates_error": self.api(&format!("{base}notification_templates_error/")),
                        "labels": self.api(&format!("{base}labels/")),
                        "survey_spec": self.api(&format!("{base}survey_spec/")),
                    }),
                );
                for (k, val) in [
                    ("job_type", json!(t.job_type)),
                    ("inventory", Value::Null),
                    ("project", Value::Null),
                    ("playbook", json!(format!("{}.yml", t.name))),
                    ("scm_branch", json!("")),
                    ("forks", json!(0)),
                    ("limit", json!("")),
                    ("verbosity", json!(0)),
                    ("job_tags", json!("")),
                    ("force_handlers", json!(false)),
                    ("skip_tags", json!("")),
                    ("start_at_task", json!("")),
                    ("timeout", json!(0)),
                    ("use_fact_cache", json!(false)),
                    ("execution_environment", Value::Null),
                    ("host_config_key", json!("")),
                    ("ask_diff_mode_on_launch", json!(t.ask_diff_mode_on_launch)),
                    ("ask_job_type_on_launch", json!(t.ask_job_type_on_launch)),
                    ("ask_verbosity_on_launch", json!(false)),
                    ("ask_credential_on_launch", json!(false)),
                    ("ask_execution_environment_on_launch", json!(false)),
                    ("ask_forks_on_launch", json!(false)),
                    ("ask_job_slice_count_on_launch", json!(false)),
                    ("ask_timeout_on_launch", json!(false)),
                    ("ask_instance_groups_on_launch", json!(false)),
                    ("become_enabled", json!(false)),
                    ("diff_mode", json!(t.diff_mode)),
                    ("custom_virtualenv", Value::Null),
                    ("job_slice_count", json!(1)),
                    ("prevent_instance_group_fallback", json!(false)),
                ] {
                    m.insert(k.into(), val);
                }
            }
            Kind::WorkflowJob => {
                m.insert(
                    "related".into(),
                    json!({
                        "launch": self.api(&format!("{base}launch/")),
                        "workflow_jobs": self.api(&format!("{base}workflow_jobs/")),
                        "workflow_nodes": self.api(&format!("{base}workflow_nodes/")),
                        "organization": self.api(&format!("organizations/{}/", t.organization)),
                        "notification_templates_started": self.api(&format!("{base}notification_templates_started/")),
                        "notification_templates_success": self.api(&format!("{base}notification_templates_success/")),
                        "notification_templates_error": self.api(&format!("{base}notification_templates_error/")),
                        "notification_templates_approvals": self.api(&format!("{base}notification_templates_approvals/")),
                        "labels": self.api(&format!("{base}labels/")),
                        "survey_spec": self.api(&format!("{base}survey_spec/")),
                    }),
                );
                for (k, val) in [
                    ("inventory", Value::Null),
                    ("limit", Value::Null),
                    ("scm_branch", Value::Null),
                    ("job_tags", Value::Null),
                    ("skip_tags", Value::Null),
                ] {
                    m.insert(k.into(), val);
                }
            }
        }
        v
    }

    /// A job or workflow job, with every field of the detail serializer. List views drop some
    /// of them (`query::Model::list_omits`).
    pub fn job_json(&self, job: &Job, view: View) -> Value {
        let now = now_micros();
        let id = job.id;
        let base = format!("{}/{id}/", job.kind.collection());
        let template_url = self.api(&format!("{}/{}/", job.kind.template_collection(), job.template_id));
        let template_summary = json!({"id": job.template_id, "name": job.template_name, "description": ""});
        let user_url = self.api(&format!("users/{}/", job.launched_by.id));
        let terminal = !job.status.is_active();
        let mut v = json!({
            "id": id,
            "type": job.kind.as_str(),
            "url": self.api(&base),
            "created": format_api(job.created),
            "modified": format_api(job.modified),
            "name": job.template_name,
            "description": "",
            "unified_job_template": job.template_id,
            "launch_type": "manual",
            "status": job.status.as_str(),
            "failed": job.status.is_failed(),
            "started": job.started.map(format_api),
            "finished": job.finished.map(format_api),
            "canceled_on": job.canceled_on.map(format_api),
            "elapsed": job.elapsed(now),
            "job_args": "",
            "job_cwd": "",
            "job_env": {},
            "job_explanation": job.job_explanation,
            "result_traceback": job.result_traceback,
            "launched_by": {"id": job.launched_by.id, "name": job.launched_by.username, "type": "user", "url": user_url},
            "work_unit_id": Value::Null,
            "extra_vars": python_json_dumps(&job.extra_vars),
            "allow_simultaneous": job.allow_simultaneous,
            "webhook_service": "",
            "webhook_credential": Value::Null,
            "webhook_guid": "",
        });
        let mut summary = json!({
            "organization": self.organization_summary(job.organization),
            "unified_job_template": {"id": job.template_id, "name": job.template_name, "description": "",
                                     "unified_job_type": job.kind.as_str()},
            "created_by": self.user_summary(&job.launched_by),
            "user_capabilities": {"delete": terminal, "start": true},
            "labels": {"count": 0, "results": []},
        });
        let m = v.as_object_mut().expect("object");
        match job.kind {
            Kind::Job => {
                summary["job_template"] = template_summary;
                summary["credentials"] = json!([]);
                m.insert(
                    "related".into(),
                    json!({
                        "created_by": user_url,
                        "labels": self.api(&format!("{base}labels/")),
                        "organization": self.api(&format!("organizations/{}/", job.organization)),
                        "credentials": self.api(&format!("{base}credentials/")),
                        "unified_job_template": template_url,
                        "stdout": self.api(&format!("{base}stdout/")),
                        "job_events": self.api(&format!("{base}job_events/")),
                        "job_host_summaries": self.api(&format!("{base}job_host_summaries/")),
                        "activity_stream": self.api(&format!("{base}activity_stream/")),
                        "notifications": self.api(&format!("{base}notifications/")),
                        "job_template": template_url,
                        "cancel": self.api(&format!("{base}cancel/")),
                        "relaunch": self.api(&format!("{base}relaunch/")),
                    }),
                );
                let played = job.started.is_some();
                for (k, val) in [
                    ("job_type", json!(job.job_type())),
                    ("inventory", Value::Null),
                    ("project", Value::Null),
                    ("playbook", json!(format!("{}.yml", job.template_name))),
                    ("scm_branch", json!("")),
                    ("forks", json!(0)),
                    ("limit", json!(job.limit)),
                    ("verbosity", json!(0)),
                    ("job_tags", json!("")),
                    ("force_handlers", json!(false)),
                    ("skip_tags", json!("")),
                    ("start_at_task", json!("")),
                    ("timeout", json!(0)),
                    ("use_fact_cache", json!(false)),
                    ("organization", json!(job.organization)),
                    ("execution_environment", Value::Null),
                    ("execution_node", json!(if played { "aap-sim" } else { "" })),
                    ("controller_node", json!(if played { "aap-sim" } else { "" })),
                    ("event_processing_finished", json!(self.events_processed(job))),
                    ("job_template", json!(job.template_id)),
                    ("passwords_needed_to_start", json!([])),
                    ("artifacts", artifacts(job)),
                    ("scm_revision", json!("")),
                    ("instance_group", Value::Null),
                    ("diff_mode", json!(job.plan.diff_mode)),
                    ("job_slice_number", json!(0)),
                    ("job_slice_count", json!(1)),
                ] {
                    m.insert(k.into(), val);
                }
                if view == View::Detail {
                    let stats = job.host_stats();
                    m.insert(
                        "host_status_counts".into(),
                        match stats {
                            Some((_, true)) => json!({"failures": 1}),
                            Some(_) => json!({"ok": 1}),
                            None => json!({}),
                        },
                    );
                    m.insert(
                        "playbook_counts".into(),
                        json!({"play_count": u64::from(played), "task_count": u64::from(played)}),
                    );
                    m.insert("custom_virtualenv".into(), Value::Null);
                }
            }
            Kind::WorkflowJob => {
                summary["workflow_job_template"] = template_summary;
                m.insert(
                    "related".into(),
                    json!({
                        "created_by": user_url,
                        "labels": self.api(&format!("{base}labels/")),
                        "unified_job_template": template_url,
                        "workflow_job_template": template_url,
                        "workflow_nodes": self.api(&format!("{base}workflow_nodes/")),
                        "notifications": self.api(&format!("{base}notifications/")),
                        "activity_stream": self.api(&format!("{base}activity_stream/")),
                        "relaunch": self.api(&format!("{base}relaunch/")),
                        "cancel": self.api(&format!("{base}cancel/")),
                    }),
                );
                for (k, val) in [
                    ("workflow_job_template", json!(job.template_id)),
                    ("job_template", Value::Null),
                    ("is_sliced_job", json!(false)),
                    ("inventory", Value::Null),
                    ("limit", if job.limit.is_empty() { Value::Null } else { json!(job.limit) }),
                    ("scm_branch", Value::Null),
                    ("skip_tags", Value::Null),
                    ("job_tags", Value::Null),
                ] {
                    m.insert(k.into(), val);
                }
            }
        }
        m.insert("summary_fields".into(), summary);
        v
    }
}

/// A job's `artifacts`: its `set_stats` data once its playbook ran to the end — successful,
/// or failed (AWX keeps what `set_stats` reported before the failure) — `{}` before and
/// otherwise.
fn artifacts(job: &Job) -> Value {
    use crate::awx::Status;
    match (&job.artifacts, job.status) {
        (Value::Object(_), Status::Successful | Status::Failed) => job.artifacts.clone(),
        _ => json!({}),
    }
}
