"""A broker outage under load: the broker stopped while players play, started again after a
while, and the proof that nothing was lost or done twice.

Two ``CommandHandler`` instances in one group (in this process, as the load test runs one)
serve fresh topics while players play without pause. Each player sends a command again under
its id when it has had no result for ``resend_after_s`` (as a platform's client does: the
handler answers a copy with the original result). The broker is stopped and started by the
shell commands given, so the drill runs only against a broker it controls (by default the
local one, through ``deploy/kafka/kafka.sh``). A projection worker folds the events through
the outage into a read model of its own. Measured after each outage: how long after the
broker is back the first table, and every table, has an answer; then, over the run, the
slowest command, the copies sent, the proof read back from offset 0, and the read model
against one rebuilt from offset 0 (``read_model.py``).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackjack.bus.settings import PLAINTEXT, KafkaSecurity
from blackjack.loadtest.config import Emit
from blackjack.loadtest.drill import POLL_S, Drill, stop_all
from blackjack.loadtest.read_model import LiveReadModel


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
    security: KafkaSecurity = PLAINTEXT
    """How every client connects (handlers, players, proof, the projection worker): the
    service's BLACKJACK_KAFKA_* settings on the command line."""
    replication_factor: int = 1
    """Replicas of the drill's topics: 3 on deploy/kafka/cluster.sh's three nodes, where one
    node stops and the others take its partitions over."""
    min_insync_replicas: int = 1


class BrokerCommandFailed(RuntimeError):
    """The command that stops or starts the broker exited with an error."""


async def run_outage(config: OutageConfig, emit: Emit) -> dict[str, Any]:
    drill = Drill(
        "outage",
        config.bootstrap,
        partitions=config.partitions,
        tables=config.tables,
        variant=config.variant,
        timeout_s=config.timeout_s,
        resend_after_s=config.resend_after_s,
        security=config.security,
        replication_factor=config.replication_factor,
        min_insync_replicas=config.min_insync_replicas,
    )
    emit({"kind": "setup", **_public(config), "topic_prefix": drill.prefix, "handlers": 2})
    outages: list[dict[str, Any]] = []
    async with drill.topics_in_use(keep=config.keep_topics):
        scratch = tempfile.TemporaryDirectory(prefix="blackjack-outage-")
        read_model = None
        try:
            # a projection worker folds through the outage too
            read_model = LiveReadModel(
                config.bootstrap, drill.prefix, Path(scratch.name), config.security
            )
            await read_model.start()
            handlers = [drill.handler("a"), drill.handler("b")]
            for one in handlers:
                await one.start()
            await drill.play()
            await drill.meanwhile(asyncio.sleep(config.settle_s))
            for number in range(config.outages):
                outage = await _outage(config, drill)
                outages.append({"kind": "outage", "number": number + 1, **outage})
                emit(outages[-1])
                await drill.meanwhile(asyncio.sleep(config.settle_s))
            await drill.stop_playing(handlers)
            folded = await read_model.check(config.timeout_s)
            emit(folded)
        finally:
            steps = [drill.close] if read_model is None else [drill.close, read_model.stop]
            try:
                await stop_all(steps)
            finally:
                scratch.cleanup()
        proof = await drill.prove(emit)
    summary = {
        "kind": "summary",
        "ok": proof.ok and folded["ok"],
        "outages": len(outages),
        **drill.figures(),
        "commands_resent": sum(drill.resent().values()),
        "first_answer_after_up_s_max": max(o["first_answer_after_up_s"] for o in outages),
        "all_answered_after_up_s_max": max(o["all_answered_after_up_s"] for o in outages),
        "longest_wait_s_max": max(o["longest_wait_s"] for o in outages),
    }
    emit(summary)
    return summary


async def _outage(config: OutageConfig, drill: Drill) -> dict[str, Any]:
    """Stop the broker, keep it down ``down_s``, start it, wait until every table has had
    an answer since; the times."""
    began = time.perf_counter()
    try:
        # not given way to a failing player: a stop half done would race the start below
        await _shell(config.stop_broker)
        down = time.perf_counter()
        await drill.meanwhile(asyncio.sleep(config.down_s))  # the outage itself: its length
    finally:  # a player failed meanwhile, or the stop did: the broker comes back all the same
        restarting = time.perf_counter()
        await _shell(config.start_broker)
    up = time.perf_counter()

    async def every_table_answered() -> None:
        while not all(p.answered_at and p.answered_at[-1] > up for p in drill.players):
            await asyncio.sleep(POLL_S)  # many players' progress: no single event to await

    await drill.meanwhile(asyncio.wait_for(every_table_answered(), config.timeout_s))
    firsts = [next(t for t in p.answered_at if t > up) - up for p in drill.players]
    # a table's longest wait for an answer from the stop on (a cluster's other nodes answer
    # while one is down: this is its failover; a single broker's is the outage itself)
    waits = [
        later - max(earlier, began)
        for p in drill.players
        for earlier, later in zip(p.answered_at, p.answered_at[1:], strict=False)
        if later > began
    ]
    answered_while_down = sum(down < t < restarting for p in drill.players for t in p.answered_at)
    return {
        "stop_s": round(down - began, 3),
        "start_s": round(up - restarting, 3),
        "broker_away_s": round(up - began, 3),
        "first_answer_after_up_s": round(min(firsts), 3),
        "all_answered_after_up_s": round(max(firsts), 3),
        "longest_wait_s": round(max(waits, default=0.0), 3),
        "answered_while_down": answered_while_down,
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
        "security": config.security.protocol,
        "replication_factor": config.replication_factor,
        "min_insync_replicas": config.min_insync_replicas,
    }
