"""A record batch holding a record whose header name is not UTF-8: aiokafka's reader raises at
that record, and no record after it in the batch could be read (``bus.header_names``)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from aiokafka.errors import CorruptRecordException
from aiokafka.record import default_records
from aiokafka.record.memory_records import MemoryRecords

from blackjack.bus import header_names
from blackjack.bus.header_names import _Batch, _Records, decode_batch, header_name_not_utf8

GZIP = default_records._DefaultRecordBatchPy.CODEC_GZIP
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
"""Kafka's codecs, as a record batch's attributes name them (what a Java producer's
``compression.type`` writes)"""


class NotUtf8(str):
    """A header name written as bytes that are not UTF-8 (as a librdkafka producer may)."""

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return b"\xff\xfebj"


def batch(names: list[str], compression: int = 0, base: int = 0) -> bytes:
    """A batch of format v2 as a broker returns it (at offset ``base``), one record per name:
    its key ``k<n>``, value ``v<n>``, one header named so."""
    builder = default_records._DefaultRecordBatchBuilderPy(
        magic=2,
        compression_type=compression,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for n, name in enumerate(names):
        builder.append(n, 1_000 + n, f"k{n}".encode(), f"v{n}".encode(), [(name, b"h")])
    raw = bytearray(builder.build())
    raw[0:8] = base.to_bytes(8, "big")
    return bytes(raw)


def read(records: Any) -> list[Any]:
    """The records as aiokafka's fetcher reads them (``PartitionRecords._unpack_records``)."""
    read = []
    while records.has_next():
        read += list(records.next_batch())
    return read


NAMES = ["ok", NotUtf8("x"), "ok", "né", NotUtf8("x"), "ok"]


def test_aiokafka_cannot_read_past_such_a_record() -> None:
    with pytest.raises(UnicodeDecodeError):
        read(MemoryRecords(batch(NAMES)))


@pytest.mark.parametrize("compression", [0, *CODECS.values()], ids=["plain", *CODECS])
def test_every_record_of_the_batch_is_read_and_the_names_not_utf8_are_told(
    compression: int,
) -> None:
    data = (
        batch(["ok", "ok"], base=10) + batch(NAMES, compression, base=12) + batch(["ok"], base=18)
    )
    records = read(_Records(data))
    assert [r.offset for r in records] == list(range(10, 19))
    assert [r.key for r in records[2:8]] == [f"k{n}".encode() for n in range(6)]
    assert [r.value for r in records[2:8]] == [f"v{n}".encode() for n in range(6)]
    told = [header_name_not_utf8(r.headers) for r in records]
    assert told == [False, False, False, True, False, False, True, False, False]
    assert records[5].headers == [("né", b"h")]
    assert records[3].headers == [("\udcff\udcfebj", b"h")]
    assert [r.timestamp for r in records[2:8]] == [1_000 + n for n in range(6)]


def test_a_batch_aiokafka_can_read_is_read_by_it_and_decoded_the_same() -> None:
    raw = batch(["ok", "né", "ok"], base=5)
    ours = decode_batch(raw)
    theirs = list(MemoryRecords(raw).next_batch())
    fields = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")
    assert [[getattr(r, f) for f in fields] for r in ours] == [
        [getattr(r, f) for f in fields] for r in theirs
    ]
    [wrapped] = [b for b in [_Records(raw).next_batch()]]
    assert type(next(iter(wrapped))) is type(theirs[0])  # aiokafka's own records


def test_the_pure_python_reader_s_error_is_told_too() -> None:
    """aiokafka without its C extension raises ``CorruptRecordException`` from the
    ``UnicodeDecodeError``."""
    raw = batch(NAMES)
    records = list(_Batch(default_records._DefaultRecordBatchPy(raw), memoryview(raw)))
    assert [r.key for r in records] == [f"k{n}".encode() for n in range(6)]


def test_a_batch_that_breaks_the_format_is_corrupt_as_for_aiokafka() -> None:
    raw = batch(NAMES)
    with pytest.raises(CorruptRecordException):
        decode_batch(raw[:-3])


def test_the_wrapper_is_installed_once() -> None:
    from aiokafka.consumer import fetcher

    header_names.read_header_names_not_utf8()
    header_names.read_header_names_not_utf8()
    assert fetcher.MemoryRecords is _Records


def test_aiokafka_reads_the_fetched_batches_through_the_wrapped_name() -> None:
    """The shape of aiokafka (0.14.0) the wrapper relies on: its fetcher makes a fetch's
    reader by the module name ``MemoryRecords`` at each fetch, and reads its batches by
    ``has_next``, ``next_batch`` and iterating each. An upgrade that changes it fails here
    (and ``tests/integration/test_handler_header_bytes.py``, on the broker)."""
    from aiokafka.consumer import fetcher

    assert "= MemoryRecords(part_data[-1])" in inspect.getsource(fetcher.Fetcher)
    unpack = inspect.getsource(fetcher.PartitionRecords._unpack_records)
    for step in ("records.has_next()", "records.next_batch()", "for record in next_batch"):
        assert step in unpack, step
    assert _Records.__slots__ and set(vars(MemoryRecords)) >= {"has_next", "next_batch"}
