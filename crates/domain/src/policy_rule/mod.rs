//! Azure Policy's rule language, the `policyRule` of a policy definition: `if` a condition —
//! `allOf`, `anyOf`, `not`, and `field`, `value` or `count` tests with the usual operators —
//! `then` an effect with its details. [`PolicyRule::parse`] checks a rule once, when its
//! definition is written (every field an alias of a served type, every function known);
//! [`PolicyRule::matches`] evaluates it against a resource ([`eval`]), reporting the tests it
//! evaluated as Azure's `evaluatedExpressions` do.
//!
//! Fields: `name`, `fullName`, `type`, `kind`, `location`, `id`, `tags`, `tags['x']` (also
//! `tags.x` and `tags[x]`, and a field named by an expression, as Azure's built-in "require
//! a tag" names its tag from a parameter), and property aliases, `{Namespace}/{type}/{path}` for every
//! property a type's schema declares ([`Aliases`]; `[*]` for an array's elements). Not
//! supported (refused when written): `value` counts, `current()`, and functions beyond those
//! [`expr`] lists.

use std::collections::BTreeMap;

use serde_json::Value;

mod eval;
mod expr;

pub use eval::{Evaluated, Subject, describe, evaluated_expressions};
pub use expr::{Expr, Function, Scope};

/// Why a rule cannot be used: shown to whoever wrote it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RuleError(pub String);

/// A property alias: which type it belongs to and its path under `properties`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alias {
    /// The type, lowercased (`slipway.example/computeinstances`).
    pub type_key: String,
    pub path: Vec<Segment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    /// `[*]`: every element of an array.
    Every,
}

/// Every property alias of the served types, by lowercased name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Aliases(BTreeMap<String, Alias>);

impl Aliases {
    /// The aliases of one type, `namespace/type`, from its properties' JSON Schema: one per
    /// declared property, nested objects by `.`, arrays' elements by `[*]`.
    pub fn add_type(&mut self, type_name: &str, schema: Option<&Value>) {
        let type_key = type_name.to_ascii_lowercase();
        let mut walk = Vec::new();
        if let Some(schema) = schema {
            collect(schema, &mut Vec::new(), &mut walk);
        }
        for path in walk {
            let name = format!("{type_name}/{}", render(&path));
            self.0.insert(name.to_ascii_lowercase(), Alias { type_key: type_key.clone(), path });
        }
    }

    pub fn get(&self, name: &str) -> Option<&Alias> {
        self.0.get(&name.to_ascii_lowercase())
    }

    /// Every alias name, lowercased.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// `a.b[*].c`.
pub fn render(path: &[Segment]) -> String {
    let mut out = String::new();
    for s in path {
        match s {
            Segment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Segment::Every => out.push_str("[*]"),
        }
    }
    out
}

fn collect(schema: &Value, here: &mut Vec<Segment>, out: &mut Vec<Vec<Segment>>) {
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            here.push(Segment::Key(name.clone()));
            out.push(here.clone());
            collect(sub, here, out);
            here.pop();
        }
    }
    if let Some(items) = schema.get("items") {
        here.push(Segment::Every);
        out.push(here.clone());
        collect(items, here, out);
        here.pop();
    }
}

/// What a field names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field {
    Name,
    FullName,
    Type,
    Kind,
    Location,
    Id,
    Tags,
    Tag(String),
    Alias { name: String, alias: Alias },
}

impl Field {
    pub fn parse(text: &str, aliases: &Aliases) -> Result<Field, RuleError> {
        let lower = text.to_ascii_lowercase();
        let simple = [
            ("name", Field::Name),
            ("fullname", Field::FullName),
            ("type", Field::Type),
            ("kind", Field::Kind),
            ("location", Field::Location),
            ("id", Field::Id),
            ("tags", Field::Tags),
        ];
        if let Some((_, f)) = simple.into_iter().find(|(n, _)| *n == lower) {
            return Ok(f);
        }
        let tag = text
            .strip_prefix("tags[")
            .and_then(|t| t.strip_suffix(']'))
            .map(|t| t.trim_matches('\''))
            .or_else(|| text.strip_prefix("tags."));
        if let Some(name) = tag.filter(|n| !n.is_empty()) {
            return Ok(Field::Tag(name.to_string()));
        }
        match aliases.get(text) {
            Some(alias) => Ok(Field::Alias { name: text.to_string(), alias: alias.clone() }),
            None => Err(RuleError(format!(
                "the field '{text}' is not name, fullName, type, kind, location, id, tags, tags['…'] \
                 or an alias of a served type's property ({{Namespace}}/{{type}}/{{property}})"
            ))),
        }
    }

    fn is_array(&self) -> bool {
        matches!(self, Field::Alias { alias, .. } if alias.path.last() == Some(&Segment::Every))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    Equals,
    NotEquals,
    Like,
    NotLike,
    Match,
    MatchInsensitively,
    NotMatch,
    NotMatchInsensitively,
    Contains,
    NotContains,
    In,
    NotIn,
    ContainsKey,
    NotContainsKey,
    Less,
    LessOrEquals,
    Greater,
    GreaterOrEquals,
    Exists,
}

impl Operator {
    pub const ALL: [Operator; 19] = [
        Operator::Equals,
        Operator::NotEquals,
        Operator::Like,
        Operator::NotLike,
        Operator::Match,
        Operator::MatchInsensitively,
        Operator::NotMatch,
        Operator::NotMatchInsensitively,
        Operator::Contains,
        Operator::NotContains,
        Operator::In,
        Operator::NotIn,
        Operator::ContainsKey,
        Operator::NotContainsKey,
        Operator::Less,
        Operator::LessOrEquals,
        Operator::Greater,
        Operator::GreaterOrEquals,
        Operator::Exists,
    ];

