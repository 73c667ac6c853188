"""Batches a platform's producer compressed (a Java producer's ``compression.type``), on the
real broker: each codec of Kafka read by the handler, with a record whose header name is not
UTF-8 in the middle (``bus.header_names`` decodes such a batch again, decompressed); and a
process that could not decompress one does not start (``bus.codecs``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka import codec

from blackjack.bus import header_names
from blackjack.bus.codecs import CODECS, CodecMissing
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.messages.envelope import CommandResult
from tests.integration.conftest import (
    WAIT_S,
    KafkaSpace,
    all_results,
    running_handler,
    stream_events,
)
from tests.integration.header_bytes import JUNK, send_one_batch, write_raw_header_names
from tests.integration.test_handler_header_bytes import command

pytestmark = pytest.mark.integration

TABLE = "compressed"
DECOMPRESS = dict(header_names._DECOMPRESS)


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
async def test_a_compressed_batch_with_a_header_name_not_utf8_answers_only_that_record(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch, compression: str
) -> None:
    write_raw_header_names(monkeypatch)
    number = CODECS.index(compression) + 1  # a batch's attributes name it so
    decompressed: list[int] = []

    def decompress(data: bytes) -> bytes:
        decompressed.append(len(data))
        return DECOMPRESS[number](data)

    monkeypatch.setitem(header_names._DECOMPRESS, number, decompress)
    space: KafkaSpace = await kafka_space(partitions=1)
    key = TABLE.encode()
    async with running_handler(space.config()) as handler, space.client() as client:
        offsets = await send_one_batch(
            space.bootstrap,
            space.topics.commands,
            0,
            [
                (key, command("open", cmd.OpenTable(variant="atlantic-city-multi"), TABLE), []),
                (key, command("junk", cmd.SitDown(player_id="x"), TABLE), JUNK),
                (key, command("sit-p", cmd.SitDown(player_id="p", seat=0), TABLE), []),
                (key, command("sit-q", cmd.SitDown(player_id="q", seat=1), TABLE), [("ok", b"")]),
            ],
            compression=compression,
        )
        async with asyncio.timeout(WAIT_S):
            for command_id in ("open", "sit-p", "sit-q"):
                await client.result(command_id)
        assert handler.failure is None
    assert decompressed  # the batch went compressed, and was decoded again from its bytes
    results = await all_results(space)
    unread = f"unparsed-0-{offsets[1]}"
    assert [r.command_id for r in results] == ["open", unread, "sit-p", "sit-q"]
    assert [r.status for r in results] == ["accepted", "rejected", "accepted", "accepted"]
    assert results[1].rejection is not None and results[1].rejection.code == "malformed"
    seated = [
        e.data.player_id
        for e in await stream_events(space, TABLE)
        if isinstance(e.data, ev.SeatTaken)
    ]
    assert seated == ["p", "q"]


async def test_a_handler_that_could_not_decompress_a_batch_does_not_start(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, without ``cramjam``: the handler started, logged "fetching commands failed"
    (``UnsupportedCodecError``) every second and never answered the lz4 batch's commands, nor
    any sent after them on the partition."""
    space: KafkaSpace = await kafka_space(partitions=1)
    key = TABLE.encode()
    await send_one_batch(
        space.bootstrap,
        space.topics.commands,
        0,
        [(key, command(f"c{n}", cmd.OpenTable(variant="mini-h17"), TABLE), []) for n in range(10)],
        compression="lz4",
    )
    monkeypatch.setattr(codec, "cramjam", None)
    with pytest.raises(CodecMissing, match="snappy, lz4, zstd"):
        async with running_handler(space.config()):
            pass


async def test_a_client_whose_reader_cannot_decompress_a_batch_fails_every_wait_at_once(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No codec goes missing in a running process, but the reader of the results must not
    die unseen: before, its task ended with ``UnsupportedCodecError`` and every ``result``
    waited out its timeout (``blackjack send``: "no result in time")."""
    space: KafkaSpace = await kafka_space(partitions=1)
    async with space.client() as client:
        assert client._results_reader.consumer is not None
        [tp] = client._results_reader.consumer.assignment()
        client._results_reader.consumer.pause(
            tp
        )  # the batch is fetched only once the codec is gone
        answer = CommandResult(
            command_id="c", stream_id=TABLE, status="accepted", handled_at=datetime.now(UTC)
        )
        await send_one_batch(
            space.bootstrap,
            space.topics.results,
            0,
            [(TABLE.encode(), answer.model_dump_json().encode(), [])] * 10,
            compression="zstd",
        )
        monkeypatch.setattr(codec, "cramjam", None)
        waiting = asyncio.ensure_future(client.result("c", timeout=WAIT_S))
        client._results_reader.consumer.resume(tp)
        with pytest.raises(CodecMissing, match="zstd"):
            async with asyncio.timeout(WAIT_S / 2):
                await waiting
        with pytest.raises(CodecMissing):  # and every later wait
            await client.result("d", timeout=WAIT_S)
