//! List views: django-ansible-base's `FieldLookupBackend` filters, `order_by`, DRF search, and
//! AWX's page-number pagination, evaluated over the JSON representation of the objects.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::util::{parse_datetime, quote_plus};

pub const DEFAULT_PAGE_SIZE: usize = 25;
pub const MAX_PAGE_SIZE: usize = 200;

/// Query parameters that are never filters (`ANSIBLE_BASE_REST_FILTERS_RESERVED_NAMES`).
const RESERVED: &[&str] = &[
    "page",
    "page_size",
    "format",
    "order",
    "order_by",
    "search",
    "type",
    "host_filter",
    "count_disabled",
    "no_truncate",
    "limit",
    "validate",
];

const LOOKUPS: &[&str] = &[
    "exact",
    "iexact",
    "contains",
    "icontains",
    "startswith",
    "istartswith",
    "endswith",
    "iendswith",
    "regex",
    "iregex",
    "gt",
    "gte",
    "lt",
    "lte",
    "in",
    "isnull",
    "search",
];

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldType {
    /// An integer column (`id`, counters): bad values are Django `ValidationError`s.
    Int,
    /// A foreign key: accepts `none`/`null`; bad values are `"Invalid <field> id"`.
    Fk,
    Str,
    Bool,
    DateTime,
    Float,
}

/// A filterable/orderable field: its query name, its type, and where it sits in the object's
/// JSON (a dotted path, for related fields such as `organization__name`).
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    pub ty: FieldType,
    pub path: &'static str,
}

const fn f(name: &'static str, ty: FieldType, path: &'static str) -> Field {
    Field { name, ty, path }
}

/// A model as the list view sees it.
pub struct Model {
    /// Django model name, for error messages.
    pub name: &'static str,
    /// Its fields, in parts that models share.
    pub fields: &'static [&'static [Field]],
    pub default_order: &'static [&'static str],
    /// Fields the list serializer leaves out.
    pub list_omits: &'static [&'static str],
}

impl Model {
    fn field(&self, name: &str) -> Option<Field> {
        self.fields.iter().flat_map(|part| part.iter()).find(|f| f.name == name).copied()
    }
}

use FieldType::*;

const TEMPLATE_FIELDS: &[Field] = &[
    f("id", Int, "id"),
    f("name", Str, "name"),
    f("description", Str, "description"),
    f("organization", Fk, "organization"),
    f("organization__id", Int, "summary_fields.organization.id"),
    f("organization__name", Str, "summary_fields.organization.name"),
    f("created", DateTime, "created"),
    f("modified", DateTime, "modified"),
    f("status", Str, "status"),
    f("last_job_run", DateTime, "last_job_run"),
    f("last_job_failed", Bool, "last_job_failed"),
    f("survey_enabled", Bool, "survey_enabled"),
    f("allow_simultaneous", Bool, "allow_simultaneous"),
    f("ask_variables_on_launch", Bool, "ask_variables_on_launch"),
    f("playbook", Str, "playbook"),
];

pub const JOB_TEMPLATE: Model =
    Model { name: "JobTemplate", fields: &[TEMPLATE_FIELDS], default_order: &["name"], list_omits: &[] };
pub const WORKFLOW_JOB_TEMPLATE: Model =
    Model { name: "WorkflowJobTemplate", fields: &[TEMPLATE_FIELDS], default_order: &["name"], list_omits: &[] };

/// What every kind of job filters by: the `UnifiedJob` fields, before and after the fields
/// that name the kind's template.
const UNIFIED_JOB_HEAD: &[Field] = &[
    f("id", Int, "id"),
    f("name", Str, "name"),
    f("description", Str, "description"),
    f("status", Str, "status"),
    f("failed", Bool, "failed"),
    f("created", DateTime, "created"),
    f("modified", DateTime, "modified"),
    f("started", DateTime, "started"),
    f("finished", DateTime, "finished"),
    f("canceled_on", DateTime, "canceled_on"),
    f("elapsed", Float, "elapsed"),
    f("launch_type", Str, "launch_type"),
    f("job_explanation", Str, "job_explanation"),
    f("unified_job_template", Fk, "unified_job_template"),
    f("unified_job_template__name", Str, "summary_fields.unified_job_template.name"),
];

