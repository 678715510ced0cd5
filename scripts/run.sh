#!/usr/bin/env bash
# Sets up what running Slipway needs (the Python venv with ansible-core and ansible-runner,
# nothing the tests alone need) and runs it with the embedded default configuration: SQLite
# in the data directory (~/.local/share/slipway unless --data-dir or server.data_dir says
# otherwise), the local Ansible provider and the example resource types, on 127.0.0.1:8080.
# Extra arguments go to `slipway serve` (e.g. --config slipway.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-python.sh
# The venv's runner is found from any configuration, wherever it lies.
export PATH="${SLIPWAY_VENV:-$PWD/.venv}/bin:$PATH"
exec cargo run --release -p slipway -- serve "$@"
