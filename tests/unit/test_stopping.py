"""A stop signal in a process's first seconds (``blackjack.stopping``): held from the start of
``main``, taken by the command that stops cleanly (before its start, or by its signal
handlers once they are in place), acted on as before by any other command.

The processes themselves: tests/integration/test_early_stop.py."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from blackjack.stopping import (
    STOP_SIGNALS,
    hold_stop_signals,
    on_stop_signal,
    stopped_before_start,
)


@pytest.fixture
def acted_on() -> Iterator[list[int]]:
    """The signals that reached the handlers in place before the hold (the default actions'
    place: those would end the test run)."""
    received: list[int] = []
    previous = {
        s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in STOP_SIGNALS
    }
    yield received
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def test_a_signal_no_command_takes_is_acted_on_when_released(acted_on: list[int]) -> None:
    """``blackjack audit`` and the other commands end on SIGTERM as they always did."""
    release = hold_stop_signals()
    signal.raise_signal(signal.SIGTERM)
    assert acted_on == []  # held
    release()
    assert acted_on == [signal.SIGTERM]
    release()  # again (``main``'s last word): nothing more
    signal.raise_signal(signal.SIGINT)  # the handlers from before are back
    assert acted_on == [signal.SIGTERM, signal.SIGINT]


def test_a_command_signalled_before_its_start_starts_nothing_and_takes_it(
    acted_on: list[int],
) -> None:
    release = hold_stop_signals()
    try:
        assert not stopped_before_start()
        signal.raise_signal(signal.SIGTERM)
        with capture_logs() as logs:
            assert stopped_before_start()
        assert [(e["event"], e["signal"]) for e in logs] == [
            ("stopped before its start", "SIGTERM")
        ]
    finally:
        release()
    assert acted_on == []  # taken: not acted on again


async def test_a_signal_held_until_the_loops_handlers_are_in_place_is_theirs(
    acted_on: list[int],
) -> None:
    """A SIGTERM between the last look (``stopped_before_start``) and the handlers."""
    loop = asyncio.get_running_loop()
    release = hold_stop_signals()
    try:
        signal.raise_signal(signal.SIGTERM)
        taken: asyncio.Future[int] = loop.create_future()
        on_stop_signal(loop, taken.set_result)
        try:
            assert await asyncio.wait_for(taken, 5) == signal.SIGTERM
        finally:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)
    finally:
        release()
    assert acted_on == []
