//! The job template and workflow job template endpoints: lookup by id or named URL, the
//! launch prompt description, and the launch itself (prompt checks, per-launch plans).

use super::*;

/// A template by id or by named URL (`<name>++<organization name>`).
fn find_template(st: &State, kind: Kind, seg: &str) -> Option<SimTemplate> {
    if let Ok(id) = seg.parse::<u64>() {
        return st.template(kind, id).cloned();
    }
    let decoded = percent_decode(seg, false);
    let (name, org) = decoded.rsplit_once("++")?;
    st.templates(kind).iter().find(|t| t.name == name && st.organization_name(t.organization) == org).cloned()
}

pub(super) fn templates(ctx: &Ctx, st: &mut State, kind: Kind, rest: &[&str], user: User) -> Response {
    let model = match kind {
        Kind::Job => &query::JOB_TEMPLATE,
        Kind::WorkflowJob => &query::WORKFLOW_JOB_TEMPLATE,
    };
    if rest.is_empty() {
        if !ctx.is(&Method::GET) {
            return method_not_allowed(&ctx.method);
        }
        let items = st.templates(kind).iter().map(|t| st.template_json(kind, t)).collect();
        return list_response(model, items, ctx);
    }
    let Some(t) = find_template(st, kind, rest[0]) else {
        return if rest.len() <= 2 { not_found() } else { no_route() };
    };
    match (&rest[1..], kind) {
        ([], _) => {
            if ctx.is(&Method::GET) {
                json_response(200, &st.template_json(kind, &t))
            } else {
                method_not_allowed(&ctx.method)
            }
        }
        (["launch"], _) => {
            if ctx.is(&Method::GET) {
                json_response(200, &launch_info(kind, &t))
            } else if ctx.method == Method::POST {
                launch(ctx, st, kind, &t, user)
            } else {
                method_not_allowed(&ctx.method)
            }
        }
        (["jobs"], Kind::Job) | (["workflow_jobs"], Kind::WorkflowJob) => {
            if !ctx.is(&Method::GET) {
                return method_not_allowed(&ctx.method);
            }
            let items = candidate_jobs(st, &ctx.query, |j| j.kind == kind && j.template_id == t.id)
                .iter()
                .map(|j| st.job_json(j, View::Detail))
                .collect();
            list_response(if kind == Kind::Job { &query::JOB } else { &query::WORKFLOW_JOB }, items, ctx)
        }
        _ => no_route(),
    }
}

/// `GET …/launch/`: what a launch will need (nothing, in the simulator), what it may set,
/// and the template's values it otherwise runs with.
fn launch_info(kind: Kind, t: &SimTemplate) -> Value {
    let data = json!({"name": t.name, "id": t.id, "description": ""});
    match kind {
        Kind::Job => json!({
            "can_start_without_user_input": true, "passwords_needed_to_start": [],
            "ask_scm_branch_on_launch": false, "ask_variables_on_launch": t.ask_variables_on_launch,
            "ask_tags_on_launch": false, "ask_diff_mode_on_launch": t.ask_diff_mode_on_launch,
            "ask_skip_tags_on_launch": false, "ask_job_type_on_launch": t.ask_job_type_on_launch,
            "ask_limit_on_launch": false, "ask_verbosity_on_launch": false,
            "ask_inventory_on_launch": false, "ask_credential_on_launch": false,
            "ask_execution_environment_on_launch": false, "ask_labels_on_launch": false, "ask_forks_on_launch": false,
            "ask_job_slice_count_on_launch": false, "ask_timeout_on_launch": false,
            "ask_instance_groups_on_launch": false, "survey_enabled": t.survey_enabled,
            "variables_needed_to_start": [], "credential_needed_to_start": false,
            "inventory_needed_to_start": false, "job_template_data": data,
            "defaults": {"extra_vars": "", "diff_mode": t.diff_mode, "limit": "", "job_tags": "", "skip_tags": "",
                         "job_type": t.job_type, "verbosity": 0, "inventory": {"name": null, "id": null},
                         "scm_branch": "", "credentials": [], "execution_environment": {}, "labels": [],
                         "forks": 0, "job_slice_count": 1, "timeout": 0, "instance_groups": []},
        }),
        Kind::WorkflowJob => json!({
            "can_start_without_user_input": true, "extra_vars": "",
            "ask_inventory_on_launch": false, "ask_limit_on_launch": false, "ask_scm_branch_on_launch": false,
            "ask_variables_on_launch": t.ask_variables_on_launch, "ask_labels_on_launch": false,
            "ask_skip_tags_on_launch": false, "ask_tags_on_launch": false, "survey_enabled": t.survey_enabled,
            "variables_needed_to_start": [], "node_templates_missing": [], "node_prompts_rejected": [],
            "workflow_job_template_data": data,
            "defaults": {"extra_vars": "", "inventory": {"name": null, "id": null}, "limit": null,
                         "scm_branch": null, "labels": [], "job_tags": null, "skip_tags": null},
        }),
    }
}

