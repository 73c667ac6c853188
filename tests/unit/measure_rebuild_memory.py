"""A partition rebuilt from its whole log (no checkpoint to trust) with every answer past the
results topic's retention: the rebuild's peak memory by how many commands the log holds
(docs/operations.md, the handler's rebuild):

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_rebuild_memory 2500 10000

One mini-h17 table, that many deposits (``test_handler_windows._deposits``: each an accepted
command with an event; at most 10,000, the ids of money commands a stream keeps), a dedup
window of 1,000, rebuilt through the service's replay over a log held in memory
(``committed_log.CommittedLog``). Measured with tracemalloc: the rebuild's peak. It held a
``CommandResult`` for every command the log proved accepted; since the thirty-fifth session
a stream's newest 1,000 only."""

from __future__ import annotations

import asyncio
import sys
import time
import tracemalloc

from tests.unit.processor_harness import TOPICS
from tests.unit.test_handler_windows import Handler, _deposits


async def measure(deposits: int) -> None:
    handler = Handler(window=1000)
    _deposits(handler, "solo-1", deposits)
    handler.log.expire(TOPICS.results)
    tracemalloc.start()
    started = time.perf_counter()
    await handler.take_over()
    took = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    window = len(handler.store.streams["solo-1"].results)
    print(f"{deposits:,} deposits: peak {peak / 2**20:.1f} MiB in {took:.1f} s, window {window}")


if __name__ == "__main__":
    for count in sys.argv[1:] or ["2500", "10000"]:
        asyncio.run(measure(int(count)))
