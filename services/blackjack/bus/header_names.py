"""Records whose header name is not UTF-8, read rather than raised.

Kafka carries a header name as bytes and the broker takes any (librdkafka writes what it is
given). aiokafka (0.14.0, the same upstream) decodes every name strictly, while it reads a
record batch from its start: its C reader raises ``UnicodeDecodeError`` out of ``getmany``
(its pure-Python one, ``CorruptRecordException`` from it), and no record of that batch from
that one on can be read, on any fetch: the records its producer sent after it in the same
batch, valid ones too, were lost to every consumer in the process.

``read_header_names_not_utf8_by`` gives one consumer's fetcher
(``aiokafka.consumer.fetcher``, the one module that reads fetched record batches, through
its name ``MemoryRecords``) a wrapper over aiokafka's own record reader
(``read_header_names_not_utf8``: every consumer of the process, the service's own processes
only): every batch is read by aiokafka as before, except one on which it raises that error;
that one is decoded again, here, from its bytes (record batch format v2, in
``decode_batch``), from the record aiokafka stopped at. Every name of it is decoded as UTF-8
with surrogate escapes (``bytes.decode(..., "surrogateescape")``, as Python reads file
names), so a valid name reads as aiokafka reads it, and a name that is not UTF-8 holds lone
surrogates, which no name aiokafka decodes can hold: ``header_name_not_utf8`` tells such a
record, which each reader steps over or answers (none of the service's records has one). A
batch aiokafka cannot decompress (``UnsupportedCodecError``, a ``KafkaError`` its readers
would retry for good) raises ``bus.codecs.CodecMissing`` instead. A compressed batch is
decoded again the same way, decompressed by aiokafka's own codecs.
What aiokafka's fetcher does with the batches and records (transactions aborted, markers,
positions, CRCs) is untouched. ``bus.aiokafka_internals`` checks the shape of aiokafka this
relies on before the wrapper is put in place, ``tests/unit/test_header_names.py`` pins it,
and ``tests/integration/test_handler_header_bytes.py`` its working on the broker, so that an
upgrade that changes it fails there.
"""

from __future__ import annotations

import hashlib
import struct
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from aiokafka import codec
from aiokafka.consumer import fetcher
from aiokafka.errors import CorruptRecordException, UnsupportedCodecError

from blackjack.bus.aiokafka_internals import PROC_FETCH_REQUEST, require_fetch_reader, with_globals
from blackjack.bus.codecs import codec_missing

_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
"""A record batch's header (format v2): base offset, length, partition leader epoch, magic,
CRC, attributes, last offset delta, first and max timestamps, producer id and epoch, base
sequence, number of records."""
_LENGTH = struct.Struct(">i")
_LENGTH_AT = 8  # the batch's length follows its base offset
_LOG_OVERHEAD = 12  # base offset and length: not counted in the length
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_DECOMPRESS: dict[int, Callable[[bytes], bytes]] = {
    1: codec.gzip_decode,
    2: codec.snappy_decode,
    3: codec.lz4_decode,
    4: codec.zstd_decode,
}


def header_name_not_utf8(headers: Iterable[tuple[str, object]]) -> bool:
    """Whether a record's header names hold one that is not UTF-8 (read with surrogate
    escapes by ``decode_batch``)."""
    for name, _ in headers:
        if not name.isascii():
            try:
                name.encode()
            except UnicodeEncodeError:
                return True
    return False


def record_sha256(
    key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]]
) -> str:
    """The SHA-256 (hex) of a record's key, value and headers as the broker holds them (a
    header name read with surrogate escapes is encoded back to its bytes): what an operator
    acknowledges a record by (``blackjack audit --acknowledged``), so that another record at
    the same topic, partition and offset is not taken for it. Each field is hashed as its
    length (4 bytes, big-endian, -1 for none) then its bytes: the key, the value, the number
    of headers, then each header's name and value."""
    digest = hashlib.sha256()

    def field(data: bytes | None) -> None:
        digest.update(_LENGTH.pack(-1 if data is None else len(data)))
        digest.update(data or b"")

    field(key)
    field(value)
    listed = list(headers)
    digest.update(_LENGTH.pack(len(listed)))
    for name, header_value in listed:
        field(name.encode("utf-8", "surrogateescape"))
        field(header_value)
    return digest.hexdigest()


def cannot_decode(error: BaseException) -> bool:
    """Whether aiokafka failed to read a record on a header name that is not UTF-8."""
    return isinstance(error, UnicodeDecodeError) or isinstance(error.__cause__, UnicodeDecodeError)


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    """A record as aiokafka's fetcher reads one (``aiokafka.record.default_records``)."""

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    checksum: None = None


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint of ``data`` at ``at``, and where it ends."""
    shift = raw = 0
    while True:
        byte = data[at]
        at += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), at
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 10 bytes")


def _bytes(data: bytes, at: int) -> tuple[bytes | None, int]:
    """A varint length and that many bytes (None for a negative length)."""
    length, at = _varint(data, at)
    if length < 0:
        return None, at
    if at + length > len(data):
        raise ValueError("a field past the end of its record")
    return data[at : at + length], at + length


def decode_batch(raw: bytes | memoryview) -> list[DecodedRecord]:
    """The records of one record batch (format v2, as ``raw`` holds it whole from its base
    offset), each header name read as UTF-8 with surrogate escapes. A batch that breaks the
    format raises ``CorruptRecordException``, as aiokafka's reader does."""
    try:
        return _decode(bytes(raw))
    except (ValueError, IndexError, struct.error) as error:
        raise CorruptRecordException(f"Found invalid record structure: {error!r}") from error