/// Launch fields other than `extra_vars` a template may prompt for, with the template value
/// (a value equal to it counts as neither accepted nor ignored). The simulator's templates
/// prompt for `job_type` and `diff_mode` when configured to ([`prompted`]; their template
/// values are the template's own), for none of the others.
const JT_PROMPT_FIELDS: &[(&str, &str)] = &[
    ("inventory", "null"),
    ("credentials", "[]"),
    ("scm_branch", "\"\""),
    ("limit", "\"\""),
    ("job_tags", "\"\""),
    ("skip_tags", "\"\""),
    ("job_type", "\"run\""),
    ("verbosity", "0"),
    ("diff_mode", "false"),
    ("execution_environment", "null"),
    ("labels", "[]"),
    ("forks", "0"),
    ("job_slice_count", "1"),
    ("timeout", "0"),
    ("instance_groups", "[]"),
];
const WFJT_PROMPT_FIELDS: &[(&str, &str)] = &[
    ("inventory", "null"),
    ("limit", "null"),
    ("scm_branch", "null"),
    ("labels", "[]"),
    ("skip_tags", "null"),
    ("job_tags", "null"),
];

fn launch(ctx: &Ctx, st: &mut State, kind: Kind, t: &SimTemplate, user: User) -> Response {
    let body = match ctx.json_body() {
        Ok(Value::Object(m)) => m,
        Ok(other) => {
            let got = match other {
                Value::Array(_) => "list",
                Value::String(_) => "str",
                Value::Number(_) => "int",
                Value::Bool(_) => "bool",
                _ => "NoneType",
            };
            return json_response(
                400,
                &json!({"__all__": [format!("Invalid data. Expected a dictionary, but got {got}.")]}),
            );
        }
        Err(resp) => return *resp,
    };

    let extra_vars = match body.get("extra_vars") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(Value::String(s)) => match parse_yaml_or_json(s) {
            Ok(m) => m,
            Err(e) => return json_response(400, &json!({"extra_vars": [e]})),
        },
        Some(_) => return json_response(400, &json!({"extra_vars": ["Must be a valid JSON or YAML dictionary."]})),
    };

    // The serializer's field validation comes before the prompts are considered.
    let (job_type, diff_mode) = match mode_fields(kind, &body) {
        Ok(fields) => fields,
        Err(resp) => return *resp,
    };

    // `_accept_or_ignore_job_kwargs`: unprompted fields are dropped for job templates
    // (`_exclude_errors=['prompts']`) and rejected for workflow job templates.
    let mut ignored = Map::new();
    let mut errors = Map::new();
    let mut accepted = Map::new();
    let prompt_fields = if kind == Kind::Job { JT_PROMPT_FIELDS } else { WFJT_PROMPT_FIELDS };
    for (field, default) in prompt_fields {
        let value = match (kind, *field) {
            (Kind::Job, "job_type") => job_type.as_ref().map(|t| json!(t)),
            (Kind::Job, "diff_mode") => diff_mode.map(Value::Bool),
            _ => body.get(*field).cloned(),
        };
        let Some(value) = value else { continue };
        let default: Value = match (kind, *field) {
            (Kind::Job, "job_type") => json!(t.job_type),
            (Kind::Job, "diff_mode") => json!(t.diff_mode),
            _ => serde_json::from_str(default).expect("valid default"),
        };
        if value == default || value.is_null() {
            continue;
        }
        if kind == Kind::Job && prompted(t, field) {
            accepted.insert(field.to_string(), value);
            continue;
        }
        ignored.insert(field.to_string(), value);
        errors.insert(field.to_string(), json!(["Field is not configured to prompt on launch."]));
    }
    let accept_vars = t.ask_variables_on_launch || t.survey_enabled;
    let accepted_vars = if accept_vars || extra_vars.is_empty() {
        extra_vars
    } else {
        let keys: Vec<&str> = extra_vars.keys().map(String::as_str).collect();
        let model = if kind == Kind::Job { "Job Template" } else { "Workflow Job Template" };
        errors.insert(
            "extra_vars".into(),
            json!([format!(
                "Variables {} are not allowed on launch. Check the Prompt on Launch setting on the {model} to include Extra Variables.",
                keys.join(", ")
            )]),
        );
        ignored.insert("extra_vars".into(), Value::Object(extra_vars.clone()));
        Map::new()
    };
    if kind == Kind::WorkflowJob && !errors.is_empty() {
        return json_response(400, &Value::Object(errors));
    }

    let mut plan = match plan_for(t, &accepted_vars) {
        Ok(p) => p,
        Err(msg) => return json_response(400, &json!({"extra_vars": [msg]})),
    };
    if kind == Kind::Job {
        let job_type = accepted.get("job_type").and_then(Value::as_str).unwrap_or(&t.job_type);
        plan.check = job_type == "check";
        plan.diff_mode = accepted.get("diff_mode").and_then(Value::as_bool).unwrap_or(t.diff_mode);
    }
    let limit = if ignored.contains_key("limit") {
        String::new()
    } else {
        body.get("limit").and_then(Value::as_str).unwrap_or("").to_string()
    };
    let id = st.jobs.launch(kind, t, Value::Object(accepted_vars), limit, plan, user);

    if st.rng.percent(st.faults.lose_launch_response_percent) {
        // The job exists and runs; the client never learns its id.
        if let Some(job) = st.jobs.get_mut(&id) {
            job.launch_lost = true;
        }
        st.injected.lost_launch_responses += 1;
        ctx.conn.kill();
        return Response::new(Body::empty());
    }

    let job = &st.jobs[&id];
    let mut v = st.job_json(job, View::Launch);
    let m = v.as_object_mut().expect("object");
    m.insert(kind.as_str().into(), json!(id));
    m.insert("ignored_fields".into(), Value::Object(ignored));
    let location = st.api(&format!("{}/{id}/", kind.collection()));
    let mut resp = json_response(201, &v);
    if let Ok(l) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(header::LOCATION, l);
    }
    resp
}

