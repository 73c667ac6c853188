"""A command id is the idempotency key of one stream: the same id sent to two streams is two
commands, each accepted and answered under that id (the Node.js integrator's client sent an
`OpenTable` under one id to two tables: two `accepted` answers, each `first_sequence` 1). A
client that matched answers by id alone gave one stream's answer to the other's command."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from blackjack.client import BlackjackClient
from blackjack.domain import commands as cmd
from blackjack.messages.envelope import CommandResult

ROOT = Path(__file__).parents[2]


def _answer(stream_id: str, status: Literal["accepted", "rejected"] = "accepted") -> CommandResult:
    return CommandResult(
        command_id="same-id",
        stream_id=stream_id,
        status=status,
        first_sequence=1,
        last_sequence=2,
        handled_at=datetime(2026, 12, 3, tzinfo=UTC),
    )


def started_offline(client: BlackjackClient) -> BlackjackClient:
    """``client`` as ``start()`` leaves it, without a broker: its producer and consumer are the
    test's (a send or ``result`` of a client never started raises ``ClientStopped``)."""
    loop = asyncio.get_running_loop()
    client._loop, client._ready = loop, loop.create_future()
    client._ready.set_result(None)
    return client


class _Record:
    """A record of the results topic as aiokafka hands it over."""

    def __init__(self, result: CommandResult, offset: int) -> None:
        self.topic, self.partition, self.offset = "blackjack.command-results", 0, offset
        self.key = result.stream_id.encode()
        self.headers: list[tuple[str, bytes]] = []
        self.value = result.model_dump_json().encode()
        self.timestamp = 0


class _Results:
    """The client's consumer of the results topic: hands over what the test puts in."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[_Record] = asyncio.Queue()

    async def getmany(self, timeout_ms: int) -> dict[str, list[_Record]]:
        return {"results-0": [await self.queue.get()]}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return None  # (no metadata: no partition added)

    def assignment(self) -> set[object]:
        return set()


async def test_two_streams_sent_one_id_each_get_their_own_answer() -> None:
    # not connected: its reader gets the answers below
    client = started_offline(BlackjackClient("127.0.0.1:1"))
    results = _Results()
    client._results_reader.consumer = results
    reader = asyncio.create_task(client._results_reader.read())
    sent: list[str] = []

    async def send(stream_id: str, command: object, **_: object) -> str:
        sent.append(stream_id)
        return "same-id"

    client.send = send  # type: ignore[method-assign]
    deal = cmd.Deal(player_id="p")
    at_a = asyncio.create_task(client.execute("table-a", deal, command_id="same-id"))
    at_b = asyncio.create_task(client.execute("table-b", deal, command_id="same-id"))
    async with asyncio.timeout(5):  # each loop turn (not polled: the answers come next)
        while len(sent) < 2:
            await asyncio.sleep(0)
    await results.queue.put(_Record(_answer("table-b"), 7))  # b's handler answers first
    await results.queue.put(_Record(_answer("table-a", "rejected"), 8))
    try:
        a, b = await asyncio.wait_for(asyncio.gather(at_a, at_b), 5)
    finally:
        reader.cancel()
    assert (a.stream_id, a.status) == ("table-a", "rejected")
    assert (b.stream_id, b.status) == ("table-b", "accepted")
    assert [r.stream_id for r in client.results_for("same-id")] == ["table-b", "table-a"]
    assert client.results_for("same-id", "table-a") == [a]
    assert await client.result("same-id", stream_id="table-a") == a


def test_the_docs_say_a_command_id_is_one_stream_s_key() -> None:
    text = (ROOT / "docs" / "kafka.md").read_text()
    commands = " ".join(text[text.index("`command_id` is the idempotency key") :][:700].split())
    assert "the same id sent to two streams is two commands" in commands
    assert "(`stream_id`, `command_id`)" in commands
    readme = (ROOT / "README.md").read_text()
    row = next(
        line for line in readme.splitlines() if line.startswith("| `blackjack.command-results`")
    )
    assert "(`stream_id`, `command_id`)" in row


def test_the_readme_names_a_table_account_s_fields_as_the_query_api_answers_them() -> None:
    # The Node client looked for the README's "deposits, withdrawals" and "in play" in the
    # wallet answer: its fields are deposited, withdrawn, in_play (and cashed_out, unnamed).
    import json
    import re

    answer = json.loads((ROOT / "schemas" / "query-api.openapi.json").read_text())
    fields = set(answer["components"]["schemas"]["TableAccount"]["properties"])
    readme = (ROOT / "README.md").read_text()
    row = next(
        line for line in readme.splitlines() if line.startswith("| `/v1/players/{id}/wallet`")
    )
    named = set(re.findall(r"`([a-z_]+)`", row[row.index("`tables`: ") :]))
    assert named - {"tables", "totals"} <= fields
    assert {"available", "in_play", "deposited", "withdrawn", "cashed_out"} <= named
