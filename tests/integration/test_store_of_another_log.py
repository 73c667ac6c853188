"""A read model folded from another or a longer log (the topic deleted and created again, then
a shorter log written to it), on the real broker and SQLite and PostgreSQL: its stored
positions lie past the end of the topic's partitions (``projections.other_log``).

Before, ``blackjack audit`` waited for records that never come (until its 600 s timeout) and
``blackjack projections rebuild`` had its position reset by the broker to the partition's
start and folded the shorter log's records past the stored position on top of the other log's
read model; a worker did the same. Now the commands refuse such a store at once (exit 2,
naming the partition, its stored position and its end), and a worker stops having folded
nothing (``projections run`` exit 2, ``serve`` exit 1, a critical line), and a player joining
a table through its query API (``blackjack play --api``) reads the table from the log."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from blackjack.bus.topics import Topics, partition_for
from blackjack.messages.sealing import ShoeSeal
from blackjack.play.follow import TableFollower
from blackjack.play.read_model import ReadModelApi
from blackjack.projections.dump import write_dump
from blackjack.projections.rebuild import rebuild
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration import cli_runs
from tests.integration.conftest_projections import (
    PARTITIONS,
    SHOE_KEY,
    EventsTopic,
    StoreFactory,
    play_tables,
    publish,
    served_query_api,
    to_wire,
    worker_env,
)

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

TABLE = "table-recreated"
LONG = play_tables([(TABLE, "mini-h17")], 6, seed=31)
SHORT = play_tables([(TABLE, "mini-h17")], 1, seed=31)
WAIT_S = 120.0
REFUSED_WITHIN_S = 30.0
"""'At once': the check reads an end of 0 three times a second apart; before, the audit
waited 600 s"""
BLACKJACK = Path(sys.executable).parent / "blackjack"


def blackjack(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return cli_runs.blackjack(*args, env=env, timeout=WAIT_S)


async def recreate(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    """Delete the topic and create it again, empty, under the same name (the broker may take
    a moment to finish the deletion: the creation is retried until it is taken)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([name])
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                await admin.create_topics([NewTopic(name, partitions, 1)])
                return
            except TopicAlreadyExistsError:  # still being deleted: nothing to await
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
    finally:
        await admin.close()


async def digest(store: ProjectionStore) -> str:
    async with store.reading() as connection:
        return await write_dump(connection, lambda text: None)


async def folded_from_the_long_log(
    stores: StoreFactory, topic: EventsTopic, seal: ShoeSeal
) -> tuple[ProjectionStore, str, dict[tuple[str, int], int]]:
    """A store folded from ``LONG`` on the topic; its URL and its positions."""
    written = await publish(topic, to_wire(LONG.envelopes, seal))
    url = await stores.url()
    store = await stores.store(url)
    await rebuild(ProjectionWriter(store), topic.bootstrap, topic.name, stop=written)
    return store, url, written


def refused(done: subprocess.CompletedProcess[str], topic: str, stored: int, end: int) -> None:
    said = done.stdout + done.stderr
    assert done.returncode == 2, said[-3000:]
    assert "was folded from another or a longer log" in done.stderr, said[-3000:]
    assert f"stored at {stored}, past its end {end}" in done.stderr, said[-3000:]
    assert topic in done.stderr


async def test_a_store_folded_from_a_longer_log_is_refused_at_once(
    stores: StoreFactory, events_topic: EventsTopic, shoe_seal: ShoeSeal
) -> None:
    store, url, written = await folded_from_the_long_log(stores, events_topic, shoe_seal)
    [(position, stored)] = written.items()
    before = await digest(store)
    env = worker_env(events_topic, url, BLACKJACK_SHOE_KEY=SHOE_KEY)
    name, partition = position

    await recreate(events_topic.bootstrap, events_topic.name)
    # the topic empty: an end of 0, read again before it counts
    for command in (("audit",), ("projections", "rebuild")):
        started = time.monotonic()
        done = blackjack(*command, env=env)
        refused(done, f"{name}[{partition}]", stored, 0)
        assert time.monotonic() - started < REFUSED_WITHIN_S, command

    shorter = await publish(events_topic, to_wire(SHORT.envelopes, shoe_seal))
    end = shorter[position] + 1  # the transaction's commit marker
    assert end < stored
    for command in (("audit",), ("projections", "rebuild")):
        started = time.monotonic()
        done = blackjack(*command, env=env)
        refused(done, f"{name}[{partition}]", stored, end)
        assert time.monotonic() - started < REFUSED_WITHIN_S, command
    assert await digest(store) == before  # nothing folded, nothing copied


