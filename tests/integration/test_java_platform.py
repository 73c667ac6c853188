"""A casino platform on the JVM: Apache Kafka's own Java client (kafka-clients, the broker's
version, from its libs directory) plays rounds against a running handler, as docs/kafka.md
and the AsyncAPI document say. ``java/PlatformClient.java`` is compiled here with ``javac``
(Java 17) against the broker's jars, into a temporary directory: nothing is downloaded. It
sends each round's commands in one producer batch compressed with ``compression.type=lz4``
and ``zstd`` (the headers of a command, keyed by the stream id, the Java client's default
partitioner), and reads ``blackjack.command-results`` and ``blackjack.events`` with
``isolation.level=read_committed``, checking every result and event it reads: status and
reason code (a bet of 0 ``invalid_amount``; a ``sent_at`` written by ``OffsetDateTime.toString()``
at a whole minute, without seconds, ``malformed``), key, partition, ``bj_command_offset``, the
CloudEvents headers, sequences 1, 2, 3... and each result's sequences against its events'
causation. The service's own batches are gzip (``BLACKJACK_KAFKA_COMPRESSION``'s default)."""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from aiokafka.consumer import fetcher

from blackjack.bus.header_names import _Records
from tests.integration.conftest import KafkaSpace, read_topic, running_handler
from tests.integration.infra import kafka_cache_dir

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).parent / "java" / "PlatformClient.java"
CODECS = {"lz4": 3, "zstd": 4}  # compression.type, and a record batch's attributes for it
RUN_S = 120.0


async def run(*argv: str, timeout: float = RUN_S) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture(scope="module")
async def platform_client(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The ``java`` command line of the compiled client."""
    javac, java = shutil.which("javac"), shutil.which("java")
    assert javac and java, "Java 17 (javac, java) is needed: the README's quick start"
    libs = kafka_cache_dir() / "libs"
    assert (libs / "kafka-clients-3.9.2.jar").exists() or any(libs.glob("kafka-clients-*.jar"))
    out = tmp_path_factory.mktemp("platform-client")
    code, _, err = await run(javac, "-cp", f"{libs}/*", "-d", str(out), str(SOURCE))
    assert code == 0, err
    return [java, "-cp", f"{out}:{libs}/*", "PlatformClient"]


class BatchCodecs(_Records):
    """The fetched record batches' codecs (``compression_type``), as read."""

    seen: ClassVar[list[int]] = []

    def next_batch(self) -> Any:
        batch = super().next_batch()
        if batch is not None and not batch.is_control_batch:
            BatchCodecs.seen.append(batch.compression_type)
        return batch


async def test_a_java_platform_plays_with_lz4_and_zstd_batches(
    kafka_space: Any, platform_client: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    space: KafkaSpace = await kafka_space(partitions=3)
    run_id = uuid.uuid4().hex[:8]
    async with running_handler(space.config()) as handler:
        code, out, err = await run(*platform_client, space.bootstrap, space.prefix, run_id, *CODECS)
        assert handler.failure is None
    assert code == 0, err[-3000:]
    summary = json.loads(out.splitlines()[-1])
    assert summary["commands"] == summary["results"] == 7 * len(CODECS), summary
    assert summary["events"] >= 2 * 8, summary  # opened, seated, deposit, bet, 4 cards at least
    # the commands went compressed, one batch a round (seven records)
    monkeypatch.setattr(fetcher, "MemoryRecords", BatchCodecs)
    BatchCodecs.seen.clear()
    commands = await read_topic(space, space.topics.commands)
    assert len(commands) == 7 * len(CODECS)
    assert sorted(BatchCodecs.seen) == sorted(CODECS.values())
