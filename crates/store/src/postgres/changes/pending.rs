//! A change function that runs at most once across the attempts of one call: a retried
//! batch reuses its first decision when it reads back the same snapshot, and gives up
//! otherwise, since the function cannot run twice.

use slipway_domain::resource::Snapshot;

use crate::{ChangeFn, StoreError};

/// A change function, run at most once across the attempts of one call, and what it decided.
pub(super) struct Pending {
    change: Option<ChangeFn>,
    decided: Option<(Snapshot, Result<Snapshot, StoreError>)>,
}

impl Pending {
    pub(super) fn new(change: ChangeFn) -> Self {
        Pending { change: Some(change), decided: None }
    }

    /// The snapshot to write for `before`, or why not. A retried attempt (the batch met a
    /// deadlock or a dead connection) reuses the first decision when it read back exactly
    /// the same snapshot — the function is pure in it — and otherwise gives up, since the
    /// function cannot run twice.
    pub(super) fn decide(&mut self, before: &Snapshot) -> Result<Snapshot, StoreError> {
        if let Some((seen, decided)) = &self.decided {
            return if seen == before {
                decided.clone()
            } else {
                Err(StoreError::Unavailable("the resource changed while a failed write was retried; try again".into()))
            };
        }
        let change = self.change.take().ok_or_else(|| StoreError::Internal("the change function was lost".into()))?;
        let mut after = before.clone();
        let decided = crate::run_change(change, &mut after).map(|()| after);
        self.decided = Some((before.clone(), decided.clone()));
        decided
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use slipway_domain::admission::Rejection;
    use slipway_domain::resource::Snapshot;

    use super::Pending;
    use crate::StoreError;

    fn counting(runs: &Arc<AtomicUsize>) -> Pending {
        let runs = Arc::clone(runs);
        Pending::new(Box::new(move |s: &mut Snapshot| {
            runs.fetch_add(1, Ordering::SeqCst);
            s.operations.clear();
            s.notifications.clear();
            s.resource = None;
            Ok(())
        }))
    }

    #[test]
    fn a_retried_change_reuses_its_decision_only_on_the_same_snapshot() {
        let runs = Arc::new(AtomicUsize::new(0));
        let before = Snapshot::default();
        let mut pending = counting(&runs);
        let first = pending.decide(&before).expect("decided");
        let again = pending.decide(&before).expect("same snapshot: same decision");
        assert_eq!(first, again);
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the function ran once");

        let mut other = before.clone();
        other.notifications.push(slipway_domain::resource::NewNotification {
            subscription: "s".into(),
            operation_id: crate::conformance::op_id(1),
            uri: "u".into(),
        });
        let err = pending.decide(&other).expect_err("another snapshot");
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn refusals_and_panics_are_answers() {
        let mut refusing = Pending::new(Box::new(|_: &mut Snapshot| Err(Rejection::NotFound)));
        let err = refusing.decide(&Snapshot::default()).expect_err("refused");
        assert_eq!(err, StoreError::Rejected(Rejection::NotFound));
        let again = refusing.decide(&Snapshot::default()).expect_err("a retried attempt");
        assert_eq!(again, err, "a refusal is remembered like any decision");
        let mut panicking = Pending::new(Box::new(|_: &mut Snapshot| panic!("bug in a change")));
        let err = panicking.decide(&Snapshot::default()).expect_err("panicked");
        assert!(matches!(&err, StoreError::Internal(m) if m.contains("bug in a change")), "{err:?}");
    }
}
