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
import signal
from collections.abc import Iterator

import uvicorn

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            # a second SIGINT forces the exit, as uvicorn's own handler does
            loop.add_signal_handler(signum, self.handle_exit, signum, None)
        try:
            yield
        finally:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)
