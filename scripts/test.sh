#!/usr/bin/env bash
# Runs every test: formatting and lints, then the whole workspace test suite (domain tables,
# store conformance on SQLite, real ansible-playbook runs, black-box HTTP tests, the Azure
# SDK poller, crash tests, the CLI under a terminal, the console in headless Chromium).
# Installs what it needs idempotently (the Python venv with the test tools:
# scripts/setup-python.sh --test; Debian's chromium, chromium-driver, tmux and systemd:
# scripts/setup-test-packages.sh), and uses the machine's PostgreSQL or starts a throwaway
# one (scripts/postgres-for-tests.sh). Last, a rolling upgrade from the previous release
# (scripts/rolling-upgrade.sh --previous, which builds that release once).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-python.sh --test
scripts/setup-test-packages.sh
. scripts/postgres-for-tests.sh
# A fresh clone builds once: incremental caches would only take disk (CI's is limited).
if [[ -n "${CI:-}" ]]; then export CARGO_INCREMENTAL=0; fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# A few tests at a time per binary: the suite runs real playbooks on a 2-core machine.
cargo test --workspace -- --test-threads "${SLIPWAY_TEST_THREADS:-4}"
# Replicas of the previous release and of this tree side by side on one PostgreSQL schema.
scripts/rolling-upgrade.sh --previous
