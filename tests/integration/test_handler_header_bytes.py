"""A record whose header name is not UTF-8, on ``blackjack.commands`` and on the topics a
rebuild reads. Kafka's protocol carries
a header name as bytes and the broker takes any (librdkafka writes what it is given); aiokafka's
reader decodes each name as UTF-8, strictly, and raised ``UnicodeDecodeError`` out of
``getmany`` for the whole batch: the handler's loop died, and every handler that took the
partition over died on the same record."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from structlog.testing import capture_logs

from blackjack.bus.topics import partition_for
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from tests.integration.conftest import (
    WAIT_S,
    KafkaSpace,
    all_results,
    read_topic,
    running_handler,
    stream_events,
)
from tests.integration.header_bytes import JUNK, NotUtf8, send_one_batch, write_raw_header_names

pytestmark = pytest.mark.integration

TABLE = "header-bytes"
OTHER = next(f"other-{n}" for n in range(100) if partition_for(f"other-{n}", 2) == 1)


async def send_in_a_transaction(
    space: KafkaSpace, stream: str, command_id: str, command: cmd.TableCommand
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=space.bootstrap, transactional_id=f"{space.prefix}{command_id}"
    )
    await producer.start()
    try:
        envelope = CommandEnvelope(command_id=command_id, stream_id=stream, command=command)
        async with producer.transaction():
            await producer.send(
                space.topics.commands, envelope.model_dump_json().encode(), key=stream.encode()
            )
    finally:
        await producer.stop()


@pytest.fixture
def raw_header_names(monkeypatch: pytest.MonkeyPatch) -> None:
    write_raw_header_names(monkeypatch)


async def test_a_header_name_that_is_not_utf8_is_answered_and_the_partition_goes_on(
    kafka_space: Any, raw_header_names: None
) -> None:
    """Nothing of such a record can be read, so its answer is ``malformed`` under
    ``unparsed-<partition>-<offset>`` (docs/kafka.md); the commands before and after it are
    handled, and so are those of the other partitions the failed fetch had read."""
    space: KafkaSpace = await kafka_space(partitions=2)
    async with running_handler(space.config()) as handler, space.client() as client:
        before = await client.execute(TABLE, cmd.OpenTable(variant="mini-h17"))
        assert before.status == "accepted"
        # a transaction's commit marker just before it (a handler writes steps so)
        await send_in_a_transaction(space, TABLE, "in-a-transaction", cmd.Reconnect(player_id="z"))
        sitting = CommandEnvelope(
            command_id="sit-1", stream_id=TABLE, command=cmd.SitDown(player_id="p")
        )
        value = sitting.model_dump_json().encode()
        offset = await client.send_raw(TABLE.encode(), value, [(NotUtf8("x"), b"1")])
        partition = partition_for(TABLE, space.partitions)
        async with asyncio.timeout(WAIT_S):
            answer = await client.result(f"unparsed-{partition}-{offset}")
            after = await client.execute(TABLE, cmd.SitDown(player_id="q"))
            elsewhere = await client.execute(OTHER, cmd.OpenTable(variant="mini-h17"))
        assert handler.failure is None
    assert answer.status == "rejected" and answer.rejection is not None, answer
    assert answer.rejection.code == "malformed", answer.rejection
    assert "not UTF-8" in answer.rejection.message
    assert after.status == "accepted" and elsewhere.status == "accepted"
    assert client.results_for("sit-1") == []  # what it said is unknown: no answer names it
    results = [r.command_id for r in await all_results(space)]
    # one answer a record: none for the marker
    answered = (before, answer, after, elsewhere)
    assert sorted(results) == sorted(["in-a-transaction", *(a.command_id for a in answered)])
    # (verify_stream reads the commands topic with aiokafka, which cannot read it either)
    seated = [
        e.data.player_id
        for e in await stream_events(space, TABLE)
        if isinstance(e.data, ev.SeatTaken)
    ]
    assert seated == ["q"]
    # Downstream, a platform's own aiokafka consumer (which raises at a header name that is
    # not UTF-8, docs/kafka.md) reads everything the handler wrote: the record's names are
    # copied nowhere, and every name the service writes is one of its own, ASCII.
    for topic in (space.topics.results, space.topics.events, space.topics.snapshots):
        for record in await read_topic(space, topic):
            assert all(name.isascii() for name, _ in record.headers), (topic, record.headers)


@pytest.mark.parametrize("topic", ["events", "snapshots"])
async def test_a_record_no_reader_can_read_on_the_handlers_own_topics_is_stepped_over(
    kafka_space: Any, raw_header_names: None, topic: str
) -> None:
    """The handlers alone write these topics, but the rebuild steps over what others wrote
    there (records that are no event, forged checkpoints: docs/kafka.md). A record with a
    header name that is not UTF-8 failed every rebuild of its partition instead ("taking the
    partition failed; will retry", for good): no table or wallet on it played again."""
    space: KafkaSpace = await kafka_space(partitions=1)
    async with running_handler(space.config()), space.client() as client:
        opened = await client.execute(TABLE, cmd.OpenTable(variant="mini-h17"))
        assert opened.status == "accepted"
    producer = AIOKafkaProducer(bootstrap_servers=space.bootstrap)
    await producer.start()
    try:
        junk = await producer.send_and_wait(
            getattr(space.topics, topic), b"{}", key=TABLE.encode(), headers=[(NotUtf8("x"), b"")]
        )
    finally:
        await producer.stop()
    with capture_logs() as logs:
        async with running_handler(space.config()), space.client() as client:
            async with asyncio.timeout(WAIT_S):
                seated = await client.execute(TABLE, cmd.SitDown(player_id="p"))
    assert seated.status == "accepted", seated.rejection
    [warned] = [e for e in logs if str(e["event"]).startswith("records no reader can read")]
    # (with the commit marker just before it, on the events topic: the reader shows none)
    assert f"{getattr(space.topics, topic)}@{junk.offset}" in warned["records"]


def command(command_id: str, body: cmd.TableCommand, stream: str = TABLE) -> bytes:
    return (
        CommandEnvelope(command_id=command_id, stream_id=stream, command=body)
        .model_dump_json()
        .encode()
    )


async def test_the_valid_commands_after_such_a_record_in_its_batch_are_decided(
    kafka_space: Any, raw_header_names: None
) -> None:
    """aiokafka reads a batch from its start and raised at such a record: the valid commands
    its producer sent after it in the same batch were answered ``malformed`` by their offsets
    (a bet lost to its sender). Each is decided now, in order, once, under its own id; only
    the record that cannot be read is answered ``malformed``."""
    space: KafkaSpace = await kafka_space(partitions=1)
    key = TABLE.encode()
    async with running_handler(space.config()) as handler, space.client() as client:
        offsets = await send_one_batch(
            space.bootstrap,
            space.topics.commands,
            0,
            [
                (key, command("open", cmd.OpenTable(variant="atlantic-city-multi")), []),
                (key, command("junk-1", cmd.SitDown(player_id="x")), JUNK),
                (key, command("sit-p", cmd.SitDown(player_id="p", seat=0)), [("ok", b"")]),
                (key, command("junk-2", cmd.SitDown(player_id="y")), JUNK),
                (key, command("sit-q", cmd.SitDown(player_id="q", seat=1)), []),
            ],
        )
        async with asyncio.timeout(WAIT_S):
            for command_id in ("open", "sit-p", "sit-q"):
                await client.result(command_id)
            later = await client.execute(TABLE, cmd.SitDown(player_id="r", seat=2))
        assert handler.failure is None
    assert later.status == "accepted", later.rejection
    results = await all_results(space)
    unread = [f"unparsed-0-{offsets[1]}", f"unparsed-0-{offsets[3]}"]
    # in the order sent, one answer each
    assert [r.command_id for r in results] == [
        "open",
        unread[0],
        "sit-p",
        unread[1],
        "sit-q",
        later.command_id,
    ]
    by_id = {r.command_id: r for r in results}
    assert all(by_id[i].status == "accepted" for i in ("open", "sit-p", "sit-q")), results
    assert all(by_id[i].rejection.code == "malformed" for i in unread)  # type: ignore[union-attr]
    seated = [
        e.data.player_id
        for e in await stream_events(space, TABLE)
        if isinstance(e.data, ev.SeatTaken)
    ]
    assert seated == ["p", "q", "r"]


async def test_the_client_reads_the_results_after_such_a_record_in_its_batch(
    kafka_space: Any, raw_header_names: None
) -> None:
    """No handler writes such a record, but anyone who may write to the results topic can:
    ``BlackjackClient``'s reader of the results died at it (aiokafka raised out of
    ``getmany``), and no sender of a command got its answer again. It is stepped over with an
    error log naming it (what it says is not believed), and the results its producer sent
    with it are read."""
    space: KafkaSpace = await kafka_space(partitions=1)

    def result(command_id: str) -> bytes:
        answer = CommandResult(
            command_id=command_id, stream_id=TABLE, status="accepted", handled_at=datetime.now(UTC)
        )
        return answer.model_dump_json().encode()

    key = TABLE.encode()
    with capture_logs() as logs:
        async with space.client() as client:
            offsets = await send_one_batch(
                space.bootstrap,
                space.topics.results,
                0,
                [
                    (key, result("before"), []),
                    (key, result("forged"), JUNK),
                    (key, result("after"), []),
                ],
            )
            async with asyncio.timeout(WAIT_S):
                before = await client.result("before")
                after = await client.result("after")
            assert client.results_for("forged") == []
    assert before.status == after.status == "accepted"
    [stepped] = [e for e in logs if e["log_level"] == "error"]
    assert stepped["record"] == f"{space.topics.results}@{offsets[1]}"
