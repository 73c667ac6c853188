"""The clock task: at every tick the tables' due timers sent (``timers``), a quiet partition's
checkpoint, the commands waiting measured, and idle streams kept cold."""

from __future__ import annotations

import asyncio
import time

from blackjack.command_handler.clock import may_come_due
from blackjack.command_handler.transactions import Transactions
from blackjack.error_text import error_text
from blackjack.observability import metrics
from blackjack.observability.roles import kafka_answered

BACKLOG_EVERY_S = 15.0
COLD_SWEEP_EVERY_S = 30.0
FREEZE_AT_ONCE = 1
"""Streams a sweep seals before it lets the rest of the event loop run: sealing a table with a
full window of answers takes about 5 ms of CPU (``measure_checkpoint_stall`` in
tests/integration); ten at a time held the loop about 50 ms per turn."""
BACKLOG_TIMEOUT_S = 2.0


class Ticker(Transactions):
    """The handler's second task, beside the loop."""

    # ---- the clock ----------------------------------------------------------------------

    async def _measure_backlog(self) -> None:
        """How many commands wait in each ready partition, from the broker's end offsets: a
        partition the loop has stopped taking from shows a backlog that grows (the command lag
        histogram only sees commands that were handled). An answer is the handler's proof that
        the brokers answer (``blackjack_kafka_answered_timestamp_seconds``): while they are
        away, the partitions stay ready and the backlog keeps its last figure."""
        assert self._consumer is not None
        ready = {p.tp: p.number for p in self._partitions.values() if p.status == "ready"}
        try:
            if ready:
                ends = await self._consumer.end_offsets(list(ready))
            else:  # nothing to measure, but the brokers must still be seen to answer
                await self._consumer.topics()
                ends = {}
            backlog = {
                ready[tp]: max(end - await self._consumer.position(tp), 0)
                for tp, end in ends.items()
            }
        except Exception as error:  # revoked meanwhile, the broker: measured next time
            self.log.info("backlog not measured", error=error_text(error))
            return
        kafka_answered("handler")
        for number in self._backlog_shown - backlog.keys():
            metrics.COMMAND_BACKLOG.remove(str(number))
        for number, waiting in backlog.items():
            metrics.COMMAND_BACKLOG.labels(str(number)).set(waiting)
        self._backlog_shown = set(backlog)

    async def _tick(self) -> None:
        measured_at = swept_at = time.monotonic()
        while not self._stopping.is_set():
            await asyncio.sleep(self.config.timer_tick_s)
            if time.monotonic() - measured_at >= BACKLOG_EVERY_S:
                # bounded: a broker slow to answer must not hold up the tables' timers
                try:
                    await asyncio.wait_for(self._measure_backlog(), BACKLOG_TIMEOUT_S)
                except TimeoutError:
                    self.log.info("backlog not measured: the broker did not answer in time")
                measured_at = time.monotonic()
            now, mono = self._now(), time.monotonic()
            for partition in list(self._partitions.values()):
                store = partition.store
                if partition.status != "ready" or store is None:
                    continue
                quiet_for = mono - partition.checkpointed_at
                if store.since_checkpoint and quiet_for >= self.config.checkpoint_after_s:
                    await self._checkpoint_if_quiet(partition)
                    store = partition.store
                    if partition.status != "ready" or store is None:
                        continue
                await self._timers.send_due(partition.number, store, now, mono)
            if mono - swept_at >= min(COLD_SWEEP_EVERY_S, self.config.cold_after_s):
                await self._freeze_idle_streams()
                swept_at = mono

    async def _freeze_idle_streams(self) -> None:
        """Keep cold the streams idle for ``cold_after_s`` that no timer can wake, one at a
        time: sealing a table with a full window of answers takes milliseconds, and a sweep
        may find thousands (all those a rebuild or a burst used at once), which in one go
        would hold up the consumer's heartbeats and the clock."""
        frozen, idle_s = 0, self.config.cold_after_s
        for partition in list(self._partitions.values()):
            store = partition.store
            if partition.status != "ready" or store is None or store.codec is None:
                continue
            found = store.idle(idle_s, may_come_due)
            for start in range(0, len(found), FREEZE_AT_ONCE):
                if start:
                    await asyncio.sleep(0)  # the rest of the loop first
                if partition.store is not store or partition.status != "ready":
                    break  # rebuilt or given away meanwhile (a revoked store may be closed)
                # each checked again: a command may have used it meanwhile
                chunk = found[start : start + FREEZE_AT_ONCE]
                frozen += sum(store.freeze(s, idle_s, may_come_due) for s in chunk)
        if frozen:
            self.log.info("idle streams kept cold", streams=frozen)
            self._changed()
