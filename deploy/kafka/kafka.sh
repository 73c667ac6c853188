#!/usr/bin/env bash
# Single-node Apache Kafka (KRaft, combined broker+controller) for local dev and CI.
#
#   deploy/kafka/kafka.sh up|down|status|reset|jars
#
# up      fetch jars (Maven Central, via pom.xml) if missing, format storage on first
#         run, start the broker in the background, wait until it serves metadata.
# down    stop it (SIGTERM, then SIGKILL after KAFKA_STOP_TIMEOUT seconds).
# status  exit 0 if running.
# reset   down, then delete the data and logs (the jar cache is kept).
# jars    fetch the jars and make the TLS files only (cluster.sh, before starting its nodes).
#
# Listeners: PLAINTEXT on KAFKA_PORT, and SASL_SSL (TLS with a self-signed certificate made on
# first start, its PEM in $KAFKA_CACHE_DIR/tls/ca.pem; SASL/PLAIN user blackjack, password
# blackjack-dev-secret: development only) on KAFKA_SASL_PORT.
#
# Env: KAFKA_PORT (9092), KAFKA_CONTROLLER_PORT (9093), KAFKA_SASL_PORT (KAFKA_PORT + 2),
#      KAFKA_HEAP (-Xmx1g -Xms256m),
#      KAFKA_JVM_OPTS, KAFKA_START_TIMEOUT (90), KAFKA_STOP_TIMEOUT (60),
#      KAFKA_CACHE_DIR (<repo>/.cache/kafka).
# One node of a cluster (deploy/kafka/cluster.sh sets them): KAFKA_NODE_ID (1),
#      KAFKA_QUORUM_VOTERS (1@127.0.0.1:KAFKA_CONTROLLER_PORT), KAFKA_REPLICAS (1: the internal
#      topics' and the default replication factor), KAFKA_MIN_ISR (1), KAFKA_LIBS_DIR and
#      KAFKA_TLS_DIR (under KAFKA_CACHE_DIR), KAFKA_CLUSTER_ID (else made once, in cluster.id).
# Everything it writes lives under KAFKA_CACHE_DIR: libs/ data/ logs/ server.properties kafka.pid
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_SASL_PORT="${KAFKA_SASL_PORT:-$((KAFKA_PORT + 2))}"
KAFKA_HEAP="${KAFKA_HEAP:--Xmx1g -Xms256m}"
KAFKA_JVM_OPTS="${KAFKA_JVM_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-60}"
CACHE="${KAFKA_CACHE_DIR:-$ROOT/.cache/kafka}"
KAFKA_NODE_ID="${KAFKA_NODE_ID:-1}"
KAFKA_QUORUM_VOTERS="${KAFKA_QUORUM_VOTERS:-1@127.0.0.1:$KAFKA_CONTROLLER_PORT}"
KAFKA_REPLICAS="${KAFKA_REPLICAS:-1}"
KAFKA_MIN_ISR="${KAFKA_MIN_ISR:-1}"

LIBS="${KAFKA_LIBS_DIR:-$CACHE/libs}"
DATA="$CACHE/data"
LOGS="$CACHE/logs"
CONF="$CACHE/server.properties"
PIDFILE="$CACHE/kafka.pid"
TLS="${KAFKA_TLS_DIR:-$CACHE/tls}"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

