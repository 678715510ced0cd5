# Sourced by scripts/test.sh: makes sure a PostgreSQL server is there for the store
# conformance suite and exports SLIPWAY_TEST_POSTGRES_URL. Uses the machine's server when
# it answers; otherwise starts a throwaway cluster (initdb/pg_ctl as user postgres) that is
# stopped and removed when the test run exits.

pg_url=${SLIPWAY_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}

pg_answers() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -d "$1" -t 3
  elif command -v psql >/dev/null 2>&1; then
    psql "$1" -qAtc 'select 1' >/dev/null 2>&1
  else
    return 1
  fi
}

if pg_answers "$pg_url"; then
  export SLIPWAY_TEST_POSTGRES_URL="$pg_url"
else
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ]; then
    echo "test: no PostgreSQL answers at $pg_url and initdb is not installed." >&2
    echo "test: install it (apt-get install -y postgresql) or point SLIPWAY_TEST_POSTGRES_URL at a server." >&2
    exit 1
  fi
  if ! id postgres >/dev/null 2>&1; then
    echo "test: no PostgreSQL answers at $pg_url and there is no 'postgres' user to run a throwaway cluster as." >&2
    exit 1
  fi
  pg_port=${SLIPWAY_TEST_POSTGRES_PORT:-55432}
  pg_dir=$(mktemp -d /tmp/slipway-pg.XXXXXX)
  chown postgres "$pg_dir"
  echo "test: starting a throwaway PostgreSQL on 127.0.0.1:$pg_port in $pg_dir" >&2
  if ! su postgres -s /bin/sh -c "'$pg_bin/initdb' -D '$pg_dir/data' -A trust -U postgres >'$pg_dir/initdb.log' 2>&1 \
      && '$pg_bin/pg_ctl' -D '$pg_dir/data' -l '$pg_dir/pg.log' -w \
         -o \"-p $pg_port -k '$pg_dir' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300\" start >/dev/null \
      && '$pg_bin/createdb' -h 127.0.0.1 -p $pg_port -U postgres test"; then
    echo "test: the throwaway PostgreSQL did not start; see $pg_dir/initdb.log and $pg_dir/pg.log" >&2
    exit 1
  fi
  trap "su postgres -s /bin/sh -c \"'$pg_bin/pg_ctl' -D '$pg_dir/data' -m fast -w stop\" >/dev/null 2>&1; rm -rf '$pg_dir'" EXIT
  export SLIPWAY_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$pg_port/test"
fi
