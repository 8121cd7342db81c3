#!/usr/bin/env bash
# A throwaway PostgreSQL 15 for the tests: Debian's postgresql-15 server
# binaries (installed with apt-get when missing), a cluster initialised in a
# temporary directory owned by the postgres user, listening only on a unix
# socket in that directory, with durability off (fsync, synchronous_commit,
# full_page_writes): it holds test data only.
#
# Sourced (scripts/test.sh does this):
#   . scripts/postgres.sh; pg_start; trap pg_stop EXIT
# pg_start exports PACER_TEST_POSTGRES, a URL of the server's "postgres"
# database as the superuser postgres (tests CREATE SCHEMA / DATABASE there).
# Run:
#   scripts/postgres.sh start   prints the export line and the directory
#   scripts/postgres.sh stop DIR
#
# PG_BINDIR overrides where the server binaries are looked for, PG_TEST_TMP
# where the temporary directory is made (default /tmp).

pg_bindir() {
  if [ -n "${PG_BINDIR:-}" ]; then echo "$PG_BINDIR"; return; fi
  # pg_config --bindir may come from libpq-dev (client only): not used.
  echo /usr/lib/postgresql/15/bin
}

# pg_install installs postgresql-15 when its server binaries are missing.
pg_install() {
  local bin; bin=$(pg_bindir)
  if [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] && [ -x "$bin/postgres" ]; then return 0; fi
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/postgres.sh: $bin/initdb is missing: install Debian's postgresql-15 (apt-get install postgresql-15)" >&2
    return 1
  fi
  echo "== installing postgresql-15 (for the PostgreSQL store tests)" >&2
  if [ -z "${apt_updated:-}" ]; then apt-get update -qq; apt_updated=1; fi
  # The package's own cluster is not needed: the tests start their own.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
  if command -v pg_ctlcluster >/dev/null 2>&1; then pg_ctlcluster 15 main stop >/dev/null 2>&1 || true; fi
}

# as_postgres runs a command as the postgres user (root: runuser; the
# postgres user itself: directly).
as_postgres() {
  if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}

# pg_start initialises and starts the server; sets PG_TEST_DIR and exports
# PACER_TEST_POSTGRES.
pg_start() {
  pg_install || return 1
  local bin; bin=$(pg_bindir)
  # Not under $TMPDIR: the postgres user must reach the directory, and the
  # socket's path must stay under the 107 bytes of a unix socket address.
  PG_TEST_DIR=$(mktemp -d "${PG_TEST_TMP:-/tmp}/pacer-pg.XXXXXX") || return 1
  chmod 755 "$PG_TEST_DIR"
  if [ "$(id -un)" != postgres ]; then chown postgres: "$PG_TEST_DIR"; fi
  as_postgres "$bin/initdb" -D "$PG_TEST_DIR/data" -U postgres -A trust -E UTF8 --no-sync >"$PG_TEST_DIR/initdb.log" 2>&1 || {
    cat "$PG_TEST_DIR/initdb.log" >&2; return 1; }
  cat >>"$PG_TEST_DIR/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$PG_TEST_DIR'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 300
EOF
  as_postgres "$bin/pg_ctl" -D "$PG_TEST_DIR/data" -l "$PG_TEST_DIR/server.log" -w -t 30 start >/dev/null || {
    cat "$PG_TEST_DIR/server.log" >&2; return 1; }
  export PACER_TEST_POSTGRES="postgres://postgres@localhost/postgres?host=$PG_TEST_DIR&sslmode=disable"
}

# pg_stop stops the server of directory $1 (default PG_TEST_DIR) and removes
# the directory.
pg_stop() {
  local dir=${1:-${PG_TEST_DIR:-}}
  [ -n "$dir" ] && [ -d "$dir" ] || return 0
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_postgres "$(pg_bindir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
  start)
    pg_start
    echo "export PACER_TEST_POSTGRES='$PACER_TEST_POSTGRES'"
    echo "# stop with: $0 stop $PG_TEST_DIR"
    ;;
  stop) pg_stop "${2:?usage: $0 stop DIR}" ;;
  *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
  esac
fi
