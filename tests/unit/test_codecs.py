"""Every Kafka codec read, or the process stops at its start saying which it cannot read
(``bus.codecs``). aiokafka without ``cramjam`` raised ``UnsupportedCodecError``, a
``KafkaError``, out of ``getmany`` for a snappy, lz4 or zstd batch: the handler's loop took it
for a broker's error and fetched the same batch again, for good."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiokafka import codec
from aiokafka.errors import KafkaError
from aiokafka.record import default_records

from blackjack.bus.codecs import CODECS, CodecMissing, missing_codecs, require_codecs
from blackjack.bus.header_names import _Records
from blackjack.bus.settings import KafkaSettings
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.configuration import ConfigurationError
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.rebuild import read_consumer_records

UNREACHABLE = "127.0.0.1:1"  # nothing is asked of it: the check comes first


@pytest.fixture
def without_cramjam(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiokafka as installed without its extra ``lz4,snappy,zstd``."""
    monkeypatch.setattr(codec, "cramjam", None)


def compressed_batch(compression: int) -> bytes:
    builder = default_records._DefaultRecordBatchBuilderPy(
        magic=2,
        compression_type=compression,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for n in range(20):  # (one record is sent as it is: no smaller compressed)
        builder.append(n, 1_000, b"table-7", b'{"command_id": "c"}' * 4, [])
    return bytes(builder.build())


BATCHES = {compression: compressed_batch(compression) for compression in (1, 2, 3, 4)}
"""(made while the codecs are here)"""


def read(data: bytes) -> list[Any]:
    records = _Records(data)
    read = []
    while records.has_next():
        read += list(records.next_batch())
    return read


def test_every_codec_of_kafka_is_here() -> None:
    """The environment the service runs in (pyproject's ``aiokafka[lz4,snappy,zstd]``)."""
    assert missing_codecs() == []
    require_codecs()
    for compression in (1, 2, 3, 4):
        assert len(read(BATCHES[compression])) == 20


def test_without_cramjam_three_codecs_are_missing_and_named(without_cramjam: None) -> None:
    assert missing_codecs() == ["snappy", "lz4", "zstd"] == list(CODECS[1:])
    with pytest.raises(CodecMissing, match="snappy, lz4, zstd") as raised:
        require_codecs()
    assert isinstance(raised.value, ConfigurationError) and raised.value.exit_code == 2


@pytest.mark.parametrize("compression", [2, 3, 4], ids=["snappy", "lz4", "zstd"])
def test_a_batch_that_cannot_be_decompressed_is_no_broker_error_to_retry(
    without_cramjam: None, compression: int
) -> None:
    """Before, ``UnsupportedCodecError``: a ``KafkaError``, which the handler's loop and
    FastStream's retry as a broker's."""
    with pytest.raises(CodecMissing, match="cannot be decompressed") as raised:
        read(BATCHES[compression])
    assert not isinstance(raised.value, KafkaError)


async def test_the_handler_does_not_start(without_cramjam: None) -> None:
    config = HandlerConfig(
        shoe_key_hex=ShoeSeal.new_key_hex(), kafka=KafkaSettings(bootstrap=UNREACHABLE)
    )
    with pytest.raises(CodecMissing):  # (before: it waited for the brokers)
        async with asyncio.timeout(5):
            await CommandHandler(config).start()


async def test_the_client_does_not_start(without_cramjam: None) -> None:
    from blackjack.client import BlackjackClient

    with pytest.raises(CodecMissing):
        async with asyncio.timeout(5):
            await BlackjackClient(UNREACHABLE).start()


async def test_a_rebuild_or_an_audit_reads_nothing(without_cramjam: None) -> None:
    with pytest.raises(CodecMissing):
        async with asyncio.timeout(5):
            await read_consumer_records(UNREACHABLE, "blackjack.events", lambda records: None)


def test_a_projection_worker_does_not_subscribe(without_cramjam: None) -> None:
    from faststream.kafka import KafkaBroker

    from blackjack.projection_worker.worker import register_projection

    broker = KafkaBroker(UNREACHABLE)
    with pytest.raises(CodecMissing):
        register_projection(broker, "blackjack.events", writer=Any, settings=Any)  # type: ignore[arg-type]
    assert not broker.subscribers


def test_the_handler_process_stops_with_one_line_naming_the_codecs() -> None:
    """``blackjack handler`` in an environment without ``cramjam`` (exit 2, as for any
    setting it cannot run with), before it asks anything of a broker."""
    without = "import sys; sys.modules['cramjam'] = None; from blackjack.cli import main; "
    env = {
        **os.environ,
        "BLACKJACK_SHOE_KEY": "00" * 32,
        "BLACKJACK_KAFKA_BOOTSTRAP": UNREACHABLE,
    }
    done = subprocess.run(
        [sys.executable, "-c", without + "sys.exit(main(['handler']))"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1].startswith(
        "blackjack: aiokafka cannot decompress snappy, lz4, zstd record batches"
    )


def test_projections_run_refuses_before_it_touches_its_database(tmp_path: Path) -> None:
    """``blackjack projections run`` without ``cramjam`` exits 2 with the codec line and no
    database made or migrated: before, it migrated its store first (a SQLite file created, a
    PostgreSQL schema changed by a process that could not run)."""
    without = "import sys; sys.modules['cramjam'] = None; from blackjack.cli import main; "
    db = tmp_path / "read.db"
    env = {
        **os.environ,
        "BLACKJACK_DB_URL": f"sqlite+aiosqlite:///{db}",
        "BLACKJACK_KAFKA_BOOTSTRAP": UNREACHABLE,
    }
    done = subprocess.run(
        [sys.executable, "-c", without + "sys.exit(main(['projections', 'run']))"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1].startswith("blackjack: aiokafka cannot decompress")
    assert not db.exists()
