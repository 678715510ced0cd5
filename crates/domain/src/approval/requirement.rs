//! What a `requireApproval` policy asks of the requests it holds: its `then.details`, read when
//! the definition is written (so a mistake is a `400` then, never a surprise at a request).

use std::time::Duration;

use serde_json::Value;

use super::{DEFAULT_APPROVER_ROLE, DEFAULT_TIMEOUT};
use crate::access::Role;
use crate::policy_rule::RuleError;

/// The requests a policy can hold for approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    Create,
    Update,
}

impl RequestKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Create => "create",
            RequestKind::Update => "update",
        }
    }

    pub fn parse(text: &str) -> Option<RequestKind> {
        [RequestKind::Create, RequestKind::Update].into_iter().find(|k| k.as_str().eq_ignore_ascii_case(text))
    }
}

/// How a request nobody decided in time ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutOutcome {
    Canceled,
    Failed,
}

impl TimeoutOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutOutcome::Canceled => "Canceled",
            TimeoutOutcome::Failed => "Failed",
        }
    }

    pub fn parse(text: &str) -> Option<TimeoutOutcome> {
        [TimeoutOutcome::Canceled, TimeoutOutcome::Failed].into_iter().find(|o| o.as_str().eq_ignore_ascii_case(text))
    }
}

/// A policy's approval rule (`then.details` of a `requireApproval` policy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRule {
    /// `requests`: which writes it holds (default: creates and updates).
    pub requests: Vec<RequestKind>,
    /// `approverRole`: the least role at the resource's scope that may decide (default Owner).
    pub approver_role: Role,
    /// `allowSelfApproval`: the requester may decide their own request (default false).
    pub allow_self_approval: bool,
    /// `autoApproveRole`: a requester holding this role at the scope is approved at once.
    pub auto_approve_role: Option<Role>,
    /// `timeout` (ISO 8601, `PT4H`, `P2D`): how long a request may wait (default a day).
    pub timeout: Duration,
    /// `onTimeout`: `Canceled` (the default) or `Failed`.
    pub on_timeout: TimeoutOutcome,
    /// `quotaPercent`: hold the request only when it would take a meter of the subscription
    /// past this share of its limit (1 to 100); absent: whenever the condition holds.
    pub quota_percent: Option<u8>,
    /// `notify`: a URL the request's status is posted to when it starts waiting.
    pub notify: Option<String>,
}

impl Default for ApprovalRule {
    fn default() -> Self {
        ApprovalRule {
            requests: vec![RequestKind::Create, RequestKind::Update],
            approver_role: DEFAULT_APPROVER_ROLE,
            allow_self_approval: false,
            auto_approve_role: None,
            timeout: DEFAULT_TIMEOUT,
            on_timeout: TimeoutOutcome::Canceled,
            quota_percent: None,
            notify: None,
        }
    }
}

/// The longest a request may wait: 30 days (an operation is kept no longer than that).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 3600);

impl ApprovalRule {
    /// Reads `details` (absent: every default); names what is wrong.
    pub fn parse(details: Option<&Value>) -> Result<ApprovalRule, RuleError> {
        let mut rule = ApprovalRule::default();
        let Some(details) = details.filter(|d| !d.is_null()) else { return Ok(rule) };
        let obj = details.as_object().ok_or_else(|| bad("then.details is an object"))?;
        for (key, value) in obj {
            let text = || value.as_str().ok_or_else(|| bad(&format!("details.{key} is a string, not {value}")));
            let role = || {
                text().and_then(|t| {
                    Role::from_name(t)
                        .ok_or_else(|| bad(&format!("details.{key} '{t}' is not Reader, Contributor, Owner or Admin")))
                })
            };
            match key.as_str() {
                "requests" => {
                    let list =
                        value.as_array().ok_or_else(|| bad("details.requests is a list: [\"create\", \"update\"]"))?;
                    rule.requests = list
                        .iter()
                        .map(|r| {
                            r.as_str()
                                .and_then(RequestKind::parse)
                                .ok_or_else(|| bad(&format!("details.requests holds create or update, not {r}")))
                        })
                        .collect::<Result<_, _>>()?;
                    if rule.requests.is_empty() {
                        return Err(bad("details.requests names at least one request"));
                    }
                }
                "approverRole" => rule.approver_role = role()?,
                "autoApproveRole" => rule.auto_approve_role = Some(role()?),
                "allowSelfApproval" => {
                    rule.allow_self_approval =
                        value.as_bool().ok_or_else(|| bad("details.allowSelfApproval is true or false"))?
                }
                "timeout" => {
                    let t = text()?;
                    rule.timeout =
                        parse_iso_duration(t).filter(|d| !d.is_zero() && *d <= MAX_TIMEOUT).ok_or_else(|| {
                            bad(&format!("details.timeout '{t}' is an ISO 8601 duration from PT1S to P30D (PT4H, P2D)"))
                        })?;
                }
                "onTimeout" => {
                    let t = text()?;
                    rule.on_timeout = TimeoutOutcome::parse(t)
                        .ok_or_else(|| bad(&format!("details.onTimeout '{t}' is Canceled or Failed")))?;
                }
                "quotaPercent" => {
                    let p = value.as_u64().filter(|p| (1..=100).contains(p));
                    rule.quota_percent = Some(p.ok_or_else(|| {
                        bad(&format!("details.quotaPercent is a whole number from 1 to 100, not {value}"))
                    })? as u8);
                }
                "notify" => {
                    let t = text()?;
                    if !(t.starts_with("https://") || t.starts_with("http://")) {
                        return Err(bad(&format!("details.notify '{t}' is an http(s) URL")));
                    }
                    rule.notify = Some(t.to_owned());
                }
                other => {
                    return Err(bad(&format!(
                        "details.{other} is not known: requests, approverRole, allowSelfApproval, autoApproveRole, \
                         timeout, onTimeout, quotaPercent or notify"
                    )));
                }
            }
        }
        Ok(rule)
    }

