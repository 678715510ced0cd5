//! ARM provisioning states (shared by resources and operations) and the worst-of merge of
//! composite states (docs/arm-contract.md#provisioning-states-and-composite-states).

use std::cmp::Ordering;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProvisioningState {
    Accepted,
    /// Accepted, and held until someone approves it (`approval`): nothing runs yet. Any
    /// state but the three terminal ones means "in progress" to an ARM poller.
    WaitingForApproval,
    Provisioning,
    Updating,
    Deleting,
    Canceling,
    Succeeded,
    Failed,
    Canceled,
}

impl ProvisioningState {
    pub const ALL: [ProvisioningState; 9] = [
        ProvisioningState::Accepted,
        ProvisioningState::WaitingForApproval,
        ProvisioningState::Provisioning,
        ProvisioningState::Updating,
        ProvisioningState::Deleting,
        ProvisioningState::Canceling,
        ProvisioningState::Succeeded,
        ProvisioningState::Failed,
        ProvisioningState::Canceled,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(self, ProvisioningState::Succeeded | ProvisioningState::Failed | ProvisioningState::Canceled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProvisioningState::Accepted => "Accepted",
            ProvisioningState::WaitingForApproval => "WaitingForApproval",
            ProvisioningState::Provisioning => "Provisioning",
            ProvisioningState::Updating => "Updating",
            ProvisioningState::Deleting => "Deleting",
            ProvisioningState::Canceling => "Canceling",
            ProvisioningState::Succeeded => "Succeeded",
            ProvisioningState::Failed => "Failed",
            ProvisioningState::Canceled => "Canceled",
        }
    }

