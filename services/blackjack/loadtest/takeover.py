"""A rolling restart under load: how long tables wait when a handler instance leaves its
group and comes back, and the proof that nothing was lost or done twice.

Two ``CommandHandler`` instances in one group (in this process, as the load test runs one)
serve fresh topics while players play without pause. Each restart stops one instance (it
leaves the group, as on SIGTERM) and measures how long the other takes to serve every
partition, then starts a new instance in its place and measures how long until the two
serve every partition again between them. What it times is the group's rebalances and the
takeovers (fencing, the partitions kept or rebuilt); a process's own start (imports,
connections) comes on top in production.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from blackjack.bus.settings import PLAINTEXT, KafkaSecurity
from blackjack.command_handler.service import CommandHandler
from blackjack.loadtest.config import Emit
from blackjack.loadtest.drill import POLL_S, Drill


@dataclass(frozen=True)
class TakeoverConfig:
    bootstrap: str
    tables: int = 24
    partitions: int = 6
    restarts: int = 4
    settle_s: float = 5.0
    """Played before the first restart and between two."""
    variant: str = "mini-h17"
    timeout_s: float = 60.0
    """How long a command may wait for its result, or the handlers for their partitions."""
    keep_topics: bool = False
    security: KafkaSecurity = PLAINTEXT
    """How every client connects: the service's BLACKJACK_KAFKA_* settings."""
    replication_factor: int = 1
    min_insync_replicas: int = 1
    """of the drill's topics"""


async def run_takeover(config: TakeoverConfig, emit: Emit) -> dict[str, Any]:
    drill = Drill(
        "takeover",
        config.bootstrap,
        partitions=config.partitions,
        tables=config.tables,
        variant=config.variant,
        timeout_s=config.timeout_s,
        security=config.security,
        replication_factor=config.replication_factor,
        min_insync_replicas=config.min_insync_replicas,
    )
    everything = set(range(config.partitions))
    emit({"kind": "setup", **_public(config), "topic_prefix": drill.prefix, "handlers": 2})

    async def until(condition: Callable[[], bool]) -> float:
        started = time.monotonic()
        async with asyncio.timeout(config.timeout_s):
            while not condition():
                await asyncio.sleep(POLL_S)
        return time.monotonic() - started

    restarts: list[dict[str, Any]] = []
    async with drill.topics_in_use(keep=config.keep_topics):
        try:
            handlers = {"a": drill.handler("a"), "b": drill.handler("b")}
            await handlers["a"].start()
            await handlers["a"].wait_ready(config.timeout_s)
            await handlers["b"].start()
            await until(lambda: _share(handlers["b"], handlers["a"], everything))
            await drill.play()
            await drill.meanwhile(asyncio.sleep(config.settle_s))
            for number in range(config.restarts):
                name, other = "ab"[number % 2], "ab"[1 - number % 2]
                leaving, back = handlers[name], drill.handler(f"{name}{number}")
                handlers[name] = back
                restart = await drill.meanwhile(
                    _restart(leaving, handlers[other], back, everything, until)
                )
                restarts.append(
                    {"kind": "restart", "number": number + 1, "stopped": name, **restart}
                )
                emit(restarts[-1])
                await drill.meanwhile(asyncio.sleep(config.settle_s))
            await drill.stop_playing(handlers.values())
        finally:
            await drill.close()
        proof = await drill.prove(emit)
    summary = {
        "kind": "summary",
        "ok": proof.ok,
        "restarts": len(restarts),
        **drill.figures(),
        "other_serves_all_s_max": max(r["other_serves_all_s"] for r in restarts),
        "shared_again_s_max": max(r["shared_again_s"] for r in restarts),
    }
    emit(summary)
    return summary


async def _restart(
    leaving: CommandHandler,
    staying: CommandHandler,
    back: CommandHandler,
    everything: set[int],
    until: Callable[[Callable[[], bool]], Awaitable[float]],
) -> dict[str, Any]:
    """Stop ``leaving`` (it leaves the group), wait for ``staying`` to serve ``everything``,
    start ``back`` (not started yet) in its place, wait for the two to share the partitions
    again; the times."""
    started = time.monotonic()
    await leaving.stop()
    stopped = time.monotonic() - started
    await until(lambda: staying.owned_partitions() == everything)
    alone = time.monotonic() - started
    await back.start()
    shared = await until(lambda: _share(back, staying, everything))
    return {
        "stop_s": round(stopped, 3),
        "other_serves_all_s": round(alone, 3),
        "shared_again_s": round(shared, 3),
    }


def _share(one: CommandHandler, other: CommandHandler, everything: set[int]) -> bool:
    """Both serve some partitions, all of them between them, and neither waits on one."""
    mine, theirs = one.owned_partitions(), other.owned_partitions()
    return bool(mine and theirs) and mine | theirs == everything and one.ready and other.ready


def _public(config: TakeoverConfig) -> dict[str, Any]:
    return {
        "tables": config.tables,
        "partitions": config.partitions,
        "restarts": config.restarts,
        "settle_s": config.settle_s,
        "variant": config.variant,
        "bootstrap": config.bootstrap,
        "security": config.security.protocol,
    }
