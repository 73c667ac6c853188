"""``blackjack send``: a command typed at a terminal reaches the handler and its result is
printed, then the events it wrote."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from blackjack.command_handler.service import CommandHandler
from tests.integration.conftest import KafkaSpace

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]


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
    first, *events = out.splitlines()
    assert json.loads(first)["status"] == "accepted"
    assert events[0].startswith("  1 TableOpened {")
    for command in (
        '{"type": "SitDown", "player_id": "ann", "seat": 0}',
        '{"type": "Deposit", "player_id": "ann", "amount": 10000}',
        '{"type": "PlaceBet", "player_id": "ann", "box": 0, "amount": 500}',
    ):
        code, out, err = await send(space, "cli-table", command)
        assert code == 0, out + err
    code, out, err = await send(space, "cli-table", '{"type": "Deal", "player_id": "ann"}')
    assert code == 0, out + err
    first, *events = out.splitlines()
    result = json.loads(first)
    # every event of the deal, in order, each once: the cards and then whose turn it is
    sequences = [int(line.split()[0]) for line in events]
    assert sequences == list(range(result["first_sequence"], result["last_sequence"] + 1))
    assert "DealRequested" in events[0] and any("DealStarted" in line for line in events)
    last_type, last_data = events[-1].split()[1:]
    if last_type == "TurnStarted":  # not a natural or an ace up: the buttons
        assert "stand" in json.loads(last_data)["actions"]
    # a rule's refusal is printed too, exit 1
    code, out, err = await send(space, "cli-table", '{"type": "Hit", "player_id": "bo", "box": 0}')
    assert code == 1, out + err
    assert json.loads(out)["rejection"]["code"] == "not_seated"  # and no event line
    # not a command: said before anything is sent, exit 2
    code, out, err = await send(space, "cli-table", '{"type": "Fly"}')
    assert code == 2 and "not a command" in err