const UNIFIED_JOB_TAIL: &[Field] = &[
    f("organization", Fk, "summary_fields.organization.id"),
    f("organization__name", Str, "summary_fields.organization.name"),
    f("launched_by", Fk, "launched_by.id"),
    f("created_by", Fk, "summary_fields.created_by.id"),
    f("created_by__username", Str, "summary_fields.created_by.username"),
    f("limit", Str, "limit"),
    f("extra_vars", Str, "extra_vars"),
];

const UNIFIED_JOB_FIELDS: &[&[Field]] = &[
    UNIFIED_JOB_HEAD,
    &[f("unified_job_template__id", Int, "summary_fields.unified_job_template.id")],
    UNIFIED_JOB_TAIL,
];

const JOB_FIELDS: &[&[Field]] = &[
    UNIFIED_JOB_HEAD,
    &[
        f("job_template", Fk, "job_template"),
        f("job_template__id", Int, "summary_fields.job_template.id"),
        f("job_template__name", Str, "summary_fields.job_template.name"),
    ],
    UNIFIED_JOB_TAIL,
    &[
        f("playbook", Str, "playbook"),
        f("event_processing_finished", Bool, "event_processing_finished"),
        f("job_type", Str, "job_type"),
        f("diff_mode", Bool, "diff_mode"),
    ],
];

const WORKFLOW_JOB_FIELDS: &[&[Field]] = &[
    UNIFIED_JOB_HEAD,
    &[
        f("workflow_job_template", Fk, "workflow_job_template"),
        f("workflow_job_template__id", Int, "summary_fields.workflow_job_template.id"),
        f("workflow_job_template__name", Str, "summary_fields.workflow_job_template.name"),
    ],
    UNIFIED_JOB_TAIL,
];

/// `UnifiedJobListSerializer` drops these from list rows (fetch the detail for a traceback).
const JOB_LIST_OMITS: &[&str] = &[
    "job_args",
    "job_cwd",
    "job_env",
    "result_traceback",
    "event_processing_finished",
    "host_status_counts",
    "playbook_counts",
    "custom_virtualenv",
];

pub const JOB: Model = Model { name: "Job", fields: JOB_FIELDS, default_order: &["id"], list_omits: JOB_LIST_OMITS };
pub const WORKFLOW_JOB: Model =
    Model { name: "WorkflowJob", fields: WORKFLOW_JOB_FIELDS, default_order: &["id"], list_omits: JOB_LIST_OMITS };
pub const UNIFIED_JOB: Model =
    Model { name: "UnifiedJob", fields: UNIFIED_JOB_FIELDS, default_order: &["id"], list_omits: JOB_LIST_OMITS };

pub const JOB_EVENT: Model = Model {
    name: "JobEvent",
    fields: &[&[
        f("id", Int, "id"),
        f("counter", Int, "counter"),
        f("event", Str, "event"),
        f("failed", Bool, "failed"),
        f("changed", Bool, "changed"),
        f("created", DateTime, "created"),
        f("modified", DateTime, "modified"),
        f("job", Fk, "job"),
        f("host_name", Str, "host_name"),
        f("uuid", Str, "uuid"),
        f("parent_uuid", Str, "parent_uuid"),
        f("start_line", Int, "start_line"),
        f("end_line", Int, "end_line"),
        f("task", Str, "task"),
        f("play", Str, "play"),
        f("playbook", Str, "playbook"),
        f("event_level", Int, "event_level"),
    ]],
    default_order: &["start_line", "counter"],
    list_omits: &[],
};

