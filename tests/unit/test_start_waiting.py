"""``blackjack_start_waiting_since_timestamp_seconds{step}``: a series while a process's start
waits on a step, none once the step is done. A process that never reaches the brokers has no
Kafka-answered series to alert on; this one names the step it is stuck at (the brokers, the
database) for ``BlackjackStartStalled``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from blackjack.app import build_app
from blackjack.bus.settings import KafkaSettings
from blackjack.command_handler.config import HandlerConfig
from blackjack.messages.sealing import ShoeSeal
from blackjack.projection_worker import worker
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections.metrics import STORE_UP
from tests.unit.polling import until

GAUGE = "blackjack_start_waiting_since_timestamp_seconds"
NO_BROKER = "127.0.0.1:9"  # nothing listens: a start waits there for good


def waiting(text: str) -> dict[str, float]:
    """The steps a ``/metrics`` answer says the start waits on, and since when."""
    return {
        sample.labels["step"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == GAUGE
    }


def waiting_here() -> dict[str, float]:
    """The same from the process's registry (a worker without ``--http`` serves none)."""
    return {
        sample.labels["step"]: sample.value
        for family in REGISTRY.collect()
        for sample in family.samples
        if sample.name == GAUGE
    }


async def test_serve_names_the_step_it_waits_on_until_it_is_done() -> None:
    config = HandlerConfig(
        shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g", kafka=KafkaSettings(NO_BROKER)
    )
    served = build_app(config)
    gates = {"kafka": asyncio.Event(), "read model": asyncio.Event()}

    def gated(step: str) -> Callable[[], Awaitable[None]]:
        async def wait() -> None:
            await gates[step].wait()

        return wait

    served.start.steps = [(step, gated(step)) for step in gates]
    transport = httpx.ASGITransport(app=served.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://serve") as http:

        async def shown() -> tuple[object, dict[str, float]]:
            alive = (await http.get("/healthz")).json()
            return alive.get("waiting_for"), waiting((await http.get("/metrics")).text)

        assert await shown() == (None, {})  # not launched yet
        began = time.time()
        served.start.launch()
        await asyncio.wait_for(until(lambda: served.start.step == "kafka"), 5)
        step, since = await shown()
        assert step == "kafka" and list(since) == ["kafka"]
        assert began <= since["kafka"] <= time.time()
        gates["kafka"].set()  # the brokers answered: its series goes, the next step's comes
        await asyncio.wait_for(until(lambda: served.start.step == "read model"), 5)
        step, since = await shown()
        assert step == "read model" and list(since) == ["read model"]
        gates["read model"].set()
        await asyncio.wait_for(until(lambda: served.start.done), 5)
        assert (await http.get("/healthz")).json() == {"status": "ok"}
        assert waiting((await http.get("/metrics")).text) == {}


@pytest.mark.parametrize("ending", ["fails", "is stopped"])
async def test_a_step_that_fails_or_is_stopped_leaves_no_series(ending: str) -> None:
    config = HandlerConfig(
        shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g", kafka=KafkaSettings(NO_BROKER)
    )
    served, entered, never = build_app(config), asyncio.Event(), asyncio.Event()

    async def read_model() -> None:
        entered.set()
        await never.wait()
        raise RuntimeError("the store is newer than this code")

    served.start.steps = [("read model", read_model)]
    served.start.launch()
    await asyncio.wait_for(entered.wait(), 5)
    assert list(waiting_here()) == ["read model"]
    if ending == "fails":
        never.set()
        await asyncio.wait_for(served.start.failed.wait(), 5)
    else:
        await asyncio.wait_for(served.start.cancel(), 5)  # SIGTERM
    assert waiting_here() == {}


async def test_a_worker_names_the_step_it_waits_on_until_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``projections run``: its database answers (SQLite), the brokers never do."""
    stop = asyncio.Event()

    async def until_signalled() -> None:  # SIGTERM, without the test's loop's signal handlers
        await stop.wait()

    monkeypatch.setattr(worker, "_until_signalled", until_signalled)
    settings = ProjectionSettings(
        db_url=f"sqlite+aiosqlite:///{tmp_path / 'read.db'}", bootstrap=NO_BROKER
    )
    running = asyncio.create_task(worker.run_worker(settings))
    try:
        # the database migrated (its step done, its series gone), the brokers waited for
        await asyncio.wait_for(until(lambda: "kafka" in waiting_here()), 30)
        assert list(waiting_here()) == ["kafka"]
    finally:
        stop.set()
        await asyncio.wait_for(running, 10)
    assert waiting_here() == {}


def _store_up(text: str) -> float | None:
    return next(
        (
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "blackjack_projection_store_up"
        ),
        None,
    )


async def test_serve_waiting_for_kafka_has_reached_its_database_first(tmp_path: Path) -> None:
    """``serve`` migrates its read model before it waits for the brokers: waiting for Kafka,
    its ``blackjack_projection_store_up`` reads 1, the database's truth. Before, the brokers
    came first and the gauge read 0 until they answered, so a broker outage at a start paged
    the on-call about the database too (``BlackjackProjectionStoreUnreachable``, a review)."""
    config = HandlerConfig(
        shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g", kafka=KafkaSettings(NO_BROKER)
    )
    projections = ProjectionSettings(db_url=f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    served = build_app(config, projections)
    assert [step for step, _ in served.start.steps][:2] == ["read model", "kafka"]
    STORE_UP.set(0)  # as a process starts (another test may have set it)
    transport = httpx.ASGITransport(app=served.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://serve") as http:
        served.start.launch()
        try:
            await asyncio.wait_for(until(lambda: served.start.step == "kafka"), 10)
            text = (await http.get("/metrics")).text
            assert list(waiting(text)) == ["kafka"]
            assert _store_up(text) == 1
            assert (await http.get("/readyz")).json()["projections"]["store"]["status"] == "ok"
        finally:
            await asyncio.wait_for(served.start.cancel(), 5)
