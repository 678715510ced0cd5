#!/usr/bin/env bash
# Creates ./.venv (or $SLIPWAY_VENV) with what running Slipway needs: ansible-core and
# ansible-runner (scripts/requirements.txt). With --test, also what only the tests need: the
# Azure LRO client, the OpenAPI validator and fuzzer (scripts/requirements-test.txt), and the
# awx.awx collection (the conformance client of crates/aap-sim) in .venv/collections.
# Idempotent: each list is installed again only when its file changes (a stamp in the venv
# holds the installed copy); the collection is fetched only when it is missing. Reruns are
# instant. Test binaries run this concurrently: one installs, the others wait on a lock.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="${SLIPWAY_VENV:-$root/.venv}"
test_tools=false
case "${1:-}" in
  "") ;;
  --test) test_tools=true ;;
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac

# Installs requirements file $1 when the venv's copy of it (stamp $2) differs.
install_once() {
  local req="$1" stamp="$venv/$2"
  cmp -s "$req" "$stamp" 2>/dev/null && return 0
  exec 8>"$venv/.slipway-pip.lock"
  flock 8
  if ! cmp -s "$req" "$stamp" 2>/dev/null; then
    echo "setup-python: installing $(basename "$req") into $venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$stamp"
  fi
  exec 8>&-
}

if [ ! -x "$venv/bin/python" ]; then
  python=${PYTHON:-python3}
  if ! command -v "$python" >/dev/null 2>&1; then
    echo "setup-python: $python not found; install python3 (Debian: apt-get install -y python3 python3-venv)" >&2
    exit 1
  fi
  mkdir -p "$venv"
  exec 7>"$venv/.slipway-venv.lock"
  flock 7
  if [ ! -x "$venv/bin/python" ]; then
    echo "setup-python: creating $venv" >&2
    "$python" -m venv "$venv"
  fi
  exec 7>&-
fi
install_once "$root/scripts/requirements.txt" .slipway-requirements
if ! "$test_tools"; then exit 0; fi
install_once "$root/scripts/requirements-test.txt" .slipway-test-requirements

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