pub const ORGANIZATION: Model = Model {
    name: "Organization",
    fields: &[&[
        f("id", Int, "id"),
        f("name", Str, "name"),
        f("description", Str, "description"),
        f("created", DateTime, "created"),
        f("modified", DateTime, "modified"),
    ]],
    default_order: &["name"],
    list_omits: &[],
};

/// A list request that cannot be answered: DRF `ParseError` (400) or `NotFound` (404).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryError {
    pub status: u16,
    pub detail: String,
}

fn parse_error(detail: impl Into<String>) -> QueryError {
    QueryError { status: 400, detail: detail.into() }
}

fn lookup_path<'a>(v: &'a Value, path: &str) -> &'a Value {
    let mut cur = v;
    for part in path.split('.') {
        cur = match cur.get(part) {
            Some(next) => next,
            None => return &Value::Null,
        };
    }
    cur
}

/// A typed operand, after conversion the way Django converts filter values.
#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Null,
    Int(i64),
    Str(String),
    Bool(bool),
    Time(i64),
    Float(f64),
}

impl Operand {
    fn partial_cmp(&self, other: &Operand) -> Option<Ordering> {
        match (self, other) {
            (Operand::Int(a), Operand::Int(b)) => Some(a.cmp(b)),
            (Operand::Str(a), Operand::Str(b)) => Some(a.cmp(b)),
            (Operand::Bool(a), Operand::Bool(b)) => Some(a.cmp(b)),
            (Operand::Time(a), Operand::Time(b)) => Some(a.cmp(b)),
            (Operand::Float(a), Operand::Float(b)) => a.partial_cmp(b),
            (Operand::Int(a), Operand::Float(b)) => (*a as f64).partial_cmp(b),
            (Operand::Float(a), Operand::Int(b)) => a.partial_cmp(&(*b as f64)),
            _ => None,
        }
    }

    fn as_text(&self) -> String {
        match self {
            Operand::Null => String::new(),
            Operand::Int(i) => i.to_string(),
            Operand::Str(s) => s.clone(),
            Operand::Bool(b) => b.to_string(),
            Operand::Time(t) => crate::util::format_api(*t),
            Operand::Float(x) => x.to_string(),
        }
    }
}

/// The object's value of a field, typed.
fn object_operand(obj: &Value, field: &Field) -> Operand {
    let v = lookup_path(obj, field.path);
    match (field.ty, v) {
        (_, Value::Null) => Operand::Null,
        (Int | Fk, v) => v.as_i64().map(Operand::Int).unwrap_or(Operand::Null),
        (Float, v) => v.as_f64().map(Operand::Float).unwrap_or(Operand::Null),
        (Bool, v) => v.as_bool().map(Operand::Bool).unwrap_or(Operand::Null),
        (DateTime, Value::String(s)) => parse_datetime(s).map(Operand::Time).unwrap_or(Operand::Null),
        (Str, Value::String(s)) => Operand::Str(s.clone()),
        (_, other) => Operand::Str(other.to_string()),
    }
}

/// DAB's `to_python_boolean`.
fn to_python_boolean(v: &str) -> Result<bool, QueryError> {
    match v.to_lowercase().as_str() {
        "true" | "1" | "t" => Ok(true),
        "false" | "0" | "f" => Ok(false),
        _ => Err(parse_error(format!("Unable to convert \"{v}\" to boolean"))),
    }
}

