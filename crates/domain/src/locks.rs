//! Management locks, ARM's `Microsoft.Authorization/locks`: `CanNotDelete` or `ReadOnly` at a
//! subscription, a resource group or a resource, inherited by everything below it, the most
//! restrictive winning. A write's change judges them ([`check`]) against the locks it read
//! in its own transaction, so a lock set at the same moment is either seen or set after.
//!
//! Where ARM judges `ReadOnly` by HTTP verb — so a harmless `POST` (a restart, listing keys)
//! breaks under it — a type's action may be declared read-only, and passes.

use std::fmt;

use crate::access::Scope;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LockLevel {
    /// Nothing under it may be deleted.
    CanNotDelete,
    /// Nothing under it may be deleted or changed.
    ReadOnly,
}

impl LockLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LockLevel::CanNotDelete => "CanNotDelete",
            LockLevel::ReadOnly => "ReadOnly",
        }
    }

    /// ARM's spelling, matched without regard to case.
    pub fn parse(text: &str) -> Option<LockLevel> {
        [LockLevel::CanNotDelete, LockLevel::ReadOnly].into_iter().find(|l| l.as_str().eq_ignore_ascii_case(text))
    }
}

/// A lock: where it is, its name there, its level and why it is there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lock {
    pub scope: Scope,
    /// Its id as created, in the casing it was created with:
    /// `{scope}/providers/Microsoft.Authorization/locks/{name}`.
    pub id: String,
    pub level: LockLevel,
    pub notes: Option<String>,
}

/// What a request would do to what a lock covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Delete it (or, for a cascade, what is below it).
    Delete,
    /// Change it: `PUT`, `PATCH`, its tags, or an action that changes something.
    Write,
    /// An action its type declares read-only: no lock refuses it.
    ReadOnlyAction,
}

/// A request a lock refuses (ARM's `409 ScopeLocked`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeLocked {
    /// What the request was for.
    pub target: String,
    pub verb: Verb,
    pub lock: Lock,
}

impl fmt::Display for ScopeLocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.verb {
            Verb::Delete => "delete",
            Verb::Write | Verb::ReadOnlyAction => "write",
        };
        write!(
            f,
            "The scope '{}' cannot perform {what} operation because the lock '{}' ({}) applies to it. \
             Remove the lock and try again.",
            self.target,
            self.lock.id,
            self.lock.level.as_str()
        )?;
        if let Some(notes) = &self.lock.notes {
            write!(f, " The lock's notes: {notes}")?;
        }
        Ok(())
    }
}

fn refuses(level: LockLevel, verb: Verb) -> bool {
    match verb {
        Verb::Delete => true,
        Verb::Write => level == LockLevel::ReadOnly,
        Verb::ReadOnlyAction => false,
    }
}

/// Refuses `verb` on `target` (shown as `shown`) if a lock at or above it forbids it; of
/// several, the most restrictive is named.
pub fn check(locks: &[Lock], target: &Scope, shown: &str, verb: Verb) -> Result<(), ScopeLocked> {
    let applying = locks.iter().filter(|l| l.scope.contains(target) && refuses(l.level, verb));
    match applying.max_by_key(|l| (l.level, std::cmp::Reverse(l.scope.as_str().len()))) {
        Some(lock) => Err(ScopeLocked { target: shown.to_string(), verb, lock: lock.clone() }),
        None => Ok(()),
    }
}

/// Refuses a delete of `target` that deletes what is below it (a group's, a parent's) when a
/// lock at, above or anywhere below it forbids deleting: refused whole, before anything goes.
pub fn check_cascade(locks: &[Lock], target: &Scope, shown: &str) -> Result<(), ScopeLocked> {
    check(locks, target, shown, Verb::Delete)?;
    match locks.iter().find(|l| target.contains(&l.scope)) {
        Some(lock) => Err(ScopeLocked { target: shown.to_string(), verb: Verb::Delete, lock: lock.clone() }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(scope: &str, level: LockLevel) -> Lock {
        Lock {
            scope: Scope::parse(scope).expect("scope"),
            id: format!("{scope}/providers/Microsoft.Authorization/locks/l"),
            level,
            notes: None,
        }
    }

    const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000001";

    fn scope(tail: &str) -> Scope {
        Scope::parse(&format!("{SUB}{tail}")).expect("scope")
    }

    #[test]
    fn a_lock_covers_its_scope_and_everything_below_and_the_most_restrictive_is_named() {
        let vm = scope("/resourceGroups/rg/providers/Slipway.Example/computeInstances/vm1");
        let locks = [lock(&format!("{SUB}/resourceGroups/rg"), LockLevel::CanNotDelete)];
        assert!(check(&locks, &vm, "vm1", Verb::Delete).is_err(), "inherited from the group");
        assert!(check(&locks, &vm, "vm1", Verb::Write).is_ok(), "CanNotDelete allows changes");
        assert!(check(&locks, &scope("/resourceGroups/rg2"), "rg2", Verb::Delete).is_ok(), "another group");
        assert!(check(&locks, &scope("/resourceGroups/rg-x"), "rg-x", Verb::Delete).is_ok(), "segment-wise");

        let both = [lock(&format!("{SUB}/resourceGroups/rg"), LockLevel::CanNotDelete), lock(SUB, LockLevel::ReadOnly)];
        let refused = check(&both, &vm, "vm1", Verb::Write).expect_err("ReadOnly at the subscription");
        assert_eq!(refused.lock.level, LockLevel::ReadOnly);
        assert_eq!(check(&both, &vm, "vm1", Verb::Delete).expect_err("locked").lock.level, LockLevel::ReadOnly);
        assert!(check(&both, &vm, "vm1", Verb::ReadOnlyAction).is_ok(), "a read-only action passes ReadOnly");
    }

    #[test]
    fn a_cascade_is_refused_for_a_lock_anywhere_below() {
        let group = scope("/resourceGroups/rg");
        let below = [lock(
            &format!("{SUB}/resourceGroups/rg/providers/Slipway.Example/virtualNetworks/v"),
            LockLevel::CanNotDelete,
        )];
        assert!(check(&below, &group, "rg", Verb::Delete).is_ok(), "the group itself is not locked");
        assert!(check_cascade(&below, &group, "rg").is_err(), "but deleting it deletes a locked resource");
        assert!(check_cascade(&below, &scope("/resourceGroups/other"), "other").is_ok());
    }

    #[test]
    fn levels_parse_without_regard_to_case() {
        assert_eq!(LockLevel::parse("readonly"), Some(LockLevel::ReadOnly));
        assert_eq!(LockLevel::parse("CanNotDelete"), Some(LockLevel::CanNotDelete));
        assert_eq!(LockLevel::parse("NotSpecified"), None);
    }
}
