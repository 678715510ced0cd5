//! Template expressions, the `"[...]"` strings of Azure Policy rules: a function call with
//! literal, nested-call and property-access arguments (`[concat('env-', parameters('env'))]`,
//! `[resourceGroup().tags['costCenter']]`). A string that does not start with `[` (or starts
//! with `[[`, ARM's escape) is a literal.
//!
//! The functions are those rules use most — `parameters`, `field`, `resourceGroup`,
//! `subscription`, `concat` — and a few they combine them with: `toLower`, `toUpper`, `if`,
//! `equals`, `not`, `and`, `or`, `empty`, `contains`, `length`, `coalesce`, `string`, `int`,
//! `bool`, `requestContext`. Anything else is refused when the definition is written.

use serde_json::{Value, json};

use super::RuleError;

/// A parsed value: a literal, or a template expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Literal(Value),
    /// `name(args…)` then accessors (`.x`, `['x']`, `[0]`).
    Call {
        function: Function,
        args: Vec<Expr>,
        access: Vec<Expr>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    Parameters,
    Field,
    ResourceGroup,
    Subscription,
    RequestContext,
    Concat,
    ToLower,
    ToUpper,
    If,
    Equals,
    Not,
    And,
    Or,
    Empty,
    Contains,
    Length,
    Coalesce,
    String,
    Int,
    Bool,
}

impl Function {
    fn named(name: &str) -> Option<Function> {
        use Function::*;
        let all = [
            ("parameters", Parameters),
            ("field", Field),
            ("resourceGroup", ResourceGroup),
            ("subscription", Subscription),
            ("requestContext", RequestContext),
            ("concat", Concat),
            ("toLower", ToLower),
            ("toUpper", ToUpper),
            ("if", If),
            ("equals", Equals),
            ("not", Not),
            ("and", And),
            ("or", Or),
            ("empty", Empty),
            ("contains", Contains),
            ("length", Length),
            ("coalesce", Coalesce),
            ("string", String),
            ("int", Int),
            ("bool", Bool),
        ];
        all.into_iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, f)| f)
    }
}

/// What expressions read from outside: the evaluation's environment.
pub trait Scope {
    fn parameter(&self, name: &str) -> Option<Value>;
    fn field(&self, path: &str) -> Result<Option<Value>, RuleError>;
    fn resource_group(&self) -> Value;
    fn subscription(&self) -> Value;
    fn request_context(&self) -> Value;
}

impl Expr {
    /// A rule's value: an expression when it is a `[...]` string, else the value itself
    /// (ARM's `[[` escape drops one bracket).
    pub fn parse(value: &Value) -> Result<Expr, RuleError> {
        match value.as_str() {
            Some(s) if s.starts_with("[[") => Ok(Expr::Literal(Value::String(s[1..].to_string()))),
            Some(s) if s.starts_with('[') && s.ends_with(']') => {
                let mut p = Parser { text: &s[1..s.len() - 1], at: 0 };
                let expr = p.expr()?;
                p.skip_space();
                if p.at != p.text.len() {
                    return Err(p.error("unexpected text after the expression"));
                }
                Ok(expr)
            }
            _ => Ok(Expr::Literal(value.clone())),
        }
    }

    /// The `field('…')` paths the expression reads (checked against the type's aliases).
    pub fn fields(&self, out: &mut Vec<String>) {
        if let Expr::Call { function, args, access } = self {
            if *function == Function::Field
                && let Some(Expr::Literal(Value::String(path))) = args.first()
            {
                out.push(path.clone());
            }
            for e in args.iter().chain(access) {
                e.fields(out);
            }
        }
    }

    pub fn eval(&self, scope: &dyn Scope) -> Result<Value, RuleError> {
        let Expr::Call { function, args, access } = self else {
            let Expr::Literal(v) = self else { unreachable!() };
            return Ok(v.clone());
        };
        let mut value = call(*function, args, scope)?;
        for key in access {
            value = match (key.eval(scope)?, &value) {
                (Value::String(k), Value::Object(map)) => map
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case(&k))
                    .map(|(_, v)| v.clone())
                    .unwrap_or(Value::Null),
                (Value::Number(n), Value::Array(items)) => {
                    n.as_u64().and_then(|i| items.get(i as usize).cloned()).unwrap_or(Value::Null)
                }
                _ => Value::Null,
            };
        }
        Ok(value)
    }
}