/// A filter value converted for a field (`value_to_python_for_field`); error texts are
/// Django's, as the API shows them.
fn value_operand(field: &Field, v: &str) -> Result<Operand, QueryError> {
    match field.ty {
        Int => v
            .trim()
            .parse()
            .map(Operand::Int)
            .map_err(|_| parse_error(format!("[\"\u{201c}{v}\u{201d} value must be an integer.\"]"))),
        Fk => {
            if matches!(v.to_lowercase().as_str(), "none" | "null") {
                Ok(Operand::Null)
            } else {
                let name = field.name.split("__").next().unwrap_or(field.name);
                v.trim().parse().map(Operand::Int).map_err(|_| parse_error(format!("Invalid {name} id: {v}")))
            }
        }
        Str => Ok(Operand::Str(v.to_string())),
        Bool => to_python_boolean(v).map(Operand::Bool),
        DateTime => parse_datetime(v).map(Operand::Time).ok_or_else(|| {
            parse_error(format!(
                "[\"\u{201c}{v}\u{201d} value has an invalid format. It must be in YYYY-MM-DD HH:MM[:ss[.uuuuuu]][TZ] format.\"]"
            ))
        }),
        Float => v
            .trim()
            .parse()
            .map(Operand::Float)
            .map_err(|_| parse_error(format!("[\"\u{201c}{v}\u{201d} value must be a decimal number.\"]"))),
    }
}

