//! `$filter` as ARM's list APIs take it: clauses `field eq 'value'` joined by `and` (a quote
//! inside a value is doubled, OData's rule). Which fields a list accepts is the list's own
//! business; this only reads the text. OData has more (`or`, functions, other operators),
//! which no Slipway list needs; each is refused with a message naming what is accepted.

use std::collections::BTreeMap;

use slipway_domain::echo::echo;

use crate::error::ArmError;

/// Whether `tags` pass a `tagName eq 'n'` (and `tagValue eq 'v'`) filter: names match
/// whatever their case, values exactly; no `tagName` clause passes everything.
pub(crate) fn tags_match(tags: &BTreeMap<String, String>, name: Option<&str>, value: Option<&str>) -> bool {
    let Some(name) = name else { return true };
    tags.iter().any(|(k, v)| k.eq_ignore_ascii_case(name) && value.is_none_or(|want| v == want))
}

/// One `field eq 'value'` clause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Clause {
    pub field: String,
    pub value: String,
}

/// The clauses of `text`, in order, or why it is not a filter this reads.
pub(crate) fn parse(text: &str) -> Result<Vec<Clause>, String> {
    let mut clauses = Vec::new();
    let mut rest = text.trim();
    loop {
        let (field, after_field) = word(rest).ok_or("expected a field name")?;
        let (op, after_op) = word(after_field.trim_start()).ok_or("expected 'eq' after the field name")?;
        if !op.eq_ignore_ascii_case("eq") {
            return Err(format!("only 'eq' is supported, not '{op}'"));
        }
        let (value, after_value) = quoted(after_op.trim_start()).ok_or("expected a value in single quotes")?;
        clauses.push(Clause { field: field.to_string(), value });
        rest = after_value.trim_start();
        if rest.is_empty() {
            return Ok(clauses);
        }
        let (and, after_and) = word(rest).ok_or("expected 'and' between clauses")?;
        if !and.eq_ignore_ascii_case("and") {
            return Err(format!("clauses are joined by 'and', not '{and}'"));
        }
        rest = after_and.trim_start();
    }
}

/// A leading run of letters, digits and `.`/`_`, and what follows it.
fn word(text: &str) -> Option<(&str, &str)> {
    let end = text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_')).unwrap_or(text.len());
    (end > 0).then(|| text.split_at(end))
}

/// A leading `'…'` (with `''` for a quote inside), unquoted, and what follows it.
fn quoted(text: &str) -> Option<(String, &str)> {
    let mut chars = text.strip_prefix('\'')?.char_indices();
    let body = &text[1..];
    let mut value = String::new();
    while let Some((i, c)) = chars.next() {
        if c != '\'' {
            value.push(c);
        } else if body[i + 1..].starts_with('\'') {
            value.push('\'');
            chars.next();
        } else {
            return Some((value, &body[i + 1..]));
        }
    }
    None
}

/// The `$filter` of a list that accepts `fields` (each at most once): the value of each, in
/// the order of `fields`; `400 InvalidFilter` for anything else.
pub(crate) fn fields<const N: usize>(text: Option<&str>, fields: [&str; N]) -> Result<[Option<String>; N], ArmError> {
    let mut out: [Option<String>; N] = std::array::from_fn(|_| None);
    let Some(text) = text else { return Ok(out) };
    let refuse = |why: String| {
        let accepted = fields.map(|f| format!("{f} eq '…'")).join(", ");
        ArmError::bad_request(
            "InvalidFilter",
            format!(
                "The $filter '{}' is not valid: {why}. This list accepts {accepted}, joined by 'and'.",
                echo(text, 200)
            ),
        )
        .with_target("$filter")
    };
    for clause in parse(text).map_err(refuse)? {
        let Some(at) = fields.iter().position(|f| f.eq_ignore_ascii_case(&clause.field)) else {
            return Err(refuse(format!("the field '{}' is not one it accepts", echo(&clause.field, 64))));
        };
        if out[at].replace(clause.value).is_some() {
            return Err(refuse(format!("'{}' is given twice", fields[at])));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clause(field: &str, value: &str) -> Clause {
        Clause { field: field.into(), value: value.into() }
    }

    #[test]
    fn reads_eq_clauses_joined_by_and() {
        assert_eq!(parse("status eq 'Failed'"), Ok(vec![clause("status", "Failed")]));
        assert_eq!(
            parse("  tagName EQ 'env'   AND tagValue eq 'it''s prod' "),
            Ok(vec![clause("tagName", "env"), clause("tagValue", "it's prod")])
        );
        assert_eq!(
            parse("resourceType eq 'Slipway.Example/virtualNetworks'").unwrap()[0].value,
            "Slipway.Example/virtualNetworks"
        );
        assert_eq!(parse("name eq ''").unwrap()[0].value, "");
    }

    #[test]
    fn refuses_what_it_does_not_read() {
        for text in [
            "",
            "status",
            "status ne 'Failed'",
            "status eq Failed",
            "status eq 'Failed",
            "status eq 'a' or status eq 'b'",
            "status eq 'a' and",
            "startswith(name, 'x')",
            "status eq 'a' 'b'",
        ] {
            assert!(parse(text).is_err(), "{text:?} must be refused");
        }
    }

    #[test]
    fn a_list_takes_only_its_own_fields_once_each() {
        let [status] = fields(Some("Status eq 'Failed'"), ["status"]).unwrap();
        assert_eq!(status.as_deref(), Some("Failed"));
        assert_eq!(fields(None, ["status"]).unwrap(), [None]);
        let [kind, tag] = fields(Some("tagName eq 'a'"), ["resourceType", "tagName"]).unwrap();
        assert_eq!((kind, tag.as_deref()), (None, Some("a")));
        for text in ["color eq 'red'", "status eq 'a' and status eq 'b'", "status gt 'a'"] {
            let e = fields(Some(text), ["status"]).unwrap_err();
            assert_eq!(e.body.code, "InvalidFilter", "{text}");
        }
    }
}