fn call(function: Function, args: &[Expr], scope: &dyn Scope) -> Result<Value, RuleError> {
    use Function::*;
    let values = || args.iter().map(|a| a.eval(scope)).collect::<Result<Vec<_>, _>>();
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => std::string::String::new(),
        other => other.to_string(),
    };
    Ok(match function {
        Parameters => {
            let name = text(&one(args, scope)?);
            scope.parameter(&name).ok_or_else(|| RuleError(format!("the parameter '{name}' has no value")))?
        }
        Field => scope.field(&text(&one(args, scope)?))?.unwrap_or(Value::Null),
        ResourceGroup => scope.resource_group(),
        Subscription => scope.subscription(),
        RequestContext => scope.request_context(),
        Concat => {
            let vs = values()?;
            if vs.iter().all(Value::is_array) {
                Value::Array(vs.into_iter().flat_map(|v| v.as_array().cloned().unwrap_or_default()).collect())
            } else {
                Value::String(vs.iter().map(text).collect())
            }
        }
        ToLower => Value::String(text(&one(args, scope)?).to_lowercase()),
        ToUpper => Value::String(text(&one(args, scope)?).to_uppercase()),
        If => {
            let [c, a, b] = args else { return Err(RuleError("if() takes three arguments".into())) };
            if truthy(&c.eval(scope)?) { a.eval(scope)? } else { b.eval(scope)? }
        }
        Equals => {
            let vs = values()?;
            json!(vs.len() == 2 && super::eval::loosely_equal(&vs[0], &vs[1]))
        }
        Not => json!(!truthy(&one(args, scope)?)),
        And => json!(values()?.iter().all(truthy)),
        Or => json!(values()?.iter().any(truthy)),
        Empty => json!(is_empty(&one(args, scope)?)),
        Contains => {
            let vs = values()?;
            let [haystack, needle] = vs.as_slice() else {
                return Err(RuleError("contains() takes two arguments".into()));
            };
            json!(super::eval::contains(haystack, needle))
        }
        Length => json!(match one(args, scope)? {
            Value::String(s) => s.chars().count(),
            Value::Array(a) => a.len(),
            Value::Object(o) => o.len(),
            _ => 0,
        }),
        Coalesce => values()?.into_iter().find(|v| !v.is_null()).unwrap_or(Value::Null),
        Function::String => Value::String(text(&one(args, scope)?)),
        Int => {
            let v = one(args, scope)?;
            v.as_i64().or_else(|| text(&v).trim().parse().ok()).map(Value::from).unwrap_or(Value::Null)
        }
        Bool => json!(truthy(&one(args, scope)?)),
    })
}

fn one(args: &[Expr], scope: &dyn Scope) -> Result<Value, RuleError> {
    match args {
        [a] => a.eval(scope),
        _ => Err(RuleError(format!("a function took {} arguments where it takes one", args.len()))),
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn error(&self, why: &str) -> RuleError {
        RuleError(format!("the expression '[{}]' at character {}: {why}", self.text, self.at + 1))
    }

    fn skip_space(&mut self) {
        while self.rest().starts_with(' ') {
            self.at += 1;
        }
    }

    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_space();
        if self.rest().starts_with(c) {
            self.at += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expr(&mut self) -> Result<Expr, RuleError> {
        self.skip_space();
        let rest = self.rest();
        if rest.starts_with('\'') {
            return self.string().map(|s| Expr::Literal(Value::String(s)));
        }
        let number: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
        if !number.is_empty() {
            self.at += number.len();
            let n: i64 = number.parse().map_err(|_| self.error("not a number"))?;
            return Ok(Expr::Literal(Value::from(n)));
        }
        let name = self.identifier()?;
        match name.as_str() {
            "true" | "false" if !self.rest().trim_start().starts_with('(') => {
                return Ok(Expr::Literal(Value::Bool(name == "true")));
            }
            _ => {}
        }
        let function =
            Function::named(&name).ok_or_else(|| self.error(&format!("the function '{name}' is not supported")))?;
        if !self.eat('(') {
            return Err(self.error("expected '('"));
        }
        let mut args = Vec::new();
        if !self.eat(')') {
            loop {
                args.push(self.expr()?);
                if self.eat(')') {
                    break;
                }
                if !self.eat(',') {
                    return Err(self.error("expected ',' or ')'"));
                }
            }
        }
        let mut access = Vec::new();
        loop {
            if self.eat('.') {
                access.push(Expr::Literal(Value::String(self.identifier()?)));
            } else if self.eat('[') {
                access.push(self.expr()?);
                if !self.eat(']') {
                    return Err(self.error("expected ']'"));
                }
            } else {
                break;
            }
        }
        Ok(Expr::Call { function, args, access })
    }

    fn identifier(&mut self) -> Result<String, RuleError> {
        self.skip_space();
        let name: String = self.rest().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if name.is_empty() {
            return Err(self.error("expected a name"));
        }
        self.at += name.len();
        Ok(name)
    }

    /// A `'…'` literal, `''` standing for one quote.
    fn string(&mut self) -> Result<String, RuleError> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.rest().chars().next() else { return Err(self.error("unterminated string")) };
            self.at += c.len_utf8();
            if c == '\'' {
                if self.rest().starts_with('\'') {
                    self.at += 1;
                    out.push('\'');
                } else {
                    return Ok(out);
                }
            } else {
                out.push(c);
            }
        }
    }
}
