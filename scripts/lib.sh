# Shared helpers for scripts/*.sh: a throwaway PostgreSQL with wal_level=logical.
# Source it; call pg_start; it exports DATABASE_URL and stops on exit (pg_stop).

PG_BIN=${PG_BIN:-}

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# pg_find_bin sets PG_BIN to a directory holding initdb and pg_ctl (14 or newer),
# installing Debian's postgresql when none is found.
pg_find_bin() {
  if [ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ]; then return 0; fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n -r) ; do
    if [ -x "$d/initdb" ]; then PG_BIN=$d; return 0; fi
  done
  if command -v initdb >/dev/null 2>&1; then PG_BIN=$(dirname "$(command -v initdb)"); return 0; fi
  log "PostgreSQL server binaries not found: installing Debian's postgresql"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n -r) ; do
    if [ -x "$d/initdb" ]; then PG_BIN=$d; return 0; fi
  done
  echo "could not find initdb after installing postgresql" >&2
  return 1
}

# as_pg runs a command as the postgres user when we are root (initdb refuses root).
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# pg_start starts a cluster in a temp dir on a free loopback port and exports
# DATABASE_URL (superuser postgres, database postgres).
pg_start() {
  pg_find_bin || return 1
  PG_DIR=$(mktemp -d /tmp/outbox-pg.XXXXXX)
  chmod 755 "$PG_DIR"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
    chown postgres "$PG_DIR"
  fi
  as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$PG_DIR/initdb.log" 2>&1 ||
    as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 --no-locale >"$PG_DIR/initdb.log" 2>&1 ||
    { cat "$PG_DIR/initdb.log" >&2; return 1; }
  local tries=0
  while :; do
    PG_PORT=$((20000 + RANDOM % 20000))
    if as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 start \
      -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR -c wal_level=logical \
          -c max_replication_slots=100 -c max_wal_senders=100 -c max_connections=300 \
          -c fsync=${PG_FSYNC:-on} -c shared_buffers=256MB -c wal_sender_timeout=60s" >/dev/null 2>&1; then
      break
    fi
    tries=$((tries + 1))
    if [ $tries -ge 5 ]; then cat "$PG_DIR/server.log" >&2; return 1; fi
  done
  export PG_PORT PG_DIR PG_BIN
  export DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
  export PATH="$PG_BIN:$PATH"
  log "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT (wal_level=logical, data in $PG_DIR)"
}

pg_stop() {
  if [ -n "${PG_DIR:-}" ] && [ -d "$PG_DIR/data" ]; then
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$PG_DIR"
  fi
}

# free_port prints a loopback TCP port nobody listens on.
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((30000 + RANDOM % 20000))
    if ! (echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null; then echo "$p"; return 0; fi
  done
  return 1
}

# wait_for DESCRIPTION SECONDS COMMAND...: retries COMMAND until it succeeds.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then echo "timed out waiting for $what" >&2; return 1; fi
    sleep 0.2
  done
}

# stop_pid PID: SIGTERM and wait, if PID is set and running.
stop_pid() {
  [ -n "${1:-}" ] && kill -TERM "$1" 2>/dev/null && wait "$1" 2>/dev/null || true
}

# kafka_dev_start BIN TOPICS LOG: starts the development broker (cmd/kafka-dev)
# on a free loopback port and waits for it; sets KAFKA_PORT and KAFKA_PID.
# free_port sees only listeners: a port that an outgoing connection holds
# (the ephemeral range overlaps ours) fails the broker's bind, and then it
# tries another port, as pg_start does.
kafka_dev_start() {
  local tries
  for tries in 1 2 3 4 5; do
    KAFKA_PORT=$(free_port)
    "$1" serve --port "$KAFKA_PORT" --topics "$2" 2>"$3" &
    KAFKA_PID=$!
    # Listening, or gone: either ends the wait.
    wait_for "kafka-dev on port $KAFKA_PORT" 20 \
      bash -c "echo >/dev/tcp/127.0.0.1/$KAFKA_PORT || ! kill -0 $KAFKA_PID" || { cat "$3" >&2; return 1; }
    if kill -0 "$KAFKA_PID" 2>/dev/null; then return 0; fi
    wait "$KAFKA_PID" 2>/dev/null || true
    echo "kafka-dev could not start on port $KAFKA_PORT (try $tries of 5): $(tail -n 1 "$3")" >&2
  done
  KAFKA_PID=""
  return 1
}
