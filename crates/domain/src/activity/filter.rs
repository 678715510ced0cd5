//! The Activity Log's `$filter`: clauses joined by `and`, each a field, an operator and a
//! quoted value — `eventTimestamp ge '2026-12-01T00:00:00Z' and eventTimestamp le '…' and
//! resourceGroupName eq 'rg1'`. The fields: `eventTimestamp` (`ge`, `gt`, `le`, `lt`),
//! `resourceGroupName`, `resourceUri` (also `resourceId`), `correlationId`, `caller` and
//! `status` (`eq`). `eventChannels` is accepted and ignored: every entry is an operation.
//! Field names, `and` and the operators are matched case-insensitively, like ARM's.

use crate::time::Timestamp;

/// What a read of the log keeps; every field set must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActivityFilter {
    /// At or after.
    pub since: Option<Timestamp>,
    /// At or before.
    pub until: Option<Timestamp>,
    /// Lowercased.
    pub resource_group: Option<String>,
    /// A resource's key (lowercased id): its entries and those of anything under it.
    pub resource: Option<String>,
    /// Lowercased.
    pub correlation_id: Option<String>,
    /// Lowercased.
    pub caller: Option<String>,
    pub status: Option<ActivityStatus>,
}

/// An entry's status in the Activity Log's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivityStatus {
    /// The request was accepted and started (or changed) an operation that runs on.
    Accepted,
    Succeeded,
    Failed,
}

impl ActivityStatus {
    pub const ALL: [ActivityStatus; 3] = [ActivityStatus::Accepted, ActivityStatus::Succeeded, ActivityStatus::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            ActivityStatus::Accepted => "Accepted",
            ActivityStatus::Succeeded => "Succeeded",
            ActivityStatus::Failed => "Failed",
        }
    }

    /// Any casing.
    pub fn parse(s: &str) -> Option<ActivityStatus> {
        ActivityStatus::ALL.into_iter().find(|k| k.as_str().eq_ignore_ascii_case(s))
    }
}

/// Why a `$filter` was refused, in words for a `400`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FilterError(pub String);

const FIELDS: &str =
    "eventTimestamp (ge, gt, le, lt), resourceGroupName, resourceUri, correlationId, caller, status (eq)";

impl ActivityFilter {
    /// Parses a `$filter` (empty: everything).
    pub fn parse(text: &str) -> Result<ActivityFilter, FilterError> {
        let mut filter = ActivityFilter::default();
        let mut rest = text.trim();
        if rest.is_empty() {
            return Ok(filter);
        }
        loop {
            let (field, after) = word(rest).ok_or_else(|| FilterError(format!("expected a field, one of {FIELDS}")))?;
            let (op, after) =
                word(after).ok_or_else(|| FilterError(format!("expected an operator after '{field}'")))?;
            let (value, after) = quoted(after)?;
            filter.apply(field, &op.to_ascii_lowercase(), value)?;
            rest = after.trim_start();
            if rest.is_empty() {
                return Ok(filter);
            }
            let (and, after) = word(rest).unwrap_or_default();
            if !and.eq_ignore_ascii_case("and") {
                return Err(FilterError(format!("expected 'and' between clauses, found '{}'", short(rest))));
            }
            rest = after;
        }
    }

    fn apply(&mut self, field: &str, op: &str, value: String) -> Result<(), FilterError> {
        let eq_only = |slot: &mut Option<String>, v: String| {
            if op != "eq" {
                return Err(FilterError(format!("{field} takes only 'eq', not '{op}'")));
            }
            *slot = Some(v.to_ascii_lowercase());
            Ok(())
        };
        match field.to_ascii_lowercase().as_str() {
            "eventtimestamp" => {
                let at = Timestamp::parse_rfc3339(&value)
                    .ok_or_else(|| FilterError(format!("'{}' is not an RFC 3339 time", short(&value))))?;
                match op {
                    "ge" => self.since = Some(at),
                    "gt" => self.since = Some(Timestamp(at.0 + 1)),
                    "le" => self.until = Some(at),
                    "lt" => self.until = Some(Timestamp(at.0 - 1)),
                    _ => return Err(FilterError(format!("eventTimestamp takes ge, gt, le or lt, not '{op}'"))),
                }
                Ok(())
            }
            "resourcegroupname" => eq_only(&mut self.resource_group, value),
            "resourceuri" | "resourceid" => eq_only(&mut self.resource, value.trim_end_matches('/').to_string()),
            "correlationid" => eq_only(&mut self.correlation_id, value),
            "caller" => eq_only(&mut self.caller, value),
            "status" => {
                let mut status = None;
                eq_only(&mut status, value)?;
                let status = status.unwrap_or_default();
                self.status = Some(ActivityStatus::parse(&status).ok_or_else(|| {
                    FilterError(format!("status is one of Accepted, Succeeded, Failed, not '{}'", short(&status)))
                })?);
                Ok(())
            }
            "eventchannels" => Ok(()),
            _ => Err(FilterError(format!("'{}' cannot be filtered on: use {FIELDS}", short(field)))),
        }
    }
}

/// The first run of letters at the start of `s` (after blanks), and what follows it.
fn word(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    let end = s.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(s.len());
    (end > 0).then(|| (&s[..end], &s[end..]))
}

/// A single-quoted value (`''` is a quote) at the start of `s`, and what follows it.
fn quoted(s: &str) -> Result<(String, &str), FilterError> {
    let s = s.trim_start();
    let Some(body) = s.strip_prefix('\'') else {
        return Err(FilterError(format!("expected a quoted value, found '{}'", short(s))));
    };
    let mut value = String::new();
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '\'' {
            value.push(c);
        } else if chars.peek().is_some_and(|(_, n)| *n == '\'') {
            chars.next();
            value.push('\'');
        } else {
            return Ok((value, &body[i + 1..]));
        }
    }
    Err(FilterError("a quoted value is not closed".into()))
}

/// At most 40 characters of `s`, for an error message.
fn short(s: &str) -> String {
    crate::echo::echo(s, 40)
}
