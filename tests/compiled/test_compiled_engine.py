"""The rules engine compiled by mypyc (``deploy/mypyc/build.sh``, what ``make bench-compiled``
and a compiled ``blackjack simulate`` run) plays exactly the game the interpreted one plays:
same events, same states after every command, same money, for every preset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from blackjack.domain.rules import PRESETS
from blackjack.simulation.digest import play_digest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / ".build" / "compiled"
ROUNDS = 300
SEED = 7


def test_the_compiled_engine_plays_exactly_like_the_interpreted_one() -> None:
    env = {**os.environ, "PY": sys.executable}
    subprocess.run([str(ROOT / "deploy" / "mypyc" / "build.sh")], check=True, env=env)
    done = subprocess.run(
        [sys.executable, "-m", "blackjack.simulation.digest", str(ROUNDS), str(SEED)],
        env={**os.environ, "PYTHONPATH": str(BUILD)},
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout.splitlines()[-1])
    # The hot modules really are C extensions in that run, not the interpreted source.
    for module in ("decide", "evolve", "state"):
        assert f"blackjack.domain.{module}" in report["compiled"], report["compiled"]
    interpreted = {name: play_digest(rules, ROUNDS, SEED) for name, rules in PRESETS.items()}
    assert report["digests"] == interpreted
