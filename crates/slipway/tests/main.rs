//! Slipway's integration tests, one module per area, in one test binary: each file used to be
//! a binary of its own linking every dependency, which made the test build slow and large.
//! `common` is what they share. Run one area with `cargo test -p slipway --test integration
//! <module>::`.
//!
//! Time: a server started in this process ([`common::TestServer`]) reads a `TestClock`,
//! which follows tokio's time, so a test whose outcome hangs on a long timer (retention,
//! token expiry, an operation's deadline) moves it with `slipway_test_support::jump` rather
//! than waiting. Tests that spawn the real binary, `ansible-runner` or PostgreSQL servers
//! cannot reach those processes' clocks: they wait on real time through `eventually`, whose
//! ceilings bound a hang and are not speed claims, and each says so where its timing matters.

mod common;

mod aap_e2e;
mod actions;
mod activity;
mod approvals;
mod arm_api;
mod arm_headers;
mod arm_poller;
mod check_config;
mod cli;
mod cli_oidc;
mod cli_tty;
mod composition;
mod connections;
mod console;
mod crash;
mod deploy;
mod deprovision;
mod drift;
mod etags;
mod events;
mod failover;
mod force;
mod groups;
mod identity;
mod install;
mod issuers;
mod job_history;
mod job_output;
mod locks;
mod logs;
mod metrics;
mod notifications;
mod openapi;
mod overview;
mod policies;
mod progress;
mod quotas;
mod replica_aap_faults;
mod replica_faults;
mod replica_late_launch;
mod replicas;
mod restore;
mod role_scopes;
mod secrets;
mod tenancy;
mod tenancy_guardrails;
mod tidy;
mod tls;
mod token_api;
mod upgrade;
mod what_if;
