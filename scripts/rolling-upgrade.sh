#!/usr/bin/env bash
# A rolling upgrade on PostgreSQL, checked: a replica of the previous version serves a fresh
# schema, a replica of this version starts beside it (and migrates the schema under it), both
# take creates and updates and read each other's resources, then the old one stops and the
# new one carries on. Both use the AWX-API simulator. Exits non-zero on the first thing that
# goes wrong, printing the replicas' logs. (docs/operations.md#upgrades)
#
# Usage: scripts/rolling-upgrade.sh PREVIOUS_BINARY | --previous
#   PREVIOUS_BINARY  `slipway` built from the previous release's commit
#   --previous       build it: the commit on the next-to-last line of
#     crates/slipway/tests/fixtures/upgrade/releases.txt, exported under target/previous/ and
#     built into this tree's target directory (its registry dependencies are shared, its own
#     crates are not), once; the test command runs this.
# PostgreSQL: $SLIPWAY_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test).
set -euo pipefail
cd "$(dirname "$0")/.."
previous_release() {
  local commit out src
  commit=$(grep -v '^#' crates/slipway/tests/fixtures/upgrade/releases.txt | tail -n 2 | head -n 1 | cut -d' ' -f2)
  out=target/previous/slipway-${commit:0:12}
  if [ ! -x "$out" ]; then
    git cat-file -e "$commit^{commit}" 2>/dev/null \
      || { echo "rolling-upgrade: commit $commit is not in this clone (a shallow one? git fetch --unshallow)" >&2; exit 1; }
    src=target/previous/src-${commit:0:12}
    rm -rf "$src" && mkdir -p "$src"
    git archive "$commit" | tar -x -C "$src"
    # Built into this tree's target directory, whose uplifted target/debug/slipway it replaces
    # until the build below links this tree's again. Cargo names a workspace crate's artifacts
    # by its path within the workspace and its version, the same in both trees: the export's
    # version is marked so that its crates get artifacts of their own (and dependencies from
    # the registry are shared), instead of being taken for this tree's by file times.
    sed -i '0,/^version = /s/^version = "\([^"]*\)"/version = "\1-previous"/' "$src/Cargo.toml"
    (cd "$src" && CARGO_TARGET_DIR="$OLDPWD/target" cargo build -q -p slipway --bin slipway)
    cp target/debug/slipway "$out"
    rm -rf "$src"
  fi
  echo "$out"
}
case ${1:-} in
  --previous) old=$(previous_release) ;;
  "") echo "usage: scripts/rolling-upgrade.sh PREVIOUS_BINARY | --previous" >&2; exit 2 ;;
  *) old=$1 ;;
esac
old=$(realpath "$old")
cargo build -q -p slipway --bin slipway -p slipway-aap-sim --bin aap-sim
new=$(realpath target/debug/slipway) sim_bin=$(realpath target/debug/aap-sim)
! cmp -s "$old" "$new" || { echo "rolling-upgrade: $old is this tree's own binary" >&2; exit 1; }
pg=${SLIPWAY_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}
schema=rolling_$$ work=$(mktemp -d /tmp/slipway-rolling.XXXXXX)
pids=()
finish() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  PGOPTIONS=--client-min-messages=warning psql -q "$pg" -c "DROP SCHEMA IF EXISTS $schema CASCADE" || true
  rm -rf "$work"
}
trap finish EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
fail() {
  echo "rolling-upgrade: $*" >&2
  for f in "$work"/*.log; do echo "== $f" >&2; tail -n 30 "$f" >&2; done
  exit 1
}
sim_port=$(port)
"$sim_bin" --listen "127.0.0.1:$sim_port" >"$work/sim.log" 2>&1 &
pids+=($!)

# A replica's configuration: the keys both versions know.
replica() {
  cat >"$work/$1.toml" <<EOT
[server]
listen = "127.0.0.1:$2"
retry_after_seconds = 0
[store]
url = "$pg"
schema = "$schema"
[engine]
node_name = "$1"
lease_seconds = 5
[[providers]]
name = "aap"
type = "aap"
url = "http://127.0.0.1:$sim_port"
template_prefix = "slipway"
[[types]]
namespace = "Slipway.Example"
type = "virtualNetworks"
kind = "VirtualNetwork"
api_versions = ["2025-06-01"]
provider = "aap"
poll_interval_seconds = 0.5
EOT
}
start() { # name binary port
  replica "$1" "$3"
  SLIPWAY_LOG=info "$2" serve --config "$work/$1.toml" >"$work/$1.log" 2>&1 &
  pids+=($!)
  eval "$1=$!"
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$3/readyz" >/dev/null && return; sleep 0.1; done
  fail "$1 never became ready"
}
rid() { echo "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/rg1/providers/Slipway.Example/virtualNetworks/$1"; }
put() { # port name generation
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'content-type: application/json' \
    -d "{\"location\":\"local\",\"properties\":{\"generation\":$3}}" "http://127.0.0.1:$1$(rid "$2")?api-version=2025-06-01")
  case $code in 200|201) ;; *) fail "PUT $2 through :$1 answered $code";; esac
}
field() { # port name python-expression-on-d
  curl -s "http://127.0.0.1:$1$(rid "$2")?api-version=2025-06-01" | python3 -c "import json,sys; d=json.load(sys.stdin); print($3)"
}
settled() { # port name generation: Succeeded with that generation, read through that replica
  for _ in $(seq 300); do
    [ "$(field "$1" "$2" 'd["properties"]["provisioningState"], d["properties"]["generation"]')" = "Succeeded $3" ] && return
    sleep 0.1
  done
  fail "$2 not Succeeded at generation $3 through :$1: $(field "$1" "$2" 'd')"
}

a_port=$(port) b_port=$(port)
start old_replica "$old" "$a_port"
for r in r1 r2 r3; do put "$a_port" $r 1; done
for r in r1 r2 r3; do settled "$a_port" $r 1; done
start new_replica "$new" "$b_port"
grep -q "applied PostgreSQL migration" "$work/new_replica.log" && echo "rolling-upgrade: the new replica migrated the schema under the old one"
for r in r4 r5 r6; do put "$b_port" $r 1; done
put "$a_port" r7 1
put "$b_port" r1 2
put "$a_port" r2 2
for r in r3 r5 r6 r7; do settled "$a_port" $r 1; settled "$b_port" $r 1; done
for r in r1 r2; do settled "$a_port" $r 2; settled "$b_port" $r 2; done
settled "$a_port" r4 1
kill "$old_replica"; wait "$old_replica" || true
put "$b_port" r8 1
put "$b_port" r3 2
settled "$b_port" r8 1
settled "$b_port" r3 2
errors=$(grep -hE " ERROR " "$work/old_replica.log" "$work/new_replica.log" || true)
[ -z "$errors" ] || fail "errors logged: $errors"
# One AAP job per idempotency key: no launch was repeated across the two versions.
read -r jobs keys < <(curl -s "http://127.0.0.1:$sim_port/_sim/jobs" | python3 -c '
import json, sys
jobs = json.load(sys.stdin)
print(len(jobs), len({j["extra_vars"].get("slipway_idempotency_key") for j in jobs}))')
[ "$jobs" = "$keys" ] || fail "$jobs AAP jobs for $keys idempotency keys"
echo "rolling-upgrade: $(basename "$old") and this version side by side on schema $schema: 8 resources created and 3 updated through both, each read back through both, the old replica stopped, the new one carried on; $jobs AAP jobs, one per key; no errors logged"
