#!/usr/bin/env bash
# Writes the upgrade fixtures of one released schema version: what that version's binary
# wrote through its own API and engine — a SQLite database and a PostgreSQL schema dump —
# for crates/slipway/tests/upgrade.rs to open with the current binary
# (docs/operations.md#upgrades).
#
# Usage: scripts/upgrade-fixture.sh VERSION BINARY CONFIG
#   VERSION  the schema version the binary writes (its number of migrations)
#   BINARY   that version's `slipway`, built from its commit
#   CONFIG   that commit's example configuration, where its relative paths resolve (up to
#            schema version 2 they were relative to the checkout's root: copy
#            examples/slipway.toml there)
# PostgreSQL: $SLIPWAY_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test).
#
# The data, the same for every version: virtual networks a (created), b (created, then
# updated), c (created, then deleted) and f (its create failed), and one API token where the
# version has them.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$1 bin=$(realpath "$2") config=$(realpath "$3")
out=crates/slipway/tests/fixtures/upgrade
pg=${SLIPWAY_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}
venv=$(realpath .venv)
mkdir -p "$out"
work=$(mktemp -d /tmp/slipway-fixture.XXXXXX)
server=
trap '[ -z "$server" ] || kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
api=2025-06-01
rid() { echo "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/rg1/providers/Slipway.Example/virtualNetworks/$1"; }

# One run of the old binary against a store, writing the data above.
write_data() {
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  export SLIPWAY_SERVER__LISTEN=127.0.0.1:$port SLIPWAY_PROVIDERS__0__WORK_DIR=$work/jobs
  export SLIPWAY_PROVIDERS__0__RUNNER=$venv/bin/ansible-runner SLIPWAY_PROVIDERS__0__PYTHON=$venv/bin/python
  export SLIPWAY_LOG=warn
  (cd "$work" && exec "$bin" serve --config "$config") >"$work/server.log" 2>&1 &
  server=$!
  local base=http://127.0.0.1:$port
  for _ in $(seq 200); do curl -sf "$base$(rid a)?api-version=$api" -o /dev/null -w '' 2>/dev/null && break
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$base$(rid a)?api-version=$api")" = 404 ] && break; sleep 0.1; done
  kill -0 "$server" 2>/dev/null || { echo "upgrade-fixture: the server exited:" >&2; cat "$work/server.log" >&2; exit 1; }
  put() { curl -sf -X PUT -H 'content-type: application/json' -d "$2" "$base$(rid "$1")?api-version=$api" >/dev/null; }
  state() { curl -s "$base$(rid "$1")?api-version=$api" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("properties",{}).get("provisioningState",""))' 2>/dev/null || true; }
  settle() { for _ in $(seq 600); do case "$(state "$1")" in Succeeded|Failed|Canceled) return;; esac; sleep 0.2; done
    echo "upgrade-fixture: $1 never settled" >&2; cat "$work/server.log" >&2; exit 1; }
  put a '{"location":"local","properties":{"addressSpace":"10.1.0.0/16"}}'
  put b '{"location":"local","properties":{"addressSpace":"10.2.0.0/16"}}'
  put c '{"location":"local","properties":{"addressSpace":"10.3.0.0/16"}}'
  put f '{"location":"local","properties":{"addressSpace":"10.4.0.0/16","simulateFailure":true}}'
  for r in a b c f; do settle $r; done
  put b '{"location":"local","tags":{"tier":"gold"},"properties":{"addressSpace":"10.2.0.0/16","dnsServers":["10.2.0.4"]}}'
  settle b
  curl -sf -X DELETE "$base$(rid c)?api-version=$api" >/dev/null
  for _ in $(seq 600); do [ "$(curl -s -o /dev/null -w '%{http_code}' "$base$(rid c)?api-version=$api")" = 404 ] && break; sleep 0.2; done
  kill -TERM "$server"; wait "$server" || true
  server=
  # Stopped first: the SQLite store admits one process at a time.
  (cd "$work" && "$bin" api-token create --config "$config" --principal fixture >/dev/null 2>&1) || true
}

# SQLite.
export SLIPWAY_STORE__URL=sqlite:$work/slipway.db
write_data
rm -f "$out/sqlite-v$version.db"
python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('VACUUM INTO ?', (sys.argv[2],))" \
  "$work/slipway.db" "$out/sqlite-v$version.db"

# PostgreSQL: a schema of its own, dumped with its name replaced by a placeholder.
schema=fixture_v${version}_$$
export SLIPWAY_STORE__URL=$pg SLIPWAY_STORE__SCHEMA=$schema
write_data
pg_dump --schema="$schema" --no-owner --no-privileges --inserts "$pg" |
  sed -e "s/\b$schema\b/__schema__/g" -e '/^SET transaction_timeout/d' -e '/^\\\(un\)\?restrict /d' \
    >"$out/postgres-v$version.sql"
PGOPTIONS=--client-min-messages=warning psql -q "$pg" -c "DROP SCHEMA $schema CASCADE"
echo "upgrade-fixture: wrote $out/sqlite-v$version.db and $out/postgres-v$version.sql"
