#!/usr/bin/env bash
# The README's test command: installs what the tests need on a Debian machine
# (as root, with apt-get) when it is missing, then runs every test with the race
# detector. Extra arguments go to `go test` (e.g. -run TestX ./e2e/).
#
# What the tests need beyond Go and gcc (cgo for SQLite):
#   systemd-analyze  (package systemd)   verifies deploy/pacer.service
#   chromium         (package chromium)  the status page's browser test (e2e/dashboard_test.go)
#   promtool         (package prometheus)  deploy/alerts_test.go: promtool test rules
#   PostgreSQL 15    (package postgresql-15)  the PostgreSQL store tests: a
#                    throwaway server (scripts/postgres.sh) whose URL is
#                    exported as PACER_TEST_POSTGRES, stopped at exit
# A test that needs one of these fails, never skips, when it is missing, and
# its message names the package.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { # command package
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: $1 is missing: install Debian's $2 (apt-get install $2)" >&2
    return 0 # the tests that need it fail with the same advice
  fi
  echo "== installing $2 (for $1)"
  if [ -z "${apt_updated:-}" ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

need systemd-analyze systemd
need chromium chromium
need promtool prometheus

# shellcheck source=scripts/postgres.sh
. scripts/postgres.sh
trap pg_stop EXIT
pg_start || echo "scripts/test.sh: no PostgreSQL for the tests: the PostgreSQL store tests will fail" >&2

if [ $# -eq 0 ]; then set -- ./...; fi
go test -race "$@"
