"""``BlackjackClient`` in a casino platform's process leaves aiokafka as it ships: the service's
fixes to aiokafka (``bus.clients``) are on the client's own producer and consumer, and the
platform's own aiokafka clients in the same process behave as aiokafka's. Before, the client's
start replaced aiokafka's record reader (``fetcher.MemoryRecords``), metadata update and
bootstrap, ``aiokafka.client.create_conn`` and ``AIOKafkaProducer.start`` for the whole
process. Run in a process of its own (``platform_process.py``): the test session's own
processes may install the service's process-wide fixes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from blackjack.messages.envelope import CommandResult
from tests.integration.conftest import WAIT_S, KafkaSpace
from tests.integration.header_bytes import JUNK, send_one_batch, write_raw_header_names

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


async def said(stream: asyncio.StreamReader) -> dict[str, Any]:
    """The next JSON line the platform prints (its client logs lines of its own)."""
    while True:
        line = await stream.readline()
        assert line, "the platform's process ended"
        if line.startswith(b"{"):
            found: dict[str, Any] = json.loads(line)
            return found


def result(command_id: str) -> bytes:
    answer = CommandResult(
        command_id=command_id, stream_id="t", status="accepted", handled_at=datetime.now(UTC)
    )
    return answer.model_dump_json().encode()


async def test_the_client_leaves_the_platform_s_aiokafka_as_it_ships(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'services'}"}
    platform = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.platform_process",
        space.bootstrap,
        space.prefix,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    assert platform.stdin is not None and platform.stdout is not None
    try:
        async with asyncio.timeout(WAIT_S):
            assert await said(platform.stdout) == {"started": True}
            write_raw_header_names(monkeypatch)  # (this process's producer: the test's)
            await send_one_batch(
                space.bootstrap,
                space.topics.results,
                0,
                [
                    (b"t", result("before"), []),
                    (b"t", result("forged"), JUNK),
                    (b"t", result("after"), []),
                ],
            )
            platform.stdin.write(b"go\n")
            await platform.stdin.drain()
            found = await said(platform.stdout)
            assert await platform.wait() == 0
    finally:
        if platform.returncode is None:
            platform.kill()
            await platform.wait()
    assert found["changed"] == []
    # the client reads the results around the record, the platform's consumer stops there
    assert found["client"] == ["before", "after"] and found["forged"] == 0
    # (aiokafka's C reader raises before handing any record of the batch)
    assert found["platform"].split()[:2] in (
        ["raised", "UnicodeDecodeError"],
        ["raised", "CorruptRecordException"],
    ), found["platform"]
