"""The compression codecs every reader of the topics needs, checked before it reads.

A producer of the platform may compress its batches (a Java producer's ``compression.type``:
``gzip``, ``snappy``, ``lz4``, ``zstd``), and the broker keeps them as they were sent. aiokafka
(0.14.0) decompresses gzip with the standard library and the other three with ``cramjam``
(the extra ``aiokafka[lz4,snappy,zstd]``); without it, it raises ``UnsupportedCodecError`` (a
``KafkaError``) out of ``getmany`` for such a batch, on every fetch of it. The handler's loop
took that error for a broker's hiccup: it logged "fetching commands failed" and fetched the
same batch again (its position stays at the batch), for good: that command and every one
after it on the partition never answered. So every process that reads a topic checks the
codecs at its start (``require_codecs``): one missing stops it with one line naming it
(``CodecMissing``, exit 2), before it reads anything. A batch whose codec aiokafka cannot
read all the same (one that names no codec Kafka has) stops the reader with the same typed
error (``bus.header_names``), never retried as a broker's error.
"""

from __future__ import annotations

from aiokafka import codec
from aiokafka.errors import UnsupportedCodecError

from blackjack.configuration import ConfigurationError

CODECS = ("gzip", "snappy", "lz4", "zstd")
"""Kafka's codecs (a record batch's attributes 1 to 4), in that order"""


class CodecMissing(ConfigurationError):
    """This process cannot decompress a batch a producer may write to the topics."""


def missing_codecs() -> list[str]:
    """The codecs of ``CODECS`` aiokafka cannot decompress in this process."""
    present = {
        "gzip": codec.has_gzip(),
        "snappy": codec.has_snappy(),
        "lz4": codec.has_lz4(),
        "zstd": codec.has_zstd(),
    }
    return [name for name in CODECS if not present[name]]


def require_codecs() -> None:
    """Raise ``CodecMissing`` unless every codec of Kafka can be read here."""
    missing = missing_codecs()
    if missing:
        raise CodecMissing(
            f"aiokafka cannot decompress {', '.join(missing)} record batches in this "
            "environment (install aiokafka[lz4,snappy,zstd], which brings cramjam): a "
            "producer may compress what it sends, and such a batch could not be read"
        )


def codec_missing(error: UnsupportedCodecError) -> CodecMissing:
    """The typed error of a batch aiokafka raised ``UnsupportedCodecError`` at."""
    return CodecMissing(f"a record batch cannot be decompressed: {error}")
