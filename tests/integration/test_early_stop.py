"""A SIGTERM in a process's first seconds, before its start has got anywhere.

Kubernetes sends SIGTERM whenever it likes (a rollout cancelled right after it began). The
first seconds of ``serve``, ``handler`` and ``projections run`` are Python importing the
code; their signal handlers came only after, and a SIGTERM before them ended Python itself,
status 143. Now a stop signal is held from the start of ``main`` and the process stops
cleanly: exit 0, nothing started (not even the read model's file).

The signal is sent when the process says, in Python's verbose import trace
(``PYTHONVERBOSE``), that it has imported a module: in ``main``'s imports, in the command's,
or inside the event loop before the handlers are in place.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from blackjack.messages.sealing import ShoeSeal
from tests.integration.conftest import WAIT_S
from tests.integration.infra import free_port

pytestmark = pytest.mark.integration

BLACKJACK = Path(sys.executable).parent / "blackjack"
STOPPED_BEFORE = '"stopped before its start"'


async def terminated_after_import(args: list[str], module: str, tmp_path: Path) -> tuple[int, str]:
    """Start ``blackjack ARGS``, send SIGTERM once it has imported ``module``: its exit
    status and its log (stdout)."""
    env = {
        **os.environ,
        "PYTHONVERBOSE": "1",  # a line on stderr for every module imported
        "BLACKJACK_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}",  # nothing listens
        "BLACKJACK_SHOE_KEY": ShoeSeal.new_key_hex(),
        "BLACKJACK_DB_URL": f"sqlite+aiosqlite:///{tmp_path / 'read.db'}",
    }
    process = await asyncio.create_subprocess_exec(
        str(BLACKJACK),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        async with asyncio.timeout(WAIT_S):
            while not (line := await process.stderr.readline()).startswith(
                f"import '{module}' ".encode()
            ):
                assert line, f"the process ended before it imported {module}"
        process.send_signal(signal.SIGTERM)
        # both pipes read to their end: the verbose trace would fill stderr's and block it
        out, _ = await asyncio.wait_for(process.communicate(), 10)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode()


@pytest.mark.parametrize(
    ("args", "module"),
    [
        (["serve"], "blackjack.client_cli"),  # main's own imports
        (["serve"], "blackjack.app"),  # the command's
        (["handler"], "blackjack.command_handler.service"),
        (["projections", "run"], "blackjack.projections.worker"),
    ],
    ids=["serve-main", "serve", "handler", "projections"],
)
async def test_a_sigterm_before_the_signal_handlers_stops_the_process_cleanly(
    args: list[str], module: str, tmp_path: Path
) -> None:
    port = ["--port", str(free_port())] if args[0] == "serve" else []
    status, log = await terminated_after_import([*args, *port], module, tmp_path)
    assert status == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert STOPPED_BEFORE in log, log[-3000:]
    assert not (tmp_path / "read.db").exists()  # nothing started, nothing half-written


async def test_a_sigterm_inside_the_loop_before_the_handlers_stops_the_worker_cleanly(
    tmp_path: Path,
) -> None:
    """``projections run --http`` builds its HTTP server in the event loop, before the
    server puts its signal handlers in place: a signal held until then is taken by them."""
    status, log = await terminated_after_import(
        ["projections", "run", "--http", f"127.0.0.1:{free_port()}"],
        "blackjack.http_server",
        tmp_path,
    )
    assert status == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
