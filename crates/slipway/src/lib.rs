//! The `slipway` binary's library half: configuration, the wiring plan built from it, and
//! running that plan, so integration tests can start a whole Slipway in-process on an
//! ephemeral port.
//!
//! Modules: `config` (the file and its overrides), `plan` (every option, checked), `app`
//! (running a plan), `activity_sink` (the activity log's export), `check` (`check-config`),
//! `backup` and `restore`. Imports go one way:
//! `app` and `check` → `plan` → `config`.

pub mod activity_sink;
pub mod app;
pub mod backup;
pub mod check;
pub mod config;
pub mod plan;
pub mod restore;
