"""A record batch the projection worker cannot decompress, met while it runs (``bus.codecs``:
the codecs are checked at its start, but a batch whose codec aiokafka cannot read all the same
raises ``CodecMissing`` out of ``getmany``). FastStream's consume loop took it for a failure of
its own: it logged it once and ran again, fetching the same batch for good, the worker alive
and "ready", its partition never folded further. Now it reaches ``/readyz`` (503,
``codec_missing``) and stops the worker: ``blackjack projections run`` exits 2 with one line.
A codec goes missing here by aiokafka's own switch (``codec.cramjam``), after the start."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from aiokafka import codec

from blackjack.bus.codecs import CodecMissing
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projection_worker.worker import build_broker
from blackjack.projections.health import FoldHealth, probes
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import EventsTopic, worker_env
from tests.integration.header_bytes import send_one_batch

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

WAIT_S = 60.0
ROOT = Path(__file__).resolve().parents[2]


async def zstd_batch(topic: EventsTopic) -> None:
    await send_one_batch(topic.bootstrap, topic.name, 0, [(b"t", b"{}", [])] * 5, "zstd")


async def readyz(health: FoldHealth) -> tuple[int, dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def nothing() -> Any:
        raise AssertionError("no request body is read")

    async def fallback(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("answered by the probes")

    await probes(health, fallback)({"type": "http", "path": "/readyz"}, nothing, send)
    return sent[0]["status"], json.loads(sent[1]["body"])


async def test_a_batch_the_worker_cannot_decompress_stops_it_not_ready(
    events_topic: EventsTopic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    await store.migrate()
    settings = ProjectionSettings(
        db_url=store.url,
        bootstrap=events_topic.bootstrap,
        topic_prefix=events_topic.prefix,
        group_id=f"{events_topic.prefix}projections",
    )
    health = FoldHealth()
    broker = build_broker(settings, ProjectionWriter(store), health)  # (its codecs checked)
    await zstd_batch(events_topic)
    monkeypatch.setattr(codec, "cramjam", None)
    await broker.start()
    try:
        stopped = await asyncio.wait_for(health.stopped(), WAIT_S)
    finally:
        await broker.stop()
        await store.close()
    assert isinstance(stopped, CodecMissing) and "zstd" in str(stopped)
    status, body = await readyz(health)
    assert status == 503 and body["status"] == "codec_missing"
    assert body["projections"]["status"] == "codec_missing"


WORKER = """
import sys
from aiokafka import codec
from blackjack.cli import main
from blackjack.projection_worker import worker

checked = worker.require_codecs
def then_gone():  # checked at the start, then gone: the run-time path
    checked()
    codec.cramjam = None
worker.require_codecs = then_gone
sys.exit(main(["projections", "run"]))
"""


async def test_projections_run_exits_2_with_one_line_at_such_a_batch(
    events_topic: EventsTopic, tmp_path: Path
) -> None:
    await zstd_batch(events_topic)
    env = worker_env(events_topic, f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    env["PYTHONPATH"] = f"{ROOT / 'services'}{os.pathsep}{env.get('PYTHONPATH', '')}"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WORKER,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(process.communicate(), WAIT_S)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    said = err.decode().strip().splitlines()
    assert process.returncode == 2, said
    assert said[-1].startswith("blackjack: a record batch cannot be decompressed"), said