@contextlib.asynccontextmanager
async def process(*args: str, env: dict[str, str]) -> AsyncIterator[asyncio.subprocess.Process]:
    started = await asyncio.create_subprocess_exec(
        str(BLACKJACK),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        yield started
    finally:
        if started.returncode is None:
            started.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(started.wait(), WAIT_S)
            except TimeoutError:
                started.kill()
                await started.wait()


def critical_line(output: str) -> dict[str, Any]:
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    [line] = [line for line in lines if line.get("level") == "critical"]
    found: dict[str, Any] = line
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.parametrize("command", ["projections run", "serve"])
async def test_a_worker_over_a_store_of_another_log_stops_and_folds_nothing(
    command: str, kafka_space: Any, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    space = await kafka_space(partitions=PARTITIONS)
    topic = EventsTopic(space.bootstrap, space.prefix)
    store, url, written = await folded_from_the_long_log(stores, topic, shoe_seal)
    [((name, partition), stored)] = written.items()
    before = await digest(store)
    await recreate(topic.bootstrap, topic.name)
    shorter = await publish(topic, to_wire(SHORT.envelopes, shoe_seal))
    end = shorter[(name, partition)] + 1  # the transaction's commit marker

    env = {**os.environ, **space.env(), "BLACKJACK_DB_URL": url, "BLACKJACK_SHOE_KEY": SHOE_KEY}
    env["BLACKJACK_PROJECTION_GROUP"] = f"{space.prefix}projections"
    args = command.split() + (["--port", str(free_port())] if command == "serve" else [])
    async with process(*args, env=env) as worker:
        assert worker.stdout is not None
        output, _ = await asyncio.wait_for(worker.communicate(), WAIT_S)
    said = output.decode()
    assert worker.returncode == (2 if command == "projections run" else 1), said[-3000:]
    line = critical_line(said)
    assert "folded from another log" in line["event"], line
    assert line["partitions"] == [
        {"partition": f"{name}[{partition}]", "stored": stored, "end": end}
    ], line
    assert await digest(store) == before  # nothing folded from the wrong place


@pytest.mark.parametrize("command", [("audit",), ("projections", "rebuild")])
async def test_a_topic_that_does_not_exist_is_named_in_one_line(
    command: tuple[str, ...], projection_bootstrap: str, tmp_path: Path
) -> None:
    """A topic prefix naming no topic (a newcomer's typo): before, a traceback ending in
    ``UnknownTopic`` and exit 1, which for ``blackjack audit`` means a mismatch."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'read.db'}"
    assert (
        blackjack("projections", "migrate", "--db-url", url, env=dict(os.environ)).returncode == 0
    )
    topic = EventsTopic(projection_bootstrap, "no-such-prefix-here.")
    done = blackjack(*command, env=worker_env(topic, url, BLACKJACK_SHOE_KEY=SHOE_KEY))
    assert done.returncode == 2, (done.stdout + done.stderr)[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    line = done.stderr.splitlines()[-1]  # (rebuild's note on revocations before it)
    assert line.startswith(f"blackjack: no topic {topic.name} on {projection_bootstrap}"), line
    assert "BLACKJACK_TOPIC_PREFIX" in line


def _on_another_partition(stream_id: str) -> str:
    """A table's id hashed to another partition than ``stream_id``'s."""
    return next(
        other
        for i in range(1000)
        if partition_for(other := f"{stream_id}-o{i}", PARTITIONS)
        != partition_for(stream_id, PARTITIONS)
    )


async def _followed(
    topic: EventsTopic, stream_id: str, api: ReadModelApi | None, through: int
) -> TableFollower:
    """A follower of the stream once it has folded its events up to ``through``: its start
    may come before the commit marker of the publish before it (Kafka answers the commit
    first), and a follower caught up with an empty partition has folded nothing."""
    follower = TableFollower(topic.bootstrap, stream_id, Topics(topic.prefix), read_model=api)
    await follower.start()
    try:
        await follower.until(through, WAIT_S)
    finally:
        await follower.stop()
    return follower


async def test_a_player_joining_through_a_store_of_another_log_reads_this_log_only(
    stores: StoreFactory, events_topic: EventsTopic, shoe_seal: ShoeSeal
) -> None:
    """``blackjack play --api URL`` over a query API whose store was folded from another log:
    the topic made anew, the new log already past the store's position in the table's own
    partition but short of it in another. Before, the client checked that one position only:
    it folded the other log's events of the table, then this log's from the other log's offset
    (here its fold stopped: "the hole card is revealed but none was dealt face down"). Now any
    position past a partition's end sets the read model aside: the partition is read from its
    start, the same table as without an API, and the line says why."""
    other = _on_another_partition(TABLE)
    before = (
        play_tables([(TABLE, "mini-h17")], 1, seed=5).envelopes
        + play_tables([(other, "mini-h17")], 6, seed=5).envelopes
    )
    after = (
        play_tables([(TABLE, "mini-h17")], 6, seed=6).envelopes
        + play_tables([(other, "mini-h17")], 1, seed=6).envelopes
    )
    written = await publish(events_topic, to_wire(before, shoe_seal))
    store = await stores.store(await stores.url())
    await rebuild(ProjectionWriter(store), events_topic.bootstrap, events_topic.name, stop=written)
    await recreate(events_topic.bootstrap, events_topic.name)
    now = await publish(events_topic, to_wire(after, shoe_seal))
    name = events_topic.name
    mine = (name, partition_for(TABLE, PARTITIONS))
    theirs = (name, partition_for(other, PARTITIONS))
    assert now[mine] >= written[mine] and now[theirs] + 1 < written[theirs]  # (+1: the marker)

    last = max(e.sequence for e in after if e.stream_id == TABLE)
    from_start = await _followed(events_topic, TABLE, None, last)
    async with served_query_api(store) as url:
        joined = await _followed(events_topic, TABLE, ReadModelApi(url), last)
    assert joined.from_start, joined.joined
    assert "was folded from another or a longer log" in joined.joined, joined.joined
    assert f"{name}[{theirs[1]}] stored at {written[theirs]}, past its end" in joined.joined
    assert joined.table.view == from_start.table.view
    assert joined.folded_since(0) == from_start.folded_since(0)
    assert [e.event_id for e in joined.folded_since(0)] == [
        str(e.event_id) for e in after if e.stream_id == TABLE
    ]


async def test_a_store_folded_from_another_prefix_s_topic_is_refused_and_folds_nothing(
    kafka_space: Any, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """The newcomer's review: ``var/`` kept, ``BLACKJACK_TOPIC_PREFIX`` changed. Positions
    are kept by topic name, so the store's were past nothing of the new topic: the worker
    folded the new log on top of the old read model, was ready and served both tables, and
    the audit failed on 112 differences (exit 1) instead of refusing the store. Refused at
    once (exit 2), naming the other topic's positions; nothing folded."""
    first = await kafka_space(partitions=PARTITIONS)
    old = EventsTopic(first.bootstrap, first.prefix)
    store, url, written = await folded_from_the_long_log(stores, old, shoe_seal)
    [((name, partition), stored)] = written.items()
    before = await digest(store)
    second = await kafka_space(partitions=PARTITIONS)
    await publish(EventsTopic(second.bootstrap, second.prefix), to_wire(LONG.envelopes, shoe_seal))

    env = {**os.environ, **second.env(), "BLACKJACK_DB_URL": url, "BLACKJACK_SHOE_KEY": SHOE_KEY}
    env["BLACKJACK_PROJECTION_GROUP"] = f"{second.prefix}projections"
    async with process("projections", "run", env=env) as worker:
        assert worker.stdout is not None
        output, _ = await asyncio.wait_for(worker.communicate(), WAIT_S)
    said = output.decode()
    assert worker.returncode == 2, said[-3000:]
    line = critical_line(said)
    assert "folded from another log" in line["event"], line
    assert line["partitions"] == [
        {"partition": f"{name}[{partition}]", "stored": stored, "end": None}
    ], line
    for command in (("audit",), ("projections", "rebuild")):
        done = blackjack(*command, env=env)
        assert done.returncode == 2, (done.stdout + done.stderr)[-3000:]
        assert f"{name}[{partition}] stored at {stored}, a topic this one does not read" in (
            done.stderr
        ), done.stderr[-3000:]
    assert await digest(store) == before  # nothing folded from the other topic
