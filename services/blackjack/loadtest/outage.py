"""A broker outage under load: the broker stopped while players play, started again after a
while, and the proof that nothing was lost or done twice.

Two ``CommandHandler`` instances in one group (in this process, as the load test runs one)
serve fresh topics while players play without pause. Each player sends a command again under
its id when it has had no result for ``resend_after_s`` (as a platform's client does: the
handler answers a copy with the original result). The broker is stopped and started by the
shell commands given, so the drill runs only against a broker it controls (by default the
local one, through ``deploy/kafka/kafka.sh``). Measured after each outage: how long after the
broker is back the first table, and every table, has an answer; then, over the run, the
slowest command, the copies sent, and the proof read back from offset 0.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

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
from blackjack.loadtest.takeover import MOST_ROUNDS, POLL_S, or_failed
from blackjack.messages.sealing import ShoeSeal
from blackjack.strategy import compute_strategy


@dataclass(frozen=True)
class OutageConfig:
    bootstrap: str
    stop_broker: str
    """A shell command that stops the broker at ``bootstrap`` and returns once it is down."""
    start_broker: str
    """A shell command that starts it again and returns once it serves."""
    tables: int = 12
    partitions: int = 3
    outages: int = 1
    down_s: float = 15.0
    """How long the broker stays down (after its stop command has returned)."""
    settle_s: float = 5.0
    """Played before the first outage and after each."""
    variant: str = "mini-h17"
    resend_after_s: float = 10.0
    timeout_s: float = 180.0
    """How long a command may go unanswered, resends included, before the run fails."""
    keep_topics: bool = False


class BrokerCommandFailed(RuntimeError):
    """The command that stops or starts the broker exited with an error."""


async def run_outage(config: OutageConfig, emit: Emit) -> dict[str, Any]:
    prefix = f"outage{uuid.uuid4().hex[:10]}."
    settings = KafkaSettings(
        bootstrap=config.bootstrap, topic_prefix=prefix, partitions=config.partitions
    )
    topics = Topics(prefix)
    shoe_key = ShoeSeal.new_key_hex()
    rules = preset(config.variant)
    compute_strategy(rules)  # before any clock starts
    emit({"kind": "setup", **_public(config), "topic_prefix": prefix, "handlers": 2})

    def handler(name: str) -> CommandHandler:
        return CommandHandler(
            HandlerConfig(
                shoe_key_hex=shoe_key, kafka=settings, instance_id=f"{name}-{os.getpid()}"
            )
        )

    await ensure_topics(settings, topics)
    handlers = [handler("a"), handler("b")]
    follower = EventFollower(
        config.bootstrap, topics, config.partitions, ShoeSeal.from_hex(shoe_key)
    )
    client = BlackjackClient(config.bootstrap, topics, client_id=f"{prefix}client")
    sent: list[Sent] = []
    outages: list[dict[str, Any]] = []
    stop_playing = asyncio.Event()
    try:
        for one in handlers:
            await one.start()
        await follower.start()
        await client.start()
        players = [
            Player(
                i,
                rules,
                client=client,
                follower=follower,
                log=sent,
                timeout=config.timeout_s,
                resend_after=config.resend_after_s,
            )
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
            for number in range(config.outages):
                outage = await _outage(config, players, playing)
                outages.append({"kind": "outage", "number": number + 1, **outage})
                emit(outages[-1])
                await or_failed(asyncio.sleep(config.settle_s), playing)
        finally:
            stop_playing.set()
            outcomes = await asyncio.gather(*playing, return_exceptions=True)
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if failures:
            raise failures[0]
        states = {
            stream_id: (sequence, state)
            for one in handlers
            for stream_id, (sequence, state) in one.streams().items()
            if isinstance(state, TableState)
        }
        views = {sid: (view.sequence, view.state) for sid, view in follower.views.items()}
    finally:
        await client.stop()
        await follower.stop()
        for one in handlers:
            await one.stop()
    resent: Counter[str] = Counter()
    for player in players:
        resent.update(player.resent)
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
            resent=resent,
        )
        emit(proof.line())
    finally:
        if not config.keep_topics:
            await remove_topics(config.bootstrap, [settings])
    latencies = [latency for p in players for latency in p.latencies]
    summary = {
        "kind": "summary",
        "ok": proof.ok,
        "outages": len(outages),
        "commands": len(sent),
        "commands_resent": sum(resent.values()),
        "rounds": sum(p.rounds for p in players),
        "first_answer_after_up_s_max": max(o["first_answer_after_up_s"] for o in outages),
        "all_answered_after_up_s_max": max(o["all_answered_after_up_s"] for o in outages),
        "latency_ms": {
            name: round(1000 * percentile(latencies, q), 1)
            for name, q in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0))
        },
    }
    emit(summary)
    return summary


async def _outage(
    config: OutageConfig, players: list[Player], playing: list[asyncio.Task[None]]
) -> dict[str, Any]:
    """Stop the broker, keep it down ``down_s``, start it, wait until every table has had
    an answer since; the times."""
    began = time.perf_counter()
    try:
        # not given way to a failing player: a stop half done would race the start below
        await _shell(config.stop_broker)
        down = time.perf_counter()
        await or_failed(asyncio.sleep(config.down_s), playing)  # the outage itself: its length
    finally:  # a player failed meanwhile, or the stop did: the broker comes back all the same
        restarting = time.perf_counter()
        await _shell(config.start_broker)
    up = time.perf_counter()

    async def every_table_answered() -> None:
        while not all(p.answered_at and p.answered_at[-1] > up for p in players):
            await asyncio.sleep(POLL_S)  # many players' progress: no single event to await

    await or_failed(asyncio.wait_for(every_table_answered(), config.timeout_s), playing)
    firsts = [next(t for t in p.answered_at if t > up) - up for p in players]
    return {
        "stop_s": round(down - began, 3),
        "start_s": round(up - restarting, 3),
        "broker_away_s": round(up - began, 3),
        "first_answer_after_up_s": round(min(firsts), 3),
        "all_answered_after_up_s": round(max(firsts), 3),
    }


async def _shell(command: str) -> None:
    process = await asyncio.create_subprocess_shell(
        command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, errors = await process.communicate()
    if process.returncode != 0:
        tail = errors.decode(errors="replace")[-1000:]
        raise BrokerCommandFailed(f"{command!r} exited {process.returncode}: {tail}")


def _public(config: OutageConfig) -> dict[str, Any]:
    return {
        "tables": config.tables,
        "partitions": config.partitions,
        "outages": config.outages,
        "down_s": config.down_s,
        "settle_s": config.settle_s,
        "resend_after_s": config.resend_after_s,
        "variant": config.variant,
        "bootstrap": config.bootstrap,
        "stop_broker": config.stop_broker,
        "start_broker": config.start_broker,
    }
