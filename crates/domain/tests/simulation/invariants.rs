//! The invariants the simulation checks after every step.

use slipway_domain::progress::MAX_RUNNING_PERCENT;

use super::*;

impl Sim {
    pub(super) fn check(&self, when: &str) {
        // One job at a time, in the record and at the provider.
        if let Some(res) = &self.w.snap.resource {
            let live = res.jobs.iter().filter(|j| !j.state.is_terminal()).count();
            if live > 1 {
                self.fail(&format!("{when}: {live} non-terminal jobs in the record"));
            }
        }
        let running = self.jobs.iter().filter(|j| !j.purged && !j.state(self.t).is_terminal()).count();
        if running > 1 {
            self.fail(&format!("{when}: {running} jobs running at the provider"));
        }
        // Operations: at most one open, the active one, mirrored by the resource.
        let open: Vec<_> = self.w.snap.operations.iter().filter(|o| !o.is_terminal()).collect();
        if open.len() > 1 {
            self.fail(&format!("{when}: {} non-terminal operations", open.len()));
        }
        match (&self.w.snap.resource, open.first()) {
            (None, Some(op)) => self.fail(&format!("{when}: operation {} open without a resource", op.id)),
            (Some(res), Some(op)) => {
                if res.active_operation_id.as_ref() != Some(&op.id) {
                    self.fail(&format!("{when}: open operation {} is not the active one", op.id));
                }
                if res.provisioning_state != op.status {
                    self.fail(&format!(
                        "{when}: resource {:?} but its operation {:?}",
                        res.provisioning_state, op.status
                    ));
                }
            }
            (Some(res), None) => {
                if res.active_operation_id.is_some() {
                    self.fail(&format!("{when}: active operation id names a terminal operation"));
                }
            }
            (None, None) => {}
        }
        let mut notified = HashSet::new();
        for n in &self.w.snap.notifications {
            if !notified.insert(&n.operation_id) {
                self.fail(&format!("{when}: operation {} notified twice", n.operation_id));
            }
            if !self.w.snap.operation(&n.operation_id).is_some_and(|o| o.is_terminal()) {
                self.fail(&format!("{when}: notification for a non-terminal operation"));
            }
        }
    }

    /// An operation's percentage never goes down, and is below 100 until it succeeded; a
    /// current task shows only while it is in progress.
    pub(super) fn check_progress(&mut self) {
        let ops: Vec<_> = self
            .w
            .snap
            .operations
            .iter()
            .map(|o| (o.id.clone(), o.status, o.percent_complete, o.current_task.is_some()))
            .collect();
        for (id, status, percent, task) in ops {
            let terminal = status.is_terminal();
            if task && terminal {
                self.fail(&format!("operation {id} ended {status:?} and still shows a current task"));
            }
            let Some(p) = percent else { continue };
            if !terminal && p > MAX_RUNNING_PERCENT {
                self.fail(&format!("operation {id} in progress at {p}%"));
            }
            if status == slipway_domain::ProvisioningState::Succeeded && p != 100 {
                self.fail(&format!("operation {id} succeeded at {p}%"));
            }
            let was = self.percents.insert(id.clone(), p);
            if p == 100 && was.is_some_and(|w| w < 100) {
                self.stats.progressed += 1;
            }
            if let Some(was) = was.filter(|was| *was > p) {
                self.fail(&format!("operation {id} went from {was}% down to {p}%"));
            }
        }
    }
}