log() { echo "kafka.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# PID of our broker if it is alive, else empty (and a stale pid file is removed).
running_pid() {
    local pid
    [[ -f "$PIDFILE" ]] || return 0
    pid="$(cat "$PIDFILE" 2>/dev/null || true)"
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null \
        && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka'; then
        echo "$pid"
    else
        rm -f "$PIDFILE"
    fi
}

# True if something accepts TCP connections on 127.0.0.1:$1.
port_open() {
    timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# True once the broker answers a Metadata request (falls back to the log line without python3).
broker_ready() {
    port_open "$KAFKA_PORT" || return 1
    if command -v python3 >/dev/null 2>&1; then
        python3 "$HERE/probe.py" 127.0.0.1 "$KAFKA_PORT" 3
    else
        grep -q 'Kafka Server started' "$LOGS/server.log" 2>/dev/null
    fi
}

# Download the broker jars into $LIBS unless they match the current pom.xml.
ensure_jars() {
    local stamp
    stamp="$(sha256sum "$HERE/pom.xml" | cut -d' ' -f1)"
    if [[ -f "$LIBS/.pom.sha256" && "$(cat "$LIBS/.pom.sha256")" == "$stamp" ]]; then
        return 0
    fi
    command -v mvn >/dev/null 2>&1 || die "mvn not found (needed once to fetch the Kafka jars)"
    log "fetching Kafka jars from Maven Central into $LIBS"
    rm -rf "$LIBS.tmp"
    mkdir -p "$LOGS"
    if ! mvn -B -ntp -f "$HERE/pom.xml" dependency:copy-dependencies -Dstyle.color=never \
        -DincludeScope=runtime -DoutputDirectory="$LIBS.tmp" >"$LOGS/mvn.log" 2>&1; then
        tail -n 40 "$LOGS/mvn.log" >&2
        die "fetching jars failed (full output: $LOGS/mvn.log)"
    fi
    echo "$stamp" >"$LIBS.tmp/.pom.sha256"
    rm -rf "$LIBS"
    mv "$LIBS.tmp" "$LIBS"   # swap in whole, so an interrupted fetch never looks complete
}

java_run() {
    # shellcheck disable=SC2086  # heap/opts are intentionally word-split
    "$JAVA" $KAFKA_HEAP $KAFKA_JVM_OPTS \
        -Dlog4j.configuration="file:$HERE/log4j.properties" -Dkafka.logs.dir="$LOGS" \
        -cp "$LIBS/*" "$@"
}

# The SASL_SSL listener's key and self-signed certificate (keytool comes with the JDK), and
# the certificate as PEM for clients to trust (ca.pem).
ensure_tls() {
    [[ -f "$TLS/broker.p12" && -f "$TLS/ca.pem" ]] && return 0
    local keytool="${JAVA_HOME:+$JAVA_HOME/bin/}keytool"
    command -v "$keytool" >/dev/null 2>&1 || die "keytool not found (it comes with the JDK)"
    rm -rf "$TLS.tmp"
    mkdir -p "$TLS.tmp"
    "$keytool" -genkeypair -alias broker -keyalg RSA -keysize 2048 -validity 3650 \
        -dname "CN=localhost" -ext "SAN=IP:127.0.0.1,DNS:localhost" \
        -storetype PKCS12 -keystore "$TLS.tmp/broker.p12" \
        -storepass blackjack-dev-store -keypass blackjack-dev-store >/dev/null 2>&1 \
        || die "keytool could not make the broker's certificate"
    "$keytool" -exportcert -rfc -alias broker -keystore "$TLS.tmp/broker.p12" \
        -storepass blackjack-dev-store -file "$TLS.tmp/ca.pem" >/dev/null 2>&1 \
        || die "keytool could not export the broker's certificate"
    rm -rf "$TLS"
    mv "$TLS.tmp" "$TLS"
}

render_config() {
    sed -e "s|@KAFKA_PORT@|$KAFKA_PORT|g" \
        -e "s|@KAFKA_CONTROLLER_PORT@|$KAFKA_CONTROLLER_PORT|g" \
        -e "s|@KAFKA_SASL_PORT@|$KAFKA_SASL_PORT|g" \
        -e "s|@KAFKA_TLS_DIR@|$TLS|g" \
        -e "s|@KAFKA_DATA_DIR@|$DATA|g" \
        -e "s|@KAFKA_NODE_ID@|$KAFKA_NODE_ID|g" \
        -e "s|@KAFKA_QUORUM_VOTERS@|$KAFKA_QUORUM_VOTERS|g" \
        -e "s|@KAFKA_REPLICAS@|$KAFKA_REPLICAS|g" \
        -e "s|@KAFKA_MIN_ISR@|$KAFKA_MIN_ISR|g" \
        "$HERE/server.properties.template" >"$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
}

# Format KRaft storage once; later runs reuse the data and cluster id.
format_storage() {
    [[ -f "$DATA/meta.properties" ]] && return 0
    local cid
    if [[ -n "${KAFKA_CLUSTER_ID:-}" ]]; then
        echo "$KAFKA_CLUSTER_ID" >"$CACHE/cluster.id"
    elif [[ ! -s "$CACHE/cluster.id" ]]; then
        java_run kafka.tools.StorageTool random-uuid | tail -n1 >"$CACHE/cluster.id"
    fi
    cid="$(cat "$CACHE/cluster.id")"
    log "formatting storage in $DATA (cluster id $cid)"
    # --cluster-id=: an id may start with "-" (URL-safe base64), which "-t ID" reads as a flag
    java_run kafka.tools.StorageTool format --cluster-id="$cid" -c "$CONF" --ignore-formatted >&2
}

wait_ready() {
    local pid="$1" deadline=$((SECONDS + KAFKA_START_TIMEOUT))
    while ((SECONDS < deadline)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$PIDFILE"
            log "broker exited during startup; last log lines:"
            tail -n 40 "$LOGS/kafka.out" "$LOGS/server.log" >&2 2>/dev/null || true
            return 1
        fi
        broker_ready && return 0
        sleep 0.5
    done
    log "broker not ready after ${KAFKA_START_TIMEOUT}s; see $LOGS/server.log"
    return 1
}

cmd_up() {
    local pid t0=$SECONDS
    mkdir -p "$CACHE" "$LOGS"
    command -v "$JAVA" >/dev/null 2>&1 || die "java not found"
    pid="$(running_pid)"
    if [[ -n "$pid" ]]; then
        wait_ready "$pid" || die "running broker (pid $pid) is not healthy"
        log "already running (pid $pid) on 127.0.0.1:$KAFKA_PORT"
        return 0
    fi
    if [[ "$KAFKA_PORT" == "$KAFKA_CONTROLLER_PORT" || "$KAFKA_PORT" == "$KAFKA_SASL_PORT" \
        || "$KAFKA_CONTROLLER_PORT" == "$KAFKA_SASL_PORT" ]]; then
        die "KAFKA_PORT, KAFKA_CONTROLLER_PORT and KAFKA_SASL_PORT must differ"
    fi
    for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$KAFKA_SASL_PORT"; do
        port_open "$p" && die "port $p is already in use by another process"
    done
    ensure_jars
    ensure_tls
    render_config
    format_storage
    # setsid: the broker outlives the calling shell (a non-interactive shell's background
    # child is no group leader, so setsid execs in place and $! is the JVM's pid).
    # 9>&-: the broker must not inherit the lock. kafka.out only catches JVM-level output.
    # shellcheck disable=SC2086
    setsid "$JAVA" $KAFKA_HEAP $KAFKA_JVM_OPTS \
        -Dlog4j.configuration="file:$HERE/log4j.properties" -Dkafka.logs.dir="$LOGS" \
        -cp "$LIBS/*" kafka.Kafka "$CONF" >"$LOGS/kafka.out" 2>&1 </dev/null 9>&- &
    pid=$!
    echo "$pid" >"$PIDFILE"
    log "started broker (pid $pid), waiting for 127.0.0.1:$KAFKA_PORT"
    if ! wait_ready "$pid"; then
        cmd_down || true
        die "Kafka failed to start"
    fi
    log "ready on 127.0.0.1:$KAFKA_PORT in $((SECONDS - t0))s"
}

cmd_down() {
    local pid deadline
    pid="$(running_pid)"
    if [[ -z "$pid" ]]; then
        log "not running"
        return 0
    fi
    log "stopping broker (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + KAFKA_STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "still alive after ${KAFKA_STOP_TIMEOUT}s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    fi
    rm -f "$PIDFILE"
    log "stopped"
}

cmd_status() {
    local pid
    pid="$(running_pid)"
    if [[ -n "$pid" ]]; then
        echo "kafka running (pid $pid) on 127.0.0.1:$KAFKA_PORT"
        return 0
    fi
    echo "kafka not running"
    return 1
}

cmd_jars() {
    command -v "$JAVA" >/dev/null 2>&1 || die "java not found"
    mkdir -p "$LOGS"
    ensure_jars
    ensure_tls
}

cmd_reset() {
    cmd_down
    if [[ ! -e "$DATA" && ! -e "$LOGS" && ! -e "$CONF" ]]; then
        # (another KAFKA_CACHE_DIR's broker keeps its data: say so, not "removed")
        log "no broker data under $CACHE: nothing removed (KAFKA_CACHE_DIR names the broker's)"
        return 0
    fi
    rm -rf "$DATA" "$LOGS" "$CACHE/cluster.id" "$CONF"
    log "data removed from $CACHE"
}

main() {
    local action="${1:-}"
    case "$action" in
        up | down | reset | jars)
            mkdir -p "$CACHE"
            # Serialize concurrent invocations (e.g. parallel test workers).
            exec 9>"$CACHE/.lock"
            flock 9
            "cmd_$action"
            ;;
        status) cmd_status ;;
        *)
            echo "usage: $0 up|down|status|reset|jars" >&2
            exit 2
            ;;
    esac
}

main "$@"
