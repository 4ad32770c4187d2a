#!/usr/bin/env bash
# The experiment behind partitioned retention (docs/performance.md,
# "Partitioned retention: the experiment"): what the application's outbox
# INSERTs at 1,000/s see while old events go, deleted at the relay's base
# pace or dropped as a pair of partitions.
#
#   scripts/partitions/run.sh [--rows 20000000] [--failed-every 100] [--partition-hours 24]
#                             [--seconds 60] [--rounds 3] [--out DIR] [--pg N]
#
# It starts its own PostgreSQL (fsync on, as scripts/bench.sh), applies the
# relay's migrations, builds proto.events and proto.deliveries (schema.sql:
# copies of the relay's tables partitioned by ranges of event id,
# --partition-hours of time-ordered ids to a partition, with a DEFAULT
# partition), fills them as the growth bench fills the relay's (fill.sql),
# then for each round runs pgbench at 1,000 INSERTs/s for --seconds three
# times: alone, while retain.sql deletes from a partition, and while a pair
# of partitions goes: checked (drop_check.sql), detached (detach.sql), what
# must stay copied back (keep.sql: one in --failed-every is FAILED), dropped
# (drop.sql).
# Last, once, while a new pair is created and attached.
# Prints each run's INSERT latency (p50, p99, p99.9, max) and each step's
# time; keeps pgbench's logs in --out. Needs pgbench (PostgreSQL's; the
# server's own, else the one on PATH) and bc. About 25 minutes at 20,000,000
# rows, 1 GiB of disk a million. A prototype: the relay does not run
# partitioned retention (README, "Not implemented yet").
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib.sh
export PGTZ=UTC # partitions start at UTC hours (schema.sql)
pg_parse_args "$@"
set -- ${PG_ARGS[@]+"${PG_ARGS[@]}"}
ROWS=20000000 SECONDS_EACH=60 ROUNDS=3 OUT=partitions-results FAILED_EVERY=100 HOURS=24
while [ $# -gt 0 ]; do
  case "$1" in
    --rows) ROWS=$2; shift 2 ;;
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --failed-every) FAILED_EVERY=$2; shift 2 ;;
    --partition-hours) HOURS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
HERE=scripts/partitions
trap pg_stop EXIT
pg_start
PGBENCH="$PG_BIN/pgbench"
[ -x "$PGBENCH" ] || PGBENCH=$(command -v pgbench)
q() { psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 "$@"; }

log "migrating and building the prototype's partitions"
go run ./cmd/outbox-relay migrate --database-url "$DATABASE_URL" >/dev/null
q -v hours="$HOURS" -f "$HERE/schema.sql"
q -f "$HERE/retain.sql"

log "filling $ROWS events and status rows"
start=$(q -Atc "SELECT now() - interval '601200 seconds'")
batch=500000
for ((from = 1; from <= ROWS; from += batch)); do
  to=$((from + batch - 1)); [ $to -gt "$ROWS" ] && to=$ROWS
  q -v from="$from" -v to="$to" -v n="$ROWS" -v start="$start" -v failed_every="$FAILED_EVERY" -f "$HERE/fill.sql"
done
q -c 'VACUUM ANALYZE proto.events' -c 'VACUUM ANALYZE proto.deliveries' -c 'CHECKPOINT'
q -c "SELECT c.relname, c.reltuples::bigint AS rows, pg_size_pretty(pg_total_relation_size(c.oid)) AS size
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'proto.events'::regclass ORDER BY 1"
# The partitions whose ranges the fill covers whole, oldest first.
mapfile -t PARTS < <(q -Atc "SELECT to_char(g, 'YYYYMMDDHH24') FROM generate_series(
  date_trunc('day', now()) - interval '8 days', now(), interval '$HOURS hours') g
  WHERE g >= now() - interval '601200 seconds' AND g + interval '$HOURS hours' <= now() - interval '1 hour'")
