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
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from blackjack.bus.settings import KafkaSettings
from blackjack.bus.topics import Topics, ensure_topics
from blackjack.client import BlackjackClient
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.domain.rules import preset
from blackjack.domain.state import TableState
from blackjack.loadtest.config import Emit
from blackjack.loadtest.figures import percentile
from blackjack.loadtest.players import EventFollower, Player, Sent
from blackjack.loadtest.proof import prove, read_back
from blackjack.loadtest.run import remove_topics
from blackjack.messages.sealing import ShoeSeal
from blackjack.strategy import compute_strategy

T = TypeVar("T")
POLL_S = 0.01  # how finely the handlers' partitions are watched (two handlers: no one event)
MOST_ROUNDS = 10_000  # a table's deposit covers this many rounds of splits and doubles


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


async def run_takeover(config: TakeoverConfig, emit: Emit) -> dict[str, Any]:
    prefix = f"takeover{uuid.uuid4().hex[:10]}."
    settings = KafkaSettings(
        bootstrap=config.bootstrap, topic_prefix=prefix, partitions=config.partitions
    )
    topics = Topics(prefix)
    shoe_key = ShoeSeal.new_key_hex()
    rules = preset(config.variant)
    compute_strategy(rules)  # before any clock starts
    everything = set(range(config.partitions))
    emit({"kind": "setup", **_public(config), "topic_prefix": prefix, "handlers": 2})

    def handler(name: str) -> CommandHandler:
        return CommandHandler(
            HandlerConfig(
                shoe_key_hex=shoe_key, kafka=settings, instance_id=f"{name}-{os.getpid()}"
            )
        )

    async def until(condition: Callable[[], bool]) -> float:
        started = time.monotonic()
        async with asyncio.timeout(config.timeout_s):
            while not condition():
                await asyncio.sleep(POLL_S)
        return time.monotonic() - started

    await ensure_topics(settings, topics)
    handlers = {"a": handler("a"), "b": handler("b")}
    created = list(handlers.values())
    seal = ShoeSeal.from_hex(shoe_key)
    follower = EventFollower(config.bootstrap, topics, config.partitions, seal)
    client = BlackjackClient(config.bootstrap, topics, client_id=f"{prefix}client")
    sent: list[Sent] = []
    restarts: list[dict[str, Any]] = []
    stop_playing = asyncio.Event()
    try:
        await handlers["a"].start()
        await handlers["a"].wait_ready(config.timeout_s)
        await handlers["b"].start()
        await until(lambda: _share(handlers["b"], handlers["a"], everything))
        await follower.start()
        await client.start()
        players = [
            Player(i, rules, client=client, follower=follower, log=sent, timeout=config.timeout_s)
            for i in range(config.tables)
        ]
        for player in players:
            await player.set_up(4 * rules.min_bet * (MOST_ROUNDS + 1))

        async def play(player: Player) -> None:
            while not stop_playing.is_set() and player.rounds < MOST_ROUNDS:
                await player.play(1, rules.min_bet)

        playing = [asyncio.create_task(play(p)) for p in players]
        try:
            await or_failed(asyncio.sleep(config.settle_s), playing)
            for number in range(config.restarts):
                name, other = "ab"[number % 2], "ab"[1 - number % 2]
                leaving, back = handlers[name], handler(f"{name}{number}")
                created.append(back)  # stopped at the end whatever happens
                handlers[name] = back
                restart = await _restart(leaving, handlers[other], back, everything, until)
                restarts.append(
                    {"kind": "restart", "number": number + 1, "stopped": name, **restart}
                )
                emit(restarts[-1])
                await or_failed(asyncio.sleep(config.settle_s), playing)
        finally:
            stop_playing.set()
            outcomes = await asyncio.gather(*playing, return_exceptions=True)
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if failures:
            raise failures[0]
        states = {
            stream_id: (sequence, state)
            for one in handlers.values()
            for stream_id, (sequence, state) in one.streams().items()
            if isinstance(state, TableState)
        }
        views = {sid: (view.sequence, view.state) for sid, view in follower.views.items()}
    finally:
        await client.stop()
        await follower.stop()
        for one in created:
            await one.stop()  # once each: a stopped one returns at once
    try:
        commands, results, events = await read_back(settings, shoe_key)
        proof = prove(
            sent,
            command_records=commands,
            results=results,
            events=events,
            handler_states=states,
            views=views,
            rounds={p.stream_id: p.rounds for p in players},
        )
        emit(proof.line())
    finally:
        if not config.keep_topics:
            await remove_topics(config.bootstrap, [settings])
    latencies = [latency for p in players for latency in p.latencies]
    summary = {
        "kind": "summary",
        "ok": proof.ok,
        "restarts": len(restarts),
        "commands": len(sent),
        "rounds": sum(p.rounds for p in players),
        "other_serves_all_s_max": max(r["other_serves_all_s"] for r in restarts),
        "shared_again_s_max": max(r["shared_again_s"] for r in restarts),
        "latency_ms": {
            name: round(1000 * percentile(latencies, q), 1)
            for name, q in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0))
        },
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


async def or_failed(work: Awaitable[T], playing: list[asyncio.Task[None]]) -> T:
    """``work``'s result, unless a player fails first (its error is raised)."""
    task = asyncio.ensure_future(work)
    waiting: set[asyncio.Future[Any]] = {task, *playing}
    while True:
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        for finished in done:
            waiting.discard(finished)
            error = finished.exception()
            if error is not None:
                task.cancel()
                raise error


def _public(config: TakeoverConfig) -> dict[str, Any]:
    return {
        "tables": config.tables,
        "partitions": config.partitions,
        "restarts": config.restarts,
        "settle_s": config.settle_s,
        "variant": config.variant,
        "bootstrap": config.bootstrap,
    }
