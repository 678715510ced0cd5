//! A type's rule for its resource names: ARM's common rule, tightened by a type's own
//! maximum length and pattern.

use slipway_domain::ids::{ARM_NAME_MAX_LENGTH, ARM_NAME_RULE, arm_name_ok};

use crate::TypeError;

/// A type's rule for its resource names: ARM's common rule, a maximum length (at most ARM's)
/// and optionally a regular expression the whole name must match.
#[derive(Clone, Debug)]
pub struct NameRule {
    max_length: usize,
    pattern: Option<regex::Regex>,
}

impl Default for NameRule {
    /// ARM's common rule alone.
    fn default() -> Self {
        NameRule { max_length: ARM_NAME_MAX_LENGTH, pattern: None }
    }
}

impl NameRule {
    /// `max_length` from 1 to [`ARM_NAME_MAX_LENGTH`]; `pattern` must match the whole name
    /// (it is anchored here). `type_name` only names the type in errors.
    pub fn new(type_name: &str, max_length: usize, pattern: Option<&str>) -> Result<Self, TypeError> {
        let invalid = |why: String| TypeError::InvalidNameRule(type_name.to_string(), why);
        if !(1..=ARM_NAME_MAX_LENGTH).contains(&max_length) {
            return Err(invalid(format!("name_max_length must be from 1 to {ARM_NAME_MAX_LENGTH}, not {max_length}")));
        }
        let pattern = pattern
            .map(|p| {
                regex::RegexBuilder::new(&format!("^(?:{p})$"))
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| invalid(format!("name_pattern is not a valid regular expression: {e}")))
            })
            .transpose()?;
        Ok(NameRule { max_length, pattern })
    }

    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// The pattern as configured (without the anchors added here).
    pub fn pattern(&self) -> Option<&str> {
        self.pattern.as_ref().map(|r| r.as_str().trim_start_matches("^(?:").trim_end_matches(")$"))
    }

    pub fn allows(&self, name: &str) -> bool {
        arm_name_ok(name)
            && name.chars().count() <= self.max_length
            && self.pattern.as_ref().is_none_or(|p| p.is_match(name))
    }

    /// The rule as an error message states it.
    pub fn describe(&self) -> String {
        match (self.pattern(), self.max_length) {
            (None, ARM_NAME_MAX_LENGTH) => ARM_NAME_RULE.to_string(),
            (None, max) => format!(
                "use 1-{max} characters, none of '<', '>', '%', '&', ':', '\\', '?', '/', no control characters, not \
                 '.' or '..'"
            ),
            (Some(p), max) => format!("use 1-{max} characters matching the pattern {p}"),
        }
    }
}
