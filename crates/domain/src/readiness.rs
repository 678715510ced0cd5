//! Whether a provider can take work, as its last check answered: the engine asks, `/readyz`
//! and the metrics show it.

/// The last answer of a provider's readiness check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Not asked yet (the first check is under way).
    Unknown,
    Ready,
    /// Why not (the provider's words: for the server's log, not for clients).
    NotReady(String),
}
