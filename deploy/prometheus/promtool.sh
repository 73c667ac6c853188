#!/usr/bin/env bash
# promtool, built once from the Go module proxy into the git-ignored .cache/tools/, for
# `promtool check rules` and `promtool test rules` on rules.yml (tests/deploy runs both).
#   deploy/prometheus/promtool.sh                 prints the binary's path (building it first)
#   deploy/prometheus/promtool.sh test rules F    runs it with these arguments
# Built with the remove_all_sd tag: without the service discovery plugins (AWS, Azure,
# Kubernetes, ...), which rule checks and tests never use, the first build takes a fraction
# of the time. Needs Go (on PATH, or /usr/local/go/bin); the build log goes to stderr.
set -euo pipefail

VERSION=v0.316.0 # github.com/prometheus/prometheus v0.316.0: promtool of Prometheus 3.16.0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="$ROOT/.cache/tools/promtool-$VERSION"
PROMTOOL="$DIR/promtool"

if [[ ! -x "$PROMTOOL" ]]; then
    GO="$(command -v go || true)"
    GO="${GO:-/usr/local/go/bin/go}"
    if [[ ! -x "$GO" ]]; then
        echo "promtool.sh: no Go toolchain (on PATH or at /usr/local/go/bin) to build promtool" >&2
        exit 1
    fi
    echo "promtool.sh: building promtool $VERSION into $DIR" >&2
    started=$SECONDS
    if [[ -z "${HOME:-}" ]]; then # Go keeps its caches under HOME
        export GOPATH="$ROOT/.cache/tools/go" GOCACHE="$ROOT/.cache/tools/go-build"
    fi
    GOBIN="$DIR" "$GO" install -tags remove_all_sd \
        "github.com/prometheus/prometheus/cmd/promtool@$VERSION" >&2
    echo "promtool.sh: built in $((SECONDS - started)) s" >&2
fi

if (($# == 0)); then
    echo "$PROMTOOL"
else
    exec "$PROMTOOL" "$@"
fi
