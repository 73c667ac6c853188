#!/usr/bin/env bash
# Private PostgreSQL cluster for local dev and CI (Debian's packages, no Docker).
#
#   deploy/postgres/postgres.sh up|down|status|reset|cafile
#
# up      install Debian's postgresql if its binaries are missing (root only), initdb on
#         first run, start on 127.0.0.1:$PG_PORT, ensure role+database `blackjack`
#         (password `blackjack`), wait for pg_isready, print the SQLAlchemy URL on stdout.
# down    stop the cluster (fast, then immediate, then SIGKILL).
# status  exit 0 if running.
# reset   down, then delete the cluster's data.
# cafile  print the path of the certificate that verifies the server's (TLS is on, as in
#         production: `?ssl=verify-full` with PGSSLROOTCERT set to it checks it; clients that
#         ask nothing, asyncpg's default `prefer`, get TLS without a check).
#
# Env: PG_PORT (55432), PG_DATA_ROOT (<repo>/.cache/postgres/<port>), PG_START_TIMEOUT (60).
# Data lives in <repo>/.cache/postgres/<port>/. Run as root, the server runs as the
# `postgres` system user; if that user cannot reach the repo folder, the cluster goes to
# /tmp/blackjack-pg-<port>/ instead. Unix sockets are off: clients use TCP on 127.0.0.1.
# Auth (loopback only): superuser `postgres` trust, everyone else scram-sha-256.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

PG_PORT="${PG_PORT:-55432}"
PG_START_TIMEOUT="${PG_START_TIMEOUT:-60}"
DB_NAME=blackjack
DB_USER=blackjack
DB_PASSWORD=blackjack
URL="postgresql+asyncpg://$DB_USER:$DB_PASSWORD@127.0.0.1:$PG_PORT/$DB_NAME"

log() { echo "postgres.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

IS_ROOT=0
[[ "$(id -u)" == 0 ]] && IS_ROOT=1
RUN_USER="$(id -un)"
((IS_ROOT)) && RUN_USER=postgres

# Directory holding the newest installed server's binaries, or empty.
find_bindir() {
    local d
    d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
    [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]] && echo "$d"
    return 0
}

ensure_binaries() {
    BIN="$(find_bindir)"
    [[ -n "$BIN" ]] && return 0
    ((IS_ROOT)) || die "PostgreSQL server binaries missing; install Debian's 'postgresql' package"
    apt_install postgresql
    BIN="$(find_bindir)"
    [[ -n "$BIN" ]] || die "postgresql installed but no /usr/lib/postgresql/*/bin/initdb found"
}

