# Postgres for the durable-run tests: a private cluster (initdb + pg_ctl in its own folder, run as
# the `postgres` user when we are root) listening on 127.0.0.1 only. Idempotent: a cluster that is
# already up is reused. Exports LOOPWARDEN_TEST_POSTGRES_URL (tests create a database each in it).
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pg_bin" ]; then
  echo "ci: postgres.sh: no /usr/lib/postgresql/*/bin (is the Debian package postgresql installed?)" >&2
  return 1
fi
pg_port=${LOOPWARDEN_TEST_POSTGRES_PORT:-54329}
pg_dir=${LOOPWARDEN_TEST_POSTGRES_DIR:-/tmp/loopwarden-ci-postgres}
pg_as() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if ! "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$pg_port"; then
  mkdir -p "$pg_dir"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$pg_dir"
  if [ ! -f "$pg_dir/data/PG_VERSION" ]; then
    pg_as "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust --no-sync > "$pg_dir/initdb.log"
  fi
  # -w waits (bounded by -t) until the server accepts connections: a readiness check, not a sleep.
  pg_as "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 120 \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $pg_dir -c max_connections=400 -c fsync=off" start
fi
export LOOPWARDEN_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:${pg_port}/postgres"
echo "ci: postgres on 127.0.0.1:${pg_port} (LOOPWARDEN_TEST_POSTGRES_URL)"
