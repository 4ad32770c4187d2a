#!/usr/bin/env bash
# Measures outbox-relay in one run on this machine: the decoding limit
# (pg_recvlogical), the relay's drain, a poll-only drain, steady-state
# COMMIT-to-Kafka latency at fixed rates, the writer's rate with and without
# the relay, and the relay's memory and CPU. Starts its own PostgreSQL and the
# development Kafka broker as a separate process; cleans up after itself.
#
#   scripts/bench.sh [--events 200000] [--drain-runs 3] [--rates 1000,5000,max] [--steady-duration 10s] [--warmup 2s]
#                    [--big-transaction 1000000] [--out bench-results] [--pg 18]
#                    [--server-setting wal_compression=lz4 ...]
#   scripts/bench.sh --growth 0,5000000,20000000 [--growth-failed 1] [--growth-interleaved 4m] [--growth-versus-empty 4m]
#                    [--events 100000] [--steady-duration 10s]
#
# --pg N (or PG_MAJOR=N) runs PostgreSQL N (14 to 18) instead of the newest
# that Debian ships; see scripts/lib.sh.
#
# --server-setting NAME=VALUE (repeatable) sets a PostgreSQL setting on the
# bench's server (on its command line, as scripts/lib.sh sets its own, which
# it overrides: shared_buffers too), such as the settings docs/performance.md
# recommends; results.json records the WAL, checkpoint and memory settings
# the run had.
#
# --growth 0,5000000,20000000 runs only the growth phase instead (off by
# default: minutes a size, and about 1 GiB of disk a million rows): for each
# size, outbox.deliveries and outbox.events are filled as a week of traffic
# leaves them, then the relay's drain of --events, the stream at 1,000/s, a
# claim, the gap sweep, the console and retention are measured, and last
# two stream runs in blocks of 10 s, in turn: one (--growth-interleaved
# long) in which the blocks delete at retention's keep-up pace or do not,
# one (--growth-versus-empty long) in which they write to the filled
# database or to an empty one beside it (docs/performance.md, "Cost as the
# outbox grows").
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
pg_parse_args "$@"
set -- ${PG_ARGS[@]+"${PG_ARGS[@]}"}
SETTINGS=()
BENCH_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --server-setting) SETTINGS+=("${2:?--server-setting needs NAME=VALUE}"); shift 2 ;;
    --server-setting=*) SETTINGS+=("${1#--server-setting=}"); shift ;;
    *) BENCH_ARGS+=("$1"); shift ;;
  esac
done
PG_OPTS=""
for s in ${SETTINGS[@]+"${SETTINGS[@]}"}; do
  case "$s" in
    [a-z_]*=*) [[ "${s%%=*}" =~ ^[a-z_.]+$ ]] || { echo "--server-setting $s: NAME is a PostgreSQL setting's name" >&2; exit 64; } ;;
    *) echo "--server-setting $s: expected NAME=VALUE, such as wal_compression=lz4" >&2; exit 64 ;;
  esac
  # The value goes on the server's command line: one word.
  [[ "${s#*=}" =~ ^[A-Za-z0-9._:,+-]+$ ]] ||
    { echo "--server-setting $s: VALUE must be one word of letters, digits and . _ : , + -" >&2; exit 64; }
  PG_OPTS+=" -c $s"
done
export PG_OPTS
set -- ${BENCH_ARGS[@]+"${BENCH_ARGS[@]}"}

WORK=$(mktemp -d /tmp/outbox-bench.XXXXXX)
KAFKA_PID=""
cleanup() {
  stop_pid "$KAFKA_PID"
  pg_stop
  rm -rf "$WORK"
}
trap cleanup EXIT

log "building outbox-relay, kafka-dev and the bench driver"
go build -o "$WORK/outbox-relay" ./cmd/outbox-relay
go build -o "$WORK/kafka-dev" ./cmd/kafka-dev
go build -o "$WORK/outbox-bench" ./cmd/outbox-bench

pg_start || { echo "--server-setting: PostgreSQL did not start with ${SETTINGS[*]} (its log above)" >&2; exit 64; }
for s in ${SETTINGS[@]+"${SETTINGS[@]}"}; do
  # Each as the server has it (a custom name.with_dot is taken as given).
  log "server setting ${s%%=*}: $(psql -X -At -v n="${s%%=*}" "$DATABASE_URL" <<<"SELECT pg_catalog.current_setting(:'n');")"
done
kafka_dev_start "$WORK/kafka-dev" bench:3 "$WORK/kafka.log"
"$WORK/outbox-relay" migrate --database-url "$DATABASE_URL" >/dev/null

log "running the benchmark (several minutes)"
"$WORK/outbox-bench" --database-url "$DATABASE_URL" --kafka-brokers "127.0.0.1:$KAFKA_PORT" \
  --relay "$WORK/outbox-relay" --broker-pid "$KAFKA_PID" "$@"