    pub fn as_str(self) -> &'static str {
        use Operator::*;
        match self {
            Equals => "equals",
            NotEquals => "notEquals",
            Like => "like",
            NotLike => "notLike",
            Match => "match",
            MatchInsensitively => "matchInsensitively",
            NotMatch => "notMatch",
            NotMatchInsensitively => "notMatchInsensitively",
            Contains => "contains",
            NotContains => "notContains",
            In => "in",
            NotIn => "notIn",
            ContainsKey => "containsKey",
            NotContainsKey => "notContainsKey",
            Less => "less",
            LessOrEquals => "lessOrEquals",
            Greater => "greater",
            GreaterOrEquals => "greaterOrEquals",
            Exists => "exists",
        }
    }
}

/// What a test looks at.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Field(Field),
    /// A field named by an expression (`[concat('tags[', parameters('tagName'), ']')]`),
    /// resolved when the rule is evaluated.
    NamedField(Expr),
    Value(Expr),
    /// `{"count": {"field": "…[*]", "where": …}}`: how many of the array's elements satisfy
    /// `where` (all of them without one).
    Count {
        field: Field,
        filter: Option<Box<Condition>>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    AllOf(Vec<Condition>),
    AnyOf(Vec<Condition>),
    Not(Box<Condition>),
    Test { operand: Operand, operator: Operator, target: Expr },
}

/// A rule's `then`.
#[derive(Clone, Debug, PartialEq)]
pub struct Then {
    /// `deny`, `audit`, `modify`, … or an expression (`[parameters('effect')]`).
    pub effect: Expr,
    pub details: Option<Value>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PolicyRule {
    pub condition: Condition,
    pub then: Then,
}

impl PolicyRule {
    pub fn parse(rule: &Value, aliases: &Aliases) -> Result<PolicyRule, RuleError> {
        let condition = rule.get("if").ok_or_else(|| RuleError("policyRule has no 'if'".into()))?;
        let then = rule.get("then").ok_or_else(|| RuleError("policyRule has no 'then'".into()))?;
        let effect = then.get("effect").ok_or_else(|| RuleError("policyRule.then has no 'effect'".into()))?;
        let condition = Condition::parse(condition, aliases)?;
        let then = Then { effect: Expr::parse(effect)?, details: then.get("details").cloned() };
        let mut fields = Vec::new();
        condition.fields(&mut fields);
        for path in fields {
            Field::parse(&path, aliases)?;
        }
        Ok(PolicyRule { condition, then })
    }
}

impl Condition {
    fn parse(v: &Value, aliases: &Aliases) -> Result<Condition, RuleError> {
        let obj = v.as_object().ok_or_else(|| RuleError(format!("a condition is an object, not {v}")))?;
        let get = |k: &str| obj.iter().find(|(name, _)| name.eq_ignore_ascii_case(k)).map(|(_, v)| v);
        let list = |v: &Value| -> Result<Vec<Condition>, RuleError> {
            v.as_array()
                .ok_or_else(|| RuleError("allOf and anyOf take a list of conditions".into()))?
                .iter()
                .map(|c| Condition::parse(c, aliases))
                .collect()
        };
        if let Some(all) = get("allOf") {
            return list(all).map(Condition::AllOf);
        }
        if let Some(any) = get("anyOf") {
            return list(any).map(Condition::AnyOf);
        }
        if let Some(not) = get("not") {
            return Ok(Condition::Not(Box::new(Condition::parse(not, aliases)?)));
        }
        let operand = if let Some(field) = get("field") {
            let text = field.as_str().ok_or_else(|| RuleError("'field' names a field as a string".into()))?;
            match Expr::parse(field)? {
                Expr::Literal(_) => Operand::Field(Field::parse(text, aliases)?),
                named => Operand::NamedField(named),
            }
        } else if let Some(value) = get("value") {
            Operand::Value(Expr::parse(value)?)
        } else if let Some(count) = get("count") {
            let field = count.get("field").and_then(Value::as_str).ok_or_else(|| {
                RuleError("only field counts are supported: {\"count\": {\"field\": \"…[*]\", \"where\": …}}".into())
            })?;
            let field = Field::parse(field, aliases)?;
            if !field.is_array() {
                return Err(RuleError("a count's field is an array alias, ending in [*]".into()));
            }
            let filter = count.get("where").map(|w| Condition::parse(w, aliases).map(Box::new)).transpose()?;
            Operand::Count { field, filter }
        } else {
            return Err(RuleError(format!("a condition names allOf, anyOf, not, field, value or count: {v}")));
        };
        let mut tests = Operator::ALL.into_iter().filter_map(|op| get(op.as_str()).map(|t| (op, t)));
        let (operator, target) = tests
            .next()
            .ok_or_else(|| RuleError(format!("a condition has one operator (equals, in, like, exists, …): {v}")))?;
        if tests.next().is_some() {
            return Err(RuleError(format!("a condition has one operator, not several: {v}")));
        }
        Ok(Condition::Test { operand, operator, target: Expr::parse(target)? })
    }

    /// The `field('…')` paths its expressions read.
    fn fields(&self, out: &mut Vec<String>) {
        match self {
            Condition::AllOf(cs) | Condition::AnyOf(cs) => cs.iter().for_each(|c| c.fields(out)),
            Condition::Not(c) => c.fields(out),
            Condition::Test { operand, target, .. } => {
                target.fields(out);
                match operand {
                    Operand::Value(e) | Operand::NamedField(e) => e.fields(out),
                    Operand::Count { filter: Some(c), .. } => c.fields(out),
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
