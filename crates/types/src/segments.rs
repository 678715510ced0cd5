//! The path segments Slipway serves under every resource id (`{id}/jobs`, `POST {id}/retry`
//! …): no action or child type may take one of these names, so the configuration refuses
//! them and the API and the console build their paths from the same words.

/// A resource's job history: `GET {id}/jobs`.
pub const JOBS_SEGMENT: &str = "jobs";
/// The last segment of every event feed's path: `GET {scope}/events`.
pub const EVENTS_SEGMENT: &str = "events";
/// `POST {id}/retry`: run a failed resource's spec again.
pub const RETRY_SEGMENT: &str = "retry";
/// `POST {id}/whatIf`: what a change would do.
pub const WHAT_IF_SEGMENT: &str = "whatIf";
/// `POST {id}/checkDrift`: check the resource for drift now.
pub const CHECK_DRIFT_SEGMENT: &str = "checkDrift";