/// Whether a job template prompts for `field` on launch (the simulator's templates may
/// prompt for `job_type` and `diff_mode` only).
fn prompted(t: &SimTemplate, field: &str) -> bool {
    match field {
        "job_type" => t.ask_job_type_on_launch,
        "diff_mode" => t.ask_diff_mode_on_launch,
        _ => false,
    }
}

/// A job template launch's `job_type` and `diff_mode`, validated as the launch serializer's
/// fields are (`null` or absent: not given); a workflow job template has no such fields and
/// drops them unread, as DRF drops unknown fields.
fn mode_fields(kind: Kind, body: &Map<String, Value>) -> Result<(Option<String>, Option<bool>), Box<Response>> {
    if kind != Kind::Job {
        return Ok((None, None));
    }
    let job_type = match body.get("job_type") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "run" || s == "check" => Some(s.clone()),
        Some(other) => {
            let shown = other.as_str().map(str::to_owned).unwrap_or_else(|| other.to_string());
            let msg = format!("\"{shown}\" is not a valid choice.");
            return Err(Box::new(json_response(400, &json!({"job_type": [msg]}))));
        }
    };
    let diff_mode = match body.get("diff_mode") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            drf_bool(v)
                .ok_or_else(|| Box::new(json_response(400, &json!({"diff_mode": ["Must be a valid boolean."]}))))?,
        ),
    };
    Ok((job_type, diff_mode))
}

