#!/usr/bin/env bash
# Creates ./.venv with ansible-core, ansible-runner and the Azure LRO client, once.
# Idempotent: reinstalls only when scripts/requirements.txt changes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="${SLIPWAY_VENV:-$root/.venv}"
req="$root/scripts/requirements.txt"
stamp="$venv/.slipway-requirements"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
  exit 0
fi
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
  echo "setup-python: $python not found; install python3 (Debian: apt-get install -y python3 python3-venv)" >&2
  exit 1
fi
echo "setup-python: creating $venv" >&2
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
cp "$req" "$stamp"
