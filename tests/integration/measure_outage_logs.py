"""The log lines each process of the service writes while the broker is away, and the
library lines its filter left out (``observability.logging.LibraryRepeats``: one line per
logger and template per 10 s, saying how many like it were left out since the last).

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_outage_logs --down 30

Starts ``blackjack serve``, ``blackjack handler``, ``blackjack projections run --http`` and a
platform's client (``BlackjackClient`` sending a command to each of 6 tables in turn, its
process logging through ``configure_logging`` as the service does) on fresh topics of 12
partitions of the tests' private broker (``KAFKA_PORT``...: tests/integration/infra.py), stops
that broker with ``deploy/kafka/kafka.sh down`` for ``--down`` seconds and starts it again.
Printed per process: the lines written from the stop to 10 s after the broker is back, the
most in one second, and per aiokafka template the lines written and those left out."""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from tests.integration.infra import free_port, kafka_bootstrap

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = re.compile(r" \((\d+) more like it left out since the last\)$")


def client() -> None:
    """A platform's process: a ``BlackjackClient`` sending a command to 6 tables in turn."""
    from blackjack.client import BlackjackClient
    from blackjack.domain.commands import Deposit
    from blackjack.observability.logging import configure_logging

    async def play() -> None:
        async with BlackjackClient.from_env() as sender:
            while True:
                for n in range(6):
                    command = Deposit(player_id="p", amount=100, currency="USD")
                    with contextlib.suppress(TimeoutError):
                        await sender.execute(f"t{n}", command, timeout=5)
                await asyncio.sleep(0.5)

    configure_logging("INFO")
    asyncio.run(play())


def counted(path: Path, start: float, end: float) -> dict[str, object]:
    per_second: collections.Counter[str] = collections.Counter()
    written: collections.Counter[str] = collections.Counter()
    left_out: collections.Counter[str] = collections.Counter()
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
            stamp = entry["timestamp"]
        except (ValueError, KeyError, TypeError):
            continue
        at = time.mktime(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        if not start <= at <= end:
            continue
        per_second[stamp[:19]] += 1
        if str(entry.get("logger", "")).startswith("aiokafka"):
            event = str(entry.get("event", ""))
            more = LEFT_OUT.search(event)
            template = re.sub(r"\d+", "N", event[: more.start()] if more else event)[:60]
            written[template] += 1
            left_out[template] += int(more.group(1)) if more else 0
    return {
        "lines": sum(per_second.values()),
        "most_in_a_second": max(per_second.values(), default=0),
        # the five most frequent templates: [lines written, lines left out]
        "aiokafka": {
            t: [written[t], left_out[t]]
            for t in sorted(written, key=lambda t: -(written[t] + left_out[t]))[:5]
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--down", type=float, default=30.0)
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client()
        return
    bootstrap = kafka_bootstrap()
    folder = Path(tempfile.mkdtemp(prefix="outage-logs-"))
    env = {
        **os.environ,
        "BLACKJACK_KAFKA_BOOTSTRAP": bootstrap,
        "BLACKJACK_TOPIC_PREFIX": f"logs-{uuid.uuid4().hex[:8]}.",
        "BLACKJACK_PARTITIONS": "12",
        "BLACKJACK_SHOE_KEY": "ab" * 32,
        "BLACKJACK_DB_URL": f"sqlite+aiosqlite:///{folder / 'read.db'}",
    }
    blackjack = str(Path(sys.executable).parent / "blackjack")
    commands = {
        "serve": [blackjack, "serve", "--port", str(free_port())],
        "handler": [blackjack, "handler"],
        "projections": [blackjack, "projections", "run", "--http", f"127.0.0.1:{free_port()}"],
        "client": [sys.executable, "-m", "tests.integration.measure_outage_logs", "--client"],
    }
    processes = {}
    for name, command in commands.items():
        with open(folder / f"{name}.log", "w") as log:
            processes[name] = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        time.sleep(8 if name == "serve" else 0)  # serve creates the topics
    try:
        time.sleep(30)  # every process started and serving
        kafka = str(ROOT / "deploy" / "kafka" / "kafka.sh")
        stopped = time.time()
        subprocess.run([kafka, "down"], check=True, capture_output=True)
        time.sleep(args.down)
        subprocess.run([kafka, "up"], check=True, capture_output=True)
        time.sleep(10)
        ended = time.time()
    finally:
        for process in processes.values():
            process.send_signal(signal.SIGTERM)
        for process in processes.values():
            process.wait(60)
    print(json.dumps({"down_s": args.down, "from_stop_to_10_s_after_up_s": round(ended - stopped)}))
    for name in commands:
        print(json.dumps({"process": name, **counted(folder / f"{name}.log", stopped, ended)}))


if __name__ == "__main__":
    main()
