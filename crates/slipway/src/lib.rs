//! The `slipway` binary's library half: configuration and wiring, so integration tests can
//! start a whole Slipway in-process on an ephemeral port.

pub mod app;
pub mod check;
pub mod config;
