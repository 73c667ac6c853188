"""Records whose header name is not UTF-8, written to the real broker as a librdkafka producer
may write them (Kafka carries a header name as bytes and the broker takes any), in one
producer batch with valid records around them (``bus.header_names``)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.producer import message_accumulator
from aiokafka.producer import producer as producer_module
from aiokafka.record import default_records


class NotUtf8(str):
    """A header name written as bytes that are not UTF-8."""

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return b"\xff\xfebj"


JUNK: list[tuple[str, bytes]] = [(NotUtf8("x"), b"1")]


def write_raw_header_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's producers write header names through ``str.encode`` (aiokafka's
    pure-Python batch builder, which calls it; its C builder reads the text itself)."""
    builder = default_records._DefaultRecordBatchBuilderPy
    for module in (message_accumulator, producer_module):
        monkeypatch.setattr(module, "DefaultRecordBatchBuilder", builder)


Sent = tuple[bytes | None, bytes, Sequence[tuple[str, bytes]]]
"""a record to send: key, value, headers"""


async def send_one_batch(
    bootstrap: str,
    topic: str,
    partition: int,
    records: Sequence[Sent],
    compression: str | None = None,
) -> list[int]:
    """``records`` in one producer batch (not transactional) to ``topic[partition]``,
    compressed with ``compression`` (gzip, snappy, lz4, zstd) if given; their offsets."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, max_batch_size=1 << 20, compression_type=compression
    )
    await producer.start()
    try:
        batch = producer.create_batch()
        for key, value, headers in records:
            assert batch.append(key=key, value=value, timestamp=None, headers=list(headers))
        sent = await producer.send_batch(batch, topic, partition=partition)
        base = (await sent).offset
    finally:
        await producer.stop()
    return [base + n for n in range(len(records))]
