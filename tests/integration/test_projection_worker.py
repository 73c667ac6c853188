"""The projection worker on the real broker, on SQLite and on PostgreSQL.

The event logs come from the real engine (``conftest_projections.play_tables``), sealed with a
test shoe key and produced in a Kafka transaction to a topic of this test's own.
"""

from __future__ import annotations

import signal
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import func, select

from blackjack.audit.conservation import conservation
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections import schema
from blackjack.projections.dump import dump
from blackjack.projections.rebuild import read_topic, rebuild
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import (
    EventsTopic,
    StoreFactory,
    expected_balances,
    play_tables,
    projection_worker,
    publish,
    reached,
    start_worker,
    to_wire,
    wait_until,
    worker_env,
)
from tests.integration.infra import free_port

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

WAIT_S = 60.0
VARIANTS = ("mini-h17", "mini-s17", "atlantic-city", "atlantic-city-multi", "surrender")
LOG = play_tables([(f"table-{v}", v) for v in VARIANTS], rounds=25, seed=2026)


def worker(
    topic: EventsTopic, store: ProjectionStore, group: str | None = None
) -> AbstractAsyncContextManager[ProjectionWriter]:
    running: AbstractAsyncContextManager[ProjectionWriter] = projection_worker(
        topic.bootstrap, topic.prefix, store, group
    )
    return running


async def balances(store: ProjectionStore) -> dict[tuple[str, str], int]:
    a = schema.accounts
    async with store.reading() as connection:
        rows = await connection.execute(select(a.c.stream_id, a.c.player_id, a.c.available))
        return {(s, p): available for s, p, available in rows.all()}


async def wallet_balances(store: ProjectionStore) -> dict[str, int]:
    w = schema.wallets
    async with store.reading() as connection:
        rows = await connection.execute(select(w.c.stream_id, w.c.balance))
        return {stream_id: balance for stream_id, balance in rows.all()}


async def folded(store: ProjectionStore) -> int:
    async with store.reading() as connection:
        return (
            await connection.execute(select(func.count()).select_from(schema.events))
        ).scalar_one()


async def text_of(store: ProjectionStore) -> str:
    async with store.reading() as connection:
        return (await dump(connection)).text()


async def rebuilt_from_zero(stores: StoreFactory, topic: EventsTopic) -> str:
    scratch = await stores.store()
    await rebuild(ProjectionWriter(scratch), topic.bootstrap, topic.name)
    return await text_of(scratch)


def assert_is_the_engines_fold(found: dict[tuple[str, str], int]) -> None:
    for key, balance in expected_balances(LOG).items():
        assert found[key] == balance, key


