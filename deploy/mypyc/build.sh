#!/usr/bin/env bash
# Compile the rules engine with mypyc into .build/compiled/ (a copy of the package with the
# hot modules as C extensions). The source is the same: nothing here forks the rules. The
# simulator and the benchmark run on it with PYTHONPATH=.build/compiled (make bench-compiled);
# the service and the tests run the interpreted package. Rebuilt only when a source changes.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PY:-.venv/bin/python}"
OUT=.build/compiled
# The modules a simulated round runs through. Left interpreted: the pydantic models (events,
# commands, rules, rejections; mypyc cannot compile pydantic classes) and legal.py (it defines
# some).
MODULES=(
  blackjack/domain/cards.py
  blackjack/domain/hand.py
  blackjack/domain/payouts.py
  blackjack/domain/fact.py
  blackjack/domain/facts.py
  blackjack/domain/transfers.py
  blackjack/domain/state.py
  blackjack/domain/evolve.py
  blackjack/domain/shoe.py
  blackjack/domain/decisions/draft.py
  blackjack/domain/decisions/checks.py
  blackjack/domain/decisions/options.py
  blackjack/domain/decisions/dealing.py
  blackjack/domain/decisions/settlement.py
  blackjack/domain/decisions/play.py
  blackjack/domain/decisions/insurance.py
  blackjack/domain/decisions/betting.py
  blackjack/domain/decisions/seats.py
  blackjack/domain/decisions/funds.py
  blackjack/domain/decisions/shuffle.py
  blackjack/domain/decisions/clock.py
  blackjack/domain/decisions/interruption.py
  blackjack/domain/decide.py
  blackjack/table.py
  blackjack/simulation/player.py
)
hash="$( (cat deploy/mypyc/build.sh; find services/blackjack -name '*.py' | sort | xargs cat; "$PY" -c 'import mypy.version, sys; print(mypy.version.__version__, sys.version)') | sha256sum | cut -d' ' -f1)"
if [[ -f "$OUT/SOURCE_HASH" && "$(cat "$OUT/SOURCE_HASH")" == "$hash" ]]; then
  echo "mypyc build up to date: $OUT" >&2
  exit 0
fi
rm -rf "$OUT"
mkdir -p "$OUT"
cp -r services/blackjack "$OUT/"
find "$OUT" -name __pycache__ -prune -exec rm -rf {} +
printf '[mypy]\nplugins = pydantic.mypy\nignore_missing_imports = True\n' > "$OUT/mypy.ini"
echo "mypyc: compiling ${#MODULES[@]} modules into $OUT (under a minute)" >&2
MYPYC="$(cd "$(dirname "$PY")" && pwd)/mypyc"
(cd "$OUT" && MYPYC_OPT_LEVEL=3 "$MYPYC" "${MODULES[@]}" > build.log 2>&1) || {
  tail -30 "$OUT/build.log" >&2
  exit 1
}
rm -rf "$OUT/build"
echo "$hash" > "$OUT/SOURCE_HASH"
echo "mypyc build ready: $OUT" >&2
