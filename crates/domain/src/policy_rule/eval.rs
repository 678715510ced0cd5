//! Evaluating a rule's condition against a resource, by Azure Policy's rules: strings compare
//! without regard to case, a field that is absent matches only the negative operators
//! (`notEquals`, `notIn`, `notLike`, …) and `exists: false`, a test of an array alias
//! (`…[*]`) outside a count holds when it holds for every element (so for none), and a
//! count's `where` reads the counted element through the same alias.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::expr::Scope;
use super::{Aliases, Condition, Expr, Field, Operand, Operator, PolicyRule, RuleError, Segment};

/// The resource a rule is evaluated against, as the request would leave it, and what its
/// expressions may read around it.
#[derive(Clone, Debug)]
pub struct Subject<'a> {
    pub id: &'a str,
    pub name: &'a str,
    /// A child's names from its top-level parent down (`vnet1/subnet1`).
    pub full_name: &'a str,
    /// `Namespace/type`, as configured.
    pub type_name: &'a str,
    pub kind: &'a str,
    pub location: Option<&'a str>,
    pub tags: &'a BTreeMap<String, String>,
    pub properties: &'a Value,
    /// The assignment's parameter values (defaults filled in).
    pub parameters: &'a serde_json::Map<String, Value>,
    /// `resourceGroup()`: `{id, name, location, tags}`.
    pub resource_group: Value,
    /// `subscription()`: `{id, subscriptionId, displayName}`.
    pub subscription: Value,
    /// `requestContext()`: `{apiVersion}`.
    pub request: Value,
    /// The served types' property aliases, for `field('…')` in expressions.
    pub aliases: &'a Aliases,
}

/// One test as evaluated, as Azure reports it (`evaluatedExpressions`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluated {
    /// The field, or the value expression's result, the test looked at.
    pub expression: String,
    pub value: Value,
    pub operator: Operator,
    pub target: Value,
    pub result: bool,
}

/// Values a field has: one (or none), or — through `[*]` — every element's.
enum Found {
    One(Option<Value>),
    Many(Vec<Value>),
}

/// The subject, with the element a count is looking at.
struct At<'s, 'a> {
    subject: &'s Subject<'a>,
    element: Option<(&'s [Segment], &'s Value)>,
}

impl PolicyRule {
    /// Whether the rule's `if` holds for `subject`, and the tests it evaluated.
    pub fn matches(&self, subject: &Subject<'_>) -> Result<(bool, Vec<Evaluated>), RuleError> {
        let mut log = Vec::new();
        let at = At { subject, element: None };
        let hit = at.condition(&self.condition, &mut log)?;
        Ok((hit, log))
    }

    /// The rule's effect for `subject`, lowercased (`deny`, `audit`, …).
    pub fn effect(&self, subject: &Subject<'_>) -> Result<String, RuleError> {
        let at = At { subject, element: None };
        let effect = self.then.effect.eval(&at)?;
        effect
            .as_str()
            .map(str::to_ascii_lowercase)
            .ok_or_else(|| RuleError(format!("the effect {effect} is not a name")))
    }

    /// A value of the rule's details (a `modify` operation's value), for `subject`.
    pub fn value(&self, value: &Value, subject: &Subject<'_>) -> Result<Value, RuleError> {
        Expr::parse(value)?.eval(&At { subject, element: None })
    }
}

