"""The clock's sender while the broker is away: each ``send_and_wait`` fails (after the
producer's request timeout). Before, every due command was tried at every tick and each
failure logged with its whole trace (``log.exception``): 3 tables due, 4 ticks, 12 sends and
12 traces. Now the first failure pauses the sends for a backoff, is counted
(``blackjack_timer_send_failures_total``) and logged on one throttled line."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError
from prometheus_client import REGISTRY

from blackjack.command_handler import timers
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.streams import PartitionStore
from blackjack.command_handler.timers import TimerSender
from blackjack.domain import commands as cmd
from blackjack.messages.envelope import CommandEnvelope
from blackjack.messages.sealing import ShoeSeal


class Away:
    """A producer whose broker is away: every send times out."""

    def __init__(self) -> None:
        self.tried = 0

    async def send_and_wait(self, topic: str, value: bytes, **_: Any) -> Any:
        self.tried += 1
        raise KafkaTimeoutError()


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        def line(event: str, **fields: Any) -> None:
            self.lines.append((level, event, fields))

        return line


def due(n: int) -> list[CommandEnvelope]:
    return [
        CommandEnvelope(
            command_id=f"expire-t{i}-1",
            stream_id=f"t{i}",
            sent_at=datetime(2026, 1, 1, tzinfo=UTC),
            command=cmd.ExpireTimers(),
        )
        for i in range(n)
    ]


def failures() -> float:
    value = REGISTRY.get_sample_value(
        "blackjack_timer_send_failures_total", {"error": "KafkaTimeoutError"}
    )
    return value or 0.0


async def test_a_broker_away_pauses_the_clock_with_one_line_and_a_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(timers, "due_commands", lambda store, now, timeout: due(3))
    monkeypatch.setattr(timers, "REFIRE_AFTER_S", 0.0)  # due again at every tick
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])  # the sender's and the log's
    log = Log()
    config = HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g")
    sender = TimerSender(config, log)  # type: ignore[arg-type]
    producer = Away()
    sender._producer = producer
    counted = failures()
    store, now = PartitionStore(0), datetime(2026, 1, 1, tzinfo=UTC)
    for _tick in range(4):  # four ticks within the first backoff
        await sender.send_due(0, store, now, clock[0])
        clock[0] += 0.1
    assert producer.tried == 1  # not 12: the rest wait for the backoff
    assert failures() - counted == 1
    [(level, event, fields)] = log.lines
    assert level == "warning" and "paused" in event
    assert fields["failures_in_a_row"] == 1 and fields["lines_left_out"] == 0
    clock[0] += timers.SEND_RETRY_FIRST_S  # the backoff over: tried again, once
    await sender.send_due(0, store, now, clock[0])
    assert producer.tried == 2 and failures() - counted == 2
    assert len(log.lines) == 1  # within FAILED_LOG_EVERY_S: counted, not logged


async def test_a_timer_whose_send_failed_is_sent_again_once_the_backoff_is_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command that failed stayed marked as fired, so it was due again only after the
    pause between two firings (``REFIRE_AFTER_S``, 5 s), not after the send's backoff (the
    table's turn clock ran late by seconds; review of the clock, session 34)."""
    monkeypatch.setattr(timers, "due_commands", lambda store, now, timeout: due(1))
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    config = HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g")
    sender = TimerSender(config, Log())  # type: ignore[arg-type]
    producer = Away()
    sender._producer = producer
    store, now = PartitionStore(0), datetime(2026, 1, 1, tzinfo=UTC)
    await sender.send_due(0, store, now, clock[0])
    assert producer.tried == 1
    clock[0] += timers.SEND_RETRY_FIRST_S  # the backoff over, the refiring pause not
    assert timers.SEND_RETRY_FIRST_S < timers.REFIRE_AFTER_S
    await sender.send_due(0, store, now, clock[0])
    assert producer.tried == 2
