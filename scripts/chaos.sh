#!/usr/bin/env bash
# Runs the chaos test (TestChaos_FaultsKeepEveryEventAndEachKeysOrder in
# internal/e2e) longer than CI does, or again with the seed a failure printed:
# two relays sharing a slot and a steady writer, against relays killed,
# stopped and SIGTERMed, Kafka down for a blink or for seconds, PostgreSQL
# restarted -m immediate, and two of these at once. Starts its own PostgreSQL
# (the test starts another one of its own, which it restarts) and the
# development Kafka broker; cleans up after itself.
#
#   scripts/chaos.sh [--seed N] [--minutes M] [--pg 17]
#
# --seed N     replays the schedule of faults of seed N (default: a fresh seed,
#              printed at the start and in a failure)
# --minutes M  how long faults are injected (default 4; decimals allowed)
# --pg N       PostgreSQL N (14 to 18) instead of the newest Debian ships
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
pg_parse_args "$@"
set -- ${PG_ARGS[@]+"${PG_ARGS[@]}"}

seed=""
minutes=4
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) seed=${2:?--seed needs a number}; shift 2 ;;
    --seed=*) seed=${1#--seed=}; shift ;;
    --minutes) minutes=${2:?--minutes needs a number}; shift 2 ;;
    --minutes=*) minutes=${1#--minutes=}; shift ;;
    *) echo "usage: scripts/chaos.sh [--seed N] [--minutes M] [--pg N]" >&2; exit 64 ;;
  esac
done
case "$seed" in *[!0-9]*) echo "--seed: $seed is not a number" >&2; exit 64 ;; esac
case "$minutes" in '' | *[!0-9.]*) echo "--minutes: $minutes is not a number" >&2; exit 64 ;; esac

trap pg_stop EXIT
pg_start
export TEST_DATABASE_URL="$DATABASE_URL"
export OUTBOX_CHAOS_DURATION="${minutes}m"
if [ -n "$seed" ]; then export OUTBOX_CHAOS_SEED="$seed"; fi
# The faults, then up to 3 minutes for the last events and the checks.
timeout=$(awk -v m="$minutes" 'BEGIN { printf "%dm", m + 10 }')
log "chaos for $OUTBOX_CHAOS_DURATION${seed:+, seed $seed}"
go test -count=1 -v -timeout "$timeout" -run '^TestChaos_FaultsKeepEveryEventAndEachKeysOrder$' ./internal/e2e/
