"""GLI-19 interrupted games on the real broker: a handler process is killed (SIGKILL) in the
middle of a round; the next one takes the partition over, and the round's next command writes
``RoundResumed`` before its own events, in its transaction: one marker, right after the last
event before the kill. The round's recall (the read model's log, ``blackjack replay``) shows it
and ``blackjack audit`` passes."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from blackjack.client import BlackjackClient
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.projections.queries import round_detail
from blackjack.projections.rebuild import rebuild
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration import cli_runs
from tests.integration.conftest import WAIT_S, KafkaSpace, stream_events, verify_stream
from tests.integration.test_handler_failover import (
    finish_round,
    open_round,
    start_handler,
    table_state,
)

pytestmark = pytest.mark.integration

TABLE = "resumed-1"


async def dealt_round(client: BlackjackClient, space: KafkaSpace) -> int:
    """A round whose cards are out and not settled (a blackjack settles at the deal: the
    table bets and deals again); its number."""
    await open_round(client, TABLE, "mini-h17")
    for _ in range(10):
        state = await table_state(space, TABLE)
        if state.boxes_in_play():
            return state.round
        for command in (
            cmd.PlaceBet(player_id="p", box=0, amount=1_000),
            cmd.Deal(player_id="p"),
        ):
            assert (await client.execute(TABLE, command, timeout=WAIT_S)).status == "accepted"
    raise AssertionError("ten rounds settled at the deal")


async def next_move(client: BlackjackClient, space: KafkaSpace) -> str:
    """The move the round waits for (insurance declined, or a stand), sent; its command id."""
    box = (await table_state(space, TABLE)).boxes[0]
    if box.insurance == "offered":
        move: Any = cmd.DeclineInsurance(player_id="p", box=0)
    else:
        move = cmd.Stand(player_id="p", box=0)
    result = await client.execute(TABLE, move, timeout=60)
    assert result.status == "accepted", result.rejection
    return result.command_id


def blackjack(space: KafkaSpace, db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cli_runs.blackjack(*args, env={**os.environ, **space.env(), "BLACKJACK_DB_URL": db_url})


async def test_a_handler_killed_mid_round_leaves_one_marker_the_recall_and_audit_read(
    kafka_space: Any, tmp_path: Path
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    log = tmp_path / "handlers.log"
    first = start_handler(space, log)
    second = None
    try:
        async with space.client() as client:
            number = await dealt_round(client, space)
            before = (await stream_events(space, TABLE))[-1]
            first.send_signal(signal.SIGKILL)
            assert first.wait(timeout=WAIT_S) == -signal.SIGKILL
            second = start_handler(space, log)
            resumed_by = await next_move(client, space)
            assert await finish_round(client, space, TABLE) == number
        events = await stream_events(space, TABLE)
        markers = [e for e in events if isinstance(e.data, ev.RoundResumed)]
        assert [m.sequence for m in markers] == [before.sequence + 1]
        [marker] = markers
        assert marker.data == ev.RoundResumed(round=number, last_event_at=before.occurred_at)
        after = events[marker.sequence]  # the next event: the move's own, in its transaction
        assert marker.causation_id == after.causation_id == resumed_by
        assert not isinstance(after.data, ev.RoundResumed)
        check = await verify_stream(space, TABLE)  # the engine's events, the marker apart
        assert check.resumed == 1 and not check.state.round_open
        waited = (marker.occurred_at - before.occurred_at).total_seconds()
        print(f"round {number} waited {waited:.1f}s between the kill and the marker")  # report

        url = f"sqlite+aiosqlite:///{tmp_path / 'projections.db'}"
        store = ProjectionStore(url)
        try:
            await store.migrate()
            await rebuild(ProjectionWriter(store), space.bootstrap, space.topics.events)
            async with store.engine.connect() as connection:
                recalled = await round_detail(connection, TABLE, number)
        finally:
            await store.close()
        assert recalled is not None
        entries = [(e["sequence"], e["event"]) for e in recalled["log"]]
        at = entries.index((marker.sequence, "RoundResumed"))
        assert entries[at - 1] == (before.sequence, before.type)
        assert entries[at + 1] == (after.sequence, after.type)
        [entry] = [e for e in recalled["log"] if e["event"] == "RoundResumed"]
        assert entry["command_id"] == resumed_by and entry["decided_by"] is None

        replayed = blackjack(space, url, "replay", f"{TABLE}:{number}")
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        assert "the service was interrupted after" in replayed.stdout
        assert "REPLAY OK" in replayed.stdout
        audited = blackjack(space, url, "audit")
        assert audited.returncode == 0, audited.stdout + audited.stderr
        assert "AUDIT PASSED" in audited.stdout
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