    pub fn holds(&self, kind: RequestKind) -> bool {
        self.requests.contains(&kind)
    }
}

fn bad(message: &str) -> RuleError {
    RuleError(format!("requireApproval: {message}"))
}

/// The approval a policy asked of one request: the rule, and which assignment and definition
/// asked, and why (the tests that held).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub assignment_id: String,
    pub definition_id: String,
    pub reason: String,
    pub rule: ApprovalRule,
}

/// An ISO 8601 duration of weeks, days, hours, minutes and seconds (`P1W`, `P2D`, `PT4H30M`,
/// `PT45S`); years and months, whose length varies, are not accepted.
pub fn parse_iso_duration(text: &str) -> Option<Duration> {
    let rest = text.strip_prefix(['P', 'p'])?;
    let (date, time) = match rest.split_once(['T', 't']) {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut seconds: u64 = 0;
    let mut parts = 0;
    // Each part is digits then a unit, the units in their order, each at most once.
    let mut add = |part: &str, units: &[(char, u64)]| -> Option<()> {
        let mut number = String::new();
        let mut next_unit = 0;
        for c in part.chars() {
            if c.is_ascii_digit() {
                number.push(c);
                continue;
            }
            let at = units.iter().position(|(u, _)| u.eq_ignore_ascii_case(&c))?;
            if number.is_empty() || at < next_unit {
                return None;
            }
            seconds = seconds.checked_add(number.parse::<u64>().ok()?.checked_mul(units[at].1)?)?;
            number.clear();
            next_unit = at + 1;
            parts += 1;
        }
        number.is_empty().then_some(())
    };
    add(date, &[('W', 7 * 86400), ('D', 86400)])?;
    if let Some(time) = time {
        add(time, &[('H', 3600), ('M', 60), ('S', 1)])?;
    }
    (parts > 0).then_some(Duration::from_secs(seconds))
}

/// A duration as a person reads it: `4h`, `2d`, `1d 6h`, `90s`.
pub fn describe_duration(d: Duration) -> String {
    let mut s = d.as_secs();
    let mut out = Vec::new();
    for (unit, size) in [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)] {
        if s >= size {
            out.push(format!("{}{unit}", s / size));
            s %= size;
        }
    }
    if out.is_empty() { "0s".to_owned() } else { out.join(" ") }
}

impl Requirement {
    /// Every requirement that holds for one request, as one that meets them all: the highest
    /// approver role; the requester deciding, and the time running out `Canceled`, only if
    /// every policy allows it; the shortest time; auto-approval only when every policy names a
    /// role (the highest of them); every policy's reason. The first names the assignment.
    pub fn strictest(all: Vec<Requirement>) -> Option<Requirement> {
        let mut all = all.into_iter();
        let mut out = all.next()?;
        for r in all {
            let (a, b) = (&mut out.rule, r.rule);
            a.approver_role = a.approver_role.max(b.approver_role);
            a.allow_self_approval &= b.allow_self_approval;
            a.auto_approve_role = a.auto_approve_role.zip(b.auto_approve_role).map(|(x, y)| x.max(y));
            a.timeout = a.timeout.min(b.timeout);
            if b.on_timeout == TimeoutOutcome::Failed {
                a.on_timeout = TimeoutOutcome::Failed;
            }
            a.notify = a.notify.take().or(b.notify);
            out.reason = format!("{}; and {} ({})", out.reason, r.reason, r.assignment_id);
        }
        Some(out)
    }
}
