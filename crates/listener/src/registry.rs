//! The connection table behind the cap: one slot per admitted connection, each an atomic
//! word saying what the connection is doing and since when, so the accept loop can find the
//! longest-idle connection by scanning a flat array (no per-connection lock, no pointer
//! chasing) and evict it to make room.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio::time::Instant;

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for a request: the first one on a fresh connection, or the next one.
    Idle = 1,
    /// Reading a request head: at least one byte of it arrived, the head is not complete.
    Head = 2,
    /// A request is in flight: its body is being read, handled, or its response written.
    Busy = 3,
}

// Word layout: bits 0-1 the phase (0 = free slot), bit 2 "evicted", bits 3.. microseconds
// since the registry's start at which the phase began.
const PHASE_MASK: u64 = 0b11;
const EVICTED: u64 = 0b100;
const SINCE_SHIFT: u32 = 3;

fn encode(phase: Phase, since_us: u64) -> u64 {
    (since_us << SINCE_SHIFT) | phase as u64
}

fn phase_of(word: u64) -> Option<Phase> {
    match word & PHASE_MASK {
        1 => Some(Phase::Idle),
        2 => Some(Phase::Head),
        3 => Some(Phase::Busy),
        _ => None,
    }
}

/// The connection to close to admit a new one: of those not in the middle of a request
/// (idle, or still reading a head) and not already being closed, the one whose current
/// phase began first (lowest slot on a tie). `None` if every connection is busy.
pub(super) fn victim(words: impl Iterator<Item = u64>) -> Option<(usize, u64)> {
    words
        .enumerate()
        .filter(|(_, w)| w & EVICTED == 0 && matches!(phase_of(*w), Some(Phase::Idle | Phase::Head)))
        .min_by_key(|(i, w)| (w >> SINCE_SHIFT, *i))
}

/// A decoded slot word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Snapshot {
    pub phase: Phase,
    pub since: Instant,
    pub evicted: bool,
    word: u64,
}

pub(super) struct Registry {
    base: Instant,
    words: Box<[AtomicU64]>,
    table: Mutex<Table>,
    /// Signalled whenever a slot is released.
    freed: Notify,
}

struct Table {
    /// Released slots, reused first.
    free: Vec<usize>,
    /// Per slot, the wake-up of the connection holding it (`None` = free).
    wakers: Vec<Option<Arc<Notify>>>,
}

impl Registry {
    pub fn new(cap: usize) -> Arc<Registry> {
        let cap = cap.max(1);
        Arc::new(Registry {
            base: Instant::now(),
            words: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            table: Mutex::new(Table { free: Vec::new(), wakers: Vec::new() }),
            freed: Notify::new(),
        })
    }

    pub fn cap(&self) -> usize {
        self.words.len()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    // Microseconds, not milliseconds: connections accepted in one burst must still be told
    // apart by age (a tie falls to the lowest slot, which after reuse need not be the oldest).
    fn now_us(&self) -> u64 {
        Instant::now().saturating_duration_since(self.base).as_micros() as u64
    }

    /// Connections admitted and not yet released.
    pub fn active(&self) -> usize {
        let t = self.table();
        t.wakers.len() - t.free.len()
    }

    /// A slot for a new connection, in `phase` from now, or `None` at the cap. The phase is
    /// set here, in the accept loop, rather than when the connection's task first runs: tasks
    /// start in any order, and eviction must see connections aged by when they were admitted.
    pub fn register(self: &Arc<Self>, phase: Phase) -> Option<Lease> {
        let mut t = self.table();
        let index = match t.free.pop() {
            Some(i) => i,
            None if t.wakers.len() < self.cap() => {
                t.wakers.push(None);
                t.wakers.len() - 1
            }
            None => return None,
        };
        let wake = Arc::new(Notify::new());
        t.wakers[index] = Some(wake.clone());
        self.words[index].store(encode(phase, self.now_us()), Ordering::Release);
        Some(Lease { registry: self.clone(), index, wake })
    }

    /// Marks the longest-idle connection for closing and wakes it. `false` if every
    /// connection is busy.
    pub fn evict_one(&self) -> bool {
        for _ in 0..16 {
            let Some((index, word)) = victim(self.words.iter().map(|w| w.load(Ordering::Acquire))) else {
                return false;
            };
            // The word still says what the scan saw: the connection did not start a request
            // (or go away) in between.
            if self.words[index].compare_exchange(word, word | EVICTED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                if let Some(wake) = self.table().wakers[index].clone() {
                    wake.notify_one();
                }
                return true;
            }
        }
        false
    }

    /// Resolves after some slot was released (possibly one released earlier).
    pub fn freed(&self) -> Notified<'_> {
        self.freed.notified()
    }

    fn release(&self, index: usize) {
        self.words[index].store(0, Ordering::Release);
        {
            let mut t = self.table();
            t.wakers[index] = None;
            t.free.push(index);
        }
        self.freed.notify_one();
    }
}

