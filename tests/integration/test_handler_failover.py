"""Handlers come and go; rounds do not notice.

* A handler process (started through the CLI) is killed with SIGKILL in the middle of rounds,
  with commands in flight; another process takes over. Every round resumes from its sealed
  shoe and finishes; no event is lost or written twice; every command has exactly one result.
* Two handler instances in one consumer group share the partitions; stopping one moves its
  tables, rounds in progress, to the other.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from blackjack.bus.topics import partition_for
from blackjack.client import BlackjackClient
from blackjack.domain import commands as cmd
from blackjack.domain.evolve import fold
from blackjack.domain.state import TableState
from tests.integration.conftest import (
    WAIT_S,
    KafkaSpace,
    read_topic,
    running_handler,
    stream_events,
    table_events,
    verify_stream,
)

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

BLACKJACK = Path(sys.executable).parent / "blackjack"
VARIANTS = ["mini-h17", "mini-s17", "atlantic-city", "surrender"]


def start_handler(space: KafkaSpace, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(BLACKJACK), "handler"],
            env={**os.environ, **space.env()},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def table_state(space: KafkaSpace, table: str) -> TableState:
    return fold(table_events(await stream_events(space, table)))


async def open_round(client: BlackjackClient, table: str, variant: str) -> None:
    for command in (
        cmd.OpenTable(variant=variant),
        cmd.SitDown(player_id="p"),
        cmd.Deposit(player_id="p", amount=100_000),
        cmd.PlaceBet(player_id="p", box=0, amount=1_000),
        cmd.Deal(player_id="p"),
    ):
        result = await client.execute(table, command, timeout=WAIT_S)
        assert result.status == "accepted", (table, command, result.rejection)


async def finish_round(client: BlackjackClient, space: KafkaSpace, table: str) -> int:
    """Play the round to its end with whatever the table offers: decline insurance, hit
    below 12, stand otherwise. Returns the number of rounds settled at the table."""
    for _ in range(40):
        state = await table_state(space, table)
        if not state.boxes_in_play():
            return state.round
        box = state.boxes[0]
        if box.insurance == "offered":
            command: Any = cmd.DeclineInsurance(player_id="p", box=0)
        elif state.active is not None:
            hand = box.hands[state.active[1]]
            play = cmd.Hit if hand.total.best < 12 else cmd.Stand
            command = play(player_id="p", box=0)
        else:
            raise AssertionError(f"{table}: a round in play with nothing to decide: {state}")
        result = await client.execute(table, command, timeout=WAIT_S)
        assert result.status == "accepted", (table, command, result.rejection)
    raise AssertionError(f"{table}: the round did not end")


async def open_funded(client: BlackjackClient, table: str, variant: str) -> None:
    """A table open, player ``p`` seated with 100,000 to bet."""
    for command in (
        cmd.OpenTable(variant=variant),
        cmd.SitDown(player_id="p"),
        cmd.Deposit(player_id="p", amount=100_000),
    ):
        result = await client.execute(table, command, timeout=WAIT_S)
        assert result.status == "accepted", (table, command, result.rejection)


def tables_on_every_partition(prefix: str, partitions: int, per_partition: int) -> list[str]:
    tables: dict[int, list[str]] = {p: [] for p in range(partitions)}
    n = 0
    while any(len(t) < per_partition for t in tables.values()):
        name = f"{prefix}-{n}"
        n += 1
        bucket = tables[partition_for(name, partitions)]
        if len(bucket) < per_partition:
            bucket.append(name)
    return [name for bucket in tables.values() for name in bucket]


async def test_a_killed_handler_process_loses_nothing(kafka_space: Any, tmp_path: Path) -> None:
    space: KafkaSpace = await kafka_space(partitions=3)
    rounds = tables_on_every_partition("round", space.partitions, 2)
    busy = tables_on_every_partition("busy", space.partitions, 1)
    log = tmp_path / "handlers.log"
    first = start_handler(space, log)
    second = None

    try:
        async with space.client() as client:
            for i, table in enumerate(rounds):
                await open_round(client, table, VARIANTS[i % len(VARIANTS)])
            for table in busy:
                for command in (
                    cmd.OpenTable(variant="mini-h17"),
                    cmd.SitDown(player_id="p"),
                    cmd.Deposit(player_id="p", amount=100_000),
                ):
                    assert (await client.execute(table, command)).status == "accepted"
            # A steady load: bet and clear, 300 commands per busy table, all sent at once.
            load = [
                (table, cmd.PlaceBet(player_id="p", box=0, amount=100))
                if i % 2 == 0
                else (table, cmd.ClearBets(player_id="p"))
                for i in range(300)
                for table in busy
            ]
            load_ids = await client.send_all(load)
            # Once the handler is well into them, it is killed in the middle of its work.
            await client.result(load_ids[len(load_ids) // 5], timeout=WAIT_S)
            # Mid-round, with commands in flight and transactions open: SIGKILL.
            burst = [
                (table, command)
                for table in rounds
                for command in (cmd.Hit(player_id="p", box=0), cmd.Stand(player_id="p", box=0))
            ]
            ids = await asyncio.gather(*(client.send(t, c) for t, c in burst))
            first.send_signal(signal.SIGKILL)
            killed_wall = time.time()
            assert first.wait(timeout=WAIT_S) == -signal.SIGKILL
            second = start_handler(space, log)
            answers = await asyncio.gather(
                *(client.result(i, timeout=60) for i in [*load_ids, *ids])
            )
            settled = [await finish_round(client, space, table) for table in rounds]
            assert settled == [1] * len(rounds)
        for table in rounds:
            check = await verify_stream(space, table)
            assert check.state.round == 1 and not check.state.boxes_in_play()
        for table in busy:
            check = await verify_stream(space, table)
            assert check.state.players["p"].balance == 100_000
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=WAIT_S) == 0
        after = [a for a in answers if a.handled_at.timestamp() > killed_wall]
        took_over = min(a.handled_at.timestamp() for a in after) - killed_wall
        written = len(await read_topic(space, space.topics.results, "read_uncommitted"))
        aborted = written - len(await read_topic(space, space.topics.results))
        print(  # the numbers for the report
            f"{len(answers)} commands around the kill, {len(after)} handled by the second "
            f"process, first of them {took_over:.1f}s after the kill; {aborted} results of "
            "transactions left open by the killed process were aborted"
        )
        assert after and len(after) < len(answers)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()


async def test_two_instances_share_the_partitions_and_hand_over_rounds_in_progress(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=4)
    tables = tables_on_every_partition("shared", space.partitions, 1)
    async with running_handler(space.config()) as survivor, space.client() as client:
        async with running_handler(space.config()) as leaving:
            await survivor.wait_until(
                lambda: survivor.ready and bool(survivor.owned_partitions()), WAIT_S
            )
            owned = [survivor.owned_partitions(), leaving.owned_partitions()]
            assert all(owned) and not owned[0] & owned[1]
            assert owned[0] | owned[1] == set(range(space.partitions))
            for i, table in enumerate(tables):
                await open_round(client, table, VARIANTS[i % len(VARIANTS)])
            moved = [t for t in tables if partition_for(t, space.partitions) in owned[1]]
            assert moved
        # ``leaving`` has stopped and left the group: its tables move, rounds and all.
        everything = set(range(space.partitions))
        await survivor.wait_until(lambda: survivor.owned_partitions() == everything, WAIT_S)
        assert [await finish_round(client, space, t) for t in tables] == [1] * len(tables)
    for table in tables:
        await verify_stream(space, table)


async def logged(log: Path, line: str, more_than: int, within: float = WAIT_S) -> None:
    """Until a process has written ``line`` to its log more than ``more_than`` times."""
    deadline = time.monotonic() + within
    while log.read_text().count(line) <= more_than:
        assert time.monotonic() < deadline, f"{log.name}: {line!r} not logged in {within} s"
        await asyncio.sleep(0.1)


def bet_and_clear(table: str, times: int) -> list[tuple[str, Any]]:
    return [
        (table, command)
        for _ in range(times)
        for command in (
            cmd.PlaceBet(player_id="p", box=0, amount=100),
            cmd.ClearBets(player_id="p"),
        )
    ]


async def test_a_handler_frozen_while_idle_keeps_no_stale_memory(
    kafka_space: Any, tmp_path: Path
) -> None:
    """A handler frozen while idle past its group session learns that its partitions were
    revoked only when it wakes, after another instance wrote there; the rebalance then gives
    one back. It kept its memory of that partition, checked against where the log ended as it
    woke (the other's writes included), and decided the next commands from tables many
    events old: their sequences started again at 187 (the fresh-clone CI, three nodes). Its
    memory is kept only against where its own last commit left the log.

    Eight partitions: as it wakes, the sleeper fetches the commands of one or two (whose
    transactions are fenced, their memory dropped), and of the four it is given back, some
    are ones it fetched nothing of, whatever order the group puts the members in (two
    partitions: the code before passed three runs of three; eight: it failed four of four)."""
    space: KafkaSpace = await kafka_space(partitions=8)
    tables = tables_on_every_partition("idle", space.partitions, 1)
    sleeper_log, heir_log = tmp_path / "sleeper.log", tmp_path / "heir.log"
    sleeper = start_handler(space, sleeper_log)
    heir = None
    try:
        async with space.client() as client:
            for table in tables:
                await open_funded(client, table, "mini-s17")
            sleeper.send_signal(signal.SIGSTOP)
            heir = start_handler(space, heir_log)
            for table in tables:  # the heir's, once the sleeper's session has run out
                ids = await client.send_all(bet_and_clear(table, 3))
                for answer in await asyncio.gather(*(client.result(i, timeout=60) for i in ids)):
                    assert answer.status == "accepted"
            woke = sleeper_log.read_text().count("partition ready")
            sleeper.send_signal(signal.SIGCONT)
            await logged(sleeper_log, "partition ready", woke)  # it holds one again
            for table in tables:
                bet = await client.execute(table, cmd.PlaceBet(player_id="p", box=0, amount=100))
                assert bet.status == "accepted"
        for table in tables:
            check = await verify_stream(space, table)
            assert check.state.boxes[0].bet == 100
        for process in (sleeper, heir):
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=WAIT_S) == 0
    finally:
        for leftover in (sleeper, heir):
            if leftover is not None and leftover.poll() is None:
                leftover.send_signal(signal.SIGCONT)
                leftover.kill()
                leftover.wait()


async def test_a_partition_given_back_keeps_its_memory(kafka_space: Any) -> None:
    """An eager rebalance revokes every partition, and gives most of them back: one nobody
    wrote to since this instance's last commit is taken back without a rebuild (where its
    last commit left the log, counted to the commit's marker, is where the log still ends)."""
    space: KafkaSpace = await kafka_space(partitions=2)
    tables = tables_on_every_partition("back", space.partitions, 1)
    async with running_handler(space.config()) as first, space.client() as client:
        for table in tables:
            await open_funded(client, table, "mini-h17")
        kept = rebuilds("kept")
        async with running_handler(space.config()) as second:
            await first.wait_until(
                lambda: first.ready and len(first.owned_partitions()) == 1, WAIT_S
            )
            await second.wait_until(lambda: second.ready, WAIT_S)
            assert rebuilds("kept") == kept + 1  # the first's, given back; the second rebuilt
            for table in tables:  # each decided by its partition's owner, from its memory
                bet = await client.execute(table, cmd.PlaceBet(player_id="p", box=0, amount=100))
                assert bet.status == "accepted"
    for table in tables:
        await verify_stream(space, table)


async def test_a_rebalance_leaves_each_handler_the_partitions_it_had(kafka_space: Any) -> None:
    """The group's assignment is sticky (``command_handler/assignment.py``): a third handler
    joining takes its share from the two, each keeping the rest of its own; leaving, its
    share goes back without moving anyone else's. Round-robin dealt them out by the members'
    new ids: a restarted pod could come back with the halves swapped (a two-instance review).
    Two joins: round-robin keeps each one's share within its old one a third of the time."""
    space: KafkaSpace = await kafka_space(partitions=4)
    everything = set(range(space.partitions))
    async with running_handler(space.config()) as first, running_handler(space.config()) as second:
        pair = (first, second)

        async def dealt(handlers: tuple[Any, ...]) -> list[set[int]]:
            def settled() -> bool:
                shares = [h.owned_partitions() for h in handlers]
                return (
                    all(h.ready and shares[i] for i, h in enumerate(handlers))
                    and sum(map(len, shares)) == len(everything)
                    and set().union(*shares) == everything
                )

            await first.wait_until(settled, WAIT_S)
            return [h.owned_partitions() for h in handlers]

        before = await dealt(pair)
        for _ in range(2):
            async with running_handler(space.config()) as third:
                during = await dealt((*pair, third))
                assert during[0] <= before[0] and during[1] <= before[1], (before, during)
            after = await dealt(pair)
            assert after[0] >= during[0] and after[1] >= during[1], (during, after)
            before = after


def rebuilds(kind: str) -> float:
    return REGISTRY.get_sample_value("blackjack_rebuilds_total", {"kind": kind}) or 0.0


async def test_a_frozen_handler_that_wakes_up_is_fenced(kafka_space: Any, tmp_path: Path) -> None:
    """SIGSTOP freezes a handler in the middle of its work; the group gives its partitions to
    another; SIGCONT wakes the zombie, which still believes it owns them. Whatever it tries to
    commit is refused (its transactional id was taken over), so no command is handled twice."""
    space: KafkaSpace = await kafka_space(partitions=2)
    busy = tables_on_every_partition("frozen", space.partitions, 2)
    zombie_log, heir_log = tmp_path / "zombie.log", tmp_path / "heir.log"
    zombie = start_handler(space, zombie_log)
    heir = None
    try:
        async with space.client() as client:
            for table in busy:
                await open_funded(client, table, "mini-s17")

            def load(rounds: int) -> list[tuple[str, Any]]:
                return [
                    (table, cmd.PlaceBet(player_id="p", box=0, amount=100))
                    if i % 2 == 0
                    else (table, cmd.ClearBets(player_id="p"))
                    for i in range(rounds)
                    for table in busy
                ]

            before = await client.send_all(load(200))
            await client.result(before[len(before) // 4], timeout=WAIT_S)
            zombie.send_signal(signal.SIGSTOP)
            heir = start_handler(space, heir_log)
            # Only the heir can answer these while the zombie is frozen: it owns every table.
            markers = await client.send_all([(t, cmd.Reconnect(player_id="p")) for t in busy])
            await asyncio.gather(*(client.result(i, timeout=60) for i in [*before, *markers]))
            zombie.send_signal(signal.SIGCONT)
            after = await client.send_all(load(200))
            answers = await asyncio.gather(*(client.result(i, timeout=60) for i in after))
            assert len(answers) == len(after)
        for table in busy:
            check = await verify_stream(space, table)
            assert check.state.players["p"].balance == 100_000
        for process in (zombie, heir):
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=WAIT_S) == 0
        fenced = zombie_log.read_text().count("fenced: another owner")
        print(f"the woken handler was refused {fenced} transaction(s)")  # for the report
    finally:
        for leftover in (zombie, heir):
            if leftover is not None and leftover.poll() is None:
                leftover.send_signal(signal.SIGCONT)
                leftover.kill()
                leftover.wait()
