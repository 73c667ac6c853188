"""uvicorn for the service's HTTP endpoints, with the process's shutdown left to its caller.

uvicorn (0.29 and later) raises a SIGTERM or SIGINT it caught again once it has shut down,
and with the default handler back in place that kills the process there: whatever the
caller does after ``serve()`` returns (a projection worker leaving its consumer group and
closing its store) never ran, and the process ended with status 143 after a clean stop.
Here the signal only asks the server to stop, and the caller decides the exit status.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import uvicorn

from blackjack.stopping import STOP_SIGNALS, on_stop_signal


class Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None] | None = None):
        """``on_exit``: told at once when a signal asks the server to stop (``serve`` halts
        its start there: uvicorn's shutdown of the app comes only after its connections)."""
        super().__init__(config)
        self.on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self.on_exit is not None:
            self.on_exit()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only (as uvicorn's own)
            return
        loop = asyncio.get_running_loop()
        # a SIGTERM that came before, while the process was importing, is taken here too
        on_stop_signal(loop, lambda signum: self.handle_exit(signum, None))
        try:
            yield
        finally:
            # back to the default actions: a second signal during the caller's shutdown
            # ends the process at once
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)
