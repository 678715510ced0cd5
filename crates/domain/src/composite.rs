//! Composite status: an operation whose outcome has several sources — its own job, its
//! preflight checks, a cascade's child deletes — takes the worst of them by the
//! `PickWorstOperationState` rules ([`crate::state::worst_of`]). The message merges every
//! source tied for worst as `[source] message; …`, and the ARM error carries one `details`
//! entry per failed source, so none is lost (ARO keeps only the merged message on its create
//! path: docs/arm-contract.md#composite-status).

use crate::operation::CloudError;
use crate::state::{OperationState, ProvisioningState, StateName, worst_of};

/// One source's view: its name (a check, a child's id, `preflight`), its state and, when it
/// failed, its error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub name: String,
    pub state: ProvisioningState,
    pub error: Option<CloudError>,
}

impl Source {
    pub fn succeeded(name: impl Into<String>) -> Self {
        Source { name: name.into(), state: ProvisioningState::Succeeded, error: None }
    }

    pub fn failed(name: impl Into<String>, error: CloudError) -> Self {
        Source { name: name.into(), state: ProvisioningState::Failed, error: Some(error) }
    }
}

/// The merged view of several sources: the worst state, and for a failed or canceled one
/// the error under `code`. `None` when there are no sources.
pub fn merge(sources: Vec<Source>, code: &str) -> Option<(ProvisioningState, Option<CloudError>)> {
    let states = sources
        .iter()
        .map(|s| {
            let message = s.error.as_ref().map(|e| e.message.clone()).unwrap_or_default();
            OperationState::new(StateName::Known(s.state), message).with_source(s.name.clone())
        })
        .collect();
    let worst = worst_of(states).ok()?;
    let StateName::Known(state) = worst.state else { return None };
    if !matches!(state, ProvisioningState::Failed | ProvisioningState::Canceled) {
        return Some((state, None));
    }
    let details = sources
        .into_iter()
        .filter(|s| s.state == state)
        .filter_map(|s| {
            let mut e = s.error?;
            e.target.get_or_insert(s.name);
            Some(e)
        })
        .collect();
    let mut error = CloudError::new(code, worst.message);
    error.details = details;
    Some((state, Some(error)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProvisioningState::*;

    fn err(m: &str) -> CloudError {
        CloudError::new("Check", m)
    }

    #[test]
    fn merge_table() {
        struct Case {
            name: &'static str,
            sources: Vec<Source>,
            want_state: Option<ProvisioningState>,
            want_message: &'static str,
            want_details: Vec<&'static str>,
        }
        let cases = vec![
            Case { name: "no sources", sources: vec![], want_state: None, want_message: "", want_details: vec![] },
            Case {
                name: "all succeeded",
                sources: vec![Source::succeeded("a"), Source::succeeded("b")],
                want_state: Some(Succeeded),
                want_message: "",
                want_details: vec![],
            },
            Case {
                name: "one failure among successes",
                sources: vec![Source::succeeded("a"), Source::failed("quota", err("no room"))],
                want_state: Some(Failed),
                want_message: "[quota] no room",
                want_details: vec!["quota"],
            },
            Case {
                name: "every failure kept, sorted by message",
                sources: vec![
                    Source::failed("dns", err("zone missing")),
                    Source::succeeded("a"),
                    Source::failed("quota", err("cores exhausted")),
                ],
                want_state: Some(Failed),
                want_message: "[quota] cores exhausted; [dns] zone missing",
                want_details: vec!["dns", "quota"],
            },
            Case {
                name: "in progress is worse than succeeded",
                sources: vec![Source::succeeded("a"), Source { name: "b".into(), state: Deleting, error: None }],
                want_state: Some(Deleting),
                want_message: "",
                want_details: vec![],
            },
            Case {
                name: "failed beats canceled",
                sources: vec![
                    Source { name: "c".into(), state: Canceled, error: Some(err("stopped")) },
                    Source::failed("f", err("boom")),
                ],
                want_state: Some(Failed),
                want_message: "[f] boom",
                want_details: vec!["f"],
            },
        ];
        for c in cases {
            let got = merge(c.sources, "Composite");
            assert_eq!(got.as_ref().map(|g| g.0), c.want_state, "{}", c.name);
            let error = got.and_then(|g| g.1);
            assert_eq!(error.as_ref().map(|e| e.message.as_str()).unwrap_or_default(), c.want_message, "{}", c.name);
            let targets: Vec<String> =
                error.iter().flat_map(|e| e.details.iter().filter_map(|d| d.target.clone())).collect();
            assert_eq!(targets, c.want_details, "{}", c.name);
            if let Some(e) = error {
                assert_eq!(e.code, "Composite", "{}", c.name);
            }
        }
    }

    #[test]
    fn a_source_error_keeps_its_own_target_and_code() {
        let child = CloudError::new("DeprovisioningFailed", "stuck").with_target("/subscriptions/s/…/children/c");
        let (_, error) = merge(vec![Source::failed("c", child.clone())], "DeprovisioningFailed").unwrap();
        assert_eq!(error.unwrap().details, vec![child]);
    }
}