/// One connection's slot; released on drop.
pub(super) struct Lease {
    registry: Arc<Registry>,
    index: usize,
    wake: Arc<Notify>,
}

impl Lease {
    fn word(&self) -> &AtomicU64 {
        &self.registry.words[self.index]
    }

    pub fn snapshot(&self) -> Snapshot {
        let word = self.word().load(Ordering::Acquire);
        let since = self.registry.base + Duration::from_micros(word >> SINCE_SHIFT);
        Snapshot { phase: phase_of(word).unwrap_or(Phase::Busy), since, evicted: word & EVICTED != 0, word }
    }

    /// Whether nothing changed since `s` was taken.
    pub fn unchanged(&self, s: &Snapshot) -> bool {
        self.word().load(Ordering::Acquire) == s.word
    }

    /// Enters `phase` from now (keeping an eviction mark) if the current phase is one of
    /// `from`; wakes the watchdog when it changed.
    pub fn enter(&self, phase: Phase, from: &[Phase]) {
        let now = self.registry.now_us();
        let changed = self.word().fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
            phase_of(w).filter(|p| from.contains(p)).map(|_| encode(phase, now) | (w & EVICTED))
        });
        if changed.is_ok() {
            self.wake.notify_one();
        }
    }

    /// Resolves after the phase changed or the connection was marked for eviction
    /// (possibly before this call).
    pub fn changed(&self) -> Notified<'_> {
        self.wake.notified()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.registry.release(self.index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_victim_is_the_longest_idle_connection_not_in_a_request() {
        let words = [
            encode(Phase::Busy, 1),            // in a request: never chosen
            encode(Phase::Idle, 50),           // idle since 50
            encode(Phase::Head, 20),           // reading a head since 20: the oldest
            0,                                 // free slot
            encode(Phase::Idle, 10) | EVICTED, // already being closed
            encode(Phase::Idle, 20),           // same age as slot 2: the lower slot wins
        ];
        assert_eq!(victim(words.into_iter()).map(|(i, _)| i), Some(2));
        let busy = [encode(Phase::Busy, 1), 0, encode(Phase::Idle, 1) | EVICTED];
        assert_eq!(victim(busy.into_iter()), None, "every connection busy: refuse");
    }

    #[tokio::test(start_paused = true)]
    async fn registry_caps_evicts_and_reuses_slots() {
        let reg = Registry::new(2);
        let a = reg.register(Phase::Idle).unwrap();
        tokio::time::advance(Duration::from_millis(10)).await;
        let b = reg.register(Phase::Idle).unwrap();
        assert!(reg.register(Phase::Idle).is_none(), "at the cap");
        assert_eq!(reg.active(), 2);

        // `a` is older, but busy; `b` goes.
        a.enter(Phase::Busy, &[Phase::Idle, Phase::Head]);
        assert!(reg.evict_one());
        assert!(b.snapshot().evicted);
        assert!(!a.snapshot().evicted);
        assert!(!reg.evict_one(), "`a` busy, `b` already being closed");
        // A phase change keeps the eviction mark.
        b.enter(Phase::Head, &[Phase::Idle]);
        assert!(b.snapshot().evicted);
        assert_eq!(b.snapshot().phase, Phase::Head);

        drop(b);
        reg.freed().await; // the release signalled
        let c = reg.register(Phase::Idle).expect("the released slot");
        assert!(!c.snapshot().evicted);
        assert_eq!(c.snapshot().phase, Phase::Idle);
        assert_eq!(reg.active(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn connections_are_aged_from_their_admission_in_their_first_phase() {
        let reg = Registry::new(2);
        let gone = reg.register(Phase::Idle).unwrap();
        let older = reg.register(Phase::Head).unwrap();
        drop(gone);
        tokio::time::advance(Duration::from_micros(300)).await;
        let newer = reg.register(Phase::Head).expect("the released, lower slot");
        assert_eq!(older.snapshot().phase, Phase::Head, "a TLS handshake starts as a head");
        // Admitted 0.3 ms apart, in a burst: still told apart, and the older one goes first
        // although the newer holds the lower slot.
        assert!(reg.evict_one());
        assert!(older.snapshot().evicted && !newer.snapshot().evicted);
    }

    #[tokio::test(start_paused = true)]
    async fn phase_changes_record_their_start_and_wake_the_watchdog() {
        let reg = Registry::new(1);
        let l = reg.register(Phase::Idle).unwrap();
        tokio::time::advance(Duration::from_millis(1500)).await;
        l.enter(Phase::Head, &[Phase::Idle]);
        let s = l.snapshot();
        assert_eq!(s.phase, Phase::Head);
        assert_eq!(s.since.duration_since(reg.base), Duration::from_millis(1500));
        l.changed().await; // the permit left by `enter`
        l.enter(Phase::Head, &[Phase::Idle]); // not idle: no change
        assert!(l.unchanged(&s));
    }
}
