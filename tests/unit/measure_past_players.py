"""What a projection batch costs at a table many players have sat at and left: their
accounts are kept for good (``accounts``), and a batch read every one of them until it read
only the seated players' and those its events name (``projections/writer.py``,
``_Batch.load``; docs/projections.md).

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_past_players [--past 20000]

Two SQLite stores, in this process: a shared table no one had sat at, and one ``--past``
players had each sat at and left. On each, the same events are folded: batches of 500 (250
more players sitting down and leaving) and batches of one event, the median of 5 of each.
The line printed: each store's medians and their ratio (the past players' cost).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration.conftest_projections import event_records, play_tables

TOPIC = "blackjack.events"
REPEATS = 5


class _Table:
    """A shared table's events, made from a played log's opening and first seat taken."""

    def __init__(self) -> None:
        log = play_tables([("t", "atlantic-city-multi")], rounds=1, seed=1)
        seal = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
        envelopes = [json.loads(r.value) for r in event_records(log.envelopes, seal, TOPIC)]
        self.opened = next(e for e in envelopes if e["type"] == "TableOpened")
        self.taken = next(e for e in envelopes if e["type"] == "SeatTaken")
        self.records: list[Record] = []
        self.sequence = 0
        self.players = 0
        self._add(self.opened, {})

    def _add(self, envelope: dict[str, Any], data: dict[str, Any]) -> None:
        made = copy.deepcopy(envelope)
        self.sequence += 1
        made.update(stream_id="big", sequence=self.sequence, event_id=f"big-{self.sequence}")
        made["data"].update(data)
        self.records.append(Record(TOPIC, 0, len(self.records), json.dumps(made).encode()))

    def sit_and_leave(self, count: int) -> list[Record]:
        start = len(self.records)
        for _ in range(count):
            player = f"p{self.players}"
            self.players += 1
            self._add(self.taken, {"player_id": player, "seat": 0})
            left = {**self.taken, "type": "SeatLeft", "schema_version": 2}
            left["data"] = {"type": "SeatLeft", "version": 2, "player_id": player, "seat": 0}
            self._add(left, {"balance_returned": 0, "reason": "left"})
        return self.records[start:]


async def _medians(path: Path, past: int) -> tuple[float, float]:
    """The median seconds of a batch of 500 and of a batch of one, after ``past`` players."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{path}")
    await store.migrate()
    try:
        writer, table = ProjectionWriter(store), _Table()
        await writer.apply(table.records)
        for start in range(0, past, 2_500):
            await writer.apply(table.sit_and_leave(min(2_500, past - start)))
        batches, ones = [], []
        for _ in range(REPEATS):
            records = table.sit_and_leave(250)
            started = time.perf_counter()
            await writer.apply(records)
            batches.append(time.perf_counter() - started)
            [one, _] = table.sit_and_leave(1)
            started = time.perf_counter()
            await writer.apply([one])
            ones.append(time.perf_counter() - started)
            # (its SeatLeft folded untimed: the next player's seat is free)
            await writer.apply(table.records[-1:])
        return statistics.median(batches), statistics.median(ones)
    finally:
        await store.close()


async def main(past: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        none = await _medians(Path(scratch) / "none.db", 0)
        many = await _medians(Path(scratch) / "past.db", past)
    for name, alone, after in (("500 events", none[0], many[0]), ("1 event", none[1], many[1])):
        print(
            f"a batch of {name}: {alone * 1e3:.1f} ms at a new table, {after * 1e3:.1f} ms "
            f"after {past:,} players sat and left: {after / alone:.2f}x"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--past", type=int, default=20_000)
    asyncio.run(main(parser.parse_args().past))
