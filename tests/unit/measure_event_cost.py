"""The floor a simulated round cannot go under while its events are pydantic models
(docs/benchmark.md, *The floor*): how many events a round emits, and what building one costs
the cheapest way pydantic allows (``fact.made``, no validation), interpreted or compiled:

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_event_cost [--variant mini-h17]
    PYTHONPATH=.:.build/compiled .venv/bin/python -m tests.unit.measure_event_cost   # compiled

Printed: events a round over 20,000 seeded rounds (each event built in a round counted, a
nested ``PlayerRoundResult`` too), the median nanoseconds of building a ``CardDealt`` (five
runs of 200,000), their product (a round's floor), and that floor's share of a whole round
played in the same process (CPU time of 20,000 rounds): the share is what to compare across
machines and days.
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit
from collections.abc import Callable

from blackjack.domain import events as ev
from blackjack.domain.fact import made
from blackjack.domain.rules import preset
from blackjack.simulation.player import play
from blackjack.strategy import compute_strategy
from blackjack.table import Applied

ROUNDS = 20_000


def events_a_round(variant: str) -> float:
    rules, built = preset(variant), 0

    def count(applied: Applied) -> None:
        nonlocal built
        for event in applied.events:
            built += 1
            if isinstance(event, ev.RoundSettled):
                built += len(event.results)  # its nested PlayerRoundResult models

    play(rules, compute_strategy(rules), ROUNDS, rules.min_bet, seed=7, watch=count)
    return built / ROUNDS


def microseconds_a_round(variant: str) -> float:
    """CPU microseconds of a whole round as the simulator plays it (no watcher)."""
    rules = preset(variant)
    strategy = compute_strategy(rules)
    began = time.process_time()
    play(rules, strategy, ROUNDS, rules.min_bet, seed=7)
    return 1e6 * (time.process_time() - began) / ROUNDS


def nanoseconds_an_event(number: int = 200_000) -> float:
    """A ``CardDealt`` built as ``facts.card_dealt`` builds it (its field dict as a literal,
    then ``fact.made``), less the cost of the timing loop's own call: what the compiled
    decider pays, which calls it by name with no keyword dict."""
    names = set(ev.CardDealt.model_fields)

    def build() -> ev.CardDealt:
        return made(
            ev.CardDealt,
            {
                "version": 1,
                "round": 1,
                "type": "CardDealt",
                "to": "box",
                "box": 0,
                "hand": 0,
                "card": "AS",
                "face_up": True,
            },
            names,
        )

    def median(work: Callable[[], object]) -> float:
        return statistics.median(timeit.repeat(work, number=number, repeat=5)) / number

    return 1e9 * (median(build) - median(lambda: None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="mini-h17")
    variant = parser.parse_args().variant
    events, nanoseconds = events_a_round(variant), nanoseconds_an_event()
    floor, whole = events * nanoseconds / 1000, microseconds_a_round(variant)
    print(
        f"{variant}: {events:.1f} events a round, {nanoseconds:.0f} ns an event: a floor of "
        f"{floor:.1f} us a round, {floor / whole:.0%} of a whole round ({whole:.1f} us)"
    )


if __name__ == "__main__":
    main()
