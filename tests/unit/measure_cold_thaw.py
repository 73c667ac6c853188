"""How long a handler takes to thaw a cold table with a full window of remembered answers
(1,000, ``BLACKJACK_DEDUP_WINDOW``'s default), as it does when a command for it comes: its
answers left as stored, and, for comparison, with every answer read into a result as a thaw
did before (docs/kafka.md, ``BLACKJACK_COLD_AFTER_S``):

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_cold_thaw [--repeats 9]

The table is played through the service's processor (``test_cold_streams.full_window``), its
snapshot sealed once, then opened ``--repeats`` times each way, alternated; the medians are
printed (a machine's figure: the machine is shared)."""

from __future__ import annotations

import argparse
import statistics
import time

from tests.unit.test_cold_streams import full_window

WINDOW = 1_000


def main(repeats: int) -> None:
    stream, codec = full_window(WINDOW)
    raw = codec.encode(stream)
    lazy, every = [], []
    for _ in range(repeats):  # alternated, medians
        started = time.perf_counter()
        codec.decode(raw)
        lazy.append(time.perf_counter() - started)
        started = time.perf_counter()
        list(codec.decode(raw).results.answers())
        every.append(time.perf_counter() - started)
    print(
        f"thaw of {len(stream.results)} answers: {1000 * statistics.median(lazy):.1f} ms, "
        f"{1000 * statistics.median(every):.1f} ms with every answer read"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    main(parser.parse_args().repeats)