# Install Debian packages (root only: the callers check).
apt_install() {
    log "installing $* from Debian packages"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

# Run a command as the cluster owner (from / so an unreadable cwd does not matter).
as_pg() {
    if ((IS_ROOT)); then
        (cd / && runuser -u postgres -- "$@")
    else
        (cd / && "$@")
    fi
}

# Choose the data root: the repo cache if the server user can write there, else /tmp.
resolve_dirs() {
    local base
    if [[ -n "${PG_DATA_ROOT:-}" ]]; then
        base="$PG_DATA_ROOT"
    else
        base="$ROOT/.cache/postgres/$PG_PORT"
        if ((IS_ROOT)); then
            mkdir -p "$base" 2>/dev/null || true
            chown postgres: "$base" 2>/dev/null || true
            chmod 700 "$base" 2>/dev/null || true
            if ! (cd / && runuser -u postgres -- test -w "$base" -a -x "$base") 2>/dev/null; then
                base="/tmp/blackjack-pg-$PG_PORT"
            fi
        fi
    fi
    BASE="$base"
    DATA="$BASE/data"
    LOGFILE="$BASE/postgres.log"
    TLS="$BASE/tls"
}

# The server's key and self-signed certificate for 127.0.0.1 (and localhost), made once;
# ca.pem is the certificate again, for clients to verify the server with.
ensure_tls() {
    [[ -f "$TLS/server.key" && -f "$TLS/server.crt" && -f "$TLS/ca.pem" ]] && return 0
    if ! command -v openssl >/dev/null 2>&1; then  # postgresql's packages bring it, usually
        ((IS_ROOT)) || die "openssl not found; install Debian's 'openssl' package"
        apt_install openssl
    fi
    as_pg mkdir -p "$TLS"
    as_pg openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=127.0.0.1" \
        -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
        -keyout "$TLS/server.key" -out "$TLS/server.crt" >"$BASE/openssl.log" 2>&1 \
        || { cat "$BASE/openssl.log" >&2; die "openssl could not make the server's certificate"; }
    as_pg chmod 600 "$TLS/server.key"
    as_pg cp "$TLS/server.crt" "$TLS/ca.pem"
}

prepare_base() {
    mkdir -p "$BASE"
    if ((IS_ROOT)); then chown postgres: "$BASE"; fi
    chmod 700 "$BASE"
}

is_running() {
    [[ -f "$DATA/PG_VERSION" ]] && as_pg "$BIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1
}

init_cluster() {
    [[ -f "$DATA/PG_VERSION" ]] && return 0
    log "initdb in $DATA"
    as_pg "$BIN/initdb" -D "$DATA" -U postgres -E UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 >"$BASE/initdb.log" 2>&1 \
        || { cat "$BASE/initdb.log" >&2; die "initdb failed"; }
    # Loopback only: trust the superuser (used by this script), passwords for the rest.
    as_pg sh -c "cat >'$DATA/pg_hba.conf'" <<'EOF'
# TYPE  DATABASE  USER      ADDRESS        METHOD
host    all       postgres  127.0.0.1/32   trust
host    all       all       127.0.0.1/32   scram-sha-256
EOF
    echo "include_if_exists = 'blackjack.conf'" | as_pg sh -c "cat >>'$DATA/postgresql.conf'"
}

# Settings rewritten on every start (port may change). Durability is traded for test speed.
write_conf() {
    as_pg sh -c "cat >'$DATA/blackjack.conf'" <<EOF
# Written by deploy/postgres/postgres.sh on each 'up'; do not edit.
port = $PG_PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 200
password_encryption = 'scram-sha-256'
fsync = off
synchronous_commit = off
full_page_writes = off
logging_collector = off
ssl = on
ssl_cert_file = '$TLS/server.crt'
ssl_key_file = '$TLS/server.key'
EOF
}

psql_admin() {
    "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres "$@"
}

# Create role and database if missing (idempotent).
ensure_db() {
    psql_admin -d postgres >/dev/null <<EOF
DO \$\$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$DB_USER') THEN
    CREATE ROLE $DB_USER LOGIN CREATEDB PASSWORD '$DB_PASSWORD';
  END IF;
END
\$\$;
-- The tests drop their databases WITH (FORCE), which must also end an autovacuum worker that
-- happens to be in one; that takes pg_signal_backend (granting twice is harmless).
GRANT pg_signal_backend TO $DB_USER;
SELECT 'CREATE DATABASE $DB_NAME OWNER $DB_USER'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$DB_NAME')\gexec
EOF
}

wait_ready() {
    local deadline=$((SECONDS + PG_START_TIMEOUT))
    until "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -d postgres; do
        ((SECONDS < deadline)) || { log "not ready after ${PG_START_TIMEOUT}s"; return 1; }
        sleep 0.5
    done
}

cmd_up() {
    local t0=$SECONDS
    ensure_binaries
    ((IS_ROOT)) && ! id postgres >/dev/null 2>&1 && die "system user 'postgres' missing"
    resolve_dirs
    prepare_base
    if is_running; then
        wait_ready || die "cluster in $DATA is running but not answering on port $PG_PORT"
        log "already running ($DATA)"
    else
        if timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PG_PORT" 2>/dev/null; then
            die "port $PG_PORT is already in use by another process"
        fi
        init_cluster
        ensure_tls
        write_conf
        log "starting on 127.0.0.1:$PG_PORT ($DATA, run as $RUN_USER)"
        # setsid: the postmaster outlives the calling shell's session.
        as_pg setsid "$BIN/pg_ctl" start -D "$DATA" -l "$LOGFILE" -w -t "$PG_START_TIMEOUT" >/dev/null \
            || { tail -n 30 "$LOGFILE" >&2 || true; die "pg_ctl start failed"; }
        wait_ready || die "server did not become ready; see $LOGFILE"
    fi
    ensure_db
    log "ready in $((SECONDS - t0))s"
    echo "$URL"
}

cmd_down() {
    local pid
    BIN="$(find_bindir)"
    [[ -n "$BIN" ]] || { log "not installed"; return 0; }
    resolve_dirs
    if ! is_running; then
        log "not running"
        return 0
    fi
    log "stopping ($DATA)"
    as_pg "$BIN/pg_ctl" stop -D "$DATA" -m fast -w -t 30 >/dev/null 2>&1 \
        || as_pg "$BIN/pg_ctl" stop -D "$DATA" -m immediate -w -t 15 >/dev/null 2>&1 \
        || {
            pid="$(head -n1 "$DATA/postmaster.pid" 2>/dev/null || true)"
            [[ -n "$pid" ]] && kill -KILL "$pid" 2>/dev/null || true
        }
    log "stopped"
}

cmd_status() {
    BIN="$(find_bindir)"
    [[ -n "$BIN" ]] || { echo "postgres not installed"; return 1; }
    resolve_dirs
    if is_running; then
        echo "postgres running on 127.0.0.1:$PG_PORT ($DATA)"
        return 0
    fi
    echo "postgres not running"
    return 1
}

cmd_reset() {
    cmd_down
    resolve_dirs
    rm -rf "$DATA" "$LOGFILE" "$BASE/initdb.log" "$TLS" "$BASE/openssl.log"
    log "data removed"
}

cmd_cafile() {
    resolve_dirs
    [[ -f "$TLS/ca.pem" ]] || die "no certificate in $TLS: start the server with '$0 up' (one started by an older postgres.sh has no TLS: '$0 down' first)"
    echo "$TLS/ca.pem"
}

case "${1:-}" in
    up | down | status | reset | cafile) "cmd_$1" ;;
    *)
        echo "usage: $0 up|down|status|reset|cafile" >&2
        exit 2
        ;;
esac