def _decode(raw: bytes) -> list[DecodedRecord]:
    header = _BATCH_HEADER.unpack_from(raw)
    base_offset, attributes, first_time, max_time, count = (
        header[0],
        header[5],
        header[7],
        header[8],
        header[12],
    )
    data = raw[_BATCH_HEADER.size :]
    compression = attributes & _CODEC_MASK
    if compression:
        data = _DECOMPRESS[compression](data)
    log_append = bool(attributes & _LOG_APPEND_TIME)
    records: list[DecodedRecord] = []
    at = 0
    for _ in range(count):
        length, at = _varint(data, at)
        end = at + length
        at += 1  # the record's attributes (an int8, unused)
        time_delta, at = _varint(data, at)
        offset_delta, at = _varint(data, at)
        key, at = _bytes(data, at)
        value, at = _bytes(data, at)
        names, at = _varint(data, at)
        if names < 0:
            raise ValueError(f"{names} record headers")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(names):
            name, at = _bytes(data, at)
            if name is None:
                raise ValueError("a header without a name")
            header_value, at = _bytes(data, at)
            headers.append((name.decode("utf-8", "surrogateescape"), header_value))
        if at != end:
            raise ValueError(f"a record of {length} bytes read as {length + at - end}")
        records.append(
            DecodedRecord(
                offset=base_offset + offset_delta,
                timestamp=max_time if log_append else first_time + time_delta,
                timestamp_type=int(log_append),
                key=key,
                value=value,
                headers=headers,
            )
        )
    if at != len(data):
        raise ValueError(f"{len(data) - at} bytes after the batch's {count} records")
    return records


class _Batch:
    """One record batch of format v2 as aiokafka reads it, with its bytes: its records are
    aiokafka's until aiokafka cannot read one (``cannot_decode``), then ``decode_batch``'s
    from there on."""

    __slots__ = ("_batch", "_raw")

    def __init__(self, batch: Any, raw: memoryview) -> None:
        self._batch = batch
        self._raw = raw

    def __getattr__(self, name: str) -> Any:  # the batch's header, its CRC check
        return getattr(self._batch, name)

    def __next__(self) -> Any:  # a control batch's marker (no headers)
        return next(self._batch)

    def __iter__(self) -> Iterator[Any]:
        return self._records()

    def _records(self) -> Iterator[Any]:
        last = -1
        try:
            for record in self._batch:
                last = record.offset
                yield record
            return
        except UnsupportedCodecError as error:  # never a broker's error to retry (bus.codecs)
            raise codec_missing(error) from error
        except Exception as error:
            if not cannot_decode(error):
                raise
        for decoded in decode_batch(self._raw):
            if decoded.offset > last:
                yield decoded


_AIOKAFKA_RECORDS = fetcher.MemoryRecords


class _Records:
    """aiokafka's reader of a fetch's record batches, each batch of format v2 given with its
    bytes (``_Batch``)."""

    __slots__ = ("_at", "_data", "_records")

    def __init__(self, data: bytes) -> None:
        self._records = _AIOKAFKA_RECORDS(data)
        self._data = data
        self._at = 0

    def size_in_bytes(self) -> int:
        return int(self._records.size_in_bytes())

    def has_next(self) -> bool:
        return bool(self._records.has_next())

    def next_batch(self) -> Any:
        batch = self._records.next_batch()
        if batch is None:
            return None
        start = self._at
        [length] = _LENGTH.unpack_from(self._data, start + _LENGTH_AT)
        self._at = end = start + _LOG_OVERHEAD + length
        if batch.magic < 2:  # (formats v0 and v1 carry no headers)
            return batch
        return _Batch(batch, memoryview(self._data)[start:end])


_proc_fetch_request_read_here = (
    with_globals(PROC_FETCH_REQUEST, MemoryRecords=_Records) if PROC_FETCH_REQUEST else None
)
"""aiokafka's handling of a fetch's answer, its batches read by ``_Records``"""


def read_header_names_not_utf8_by(consumer_fetcher: fetcher.Fetcher) -> None:
    """Make one consumer's fetcher read a record whose header name is not UTF-8 (module
    docstring): its fetches' answers are handled by aiokafka's own code, whose record reader
    alone is ``_Records`` (``aiokafka_internals.with_globals``); the module, and every other
    consumer of the process, read as aiokafka ships. Set before its first fetch
    (``bus.clients.ScopedConsumer``, as aiokafka's ``start`` makes the fetcher)."""
    require_fetch_reader()
    assert _proc_fetch_request_read_here is not None  # (require_fetch_reader)
    consumer_fetcher._proc_fetch_request = types.MethodType(
        _proc_fetch_request_read_here, consumer_fetcher
    )


def read_header_names_not_utf8() -> None:
    """Make every aiokafka consumer of this process read a record whose header name is not
    UTF-8 (module docstring): the service's own processes, whose FastStream consumers
    FastStream builds. Once a process: again, nothing."""
    require_fetch_reader()
    fetcher.MemoryRecords = _Records