/// DRF's `BooleanField`: a boolean, or one of the usual words and digits.
fn drf_bool(v: &Value) -> Option<bool> {
    let word = match v {
        Value::Bool(b) => return Some(*b),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.to_ascii_lowercase(),
        _ => return None,
    };
    match word.as_str() {
        "true" | "t" | "yes" | "y" | "on" | "1" => Some(true),
        "false" | "f" | "no" | "n" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// The job's timings and outcome: the template's, overridden per launch by the extra vars
/// `aap_sim_outcome` / `aap_sim_duration_seconds` / `aap_sim_pending_seconds`, or by Slipway's
/// envelope (`slipway.resource.properties.simulateFailure` / `.delaySeconds` for create jobs,
/// `simulateDeleteFailure` / `deleteDelaySeconds` for delete jobs, what the example
/// playbooks honour). The explicit `aap_sim_*` variables win over the envelope.
fn plan_for(t: &SimTemplate, vars: &Map<String, Value>) -> Result<Plan, String> {
    let outcome = Status::parse_outcome(&t.outcome).unwrap_or(Status::Successful);
    let mut plan = Plan {
        pending_seconds: t.pending_seconds,
        duration_seconds: t.duration_seconds,
        outcome,
        failure: format!("aap-sim: template {:?} is configured to end {}", t.name, t.outcome),
        check: false,
        diff_mode: false,
        tasks: t.tasks,
    };
    let slipway = match vars.get("slipway") {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::Null),
        Some(v) => v.clone(),
        None => Value::Null,
    };
    if let Some(props) = slipway.pointer("/resource/properties") {
        // As the example playbooks do: create jobs honour simulateFailure / delaySeconds,
        // delete jobs simulateDeleteFailure / deleteDelaySeconds.
        let deleting = slipway.get("action").and_then(Value::as_str) == Some("delete");
        let (fail, delay) = if deleting {
            ("simulateDeleteFailure", "deleteDelaySeconds")
        } else {
            ("simulateFailure", "delaySeconds")
        };
        if props.get(fail).and_then(Value::as_bool) == Some(true) {
            plan.outcome = Status::Failed;
            plan.failure = "simulated failure".into();
        }
        if let Some(d) = props.get(delay).and_then(Value::as_f64).filter(|d| *d >= 0.0) {
            plan.duration_seconds = d;
        }
    }
    if let Some(o) = vars.get("aap_sim_outcome") {
        let o = o.as_str().unwrap_or("");
        plan.outcome = Status::parse_outcome(o)
            .ok_or_else(|| format!("aap_sim_outcome {o:?} is not one of successful, failed, error, canceled"))?;
        plan.failure = format!("aap-sim: outcome {o} requested by aap_sim_outcome");
    }
    let seconds = |name: &str| -> Result<Option<f64>, String> {
        match vars.get(name) {
            None => Ok(None),
            Some(v) => v.as_f64().filter(|s| *s >= 0.0).map(Some).ok_or_else(|| format!("{name} must be a number ≥ 0")),
        }
    };
    if let Some(d) = seconds("aap_sim_duration_seconds")? {
        plan.duration_seconds = d;
    }
    if let Some(p) = seconds("aap_sim_pending_seconds")? {
        plan.pending_seconds = p;
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> SimTemplate {
        SimTemplate { id: 1, name: "t".into(), duration_seconds: 2.0, ..SimTemplate::default() }
    }

    #[test]
    fn per_launch_overrides() {
        let vars = |v: Value| v.as_object().unwrap().clone();
        let p = plan_for(&template(), &Map::new()).unwrap();
        assert_eq!((p.outcome, p.duration_seconds), (Status::Successful, 2.0));
        let env = vars(json!({"slipway": {"resource": {"properties": {"simulateFailure": true, "delaySeconds": 7}}}}));
        let p = plan_for(&template(), &env).unwrap();
        assert_eq!((p.outcome, p.duration_seconds, p.failure.as_str()), (Status::Failed, 7.0, "simulated failure"));
        let env_str = vars(json!({"slipway": "{\"resource\": {\"properties\": {\"delaySeconds\": 0.5}}}"}));
        assert_eq!(plan_for(&template(), &env_str).unwrap().duration_seconds, 0.5);
        let both = vars(json!({"aap_sim_outcome": "error", "aap_sim_duration_seconds": 0.25,
            "slipway": {"resource": {"properties": {"simulateFailure": true, "delaySeconds": 7}}}}));
        let p = plan_for(&template(), &both).unwrap();
        assert_eq!((p.outcome, p.duration_seconds), (Status::Error, 0.25));
        let delete = vars(json!({"slipway": {"action": "delete", "resource": {"properties":
            {"simulateFailure": true, "delaySeconds": 7, "deleteDelaySeconds": 0.5}}}}));
        let p = plan_for(&template(), &delete).unwrap();
        assert_eq!((p.outcome, p.duration_seconds), (Status::Successful, 0.5), "delete jobs use the delete knobs");
        assert!(plan_for(&template(), &vars(json!({"aap_sim_outcome": "maybe"}))).is_err());
        assert!(plan_for(&template(), &vars(json!({"aap_sim_duration_seconds": "soon"}))).is_err());
    }
}
