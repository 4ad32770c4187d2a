#!/usr/bin/env bash
# Runs the relay through convert.sql, the prototype of the migration that
# partitioned retention needs (docs/performance.md, "Partitioned retention:
# the experiment"): events written before it (into the old table), after it
# (into the old table, now the DEFAULT partition) and into a range partition
# attached after it (tools.sql) must all reach Kafka, and so must
# events written after a restart of the relay and a resend. Then it runs
# outbox-relay migrate on the partitioned tables, which skips the indexes
# they have (a new one of indexes.sql's could not be built on them: CREATE
# INDEX CONCURRENTLY is refused on a partitioned table).
#
#   scripts/partitions/convert-check.sh [--pg N]
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib.sh
pg_parse_args "$@"
WORK=$(mktemp -d /tmp/outbox-convert.XXXXXX)
RELAY_PID="" KAFKA_PID=""
cleanup() { stop_pid "$RELAY_PID"; stop_pid "$KAFKA_PID"; pg_stop; rm -rf "$WORK"; }
trap cleanup EXIT
go build -o "$WORK/outbox-relay" ./cmd/outbox-relay
go build -o "$WORK/kafka-dev" ./cmd/kafka-dev
PG_FSYNC=off pg_start
kafka_dev_start "$WORK/kafka-dev" orders:1 "$WORK/kafka.log"
export OUTBOX_DATABASE_URL="$DATABASE_URL" OUTBOX_KAFKA_BROKERS="127.0.0.1:$KAFKA_PORT"
HERE=scripts/partitions
q() { psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 "$@"; }
# write PHASE: three events.
write() {
  q -c "INSERT INTO outbox.events (topic, key, payload)
        SELECT 'orders', 'k' || i, jsonb_build_object('n', i, 'phase', '$1') FROM generate_series(1, 3) i"
}
# delivered N: until N events are SENT.
delivered() {
  wait_for "$1 events SENT" 30 bash -c \
    "[ \$(psql '$DATABASE_URL' -XAtc \"SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'\") -eq $1 ]"
}
relay() {
  "$WORK/outbox-relay" run --log-format console 2>>"$WORK/relay.log" &
  RELAY_PID=$!
}

"$WORK/outbox-relay" migrate >/dev/null
write before; relay; delivered 3
log "converting outbox.events and outbox.deliveries (convert.sql) under the running relay"
# Under a running relay, convert.sql's LOCK TABLE can be a deadlock's
# victim: a relay transaction holding one of the two tables and waiting for
# the other (1 run in 11 to 17 of this check before it tried again). The
# transaction rolls back whole, so it is tried again, at most 5 times.
tries=1
until err=$(q -f "$HERE/convert.sql" 2>&1); do
  if [[ "$err" != *"deadlock detected"* && "$err" != *"lock timeout"* ]] || [ $tries -ge 5 ]; then
    echo "$err" >&2; exit 1
  fi
  echo "convert.sql, try $tries: $(grep -m1 ERROR <<<"$err"); trying again" >&2
  tries=$((tries + 1))
done
write default; delivered 6
log "attaching a range partition ahead (tools.sql)"
q -f "$HERE/tools.sql"
q -c "CALL partition_tools.add_range('outbox', 'legacy', 'ahead', now() + interval '2 seconds', interval '1 day')"
sleep 3 # the range starts 2 s from its attach: ids of now fall in it from then on
write ahead; delivered 9
stop_pid "$RELAY_PID"; relay
write restarted; delivered 12
id=$(q -Atc "SELECT id FROM outbox.events_ahead LIMIT 1")
[ "$(q -Atc "SELECT outbox.resend('$id')")" = t ]
delivered 12 # the resent one SENT again: its thirteenth message is counted below
q -c "SELECT tableoid::regclass AS partition, count(*) AS events FROM outbox.events GROUP BY 1 ORDER BY 1"
# Read back by kcat where it is installed (a reader not of this project),
# else by kafka-dev; each message's value names its phase.
if command -v kcat >/dev/null; then
  kcat -C -b "$OUTBOX_KAFKA_BROKERS" -t orders -o beginning -c 13 -e -q -f '%k %s\n' >"$WORK/consumed"
else
  "$WORK/kafka-dev" consume --brokers "$OUTBOX_KAFKA_BROKERS" --topic orders --count 13 --timeout 15s >"$WORK/consumed"
fi
[ "$(grep -c 'phase' "$WORK/consumed")" -eq 13 ] || { cat "$WORK/consumed"; exit 1; }
for phase in before default ahead restarted; do
  grep -q "\"phase\": \"$phase\"" "$WORK/consumed" || { echo "no message of phase $phase" >&2; cat "$WORK/consumed"; exit 1; }
done
if grep -iE '"level":"(warn|error)"|\b(WARN|ERROR)\b' "$WORK/relay.log"; then
  echo "convert-check: the relay warned (above)" >&2; exit 1
fi
"$WORK/outbox-relay" migrate >/dev/null || { echo "convert-check: outbox-relay migrate failed on the partitioned tables" >&2; exit 1; }
echo "convert-check: 13 messages in Kafka, from the old table, the DEFAULT partition and a range partition, across a restart and a resend; outbox-relay migrate ran again"
