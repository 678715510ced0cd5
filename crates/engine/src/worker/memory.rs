//! What a worker remembers of its resource between steps, so that a step which would change
//! nothing needs no transaction: the snapshot it last committed, or — while all it does is
//! wait to poll a job — only that job ([`PollWait`]): a few hundred bytes instead of the
//! snapshot's few kilobytes, which were most of what an operation in flight cost in memory
//! (`slipway-bench memory`). While the worker holds the lease only a client can change the
//! resource besides it, and a client's write reaches the worker as a new claim, which makes
//! it forget.

use slipway_domain::reconcile::{Effect, Outcome, PollWait};
use slipway_domain::resource::Snapshot;
use slipway_domain::{Timestamp, TypePolicy};

use super::step::{Step, advance};

pub(super) enum Memory {
    /// Nothing to go on: the next step reads the store.
    Nothing,
    /// The state as the worker last committed or read it.
    Settled(Box<Snapshot>),
    /// Only the job the next step polls.
    Waiting(Box<PollWait>),
}

/// A step taken without the store.
pub(super) enum LocalStep {
    Perform(Effect),
    Hold(Timestamp),
}

impl Memory {
    /// Before a wait: keep only the job to poll, when polling it is all the next steps do.
    pub(super) fn lighten(&mut self, policy: &TypePolicy, now: Timestamp) {
        if let Memory::Settled(snap) = self
            && let Some(wait) = PollWait::of(snap, policy, now)
        {
            *self = Memory::Waiting(Box::new(wait));
        }
    }

    /// The step the worker's transaction would take, when it would change nothing: a poll
    /// that saw the job as recorded, the next poll of an unchanged resource. A deadline
    /// passing changes the state, so that step goes to the store.
    pub(super) fn local_step(
        &self,
        policy: &TypePolicy,
        performed: &Option<(Effect, Outcome)>,
        now: Timestamp,
    ) -> Option<LocalStep> {
        if !matches!(performed, None | Some((Effect::Poll { .. }, _))) {
            return None;
        }
        match self {
            Memory::Nothing => None,
            Memory::Settled(settled) => {
                let mut local = (**settled).clone();
                let step = advance(&mut local, policy, performed.clone(), now);
                if local != **settled {
                    return None;
                }
                match step {
                    Step::Hold(until) => Some(LocalStep::Hold(until)),
                    Step::Perform(effect @ Effect::Poll { .. }) => Some(LocalStep::Perform(effect)),
                    _ => None,
                }
            }
            Memory::Waiting(wait) => match performed {
                None => wait.holds_at(now).then(|| LocalStep::Perform(Effect::Poll { key: wait.key().clone() })),
                Some((Effect::Poll { key }, outcome)) if key == wait.key() => {
                    wait.absorb(outcome, policy, now).map(LocalStep::Hold)
                }
                Some(_) => None,
            },
        }
    }
}
