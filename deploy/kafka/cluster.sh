#!/usr/bin/env bash
# A three-node Apache Kafka cluster (KRaft, each node broker + controller) on this machine, to
# prove what a single node cannot: a broker of three lost under load, its partitions' leaders
# and the transaction coordinators moving to the others, with every topic replicated.
#
#   deploy/kafka/cluster.sh up|down|status|reset
#   deploy/kafka/cluster.sh stop N|kill N|start N      one node (1-3): SIGTERM, SIGKILL, up again
#   deploy/kafka/cluster.sh bootstrap                  prints the three PLAINTEXT addresses
#
# Each node is deploy/kafka/kafka.sh with its own data, logs and ports, the jars and the TLS
# files of the single node's cache shared. Node N listens on PLAINTEXT KAFKA_CLUSTER_PORT + 3(N-1),
# its controller on the next port, SASL_SSL on the one after. Internal topics (offsets,
# transactions) have 3 replicas and a minimum of 2 in sync, so one node may be down.
#
# Env: KAFKA_CLUSTER_PORT (29192), KAFKA_CLUSTER_DIR (<repo>/.cache/kafka-cluster),
#      KAFKA_CACHE_DIR (the single node's cache, for its jars and TLS files), KAFKA_HEAP
#      (-Xmx512m -Xms128m a node), and kafka.sh's KAFKA_START_TIMEOUT and KAFKA_STOP_TIMEOUT.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
KAFKA_SH="$HERE/kafka.sh"

BASE="${KAFKA_CLUSTER_PORT:-29192}"
DIR="${KAFKA_CLUSTER_DIR:-$ROOT/.cache/kafka-cluster}"
SHARED="${KAFKA_CACHE_DIR:-$ROOT/.cache/kafka}"
export KAFKA_HEAP="${KAFKA_HEAP:--Xmx512m -Xms128m}"
NODES=(1 2 3)

log() { echo "cluster.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

port_of() { echo $((BASE + 3 * ($1 - 1))); }

# Every node's address at port offset $1 (0 PLAINTEXT, 1 controller), each after "N@" when $2
# is given (the quorum's voters).
addresses() {
    local n out=""
    for n in "${NODES[@]}"; do
        out+="${out:+,}${2:+$n@}127.0.0.1:$(($(port_of "$n") + $1))"
    done
    echo "$out"
}

# kafka.sh for node N, with that node's ports, cache and place in the quorum.
node() {
    local n="$1" port
    shift
    port="$(port_of "$n")"
    KAFKA_PORT="$port" KAFKA_CONTROLLER_PORT=$((port + 1)) KAFKA_SASL_PORT=$((port + 2)) \
        KAFKA_CACHE_DIR="$DIR/node$n" KAFKA_NODE_ID="$n" KAFKA_QUORUM_VOTERS="$(addresses 1 voters)" \
        KAFKA_REPLICAS=3 KAFKA_MIN_ISR=2 KAFKA_CLUSTER_ID="$(cat "$DIR/cluster.id")" \
        KAFKA_LIBS_DIR="$SHARED/libs" KAFKA_TLS_DIR="$SHARED/tls" \
        "$KAFKA_SH" "$@"
}

valid_node() {
    [[ "${1:-}" =~ ^[1-3]$ ]] || die "a node is 1, 2 or 3, not '${1:-}'"
}

pid_of() { cat "$DIR/node$1/kafka.pid" 2>/dev/null || true; }

cmd_up() {
    local n pids=() failed=0 t0=$SECONDS
    KAFKA_CACHE_DIR="$SHARED" "$KAFKA_SH" jars
    mkdir -p "$DIR"
    if [[ ! -s "$DIR/cluster.id" ]]; then
        # the id kafka-storage would make: 16 random bytes, URL-safe base64 without padding,
        # never starting with "-" (Kafka's Uuid draws again: a tool's "-t ID" reads it as a flag)
        python3 -c 'import base64, os
while (cid := base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")).startswith("-"):
    pass
print(cid)' >"$DIR/cluster.id"
    fi
    # all at once: a node serves only once a majority of the controllers has met
    for n in "${NODES[@]}"; do
        node "$n" up &
        pids+=($!)
    done
    for n in "${pids[@]}"; do
        wait "$n" || failed=1
    done
    ((failed == 0)) || die "a node did not start (logs: $DIR/node*/logs)"
    log "three nodes ready on $(cmd_bootstrap) in $((SECONDS - t0))s"
}

cmd_down() {
    local n
    [[ -d "$DIR" ]] || { log "not running"; return 0; }
    for n in "${NODES[@]}"; do
        [[ -s "$DIR/cluster.id" ]] && node "$n" down &
    done
    wait
}

cmd_status() {
    local n up=0
    for n in "${NODES[@]}"; do
        if [[ -s "$DIR/cluster.id" ]] && node "$n" status >/dev/null; then
            echo "node $n running on 127.0.0.1:$(port_of "$n")"
            up=$((up + 1))
        else
            echo "node $n not running"
        fi
    done
    ((up == ${#NODES[@]}))
}

cmd_reset() {
    cmd_down
    rm -rf "$DIR"
    log "data removed"
}

cmd_bootstrap() { addresses 0; }

cmd_kill() {
    local pid
    pid="$(pid_of "$1")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || die "node $1 is not running"
    kill -KILL "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    rm -f "$DIR/node$1/kafka.pid"
    log "node $1 killed (pid $pid)"
}

main() {
    local action="${1:-}"
    case "$action" in
        up | down | status | reset | bootstrap) "cmd_$action" ;;
        stop | start | kill)
            valid_node "${2:-}"
            [[ -s "$DIR/cluster.id" ]] || die "no cluster here ($DIR): run '$0 up' first"
            case "$action" in
                stop) node "$2" down ;;
                start) node "$2" up ;;
                kill) cmd_kill "$2" ;;
            esac
            ;;
        *)
            echo "usage: $0 up|down|status|reset|bootstrap|stop N|start N|kill N" >&2
            exit 2
            ;;
    esac
}

main "$@"
