"""How long tables answer nothing while one of two command handlers restarts, with the
handlers' consumer group as the service runs it (dynamic membership) and with Kafka's static
membership (``group.instance.id``, which aiokafka 0.14's consumer takes as
``group_instance_id``), restarted under the same instance id (a container restarted in its
pod) or under a new one (a Deployment's rolling update: a new pod, a new name).

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_handler_restart \\
        dynamic static-same static-new

Each run: fresh topics (6 partitions), two ``blackjack handler`` processes, 12 tables each
sent a command as soon as the last was answered (a 1 s wait for an answer, then again); after
10 s handler A gets SIGTERM and, once it has exited, is started again at once; 60 s in all.
Printed per run: every table's longest time without an answer, in seconds. The broker is the
private one of the tests (``KAFKA_PORT``...: tests/integration/infra.py). The static variant
is this script's only: the service has no setting for it (docs/operations.md, "Handlers")."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
import uuid

from blackjack.bus.topics import Topics
from blackjack.client import BlackjackClient
from blackjack.domain.commands import Deposit
from blackjack.messages.sealing import ShoeSeal
from tests.integration.infra import kafka_bootstrap

TABLES = 12
PARTITIONS = 6
RUN_S = 60.0
RESTART_AFTER_S = 10.0
ANSWER_WAIT_S = 1.0
INSTANCES = {  # handler A's instance id before and after its restart, handler B's
    "dynamic": (None, None, None),
    "static-same": ("handler-a", "handler-a", "handler-b"),
    "static-new": ("handler-a", "handler-c", "handler-b"),
}


def handler(instance: str | None) -> None:
    """``blackjack handler``, its commands consumer a static member named ``instance``."""
    import aiokafka

    from blackjack.cli import main
    from blackjack.command_handler import service

    class Static(aiokafka.AIOKafkaConsumer):  # type: ignore[misc]
        def __init__(self, *args: object, **options: object) -> None:
            if instance and str(options.get("client_id", "")).endswith("-commands"):
                options["group_instance_id"] = instance
            super().__init__(*args, **options)

    setattr(service, "AIOKafkaConsumer", Static)  # noqa: B010  # the module's own name
    sys.argv = ["blackjack", "handler", "--log-level", "WARNING"]
    sys.exit(main())


async def start(env: dict[str, str], instance: str | None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.measure_handler_restart",
        "--handler",
        instance or "",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def table(client: BlackjackClient, name: str, until: float) -> float:
    last = time.monotonic()
    worst = 0.0
    while time.monotonic() < until:
        command = Deposit(player_id="p", amount=100, currency="USD")
        try:
            await client.execute(name, command, timeout=ANSWER_WAIT_S)
        except TimeoutError:
            continue
        now = time.monotonic()
        worst, last = max(worst, now - last), now
    return worst


async def run(mode: str, bootstrap: str) -> dict[str, float]:
    before, after, other = INSTANCES[mode]
    prefix = f"restart-{uuid.uuid4().hex[:8]}."
    env = {
        **os.environ,
        "BLACKJACK_KAFKA_BOOTSTRAP": bootstrap,
        "BLACKJACK_TOPIC_PREFIX": prefix,
        "BLACKJACK_PARTITIONS": str(PARTITIONS),
        "BLACKJACK_SHOE_KEY": ShoeSeal.new_key_hex(),
    }
    a = await start(env, before)
    b = await start(env, other)
    try:
        async with BlackjackClient(bootstrap, Topics(prefix)) as client:
            names = [f"t{n}" for n in range(TABLES)]
            for name in names:  # every table answered once: both handlers serving
                await client.execute(name, Deposit(player_id="p", amount=1), timeout=120)
            until = time.monotonic() + RUN_S
            gaps = asyncio.gather(*(table(client, name, until) for name in names))
            await asyncio.sleep(RESTART_AFTER_S)
            a.send_signal(signal.SIGTERM)
            await a.wait()
            a = await start(env, after)
            return {name: round(gap, 2) for name, gap in zip(names, await gaps, strict=True)}
    finally:
        for process in (a, b):
            process.send_signal(signal.SIGTERM)
            await process.wait()


def main() -> None:
    if sys.argv[1] == "--handler":
        handler(sys.argv[2])
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    bootstrap = kafka_bootstrap()
    for mode in sys.argv[1:]:
        gaps = asyncio.run(run(mode, bootstrap))
        print(json.dumps({"mode": mode, "max_s": max(gaps.values()), "gaps_s": gaps}), flush=True)


if __name__ == "__main__":
    main()
