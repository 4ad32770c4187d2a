#!/usr/bin/env bash
# The whole job on an embedded default: a throwaway PostgreSQL
# (wal_level=logical), the development Kafka broker (cmd/kafka-dev), the
# schema, the relay, a few events inserted with psql, read back from Kafka and
# shown beside their delivery statuses. Cleans up after itself.
#
#   scripts/demo.sh [--pg 17]   (or PG_MAJOR=17: PostgreSQL 14 to 18; see scripts/lib.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
pg_parse_args "$@"

WORK=$(mktemp -d /tmp/outbox-demo.XXXXXX)
RELAY_PID=""; KAFKA_PID=""; CONSOLE_PID=""
cleanup() {
  local rc=$?
  stop_pid "$CONSOLE_PID"
  stop_pid "$RELAY_PID"
  if [ $rc -ne 0 ] && [ -s "$WORK/relay.log" ]; then
    echo "the demo failed; the relay's last log lines:" >&2
    tail -n 20 "$WORK/relay.log" >&2
  fi
  stop_pid "$KAFKA_PID"
  pg_stop
  rm -rf "$WORK"
}
trap cleanup EXIT

log "building outbox-relay and kafka-dev"
go build -o "$WORK/outbox-relay" ./cmd/outbox-relay
go build -o "$WORK/kafka-dev" ./cmd/kafka-dev

pg_start
kafka_dev_start "$WORK/kafka-dev" orders:3,payments:1 "$WORK/kafka.log"
log "started the DEVELOPMENT Kafka broker on 127.0.0.1:$KAFKA_PORT (topics orders, payments)"

export OUTBOX_DATABASE_URL="$DATABASE_URL"
export OUTBOX_KAFKA_BROKERS="127.0.0.1:$KAFKA_PORT"
METRICS_PORT=$(free_port)
export OUTBOX_METRICS_ADDR="127.0.0.1:$METRICS_PORT"

log "outbox-relay migrate"
"$WORK/outbox-relay" migrate

# The relay runs with least privilege: a login role with REPLICATION in
# the group role outbox_relay that migrate created (docs/running.md: Roles and privileges).
psql -Xq "$DATABASE_URL" -c "DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'outbox_demo_relay') THEN
    CREATE ROLE outbox_demo_relay LOGIN REPLICATION IN ROLE outbox_relay;
  END IF; END \$\$"
log "outbox-relay run as role outbox_demo_relay (logs in $WORK/relay.log)"
OUTBOX_DATABASE_URL="${DATABASE_URL/postgres@/outbox_demo_relay@}" \
  "$WORK/outbox-relay" run --log-format console 2>"$WORK/relay.log" &
RELAY_PID=$!
wait_for "the relay to stream" 30 bash -c \
  "[ \"\$(psql -XAtq \"$DATABASE_URL\" -c \"SELECT count(*) FROM pg_stat_replication WHERE application_name = 'outbox-relay' AND state = 'streaming'\")\" = 1 ]"

log "emitting events with plain SQL, inside business transactions"
psql -Xq "$DATABASE_URL" <<'SQL'
BEGIN;
-- the business write and its event commit together, or not at all
CREATE TABLE IF NOT EXISTS orders (id bigint PRIMARY KEY, customer text, total numeric);
INSERT INTO orders VALUES (1001, 'alice', 42.50);
INSERT INTO outbox.events (topic, key, payload, headers, event_type)
VALUES ('orders', 'alice', '{"order_id": 1001, "total": 42.50}', '{"trace-id": "demo-1"}', 'order.created');
COMMIT;

BEGIN;
INSERT INTO orders VALUES (1002, 'bob', 9.99);
INSERT INTO outbox.events (topic, key, payload, event_type)
VALUES ('orders', 'bob', '{"order_id": 1002, "total": 9.99}', 'order.created'),
       ('payments', 'bob', '{"order_id": 1002, "amount": 9.99}', 'payment.requested');
COMMIT;

-- a bad event: headers must be an object of strings. It fails alone.
INSERT INTO outbox.events (topic, key, payload, headers)
VALUES ('orders', 'carol', '{"order_id": 1003}', '{"retries": 3}');

INSERT INTO outbox.events (topic, key, payload, event_type)
VALUES ('orders', 'alice', '{"order_id": 1001, "status": "shipped"}', 'order.shipped');

-- an event for a topic that does not exist yet: FAILED INVALID_TOPIC, resent below
INSERT INTO outbox.events (topic, key, payload, event_type)
VALUES ('invoices', 'alice', '{"order_id": 1001, "invoice": 1}', 'invoice.issued');
SQL

wait_for "delivery statuses" 30 bash -c \
  "[ \"\$(psql -XAtq \"$DATABASE_URL\" -c \"SELECT count(*) FROM outbox.deliveries\")\" = 6 ]"

log "the invoices topic did not exist: create it on the running broker, then resend what failed for it"
"$WORK/outbox-relay" failed --reason INVALID_TOPIC
"$WORK/kafka-dev" topics create --brokers "$OUTBOX_KAFKA_BROKERS" --topic invoices --partitions 1
"$WORK/outbox-relay" resend --failed --reason INVALID_TOPIC
"$WORK/kafka-dev" consume --brokers "$OUTBOX_KAFKA_BROKERS" --topic invoices --count 1 --timeout 15s

log "read back from Kafka (kafka-dev consume)"
"$WORK/kafka-dev" consume --brokers "$OUTBOX_KAFKA_BROKERS" --topic orders --count 3 --timeout 15s
"$WORK/kafka-dev" consume --brokers "$OUTBOX_KAFKA_BROKERS" --topic payments --count 1 --timeout 15s

log "delivery statuses (outbox.deliveries)"
psql -X "$DATABASE_URL" -c "
SELECT e.topic, e.key, e.event_type, d.status, d.kafka_partition AS part, d.kafka_offset AS off,
       d.failure_reason, d.last_error
FROM outbox.events e JOIN outbox.deliveries d ON d.event_id = e.id
ORDER BY e.created_at, e.id"

log "outbox-relay status (the database, and the running relay from its /metrics on port $METRICS_PORT)"
"$WORK/outbox-relay" status --metrics-url "http://127.0.0.1:$METRICS_PORT/metrics"

# The operator console, as a member of outbox_operator (docs/operating.md: The console).
psql -Xq "$DATABASE_URL" -c "DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'outbox_demo_operator') THEN
    CREATE ROLE outbox_demo_operator LOGIN IN ROLE outbox_operator;
  END IF; END \$\$"
CONSOLE_PORT=$(free_port)
OUTBOX_DATABASE_URL="${DATABASE_URL/postgres@/outbox_demo_operator@}" \
  "$WORK/outbox-relay" console --listen "127.0.0.1:$CONSOLE_PORT" >"$WORK/console.log" 2>&1 &
CONSOLE_PID=$!
wait_for "the console" 15 grep -q "outbox-relay console on" "$WORK/console.log"
log "the operator console: http://127.0.0.1:$CONSOLE_PORT/ (loopback, no token: open it while the demo runs,"
log "or run the demo with DEMO_HOLD=1 to keep everything up until Enter)"
if [ -n "${DEMO_HOLD:-}" ]; then read -r -p "press Enter to stop the demo " _; fi

log "stopping the relay with SIGTERM (it drains, confirms the slot and exits 0)"
kill -TERM "$RELAY_PID"
wait "$RELAY_PID" && echo "relay exited with status 0"
RELAY_PID=""
log "demo done; cleaning up"