    /// Case-insensitive; accepts the `Cancelled` spelling some services use.
    pub fn parse(s: &str) -> Option<Self> {
        if s.eq_ignore_ascii_case("cancelled") {
            return Some(ProvisioningState::Canceled);
        }
        Self::ALL.into_iter().find(|p| p.as_str().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for ProvisioningState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provisioning state as reported by a source: known, or a string we do not recognise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateName {
    Known(ProvisioningState),
    Unrecognised(String),
}

impl StateName {
    pub fn as_str(&self) -> &str {
        match self {
            StateName::Known(p) => p.as_str(),
            StateName::Unrecognised(s) => s,
        }
    }

    /// Lower is worse. ARO ranks unknown strings 0 (a tie with Failed), which reports a
    /// failure nobody observed. Slipway ranks an unrecognised, non-empty state as
    /// "in progress, least known": worse than every known in-progress state (so it is
    /// surfaced) but better than Canceled and Failed (so it never fails an operation).
    /// The empty string stays an error marker at -1.
    pub fn rank(&self) -> i32 {
        match self {
            StateName::Unrecognised(s) if s.is_empty() => -1,
            StateName::Unrecognised(_) => 15,
            StateName::Known(p) => match p {
                ProvisioningState::Failed => 0,
                ProvisioningState::Canceled => 10,
                ProvisioningState::Deleting => 20,
                ProvisioningState::Canceling => 25,
                ProvisioningState::Provisioning => 30,
                ProvisioningState::Updating => 40,
                ProvisioningState::Accepted => 50,
                ProvisioningState::WaitingForApproval => 45,
                ProvisioningState::Succeeded => 100,
            },
        }
    }
}

/// One source's view of an operation's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationState {
    pub source: String,
    pub state: StateName,
    pub message: String,
}

impl OperationState {
    pub fn new(state: StateName, message: impl Into<String>) -> Self {
        OperationState { source: String::new(), state, message: message.into() }
    }

    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.source = source.into();
        self
    }
}

/// Orders by rank (worse first), ties by message. `None` sorts before everything.
pub fn compare_operation_state(a: Option<&OperationState>, b: Option<&OperationState>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => a.state.rank().cmp(&b.state.rank()).then_with(|| a.message.cmp(&b.message)),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PickWorstError {
    #[error("no operation states")]
    Empty,
    #[error("empty provisioning state")]
    EmptyState,
}

/// Merges states that the caller has sorted with [`compare_operation_state`]: the worst
/// state, with the messages of every state tied for worst as `"[source] message; …"`.
pub fn pick_worst_operation_state(sorted: &[OperationState]) -> Result<OperationState, PickWorstError> {
    let first = sorted.first().ok_or(PickWorstError::Empty)?;
    if first.state.as_str().is_empty() {
        return Err(PickWorstError::EmptyState);
    }
    let parts: Vec<String> = sorted
        .iter()
        .take_while(|s| s.state == first.state)
        .map(|s| {
            let source = if s.source.is_empty() { "<no_source>" } else { &s.source };
            let message = if s.message.is_empty() { "<no_message>" } else { &s.message };
            format!("[{source}] {message}")
        })
        .collect();
    Ok(OperationState { source: String::new(), state: first.state.clone(), message: parts.join("; ") })
}

/// Sorts then merges: the usual way to combine several sources.
pub fn worst_of(mut states: Vec<OperationState>) -> Result<OperationState, PickWorstError> {
    states.sort_by(|a, b| compare_operation_state(Some(a), Some(b)));
    pick_worst_operation_state(&states)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProvisioningState::*;

    fn st(p: ProvisioningState, msg: &str) -> OperationState {
        OperationState::new(StateName::Known(p), msg)
    }

    #[test]
    fn terminality_and_parsing() {
        for p in ProvisioningState::ALL {
            assert_eq!(p.is_terminal(), matches!(p, Succeeded | Failed | Canceled));
            assert_eq!(ProvisioningState::parse(p.as_str()), Some(p));
            assert_eq!(ProvisioningState::parse(&p.as_str().to_lowercase()), Some(p));
        }
        assert_eq!(ProvisioningState::parse("Cancelled"), Some(Canceled));
        assert_eq!(ProvisioningState::parse("Creating"), None);
    }

    #[test]
    fn compare_table() {
        let s = |p, m| st(p, m);
        assert_eq!(compare_operation_state(None, None), Ordering::Equal);
        assert_eq!(compare_operation_state(None, Some(&s(Failed, ""))), Ordering::Less);
        assert_eq!(compare_operation_state(Some(&s(Failed, "")), None), Ordering::Greater);
        assert_eq!(compare_operation_state(Some(&s(Succeeded, "")), Some(&s(Provisioning, ""))), Ordering::Greater);
        assert_eq!(compare_operation_state(Some(&s(Deleting, "")), Some(&s(Provisioning, ""))), Ordering::Less);
        assert_eq!(compare_operation_state(Some(&s(Accepted, "")), Some(&s(Updating, ""))), Ordering::Greater);
        assert_eq!(compare_operation_state(Some(&s(Failed, "a")), Some(&s(Failed, "b"))), Ordering::Less);
    }

    #[test]
    fn unrecognised_states_rank_as_in_progress_not_failed() {
        let foo = OperationState::new(StateName::Unrecognised("Foo".into()), "");
        assert_eq!(compare_operation_state(Some(&foo), Some(&st(Failed, ""))), Ordering::Greater);
        assert_eq!(compare_operation_state(Some(&foo), Some(&st(Canceled, ""))), Ordering::Greater);
        assert_eq!(compare_operation_state(Some(&foo), Some(&st(Deleting, ""))), Ordering::Less);
        let merged = worst_of(vec![st(Succeeded, ""), foo.clone().with_source("x")]).unwrap();
        assert_eq!(merged.state, StateName::Unrecognised("Foo".into()));
        let merged = worst_of(vec![foo, st(Failed, "boom").with_source("y")]).unwrap();
        assert_eq!(merged.state, StateName::Known(Failed));
    }

    #[test]
    fn pick_worst() {
        assert_eq!(pick_worst_operation_state(&[]), Err(PickWorstError::Empty));
        let empty = OperationState::new(StateName::Unrecognised(String::new()), "");
        assert_eq!(pick_worst_operation_state(&[empty]), Err(PickWorstError::EmptyState));
        let merged =
            worst_of(vec![st(Succeeded, ""), st(Failed, "b").with_source("B"), st(Failed, "a").with_source("A")])
                .unwrap();
        assert_eq!(merged.state, StateName::Known(Failed));
        assert_eq!(merged.message, "[A] a; [B] b");
        assert_eq!(worst_of(vec![st(Failed, "").with_source("A")]).unwrap().message, "[A] <no_message>");
        assert_eq!(worst_of(vec![st(Failed, "x")]).unwrap().message, "[<no_source>] x");
    }

    #[test]
    fn aro_composite_example() {
        let merged = worst_of(vec![
            st(Provisioning, "hosted cluster is not available: ...").with_source("hypershiftHostedCluster"),
            st(Succeeded, "").with_source("cosmosCluster"),
            st(Provisioning, "ServingCABundle not yet populated").with_source("servingCABundle"),
            st(Succeeded, "").with_source("clusterServiceClusterStatus"),
        ])
        .unwrap();
        assert_eq!(merged.state, StateName::Known(Provisioning));
        assert_eq!(
            merged.message,
            "[servingCABundle] ServingCABundle not yet populated; [hypershiftHostedCluster] hosted cluster is not available: ..."
        );
    }
}
