#!/usr/bin/env bash
# Runs every test: formatting and lints, then the whole workspace test suite (domain tables,
# store conformance on SQLite, real ansible-playbook runs, black-box HTTP tests, the Azure
# SDK poller, crash tests). Installs what it needs idempotently (the Python venv with the
# test tools: scripts/setup-python.sh --test), and uses the machine's PostgreSQL or starts a
# throwaway one (scripts/postgres-for-tests.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-python.sh --test
# The CLI's terminal test runs it in a tmux pane; the systemd unit is checked by systemd-analyze.
missing=()
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
if ((${#missing[@]})); then
  echo "test: installing ${missing[*]} (Debian packages)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
. scripts/postgres-for-tests.sh
# A fresh clone builds once: incremental caches would only take disk (CI's is limited).
if [[ -n "${CI:-}" ]]; then export CARGO_INCREMENTAL=0; fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# A few tests at a time per binary: the suite runs real playbooks on a 2-core machine.
cargo test --workspace -- --test-threads "${SLIPWAY_TEST_THREADS:-4}"
