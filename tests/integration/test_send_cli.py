"""``blackjack send``: a command typed at a terminal reaches the handler and its result is
printed."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from blackjack.command_handler.service import CommandHandler
from tests.integration.conftest import KafkaSpace

pytestmark = pytest.mark.integration


async def send(space: KafkaSpace, stream: str, command: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "blackjack.cli",
        "send",
        stream,
        command,
        env={**os.environ, **space.env()},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_command_from_the_terminal_is_answered(
    space: KafkaSpace, handler: CommandHandler
) -> None:
    code, out, err = await send(space, "cli-table", '{"type": "OpenTable", "variant": "mini-h17"}')
    assert code == 0, out + err
    assert json.loads(out)["status"] == "accepted"
    # a rule's refusal is printed too, exit 1
    code, out, err = await send(space, "cli-table", '{"type": "Hit", "player_id": "ann", "box": 0}')
    assert code == 1, out + err
    assert json.loads(out)["rejection"]["code"] == "not_seated"
    # not a command: said before anything is sent, exit 2
    code, out, err = await send(space, "cli-table", '{"type": "Fly"}')
    assert code == 2 and "not a command" in err
