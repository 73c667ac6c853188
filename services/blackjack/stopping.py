"""Start-up steps that give way to a stop: a process waiting at start for its brokers or its
database must still answer SIGTERM at once (Kubernetes kills it after its grace period).

So must a process in its first seconds, importing its code before it has any signal handler
of its own: ``main`` holds the stop signals first thing (``hold_stop_signals``), a command
that stops cleanly starts nothing once one came (``stopped_before_start``), and its handlers
take one that came before them (``on_stop_signal``). Before, a SIGTERM then ended Python
itself, status 143 (a rollout cancelled right after it began).

asyncio and structlog are imported where used: ``main`` holds the signals with this module
before anything else is imported (asyncio alone takes some 45 ms).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_held: list[int] = []
"""Stop signals received while held, not yet taken by a command."""


def hold_stop_signals() -> Callable[[], None]:
    """From now on a SIGTERM or SIGINT is kept for the command (``stopped_before_start``,
    ``on_stop_signal``) instead of acted on. Returns what puts the previous handlers back
    (again: nothing more); a signal no command took is then acted on as it would have been
    (a command that does not stop by itself on one ends as before)."""
    previous: dict[int, Any] = {}

    def held(signum: int, frame: object) -> None:
        _held.append(signum)

    try:
        for signum in STOP_SIGNALS:
            previous[signum] = signal.signal(signum, held)
    except ValueError:  # not the main thread (a test's): signals are not for it
        pass

    def release() -> None:
        for signum, handler in previous.items():  # None: not set from Python (the default)
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        previous.clear()
        if _held:
            signal.raise_signal(_held.pop(0))
            _held.clear()

    return release


def stopped_before_start() -> bool:
    """Whether a stop signal came while held: then the command starts nothing, and exits 0
    (the signal is taken)."""
    if not _held:
        return False
    import structlog

    structlog.get_logger("blackjack").info(
        "stopped before its start", signal=signal.Signals(_held[0]).name
    )
    _held.clear()
    return True


def on_stop_signal(loop: asyncio.AbstractEventLoop, stop: Callable[[int], object]) -> None:
    """``stop(signum)`` on SIGTERM and SIGINT from now on, as the loop's signal handlers, and
    soon for one held since the start of ``main`` that came in between."""
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    if _held:  # read once the loop's handlers are in place: a signal is either here or theirs
        loop.call_soon(stop, _held[0])
        _held.clear()


async def unless_stopped(step: Awaitable[Any], stopped: asyncio.Future[Any]) -> bool:
    """Run ``step`` unless ``stopped`` ends first (a signal, or the HTTP server failing, whose
    error is raised here): whether the step ran to its end (its own error is raised)."""
    import asyncio

    running = asyncio.ensure_future(step)
    await asyncio.wait({running, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if running.done():
        running.result()
        return True
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    stopped.result()
    return False
