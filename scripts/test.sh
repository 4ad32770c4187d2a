#!/usr/bin/env bash
# Runs the whole test suite against a throwaway PostgreSQL (wal_level=logical)
# that it starts and removes itself. Kafka is the in-memory kfake broker the
# tests start. Needs Go; installs Debian's postgresql if its binaries are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

pg_start
trap pg_stop EXIT
export TEST_DATABASE_URL="$DATABASE_URL"
export OUTBOX_TEST_REPORT
OUTBOX_TEST_REPORT=$(mktemp /tmp/outbox-test-report.XXXXXX)

log "go vet ./..."
go vet ./...
log "go test -race ./..."
status=0
go test -race -timeout 15m "$@" ./... || status=$?
if [ -s "$OUTBOX_TEST_REPORT" ]; then
  log "figures measured by the tests"
  cat "$OUTBOX_TEST_REPORT"
fi
rm -f "$OUTBOX_TEST_REPORT"
exit $status
