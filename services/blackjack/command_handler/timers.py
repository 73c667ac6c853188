"""The clock's sender: puts the timer and presence commands a partition's tables are due
(``clock.due_commands``) on the commands topic, like any client would.

A command sent waits to be handled like any other; until it is, the same command is due again
at every tick, so each is sent at most once every ``REFIRE_AFTER_S`` (and again after that,
with the same id, in case the first was lost: the handler's idempotency makes the copies one).
The sender is an idempotent producer of its own, outside the partitions' transactions.

While the broker is away a send fails (after the producer's request timeout): the sender then
stops sending for a backoff (``SEND_RETRY_*``, doubled at each failure in a row), leaving the
rest of what is due to the next tick after it, counts each failure
(``blackjack_timer_send_failures_total``) and logs one line per ``FAILED_LOG_EVERY_S`` with the
count of those left out. Before, every due command was tried at every tick, each failure
logged with its whole trace.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, OutOfOrderSequenceNumber

from blackjack.bus.headers import command_headers
from blackjack.bus.producers import started, stopped
from blackjack.bus.topics import partition_for
from blackjack.command_handler.clock import due_commands
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.streams import PartitionStore
from blackjack.error_text import error_text
from blackjack.observability import metrics
from blackjack.observability.logging import Throttled

REFIRE_AFTER_S = 5.0
SEND_RETRY_FIRST_S = 0.5
SEND_RETRY_MAX_S = 10.0
FAILED_LOG_EVERY_S = 30.0


class TimerSender:
    def __init__(self, config: HandlerConfig, log: structlog.stdlib.BoundLogger) -> None:
        self._config = config
        self._log = log
        self._producer: AIOKafkaProducer | None = None
        self._fired: dict[int, dict[str, float]] = {}
        """partition -> command id -> ``time.monotonic()`` of its last sending"""
        self._failures = 0
        """sends failed in a row"""
        self._paused_until = 0.0
        self._failed_logged = Throttled(FAILED_LOG_EVERY_S)

    def _new_producer(self) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            **self._config.kafka.client_options(),
            client_id=f"{self._config.instance_id}-clock",
            enable_idempotence=True,
            acks="all",
            compression_type=self._config.compression_type,
        )

    async def start(self) -> None:
        self._producer = await started(self._new_producer())

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()

    def forget(self, partition: int) -> None:
        """The partition was (re)built: what it is due is sent again at once."""
        self._fired.pop(partition, None)

    async def send_due(
        self, partition: int, store: PartitionStore, now: datetime, mono: float
    ) -> None:
        """Send what the partition's tables are due at ``now`` (``mono``: the monotonic
        clock, for the refiring pause)."""
        if time.monotonic() < self._paused_until:
            return  # the broker failed the last send: tried again after the backoff
        timeout = timedelta(seconds=self._config.presence_timeout_s)
        fired = {
            k: at for k, at in self._fired.get(partition, {}).items() if mono - at < REFIRE_AFTER_S
        }
        self._fired[partition] = fired
        for envelope in list(due_commands(store, now, timeout)):
            if envelope.command_id in fired:
                continue
            fired[envelope.command_id] = mono
            assert self._producer is not None
            try:
                await self._producer.send_and_wait(
                    self._config.topics.commands,
                    envelope.model_dump_json().encode(),
                    key=envelope.stream_id.encode(),
                    headers=command_headers(envelope, self._config.source, None),
                    partition=partition_for(envelope.stream_id, self._config.kafka.partitions),
                )
            except KafkaError as error:  # sent again on a later tick (same id)
                # not sent: due again once the backoff is over, not only after the pause
                # between two firings of one that went out
                del fired[envelope.command_id]
                await self._failed(error)
                return  # the rest is due again at a later tick
            if self._failures:
                self._log.info("timer commands sent again", failures_in_a_row=self._failures)
                self._failures = 0
            metrics.TIMER_COMMANDS.labels(str(envelope.command.type)).inc()
            self._log.info(
                "timer fired",
                command_id=envelope.command_id,
                stream_id=envelope.stream_id,
                command_type=str(envelope.command.type),
            )

    async def _failed(self, error: KafkaError) -> None:
        """Count a failed send, pause the sending (unless the producer is replaced: its
        next send is tried at once) and log one line per ``FAILED_LOG_EVERY_S``."""
        metrics.TIMER_SEND_FAILURES.labels(type(error).__name__).inc()
        self._failures += 1
        pause = min(SEND_RETRY_FIRST_S * 2 ** (self._failures - 1), SEND_RETRY_MAX_S)
        left_out = self._failed_logged.due()
        if left_out is not None:
            self._log.warning(
                "sending timer commands failed; the clock's sends paused",
                error=error_text(error),
                failures_in_a_row=self._failures,
                pause_s=pause,
                lines_left_out=left_out,
            )
        if isinstance(error, OutOfOrderSequenceNumber):
            await self._renew(error)
            return
        self._paused_until = time.monotonic() + pause

    async def _renew(self, error: Exception) -> None:
        """Replace a producer ``OutOfOrderSequenceNumber`` left unusable (``bus.producers``):
        unreplaced, every table's timers would stop. A start that fails is logged and tried
        again at the next failed send (the clock is one task: it never replaces two at once)."""
        try:
            fresh = await started(self._new_producer())
        except Exception:
            self._log.exception("clock producer not replaced; tried again at the next tick")
            return
        self._log.warning("clock producer replaced", error=error_text(error))
        broken, self._producer = self._producer, fresh
        await stopped(broken)