#[derive(Debug, Clone)]
enum Condition {
    Exact(Operand),
    IExact(String),
    Text { op: &'static str, needle: String, insensitive: bool },
    Cmp(&'static str, Operand),
    In(Vec<Operand>),
    IsNull(bool),
}

#[derive(Debug, Clone)]
struct Filter {
    negate: bool,
    field: Field,
    cond: Condition,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        let have = object_operand(obj, &self.field);
        let m = match &self.cond {
            Condition::Exact(want) => match (&have, want) {
                (Operand::Null, Operand::Null) => true,
                (Operand::Null, _) | (_, Operand::Null) => false,
                _ => have.partial_cmp(want) == Some(Ordering::Equal),
            },
            Condition::IExact(want) => match &have {
                Operand::Null => false,
                h => h.as_text().to_lowercase() == want.to_lowercase(),
            },
            Condition::Text { op, needle, insensitive } => {
                if have == Operand::Null {
                    false
                } else {
                    let (h, n) = if *insensitive {
                        (have.as_text().to_lowercase(), needle.to_lowercase())
                    } else {
                        (have.as_text(), needle.clone())
                    };
                    match *op {
                        "contains" => h.contains(&n),
                        "startswith" => h.starts_with(&n),
                        _ => h.ends_with(&n),
                    }
                }
            }
            Condition::Cmp(op, want) => match have.partial_cmp(want) {
                None => false,
                Some(o) => match *op {
                    "gt" => o == Ordering::Greater,
                    "gte" => o != Ordering::Less,
                    "lt" => o == Ordering::Less,
                    _ => o != Ordering::Greater,
                },
            },
            Condition::In(wants) => {
                have != Operand::Null && wants.iter().any(|w| have.partial_cmp(w) == Some(Ordering::Equal))
            }
            Condition::IsNull(want) => (have == Operand::Null) == *want,
        };
        m != self.negate
    }
}

fn find_field(model: &Model, path: &str) -> Result<Field, QueryError> {
    model.field(path).ok_or_else(|| parse_error(format!("{} has no field named '{}'", model.name, path)))
}

/// Parses one `key=value` filter (prefixes already stripped).
fn parse_filter(model: &Model, key: &str, value: &str, negate: bool) -> Result<Filter, QueryError> {
    let (path, lookup) = match key.rsplit_once("__") {
        Some((p, l)) if LOOKUPS.contains(&l) => (p, l),
        _ => (key, "exact"),
    };
    if path.is_empty() {
        return Err(parse_error("Query string field name not provided."));
    }
    let field = find_field(model, path)?;
    let cond = match lookup {
        "exact" => Condition::Exact(value_operand(&field, value)?),
        "iexact" => {
            if field.ty != Str {
                return Err(parse_error(format!(
                    "{} is not a text field and cannot be filtered by case-insensitive search",
                    field.name
                )));
            }
            Condition::IExact(value.to_string())
        }
        "contains" | "icontains" | "startswith" | "istartswith" | "endswith" | "iendswith" => {
            let insensitive = lookup.starts_with('i');
            let op = match lookup.trim_start_matches('i') {
                "contains" => "contains",
                "startswith" => "startswith",
                _ => "endswith",
            };
            Condition::Text { op, needle: value.to_string(), insensitive }
        }
        "gt" | "gte" | "lt" | "lte" => {
            let op = match lookup {
                "gt" => "gt",
                "gte" => "gte",
                "lt" => "lt",
                _ => "lte",
            };
            Condition::Cmp(op, value_operand(&field, value)?)
        }
        "in" => {
            if value.is_empty() {
                return Err(parse_error("cannot provide empty value for __in"));
            }
            Condition::In(value.split(',').map(|v| value_operand(&field, v)).collect::<Result<_, _>>()?)
        }
        "isnull" => Condition::IsNull(to_python_boolean(value)?),
        // No regex engine in the simulator; an honest 400 beats a silent wrong answer.
        other => return Err(parse_error(format!("aap-sim does not support the '{other}' lookup"))),
    };
    Ok(Filter { negate, field, cond })
}

/// Filters, orders and paginates `items` (full representations) for a list request at
/// `path` with `query` (the raw query string). Returns the page body.
pub fn list(model: &Model, mut items: Vec<Value>, path: &str, query: &str) -> Result<Value, QueryError> {
    let params = crate::util::parse_query(query);

    // Filters: AND of plain ones, one OR group of `or__` ones, `not__` negates (DAB semantics).
    let mut and_filters = Vec::new();
    let mut or_filters = Vec::new();
    let mut search: Option<String> = None;
    let mut order_by: Option<String> = None;
    for (key, value) in &params {
        match key.as_str() {
            "search" => search = Some(value.clone()),
            "order" | "order_by" => order_by = Some(value.clone()),
            k if RESERVED.contains(&k) => {}
            k => {
                let (k, or) = match k.strip_prefix("or__") {
                    Some(rest) => (rest, true),
                    None => (k.strip_prefix("chain__").unwrap_or(k), false),
                };
                let (k, negate) = match k.strip_prefix("not__") {
                    Some(rest) => (rest, true),
                    None => (k, false),
                };
                let filter = parse_filter(model, k, value, negate)?;
                if or { or_filters.push(filter) } else { and_filters.push(filter) }
            }
        }
    }
    items.retain(|o| {
        and_filters.iter().all(|f| f.matches(o)) && (or_filters.is_empty() || or_filters.iter().any(|f| f.matches(o)))
    });
    if let Some(terms) = search.filter(|s| !s.trim().is_empty()) {
        // DRF SearchFilter: every term must match one of the search fields.
        let terms: Vec<String> = terms
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .map(str::to_lowercase)
            .collect();
        items.retain(|o| {
            terms.iter().all(|t| {
                ["name", "description"]
                    .iter()
                    .any(|k| o.get(*k).and_then(Value::as_str).is_some_and(|s| s.to_lowercase().contains(t)))
            })
        });
    }

    // Ordering: the model's default first, so that requested keys tie-break deterministically.
    let mut keys: Vec<(Field, bool)> = Vec::new();
    let requested: Vec<String> = match &order_by {
        Some(o) => o.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect(),
        None => model.default_order.iter().map(|s| s.to_string()).collect(),
    };
    for k in requested {
        let (name, desc) = match k.strip_prefix('-') {
            Some(n) => (n.to_string(), true),
            None => (k.strip_prefix('+').unwrap_or(&k).to_string(), false),
        };
        let field =
            model.field(&name).ok_or_else(|| parse_error(format!("Cannot resolve keyword '{name}' into field.")))?;
        keys.push((field, desc));
    }
    keys.push((find_field(model, if model.name == "JobEvent" { "counter" } else { "id" })?, false));
    items.sort_by(|a, b| {
        for (field, desc) in &keys {
            let (x, y) = (object_operand(a, field), object_operand(b, field));
            // PostgreSQL: NULLs sort last ascending, first descending.
            let o = match (&x, &y) {
                (Operand::Null, Operand::Null) => Ordering::Equal,
                (Operand::Null, _) => Ordering::Greater,
                (_, Operand::Null) => Ordering::Less,
                _ => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
            };
            let o = if *desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });

    let strip = |mut v: Value| {
        if let Some(m) = v.as_object_mut() {
            for k in model.list_omits {
                m.remove(*k);
            }
        }
        v
    };

    if params.iter().any(|(k, _)| k == "count_disabled") {
        return Ok(json!({"results": items.into_iter().map(strip).collect::<Vec<_>>()}));
    }

    // DRF `get_page_size`: a positive integer, capped; anything else means the default.
    let requested_size = params.iter().rev().find(|(k, _)| k == "page_size").map(|(_, v)| v.as_str());
    let page_size = match requested_size.and_then(|v| v.parse::<usize>().ok()) {
        Some(n) if n > 0 => n.min(MAX_PAGE_SIZE),
        _ => DEFAULT_PAGE_SIZE,
    };
    let count = items.len();
    let num_pages = count.div_ceil(page_size).max(1);
    let page = match params.iter().rev().find(|(k, _)| k == "page").map(|(_, v)| v.as_str()) {
        None => 1,
        Some("last") => num_pages,
        Some(p) => match p.parse::<usize>() {
            Ok(n) if (1..=num_pages).contains(&n) => n,
            _ => return Err(QueryError { status: 404, detail: "Invalid page.".into() }),
        },
    };
    let link = |to: usize| page_link(path, &params, to, requested_size);
    let next = (page < num_pages).then(|| link(page + 1));
    let previous = (page > 1).then(|| link(page - 1));
    let results: Vec<Value> = items.into_iter().skip((page - 1) * page_size).take(page_size).map(strip).collect();
    Ok(json!({"count": count, "next": next, "previous": previous, "results": results}))
}

/// AWX `Pagination.get_next_link`: the request's full path with `page` replaced, and
/// `page_size` rewritten to the cap when it was above it; DRF's `replace_query_param`
/// re-encodes the query sorted by key with `urlencode` (so `1,2` becomes `1%2C2`).
fn page_link(path: &str, params: &[(String, String)], page: usize, requested_size: Option<&str>) -> String {
    let mut grouped: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (k, v) in params {
        grouped.entry(k.as_str()).or_default().push(v.clone());
    }
    grouped.insert("page", vec![page.to_string()]);
    if requested_size.and_then(|v| v.parse::<u64>().ok()).is_some_and(|n| n > MAX_PAGE_SIZE as u64) {
        grouped.insert("page_size", vec![MAX_PAGE_SIZE.to_string()]);
    }
    let query: Vec<String> = grouped
        .iter()
        .flat_map(|(k, vs)| vs.iter().map(move |v| format!("{}={}", quote_plus(k), quote_plus(v))))
        .collect();
    format!("{path}?{}", query.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(n: u64) -> Vec<Value> {
        (1..=n)
            .map(|i| {
                json!({"id": i, "name": format!("job {i}"), "status": if i % 2 == 0 {"running"} else {"successful"},
                       "created": crate::util::format_api(i as i64 * 1_000_000), "failed": false,
                       "job_template": if i == 3 { Value::Null } else { json!(7) },
                       "summary_fields": {"organization": {"id": 1, "name": "Default"}},
                       "result_traceback": "tb"})
            })
            .collect()
    }

    fn ids(page: &Value) -> Vec<u64> {
        page["results"].as_array().unwrap().iter().map(|r| r["id"].as_u64().unwrap()).collect()
    }

    #[test]
    fn pagination_links_follow_drf() {
        let p = list(&JOB, jobs(5), "/api/v2/jobs/", "id__in=1,2,3&page_size=2").unwrap();
        assert_eq!(p["count"], 3);
        assert_eq!(ids(&p), vec![1, 2]);
        assert_eq!(p["next"], "/api/v2/jobs/?id__in=1%2C2%2C3&page=2&page_size=2");
        assert_eq!(p["previous"], Value::Null);
        assert!(p["results"][0].get("result_traceback").is_none(), "list rows omit result_traceback");
        let p = list(&JOB, jobs(5), "/api/v2/jobs/", "page=2&page_size=2&id__in=1,2,3").unwrap();
        assert_eq!(p["previous"], "/api/v2/jobs/?id__in=1%2C2%2C3&page=1&page_size=2");
        assert_eq!(p["next"], Value::Null);
        let p = list(&JOB, jobs(300), "/api/v2/jobs/", "page_size=1000").unwrap();
        assert_eq!(p["results"].as_array().unwrap().len(), 200);
        assert_eq!(p["next"], "/api/v2/jobs/?page=2&page_size=200");
        assert_eq!(list(&JOB, jobs(3), "/x/", "page=2").unwrap_err().status, 404);
        assert_eq!(list(&JOB, jobs(3), "/x/", "page=0").unwrap_err().detail, "Invalid page.");
        assert_eq!(list(&JOB, vec![], "/x/", "").unwrap()["count"], 0);
        assert_eq!(ids(&list(&JOB, jobs(60), "/x/", "page=last").unwrap()), (51..=60).collect::<Vec<_>>());
        assert_eq!(list(&JOB, jobs(30), "/x/", "page_size=0").unwrap()["results"].as_array().unwrap().len(), 25);
    }

    #[test]
    fn filters_and_ordering() {
        let q = |query: &str| list(&JOB, jobs(6), "/x/", query);
        assert_eq!(ids(&q("status=running").unwrap()), vec![2, 4, 6]);
        assert_eq!(ids(&q("status__in=running,successful&id__gt=3").unwrap()), vec![4, 5, 6]);
        assert_eq!(ids(&q("not__status=running").unwrap()), vec![1, 3, 5]);
        assert_eq!(ids(&q("or__id=2&or__name=job 5").unwrap()), vec![2, 5]);
        assert_eq!(ids(&q("name__iexact=JOB 1").unwrap()), vec![1]);
        assert_eq!(ids(&q("name__icontains=B 2").unwrap()), vec![2]);
        assert_eq!(ids(&q("job_template__isnull=true").unwrap()), vec![3]);
        assert_eq!(ids(&q("job_template=null").unwrap()), vec![3]);
        assert_eq!(ids(&q("created__gte=1970-01-01T00:00:05Z").unwrap()), vec![5, 6]);
        assert_eq!(ids(&q("created__lt=1970-01-01T00:00:02.5Z").unwrap()), vec![1, 2]);
        assert_eq!(ids(&q("organization__name=Default&order_by=-id").unwrap()), vec![6, 5, 4, 3, 2, 1]);
        assert_eq!(ids(&q("order_by=status,-id").unwrap()), vec![6, 4, 2, 5, 3, 1]);
        assert_eq!(ids(&q("order_by=%2Bstatus,-id").unwrap()), vec![6, 4, 2, 5, 3, 1]);
        assert_eq!(ids(&q("search=job 4").unwrap()), vec![4]);
        assert_eq!(q("id__in=").unwrap_err().detail, "cannot provide empty value for __in");
        assert_eq!(q("bogus=1").unwrap_err().detail, "Job has no field named 'bogus'");
        assert_eq!(q("id=abc").unwrap_err().detail, "[\"\u{201c}abc\u{201d} value must be an integer.\"]");
        assert_eq!(q("job_template=abc").unwrap_err().detail, "Invalid job_template id: abc");
        assert_eq!(q("failed=maybe").unwrap_err().status, 400);
        assert_eq!(q("created__gt=yesterday").unwrap_err().status, 400);
        assert_eq!(q("id__iexact=1").unwrap_err().status, 400);
        assert_eq!(q("order_by=bogus").unwrap_err().status, 400);
        assert_eq!(ids(&q("type=job&format=json").unwrap()).len(), 6, "reserved names are not filters");
        assert_eq!(q("count_disabled=1").unwrap().as_object().unwrap().keys().collect::<Vec<_>>(), vec!["results"]);
    }
}
