"""A fingerprint of simulated play: sha256 over every event and every state after every
command of seeded rounds. Equal fingerprints from two builds of the engine (interpreted, and
compiled by ``deploy/mypyc/build.sh``) mean they played exactly the same game."""

from __future__ import annotations

import hashlib
import json
import sys

from blackjack.domain.rules import PRESETS, Rules
from blackjack.simulation.player import play
from blackjack.strategy import compute_strategy
from blackjack.table import Applied


def play_digest(rules: Rules, rounds: int, seed: int) -> str:
    digest = hashlib.sha256()

    def watch(applied: Applied) -> None:
        for event in applied.events:
            digest.update(event.model_dump_json().encode())
        digest.update(json.dumps(applied.state.to_doc(), sort_keys=True).encode())

    tally = play(rules, compute_strategy(rules), rounds, rules.min_bet, seed, watch=watch)
    digest.update(f"{tally.rounds}/{tally.net}/{tally.net_squares}".encode())
    return digest.hexdigest()


def compiled_modules() -> list[str]:
    """The modules of this package loaded from C extensions (a mypyc build), if any."""
    loaded = list(sys.modules.items())
    files = {name: getattr(module, "__file__", None) or "" for name, module in loaded}
    return sorted(n for n, f in files.items() if n.startswith("blackjack.") and f.endswith(".so"))


def main(argv: list[str]) -> None:
    """``python -m blackjack.simulation.digest ROUNDS SEED``: every preset's digest, as JSON."""
    rounds, seed = int(argv[0]), int(argv[1])
    digests = {name: play_digest(rules, rounds, seed) for name, rules in PRESETS.items()}
    print(json.dumps({"compiled": compiled_modules(), "digests": digests}))


if __name__ == "__main__":
    main(sys.argv[1:])
