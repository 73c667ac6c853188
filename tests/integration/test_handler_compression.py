"""The handler writing compressed batches (``BLACKJACK_KAFKA_COMPRESSION``), on the real
broker: its transactions hold as uncompressed (events, result and offsets in one
transaction, read ``read_committed``), a takeover rebuilds from the compressed snapshots and
events with a round in flight, a resent command gets its original result and writes nothing,
and the audit's reader reads every event."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest
from aiokafka.consumer import fetcher
from structlog.testing import capture_logs

from blackjack.bus.header_names import _Records
from blackjack.command_handler.config import HandlerConfig
from blackjack.configuration import ConfigurationError
from blackjack.domain import commands as cmd
from blackjack.projections.rebuild import read_consumer_records
from tests.integration.conftest import (
    WAIT_S,
    KafkaSpace,
    accept,
    read_topic,
    running_handler,
    stream_events,
    verify_stream,
)

pytestmark = pytest.mark.integration

TABLE = "compressing"
NUMBER = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # a record batch's attributes


class Codecs(_Records):
    """The codecs of the data batches read (``compression_type``)."""

    seen: ClassVar[set[int]] = set()

    def next_batch(self) -> Any:
        batch = super().next_batch()
        if batch is not None and not batch.is_control_batch:
            Codecs.seen.add(batch.compression_type)
        return batch


async def codecs_of(space: KafkaSpace, topic: str, monkeypatch: pytest.MonkeyPatch) -> set[int]:
    with monkeypatch.context() as patched:
        patched.setattr(fetcher, "MemoryRecords", Codecs)
        Codecs.seen = set()
        await read_topic(space, topic)
        return Codecs.seen


@pytest.mark.parametrize("codec", list(NUMBER))
async def test_compressed_transactions_take_over_and_answer_a_resend_once(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch, codec: str
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    config = space.config(kafka_compression=codec, snapshot_every=3)
    async with running_handler(config), space.client() as client:
        await accept(
            client,
            TABLE,
            cmd.OpenTable(variant="mini-h17"),
            cmd.SitDown(player_id="alice"),
            cmd.Deposit(player_id="alice", amount=10_000),
            cmd.PlaceBet(player_id="alice", box=0, amount=500),
        )
        deal_id = await client.send(TABLE, cmd.Deal(player_id="alice"))
        dealt = await client.result(deal_id, timeout=WAIT_S)
        assert dealt.status == "accepted", dealt.rejection
    # another handler takes the partition over: from the checkpoint and the events, compressed
    with capture_logs() as logs:
        async with running_handler(space.config(kafka_compression=codec)), space.client() as client:
            async with asyncio.timeout(WAIT_S):
                await client.send(TABLE, cmd.Deal(player_id="alice"), command_id=deal_id)
                again = [await client.result(deal_id, timeout=WAIT_S)]
                stood = await client.execute(TABLE, cmd.Stand(player_id="alice", box=0))
    [rebuilt] = [e for e in logs if e["event"] == "partition rebuilt"]
    assert rebuilt["from_checkpoint"] is True, rebuilt
    assert [(r.status, r.first_sequence, r.last_sequence) for r in again] == [
        (dealt.status, dealt.first_sequence, dealt.last_sequence)
    ]
    # (the deal may have settled the round: a blackjack, the dealer's)
    assert stood.status == "accepted" or stood.rejection is not None
    await verify_stream(space, TABLE, resent=[deal_id])
    for topic in (space.topics.events, space.topics.results):
        assert await codecs_of(space, topic, monkeypatch) == {NUMBER[codec]}, topic
    # a sealed snapshot may not shrink: aiokafka then sends its batch as it is
    assert await codecs_of(space, space.topics.snapshots, monkeypatch) <= {0, NUMBER[codec]}
    read: list[Any] = []
    await read_consumer_records(space.bootstrap, space.topics.events, read.extend)
    assert len(read) == len(await stream_events(space, TABLE))


def test_an_unknown_codec_is_a_setting_error() -> None:
    with pytest.raises(ConfigurationError, match="BLACKJACK_KAFKA_COMPRESSION"):
        HandlerConfig.from_env(
            {"BLACKJACK_SHOE_KEY": "00" * 32, "BLACKJACK_KAFKA_COMPRESSION": "br"}
        )
    config = HandlerConfig.from_env(
        {"BLACKJACK_SHOE_KEY": "00" * 32, "BLACKJACK_KAFKA_COMPRESSION": " LZ4 "}
    )
    assert config.compression_type == "lz4"
    default = HandlerConfig.from_env({"BLACKJACK_SHOE_KEY": "00" * 32})
    assert default.kafka_compression == "gzip" and default.compression_type == "gzip"
    none = HandlerConfig.from_env(
        {"BLACKJACK_SHOE_KEY": "00" * 32, "BLACKJACK_KAFKA_COMPRESSION": "none"}
    )
    assert none.compression_type is None
