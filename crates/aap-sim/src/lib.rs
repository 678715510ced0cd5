//! `aap-sim`: a simulator of the AWX / Ansible Automation Platform controller REST API v2
//! subset Slipway's AAP provider uses, faithful to AWX 24.6.1's shapes and status codes (what
//! the provider relies on: `docs/providers.md`) and checked against the real `awx.awx`
//! collection (`tests/awx_collection.rs`).
//!
//! What it serves, under `{api_prefix}` (`/api/` or `/api/controller/`):
//!
//! * discovery `GET {prefix}`, `v2/`, `v2/ping/`, `v2/me/`; `v2/tokens/` (POST, `{id}/` DELETE),
//!   which awx.awx uses with basic auth; `v2/organizations/`;
//! * `v2/job_templates/` and `v2/workflow_job_templates/`: list (filters, ordering, pagination),
//!   detail (by id or named URL `name++org`), `launch/` (GET and POST), and their jobs;
//! * `v2/jobs/`, `v2/workflow_jobs/`, `v2/unified_jobs/`: list and detail, `cancel/` (GET, POST),
//!   `jobs/{id}/job_events/`.
//!
//! Jobs go `pending → waiting → running → <outcome>` on a ticker (`tick_ms`), with timings and
//! outcome from the template, overridable per launch by extra vars: `aap_sim_outcome`,
//! `aap_sim_duration_seconds`, `aap_sim_pending_seconds`, or Slipway's envelope
//! `slipway.resource.properties.simulateFailure` / `.delaySeconds`.
//!
//! Check mode: a job template's `job_type` (`run`/`check`) and `diff_mode`, set per launch
//! only when the template prompts for them (`ask_job_type_on_launch`,
//! `ask_diff_mode_on_launch`; else ignored and listed in `ignored_fields`, as AWX does). The
//! playbooks of create and delete templates keep resource state, per `slipway.resource.id`
//! ([`ResourceEffect`]): a job that runs to success reports its record task (`runner_on_ok`,
//! `changed`, the diff in diff mode) and, in `run` mode only, applies it.
//!
//! Faults (`Faults`): latency, `429` with `Retry-After` (every Nth request, or to everything in
//! periodic bursts), `503`s (optionally with `Retry-After`), dropped connections, launches whose
//! response is lost. Clients are told apart by `User-Agent`; a request that arrives before the
//! time a `Retry-After` told its client to wait for is recorded as a [`Violation`].
//!
//! Test hooks: [`SimHandle`] in process, and the same over HTTP for the binary under `/_sim/`
//! (`GET requests`, `POST requests/reset`, `GET clients`, `GET injected`, `GET violations`,
//! `GET jobs`, `GET jobs/{id}`, `DELETE jobs/{id}`, `PUT jobs/{id}/status` `{"status": …}`,
//! `GET|PUT faults`, `GET resources`, `GET|PUT|DELETE resources/{resource id}`).
//!
//! Modules: `server` (the HTTP server, the ticker, the handle), `api` (routing, faults,
//! authentication, the handlers), `shared`, `state` (the data), `lifecycle` (the job state
//! machine), `events`, `resources`, `views` (AWX's JSON), `query` (AWX's list filters),
//! `throttle`, `webhook`, `config`, `awx`, `util`. Imports go one way: `server` → `api` →
//! `shared`, `views` → `state` → `lifecycle`, `throttle` → `config` → `awx`. Test and
//! benchmark infrastructure: never linked into `slipway`.

mod api;
mod awx;
mod config;
mod events;
mod lifecycle;
mod query;
mod resources;
mod server;
mod shared;
mod state;
mod throttle;
mod util;
mod views;
mod webhook;

pub use config::{
    ConfigError, Faults, RateLimitBurst, ResourceEffect, SimConfig, SimOrganization, SimTemplate, SimUser, SimWebhook,
};
pub use lifecycle::SimJob;
pub use resources::{STATE_DIR, state_text};
pub use server::{JobTimes, Sim, SimHandle};
pub use throttle::{FaultCounts, Violation};