impl At<'_, '_> {
    fn condition(&self, c: &Condition, log: &mut Vec<Evaluated>) -> Result<bool, RuleError> {
        match c {
            Condition::AllOf(cs) => {
                for c in cs {
                    if !self.condition(c, log)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Condition::AnyOf(cs) => {
                for c in cs {
                    if self.condition(c, log)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            Condition::Not(c) => Ok(!self.condition(c, log)?),
            Condition::Test { operand, operator, target } => {
                let target = target.eval(self)?;
                let (expression, found) = match operand {
                    Operand::Field(f) => (field_name(f), self.field(f)),
                    Operand::NamedField(e) => {
                        let name = e.eval(self)?;
                        let name =
                            name.as_str().ok_or_else(|| RuleError(format!("a field's name is text, not {name}")))?;
                        let f = Field::parse(name, self.subject.aliases)?;
                        (field_name(&f), self.field(&f))
                    }
                    Operand::Value(e) => ("value".to_string(), Found::One(Some(e.eval(self)?))),
                    Operand::Count { field, filter } => {
                        let n = self.count(field, filter.as_deref(), log)?;
                        (format!("count({})", field_name(field)), Found::One(Some(json!(n))))
                    }
                };
                let (value, result) = match found {
                    Found::One(v) => {
                        let result = test(*operator, v.as_ref(), &target);
                        (v.unwrap_or(Value::Null), result)
                    }
                    Found::Many(vs) => {
                        let result = vs.iter().all(|v| test(*operator, Some(v), &target));
                        (Value::Array(vs), result)
                    }
                };
                log.push(Evaluated { expression, value, operator: *operator, target, result });
                Ok(result)
            }
        }
    }

    fn count(&self, field: &Field, filter: Option<&Condition>, log: &mut Vec<Evaluated>) -> Result<usize, RuleError> {
        let Field::Alias { alias, .. } = field else { return Ok(0) };
        let elements = match self.field(field) {
            Found::Many(vs) => vs,
            Found::One(v) => v.into_iter().collect(),
        };
        let Some(filter) = filter else { return Ok(elements.len()) };
        let mut n = 0;
        for e in &elements {
            let inner = At { subject: self.subject, element: Some((&alias.path, e)) };
            if inner.condition(filter, log)? {
                n += 1;
            }
        }
        Ok(n)
    }

    fn field(&self, f: &Field) -> Found {
        let s = self.subject;
        let one = |v: Option<Value>| Found::One(v);
        match f {
            Field::Name => one(Some(json!(s.name))),
            Field::FullName => one(Some(json!(s.full_name))),
            Field::Type => one(Some(json!(s.type_name))),
            Field::Kind => one(Some(json!(s.kind))),
            Field::Location => one(s.location.map(|l| json!(l))),
            Field::Id => one(Some(json!(s.id))),
            Field::Tags => one(Some(json!(s.tags))),
            Field::Tag(name) => one(s.tags.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| json!(v))),
            Field::Alias { alias, .. } => {
                if !alias.type_key.eq_ignore_ascii_case(s.type_name) {
                    return one(None);
                }
                // Inside a count's `where`, the counted alias reads the element in hand.
                if let Some((prefix, element)) = self.element
                    && alias.path.starts_with(prefix)
                {
                    return walk(element, &alias.path[prefix.len()..]);
                }
                walk(s.properties, &alias.path)
            }
        }
    }
}

impl Scope for At<'_, '_> {
    fn parameter(&self, name: &str) -> Option<Value> {
        self.subject.parameters.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone())
    }

    fn field(&self, path: &str) -> Result<Option<Value>, RuleError> {
        let field = Field::parse(path, self.subject.aliases)?;
        Ok(match At::field(self, &field) {
            Found::One(v) => v,
            Found::Many(vs) => Some(Value::Array(vs)),
        })
    }

    fn resource_group(&self) -> Value {
        self.subject.resource_group.clone()
    }

    fn subscription(&self) -> Value {
        self.subject.subscription.clone()
    }

    fn request_context(&self) -> Value {
        self.subject.request.clone()
    }
}

fn field_name(f: &Field) -> String {
    match f {
        Field::Name => "name".into(),
        Field::FullName => "fullName".into(),
        Field::Type => "type".into(),
        Field::Kind => "kind".into(),
        Field::Location => "location".into(),
        Field::Id => "id".into(),
        Field::Tags => "tags".into(),
        Field::Tag(t) => format!("tags['{t}']"),
        Field::Alias { name, .. } => name.clone(),
    }
}

/// The values at `path` under `from`; through `[*]`, every element's.
fn walk(from: &Value, path: &[Segment]) -> Found {
    let mut at = vec![from.clone()];
    let mut many = false;
    for seg in path {
        at = match seg {
            Segment::Key(k) => at
                .iter()
                .filter_map(|v| {
                    v.as_object()?.iter().find(|(name, _)| name.eq_ignore_ascii_case(k)).map(|(_, v)| v.clone())
                })
                .collect(),
            Segment::Every => {
                many = true;
                at.iter().filter_map(Value::as_array).flatten().cloned().collect()
            }
        };
    }
    if many { Found::Many(at) } else { Found::One(at.into_iter().next().filter(|v| !v.is_null())) }
}

/// One test, `value` absent when the field does not exist.
fn test(op: Operator, value: Option<&Value>, target: &Value) -> bool {
    use Operator::*;
    let Some(v) = value.filter(|v| !v.is_null()) else {
        return match op {
            Exists => !truthy(target),
            Equals => target.is_null() || target.as_str() == Some(""),
            NotEquals => !(target.is_null() || target.as_str() == Some("")),
            NotLike | NotMatch | NotMatchInsensitively | NotContains | NotIn | NotContainsKey => true,
            _ => false,
        };
    };
    match op {
        Exists => truthy(target),
        Equals => loosely_equal(v, target),
        NotEquals => !loosely_equal(v, target),
        Like => like(&text(v), &text(target)),
        NotLike => !like(&text(v), &text(target)),
        Match => matches_pattern(&text(v), &text(target)),
        MatchInsensitively => matches_pattern(&text(v).to_lowercase(), &text(target).to_lowercase()),
        NotMatch => !matches_pattern(&text(v), &text(target)),
        NotMatchInsensitively => !matches_pattern(&text(v).to_lowercase(), &text(target).to_lowercase()),
        Contains => contains(v, target),
        NotContains => !contains(v, target),
        In => target.as_array().is_some_and(|t| t.iter().any(|t| loosely_equal(v, t))),
        NotIn => !target.as_array().is_some_and(|t| t.iter().any(|t| loosely_equal(v, t))),
        ContainsKey => has_key(v, target),
        NotContainsKey => !has_key(v, target),
        Less => compare(v, target).is_some_and(|o| o.is_lt()),
        LessOrEquals => compare(v, target).is_some_and(|o| o.is_le()),
        Greater => compare(v, target).is_some_and(|o| o.is_gt()),
        GreaterOrEquals => compare(v, target).is_some_and(|o| o.is_ge()),
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Azure Policy's equality: strings without regard to case, a number or a boolean equal to
/// its text, arrays and objects member by member.
pub(super) fn loosely_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.eq_ignore_ascii_case(y),
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| loosely_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter().all(|(k, v)| y.iter().any(|(k2, v2)| k.eq_ignore_ascii_case(k2) && loosely_equal(v, v2)))
        }
        (Value::String(s), other @ (Value::Number(_) | Value::Bool(_)))
        | (other @ (Value::Number(_) | Value::Bool(_)), Value::String(s)) => s.eq_ignore_ascii_case(&other.to_string()),
        (x, y) => x == y,
    }
}

/// `contains`: a substring (without regard to case), an array's member, an object's key.
pub(super) fn contains(haystack: &Value, needle: &Value) -> bool {
    match haystack {
        Value::String(s) => s.to_lowercase().contains(&text(needle).to_lowercase()),
        Value::Array(items) => items.iter().any(|i| loosely_equal(i, needle)),
        Value::Object(_) => has_key(haystack, needle),
        _ => false,
    }
}

fn has_key(v: &Value, key: &Value) -> bool {
    let key = text(key);
    v.as_object().is_some_and(|o| o.keys().any(|k| k.eq_ignore_ascii_case(&key)))
}

/// Numbers by value; anything else as text, without regard to case (ISO dates order so).
fn compare(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    let number = |v: &Value| v.as_f64().or_else(|| v.as_str()?.trim().parse::<f64>().ok());
    match (number(a), number(b)) {
        (Some(x), Some(y)) => x.partial_cmp(&y),
        _ => Some(text(a).to_lowercase().cmp(&text(b).to_lowercase())),
    }
}

/// `like`: `*` stands for any run of characters; without regard to case.
fn like(value: &str, pattern: &str) -> bool {
    let (value, pattern) = (value.to_lowercase(), pattern.to_lowercase());
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return value == pattern;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !value.starts_with(first) || !value[first.len()..].ends_with(last) || value.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

/// `match`: `#` a digit, `?` a letter, `.` any character, anything else itself.
fn matches_pattern(value: &str, pattern: &str) -> bool {
    let (v, p): (Vec<char>, Vec<char>) = (value.chars().collect(), pattern.chars().collect());
    v.len() == p.len()
        && v.iter().zip(&p).all(|(c, want)| match want {
            '#' => c.is_ascii_digit(),
            '?' => c.is_alphabetic(),
            '.' => true,
            other => c == other,
        })
}

/// The evaluated tests as Azure's `evaluationDetails.evaluatedExpressions`.
pub fn evaluated_expressions(log: &[Evaluated]) -> Value {
    Value::Array(
        log.iter()
            .map(|e| {
                json!({
                    "result": if e.result { "True" } else { "False" },
                    "expression": e.expression,
                    "expressionValue": e.value,
                    "operator": e.operator.as_str(),
                    "targetValue": e.target,
                })
            })
            .collect(),
    )
}

/// The tests as one line, for a message: `location in ["local"] is false`.
pub fn describe(log: &[Evaluated]) -> String {
    let mut out = String::new();
    for (i, e) in log.iter().enumerate() {
        if i > 0 {
            out.push_str(" and ");
        }
        let _ = write!(out, "{} {} {}", e.expression, e.operator.as_str(), e.target);
        if !e.result {
            out.push_str(" is false");
        }
    }
    out
}
