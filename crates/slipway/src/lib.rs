//! The `slipway` binary's library half: configuration, the wiring plan built from it, and
//! running that plan, so integration tests can start a whole Slipway in-process on an
//! ephemeral port.

pub mod app;
pub mod backup;
pub mod check;
pub mod config;
pub mod plan;
pub mod restore;
