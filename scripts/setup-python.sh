#!/usr/bin/env bash
# Creates ./.venv with ansible-core, ansible-runner and the Azure LRO client, once, adds the
# OpenAPI validator and fuzzer (openapi-spec-validator, schemathesis), and puts the awx.awx
# collection (the conformance client of crates/aap-sim) into .venv/collections.
# Idempotent: reinstalls only when scripts/requirements.txt changes; fetches the collection only
# when it is missing. Reruns are instant.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="${SLIPWAY_VENV:-$root/.venv}"
req="$root/scripts/requirements.txt"
stamp="$venv/.slipway-requirements"
if ! { [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; }; then
  python=${PYTHON:-python3}
  if ! command -v "$python" >/dev/null 2>&1; then
    echo "setup-python: $python not found; install python3 (Debian: apt-get install -y python3 python3-venv)" >&2
    exit 1
  fi
  echo "setup-python: creating $venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$stamp"
fi

# The OpenAPI validator and the API fuzzer that crates/slipway/tests/openapi.rs runs against
# Slipway's own /openapi.json. Pinned; installed again only when this list changes.
contract_tools="openapi-spec-validator==0.9.0 schemathesis==4.32.5"
contract_stamp="$venv/.slipway-contract-tools"
if [ "$(cat "$contract_stamp" 2>/dev/null)" != "$contract_tools" ]; then
  # Test binaries run this script concurrently; one of them installs, the others wait for it.
  exec 8>"$venv/.slipway-contract-tools.lock"
  flock 8
  if [ "$(cat "$contract_stamp" 2>/dev/null)" != "$contract_tools" ]; then
    echo "setup-python: installing $contract_tools" >&2
    # shellcheck disable=SC2086 # one argument per requirement
    "$venv/bin/pip" install --quiet --disable-pip-version-check $contract_tools
    echo "$contract_tools" >"$contract_stamp"
  fi
  exec 8>&-
fi

# awx.awx 24.6.1 is not installed from Galaxy (unreachable here) but taken from the PyPI `ansible`
# bundle, which ships it: download the wheel once (about 54 MB, kept in .venv/cache, which is
# git-ignored with the venv) and extract only ansible_collections/awx/awx (1.3 MB). Tests point
# ANSIBLE_COLLECTIONS_PATH at .venv/collections.
ansible_bundle=12.3.0
collections="$venv/collections"
awx_stamp="$collections/.slipway-awx-from-ansible-$ansible_bundle"
awx_manifest="$collections/ansible_collections/awx/awx/MANIFEST.json"
if [ ! -f "$awx_stamp" ] || [ ! -f "$awx_manifest" ]; then
  mkdir -p "$collections" "$venv/cache"
  # Test binaries run this script concurrently; one of them installs, the others wait for it.
  exec 9>"$venv/.slipway-collections.lock"
  flock 9
  if [ ! -f "$awx_stamp" ] || [ ! -f "$awx_manifest" ]; then
    wheel=$(ls "$venv/cache/ansible-$ansible_bundle-"*.whl 2>/dev/null | head -n 1 || true)
    if [ -z "$wheel" ]; then
      echo "setup-python: downloading ansible==$ansible_bundle (for the awx.awx collection)" >&2
      "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps "ansible==$ansible_bundle" \
        -d "$venv/cache"
      wheel=$(ls "$venv/cache/ansible-$ansible_bundle-"*.whl | head -n 1)
    fi
    "$venv/bin/python" - "$wheel" "$collections" <<'EOF'
import json, os, shutil, sys, tempfile, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
prefix = "ansible_collections/awx/awx/"
target = os.path.join(dest, prefix)
# Extract next to the target and rename, so a half-extracted tree is never visible.
tmp = tempfile.mkdtemp(dir=dest)
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.startswith(prefix)]
    if not members:
        sys.exit(f"setup-python: {wheel} has no {prefix}")
    # crates/aap-sim is checked against this exact collection version.
    version = json.loads(z.read(prefix + "MANIFEST.json"))["collection_info"]["version"]
    if version != "24.6.1":
        sys.exit(f"setup-python: {wheel} ships awx.awx {version}, expected 24.6.1")
    z.extractall(tmp, members)
shutil.rmtree(target, ignore_errors=True)
os.makedirs(os.path.dirname(target.rstrip("/")), exist_ok=True)
os.replace(os.path.join(tmp, prefix), target)
shutil.rmtree(tmp)
EOF
    touch "$awx_stamp"
  fi
  exec 9>&-
fi
