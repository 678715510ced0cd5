#!/usr/bin/env bash
# Sets up what Slipway needs (the Python venv with ansible-core and ansible-runner) and runs
# it with the embedded default configuration: SQLite in ./slipway.db, the local Ansible
# provider and the example resource types, on 127.0.0.1:8080. Extra arguments go to
# `slipway serve` (e.g. --config slipway.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-python.sh
exec cargo run --release -p slipway -- serve "$@"