echo "partitions filled whole: ${PARTS[*]}" >&2
[ ${#PARTS[@]} -ge $((2 * ROUNDS)) ] || { echo "need $((2 * ROUNDS)) partitions filled whole: fewer rounds or narrower partitions" >&2; exit 64; }

# latency NAME [FROM TO [LABEL]]: p50/p99/p99.9/max of pgbench's per-transaction
# log, in ms (the time from the transaction's scheduled start: with --rate,
# lag behind the schedule counts, as a late event's would); with FROM and
# TO (epoch seconds), only the transactions that ended between them.
latency() {
  local name=$1 from=${2:-0} to=${3:-9999999999}
  cat "$OUT/$name".[0-9]* | awk -v from="$from" -v to="$to" '{ t = $5 + $6 / 1e6; if (t >= from && t <= to) print $3 / 1000 }' |
    sort -n | awk -v name="$name${2:+ ${4:-(during)}}" '
    { v[NR] = $1 } END { if (NR == 0) { printf "%-30s n=0\n", name; exit }
      printf "%-30s n=%d p50=%.2f p99=%.2f p99.9=%.2f max=%.2f ms\n", name, NR,
      v[q(0.50)], v[q(0.99)], v[q(0.999)], v[NR] }
    function q(p,  i) { i = int(NR * p) + 1; if (i > NR) i = NR; return i }' | tee -a "$OUT/summary.txt"
}
# writer NAME: pgbench at 1,000/s for SECONDS_EACH in the background.
writer() {
  rm -f "$OUT/$1".[0-9]*
  "$PGBENCH" -n -R 1000 -T "$SECONDS_EACH" -c 4 -j 2 -f "$HERE/insert.pgbench" -l --log-prefix="$OUT/$1" \
    "$DATABASE_URL" >"$OUT/$1.out" 2>&1 &
  WRITER=$!
}
# step NAME CMD...: runs CMD, logging how long it took; STEPS collects
# "FROM TO NAME" (epoch seconds) for the writer's latency while each ran.
step() {
  local name=$1 t0 t1; shift
  t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N)
  STEPS+=("$t0 $t1 $name")
  printf '  %-40s %8.1f ms\n' "$name" "$(echo "($t1 - $t0) * 1000" | bc)" | tee -a "$OUT/summary.txt"
}
# steps NAME: the writer's latency while each of STEPS ran (and for a
# second after: an unlink's cost comes after its commit).
steps() {
  local s n f t
  for s in "${STEPS[@]}"; do
    read -r f t n <<<"$s"
    latency "$1" "$f" "$(echo "$t + 1" | bc)" "  while $n" >/dev/null
  done
  STEPS=()
}
STEPS=()
# detach PARENT PART: detach.sql until it gets its lock (lock_timeout 50 ms),
# at most 100 tries; any other error ends the run.
detach() {
  local tries=1 err
  until err=$(q -v parent="$1" -v part="$2" -v lock_timeout=50ms -f "$HERE/detach.sql" 2>&1); do
    if [[ "$err" != *"lock timeout"* ]] || [ $tries -ge 100 ]; then
      echo "detaching $2 (try $tries): $err" >&2; return 1
    fi
    tries=$((tries + 1))
  done
  [ $tries -eq 1 ] || echo "  ($2: $tries tries)" | tee -a "$OUT/summary.txt"
}

: >"$OUT/summary.txt"
for ((r = 0; r < ROUNDS; r++)); do
  del=${PARTS[$((${#PARTS[@]} - 1 - r))]} drop=${PARTS[$r]}
  log "round $((r + 1)): alone"
  writer "r$((r + 1))-alone"; wait "$WRITER"; latency "r$((r + 1))-alone"

  log "round $((r + 1)): while retention deletes from partition $del"
  writer "r$((r + 1))-delete"
  q -c "CALL proto.retain_by_delete('$del', $SECONDS_EACH)" 2>&1 | tee -a "$OUT/summary.txt"
  wait "$WRITER"; latency "r$((r + 1))-delete"

  log "round $((r + 1)): while partition pair $drop is dropped"
  writer "r$((r + 1))-drop"
  sleep $((SECONDS_EACH / 4))
  t0=$(date +%s.%N)
  step "check $drop (drop_check.sql)" q -v part="$drop" -f "$HERE/drop_check.sql"
  step "detach deliveries_$drop" detach deliveries "deliveries_$drop"
  step "detach events_$drop" detach events "events_$drop"
  step "keep what stays (keep.sql)" q -v part="$drop" -f "$HERE/keep.sql"
  step "drop both (drop.sql)" q -v part="$drop" -f "$HERE/drop.sql"
  t1=$(date +%s.%N)
  wait "$WRITER"; latency "r$((r + 1))-drop"; latency "r$((r + 1))-drop" "$t0" "$t1"; steps "r$((r + 1))-drop"
done

next=$(q -Atc "SELECT date_trunc('day', now()) + interval '2 days'")
log "while the partitions from $next are created and attached"
writer "add"
sleep $((SECONDS_EACH / 4))
t0=$(date +%s.%N)
step "add $next (partition_tools.add_range)" q -c "CALL partition_tools.add_range('proto', 'default',
  to_char(timestamptz '$next' AT TIME ZONE 'UTC', 'YYYYMMDDHH24'), '$next', interval '$HOURS hours')"
t1=$(date +%s.%N)
wait "$WRITER"; latency "add"; latency "add" "$t0" "$t1"; steps "add"
log "summary in $OUT/summary.txt"