async def test_the_worker_folds_the_log_as_the_engine_does_and_as_a_rebuild_from_zero(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    ends = await publish(events_topic, to_wire(LOG.envelopes, shoe_seal))
    live = await stores.store()
    async with worker(events_topic, live) as writer:
        await writer.wait_for(ends, WAIT_S)

    assert await folded(live) == len(LOG.envelopes)
    assert_is_the_engines_fold(await balances(live))
    assert await wallet_balances(live) == {k: w.balance for k, w in LOG.wallets.items()}
    async with live.reading() as connection:
        violations, totals = await conservation(connection)
    assert violations == [] and all(t.balanced for t in totals)
    assert await rebuilt_from_zero(stores, events_topic) == await text_of(live)


async def test_a_worker_given_a_cluster_s_addresses_folds(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """BLACKJACK_KAFKA_BOOTSTRAP as a cluster's is written, ``host:port,host:port``: FastStream
    took the string as one address (``host:port,host``) and the worker never connected, on
    deploy/kafka/cluster.sh's three nodes as on any production cluster. Here the first address
    is a port nothing listens on, the second the broker."""
    small = play_tables([("table-a", "mini-h17")], rounds=2, seed=5)
    ends = await publish(events_topic, to_wire(small.envelopes, shoe_seal))
    store = await stores.store()
    addresses = f"127.0.0.1:{free_port()}, {events_topic.bootstrap}"
    async with projection_worker(addresses, events_topic.prefix, store) as writer:
        await writer.wait_for(ends, WAIT_S)
    assert await folded(store) == len(small.envelopes)


async def test_a_caught_up_partition_shows_no_lag(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """A transaction's commit marker takes an offset after its records: measured from its
    stored position (last record + 1), a caught-up partition showed a lag of 1 for ever."""
    small = play_tables([("table-a", "mini-h17"), ("table-b", "surrender")], rounds=1, seed=3)
    past_records = await publish(events_topic, to_wire(small.envelopes, shoe_seal))
    store = await stores.store()
    async with worker(events_topic, store) as writer:
        await writer.wait_for(past_records, WAIT_S)
        ends = await read_topic(events_topic.bootstrap, events_topic.name, lambda _: None)
        written = {key: end for key, end in ends.items() if end}
        assert written == {key: offset + 1 for key, offset in past_records.items()}  # markers
        assert await writer.stored_positions() == past_records

        def lag(key: tuple[str, int]) -> float | None:
            labels = {"topic": key[0], "partition": str(key[1])}
            return REGISTRY.get_sample_value("blackjack_projection_lag", labels)

        async def measured() -> bool:
            return all(lag(key) is not None for key in written)

        await wait_until(measured, "the lag of every partition measured")
        assert {key: lag(key) for key in written} == dict.fromkeys(written, 0.0)


async def test_a_worker_killed_mid_stream_resumes_without_counting_anything_twice(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal, tmp_path: Path
) -> None:
    ends = await publish(events_topic, to_wire(LOG.envelopes, shoe_seal))
    total = len(LOG.envelopes)
    url = await stores.url()
    store = await stores.store(url)
    # a stable instance id (static membership): the restarted worker takes the killed one's
    # partitions at once, instead of after the dead member's session times out
    env = worker_env(
        events_topic,
        url,
        BLACKJACK_PROJECTION_BATCH="3",
        BLACKJACK_PROJECTION_INSTANCE="projections-0",
    )
    output = tmp_path / "worker.log"
    kills = []
    for share in (0.2, 0.55):
        process = start_worker(env, output)
        try:
            await wait_until(lambda s=share: _at_least(store, int(total * s)), "progress")
        finally:
            process.send_signal(signal.SIGKILL)
            assert process.wait(timeout=WAIT_S) == -signal.SIGKILL
        kills.append(await folded(store))
    assert 0 < kills[0] < kills[1] < total, kills

    # A new consumer group has no committed offsets at all: only the store's positions count.
    restart = worker_env(events_topic, url, BLACKJACK_PROJECTION_GROUP=f"{events_topic.prefix}new")
    process = start_worker(restart, output)
    try:
        await wait_until(lambda: reached(store, ends), "the end of the topic")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=WAIT_S) == 0, output.read_text()[-3000:]

    assert await folded(store) == total
    assert_is_the_engines_fold(await balances(store))
    assert await rebuilt_from_zero(stores, events_topic) == await text_of(store)


async def _at_least(store: ProjectionStore, count: int) -> bool:
    return await folded(store) >= count


async def test_a_fresh_store_is_folded_from_zero_whatever_the_group_committed(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    ends = await publish(events_topic, to_wire(LOG.envelopes, shoe_seal))
    first = await stores.store()
    async with worker(events_topic, first) as writer:
        await writer.wait_for(ends, WAIT_S)
    # The group has committed every offset to Kafka by now; a new, empty store (a restored
    # backup, a new database) must still get everything: the worker seeks to its positions.
    second = await stores.store()
    async with worker(events_topic, second) as writer:
        await writer.wait_for(ends, WAIT_S)
    assert await text_of(second) == await text_of(first)


async def test_a_second_worker_joining_mid_stream_takes_partitions_without_double_counting(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    store = await stores.store()
    total = len(LOG.envelopes)
    async with worker(events_topic, store) as first:
        ends = await publish(events_topic, to_wire(LOG.envelopes, shoe_seal))
        await wait_until(lambda: _at_least(store, total // 10), "the first worker to start")
        async with worker(events_topic, store) as second:
            # the group rebalances while batches are in flight; partitions change hands
            await wait_until(lambda: reached(store, ends), "both workers to finish")
    assert len(set(first.positions) | set(second.positions)) == len(ends)
    assert await folded(store) == total
    assert_is_the_engines_fold(await balances(store))
    assert await rebuilt_from_zero(stores, events_topic) == await text_of(store)


async def test_events_of_an_aborted_transaction_are_never_projected(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    # The same table twice: a version aborted by its producer, then the committed one.
    # Had the worker read uncommitted records, the aborted TableOpened would hold the
    # table's first place and the committed one would be refused as a conflicting event.
    real = play_tables([("table-x", "atlantic-city")], rounds=2, seed=8).envelopes
    aborted = [
        e.model_copy(update={"event_id": f"aborted-{e.event_id}"})
        for e in play_tables([("table-x", "mini-s17")], rounds=2, seed=7).envelopes
    ]
    store = await stores.store()
    async with worker(events_topic, store) as writer:
        await publish(events_topic, to_wire(aborted, shoe_seal), abort=True)
        ends = await publish(events_topic, to_wire(real, shoe_seal))
        await writer.wait_for(ends, WAIT_S)
    async with store.reading() as connection:
        variants = await connection.execute(select(schema.table_views.c.variant))
        assert variants.scalars().all() == ["atlantic-city"]
    assert await folded(store) == len(real)


async def test_sqlite_and_postgresql_hold_the_same_read_model_byte_for_byte(
    events_topic: EventsTopic, shoe_seal: ShoeSeal, postgres_server_url: str, tmp_path: Path
) -> None:
    written = await publish(events_topic, to_wire(LOG.envelopes, shoe_seal))
    texts = []
    for factory in (
        StoreFactory("sqlite", tmp_path, None),
        StoreFactory("postgresql", tmp_path, postgres_server_url),
    ):
        try:
            store = await factory.store()
            await rebuild(
                ProjectionWriter(store), events_topic.bootstrap, events_topic.name, stop=written
            )
            texts.append(await text_of(store))
        finally:
            await factory.close()
    assert texts[0] == texts[1]
    assert texts[0].count("\n") > len(LOG.envelopes)  # every event, and more rows besides


async def test_two_worker_processes_in_one_group_share_one_sqlite_file_correctly(
    events_topic: EventsTopic, shoe_seal: ShoeSeal, tmp_path: Path
) -> None:
    """Several ``blackjack serve`` started in one directory (docs/kafka.md, "Running several
    handler instances") fold into the same default ``var/projections.db``, their workers in
    one consumer group, the partitions split between them. Pinned as right, not changed:
    each batch is one ``BEGIN IMMEDIATE`` transaction that reads its partitions' positions
    from the file and moves them (SQLite's write lock, waited for up to 30 s, serialises the
    two processes), so a partition changing hands is taken up where the file says, by
    either. Both started at once on a file that does not exist yet (both migrate it), in
    small batches (many transactions to contend), one stopped halfway (a rebalance): the
    fold is the engine's and a rebuild's, nothing twice, no lock error."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'var' / 'projections.db'}"
    env = worker_env(events_topic, url, BLACKJACK_PROJECTION_BATCH="3")
    logs = [tmp_path / "worker-0.log", tmp_path / "worker-1.log"]
    processes = [start_worker(env, log) for log in logs]
    store = ProjectionStore(url)
    try:
        ends = await publish(events_topic, to_wire(LOG.envelopes, shoe_seal))
        total = len(LOG.envelopes)
        await wait_until(lambda: _migrated_and_at_least(store, total // 3), "a third folded")
        processes[1].send_signal(signal.SIGTERM)  # its partitions go to the other
        assert processes[1].wait(timeout=WAIT_S) == 0, logs[1].read_text()[-3000:]
        await wait_until(lambda: reached(store, ends), "the end of the topic")
        assert await folded(store) == total
        assert_is_the_engines_fold(await balances(store))
        scratch = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'scratch.db'}")
        await scratch.migrate()
        try:
            await rebuild(ProjectionWriter(scratch), events_topic.bootstrap, events_topic.name)
            assert await text_of(scratch) == await text_of(store)
        finally:
            await scratch.close()
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=WAIT_S)
        await store.close()
    said = "".join(log.read_text() for log in logs)
    assert "database is locked" not in said and "Traceback" not in said, said[-3000:]
    for log in logs:  # each took partitions of its own from the file's positions
        assert "partitions sought to the stored positions" in log.read_text(), log.read_text()


async def _migrated_and_at_least(store: ProjectionStore, count: int) -> bool:
    try:
        return await _at_least(store, count)
    except Exception:  # the workers have not migrated the file yet: no table
        return False
