"""Process-level fault drill: SIGKILL and SIGSTOP of the command handlers, SIGKILL of the
projection worker, and SIGKILL or a restart of PostgreSQL, at random moments while players
play; then the proof that nothing was lost, doubled or guessed (docs/load.md, "Process
faults under load"):

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_chaos \\
        [--tables 12] [--partitions 6] [--faults 8] [--seed 1] \\
        [--kinds handler-kill,handlers-kill,handler-stop,worker-kill,pg-kill,pg-restart]

What runs, each as its own OS process as in production: two ``blackjack handler`` processes
in one consumer group, and one ``blackjack projections run`` worker (a stable instance name,
as the StatefulSet gives it) folding into a fresh PostgreSQL database. Players (this process,
``loadtest.drill``: basic strategy, one command in flight per table, a command sent again
under its id after 10 s without an answer, as a platform's client does) play without pause.
The faults, one at a time, in a random order (``--seed``), ``--settle`` to 2 x ``--settle``
seconds apart:

* ``handler-kill``: SIGKILL of one handler at a random moment, a new process started
  ``--restart-after`` seconds later (a pod restarted);
* ``handlers-kill``: SIGKILL of both handlers at once, new processes started
  ``--restart-after`` seconds later (every partition rebuilt from the log);
* ``handler-stop``: SIGSTOP of one handler for ``--stop-s`` seconds (default 65: past the
  group's 10 s session timeout and the producers' 60 s transaction timeout), then SIGCONT:
  the other takes its partitions, and whatever the woken one had open must be fenced;
* ``worker-kill``: SIGKILL of the projection worker (it folds all the time: mid-batch), a
  new one started ``--restart-after`` seconds later;
* ``pg-kill``: SIGKILL of every PostgreSQL process (the postmaster's process group), started
  again (crash recovery) after ``--pg-down`` seconds;
* ``pg-restart``: PostgreSQL stopped (``postgres.sh down``: fast shutdown) and started again
  after ``--pg-down`` seconds.

Measured per fault: for the handlers, from the fault until every table has had an answer
again (``all_answered_after_s``); for the read model, from the moment the worker or the
database is back until the store's positions reach the events' end offsets read at that
moment (``caught_up_after_s``). At the end, once the worker has folded everything:

1. the load test's proof read back from offset 0 (every command record answered exactly
   once, the same answer to every copy, every table's events 1..n, each caused by its
   command, folding to what the players saw, money conserved per table);
2. ``blackjack audit`` on the PostgreSQL read model (a process, as an auditor runs it):
   replay of every round, the store rebuilt from offset 0 and compared with the live one;
3. the players' own view: each player's balance as its events folded for it equals the read
   model's account (available + in play), its deposit equals the account's ``deposited``,
   and its deposit - stakes + payouts, summed from the ``RoundSettled`` it saw, equals its
   balance.

The broker and PostgreSQL are the tests' private ones (``tests/integration/infra.py``:
``KAFKA_PORT``, ``PG_PORT``, ``PG_DATA_ROOT``); this drill stops and kills that PostgreSQL:
never point it at a shared one. The topics and the database are fresh and removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, TopicPartition
from sqlalchemy.engine import make_url

from blackjack.loadtest.drill import MOST_ROUNDS, POLL_S, Drill
from tests.integration import infra
from tests.integration.conftest_projections import connect_directly, on_server

BLACKJACK = Path(sys.executable).parent / "blackjack"
KINDS = ("handler-kill", "handlers-kill", "handler-stop", "worker-kill", "pg-kill", "pg-restart")
Emit = Callable[[dict[str, Any]], None]


@dataclass
class ChaosConfig:
    tables: int = 12
    partitions: int = 6
    faults: int = 8
    kinds: tuple[str, ...] = KINDS
    seed: int = 1
    settle_s: float = 4.0
    restart_after_s: float = 1.0
    stop_s: float = 65.0
    pg_down_s: float = 5.0
    variant: str = "mini-h17"
    timeout_s: float = 300.0
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="bj-chaos-")))


class Processes:
    """The handler processes and the projection worker process of the drill."""

    def __init__(self, drill: Drill, db_url: str, bootstrap: str, log_dir: Path) -> None:
        self.drill = drill
        self.db_url = db_url
        self.bootstrap = bootstrap
        self.log_dir = log_dir
        self.handlers: dict[str, subprocess.Popen[bytes]] = {}
        self.worker: subprocess.Popen[bytes] | None = None
        self.started = 0
        self.everything: list[subprocess.Popen[bytes]] = []

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "BLACKJACK_KAFKA_BOOTSTRAP": self.bootstrap,
            "BLACKJACK_TOPIC_PREFIX": self.drill.prefix,
            "BLACKJACK_PARTITIONS": str(self.drill.settings.partitions),
            "BLACKJACK_SHOE_KEY": self.drill.shoe_key,
        }

    def _spawn(self, args: list[str], log: Path, **extra: str) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            process = subprocess.Popen(
                args, env={**self._env(), **extra}, stdout=out, stderr=subprocess.STDOUT
            )
        self.everything.append(process)
        return process

    def start_handler(self, name: str) -> None:
        self.started += 1
        self.handlers[name] = self._spawn(
            [str(BLACKJACK), "handler"],
            self.log_dir / f"handler-{name}.log",
            BLACKJACK_INSTANCE_ID=f"chaos-{name}-{self.started}",
        )

    def start_worker(self) -> None:
        self.worker = self._spawn(
            [str(BLACKJACK), "projections", "run", "--db-url", self.db_url],
            self.log_dir / "worker.log",
            BLACKJACK_PROJECTION_INSTANCE="chaos-worker-0",
        )

    def handler_log(self, name: str) -> Path:
        return self.log_dir / f"handler-{name}.log"

    def check_alive(self) -> None:
        for name, process in [*self.handlers.items(), ("worker", self.worker)]:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"{name} exited {process.returncode} by itself")

    def stop(self) -> None:
        for process in self.everything:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.send_signal(signal.SIGTERM)
        for process in self.everything:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# ---- PostgreSQL ---------------------------------------------------------------------------


def _postgres_script(action: str) -> None:
    script = Path(__file__).resolve().parents[2] / "deploy" / "postgres" / "postgres.sh"
    subprocess.run([str(script), action], check=True, capture_output=True)


def _postmaster_pid() -> int:
    root = os.environ.get("PG_DATA_ROOT", "").strip()
    if not root:
        raise RuntimeError("set PG_DATA_ROOT: the drill kills the PostgreSQL it names")
    return int((Path(root) / "data" / "postmaster.pid").read_text().split()[0])


def kill_postgres() -> None:
    """SIGKILL to the postmaster's process group: the postmaster and every backend at once."""
    group = os.getpgid(_postmaster_pid())
    if group == os.getpgid(0):
        raise RuntimeError("PostgreSQL runs in the drill's own process group")
    os.killpg(group, signal.SIGKILL)
    while True:  # until the group is gone (the port and the shared memory are then free)
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(POLL_S)


async def fresh_database(server_url: str) -> tuple[str, str]:
    name = f"chaos_{uuid.uuid4().hex[:10]}"
    await on_server(server_url, f"CREATE DATABASE {name}")
    return name, make_url(server_url).set(database=name).render_as_string(hide_password=False)


async def stored_positions(db_url: str, topic: str) -> dict[int, int]:
    """The read model's positions on the events topic; {} while the database is away."""
    try:
        connection = await connect_directly(db_url, timeout=2)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return {}
    try:
        rows = await connection.fetch(
            "SELECT kafka_partition, next_offset FROM projection_positions WHERE topic = $1",
            topic,
        )
    except asyncpg.PostgresError:
        return {}
    finally:
        await connection.close()
    return {row["kafka_partition"]: row["next_offset"] for row in rows}


async def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


async def caught_up(
    drill: Drill, db_url: str, bootstrap: str, timeout: float
) -> dict[str, float | None]:
    """From now: seconds until the store's positions first move (``folding_again_after_s``;
    None if they had already reached the end), and until they reach the events' end offsets
    read now (``caught_up_after_s``). Every event is written in a transaction, whose commit
    marker is the partition's last offset: a position one below a non-zero end has folded
    everything before it."""
    began = time.perf_counter()
    topic = drill.topics.events
    ends = await end_offsets(bootstrap, topic, drill.settings.partitions)
    first: dict[int, int] | None = None
    moved: float | None = None
    while True:
        stored = await stored_positions(db_url, topic)
        if stored and first is None:
            first = stored
        if moved is None and first is not None and stored and stored != first:
            moved = round(time.perf_counter() - began, 3)
        if all(end == 0 or stored.get(p, 0) >= end - 1 for p, end in ends.items()):
            return {
                "folding_again_after_s": moved,
                "caught_up_after_s": round(time.perf_counter() - began, 3),
                "behind_at_start": sum(
                    max(0, end - 1 - (first or {}).get(p, 0)) for p, end in ends.items() if end
                ),
            }
        if time.perf_counter() - began > timeout:
            raise TimeoutError(f"the read model did not catch up: {stored} against {ends}")
        await asyncio.sleep(POLL_S)  # a row of another process's database: polled


# ---- the faults ---------------------------------------------------------------------------


async def every_table_answered_since(drill: Drill, moment: float, timeout: float) -> float:
    """Seconds from ``moment`` until every table has had an answer to a command it sent
    after it (an answer to one sent before may have been on its way when the fault came)."""

    def first_after(player: Any) -> float | None:
        return next(
            (a for a, s in zip(player.answered_at, player.asked_at, strict=True) if s > moment),
            None,
        )

    async def wait() -> None:
        while any(first_after(p) is None for p in drill.players):
            await asyncio.sleep(POLL_S)  # many players' progress: no single event to await

    await drill.meanwhile(asyncio.wait_for(wait(), timeout))
    return round(max(first_after(p) or moment for p in drill.players) - moment, 3)


async def started(log: Path, line: str, before: int, timeout: float) -> float:
    """Seconds until ``log`` holds more than ``before`` lines with ``line``: a process
    restarted, its imports and connections done (another process's file: polled)."""
    began = time.perf_counter()
    while log.read_text().count(line) <= before:
        if time.perf_counter() - began > timeout:
            raise TimeoutError(f"{log.name}: no {line!r}")
        await asyncio.sleep(0.1)
    return round(time.perf_counter() - began, 3)


async def fault(
    kind: str, config: ChaosConfig, drill: Drill, procs: Processes, chance: random.Random
) -> dict[str, Any]:
    bootstrap, db_url = procs.bootstrap, procs.db_url
    if kind == "handlers-kill":
        began = time.perf_counter()
        for victim in procs.handlers.values():
            victim.send_signal(signal.SIGKILL)
        for victim in procs.handlers.values():
            victim.wait()
        await drill.meanwhile(asyncio.sleep(config.restart_after_s))
        for name in sorted(procs.handlers):
            procs.start_handler(name)
        answered = await every_table_answered_since(drill, began, config.timeout_s)
        return {"handler": "both", "all_answered_after_s": answered}
    if kind in ("handler-kill", "handler-stop"):
        name = chance.choice(sorted(procs.handlers))
        victim = procs.handlers[name]
        began = time.perf_counter()
        if kind == "handler-kill":
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            await drill.meanwhile(asyncio.sleep(config.restart_after_s))
            procs.start_handler(name)
            line = f'"instance": "chaos-{name}-{procs.started}"'
            up = asyncio.ensure_future(started(procs.handler_log(name), line, 0, config.timeout_s))
            answered = await every_table_answered_since(drill, began, config.timeout_s)
            begun = await drill.meanwhile(up)
            return {
                "handler": name,
                "all_answered_after_s": answered,
                "new_process_up_after_restart_s": begun,
            }
        fenced_before = procs.handler_log(name).read_text().count("fenced")
        victim.send_signal(signal.SIGSTOP)
        try:
            answered = await every_table_answered_since(drill, began, config.timeout_s)
            await drill.meanwhile(asyncio.sleep(max(0.0, config.stop_s - answered)))
        finally:
            victim.send_signal(signal.SIGCONT)
        woke = time.perf_counter()
        after = await every_table_answered_since(drill, woke, config.timeout_s)
        await drill.meanwhile(asyncio.sleep(config.settle_s))
        fenced = procs.handler_log(name).read_text().count("fenced") - fenced_before
        return {
            "handler": name,
            "stopped_s": round(woke - began, 3),
            "all_answered_after_s": answered,
            "all_answered_after_wake_s": after,
            "fenced_log_lines_after_wake": fenced,
        }
    if kind == "worker-kill":
        assert procs.worker is not None
        worker_log, line = procs.log_dir / "worker.log", '"projection worker started"'
        before = worker_log.read_text().count(line)
        procs.worker.send_signal(signal.SIGKILL)
        procs.worker.wait()
        await drill.meanwhile(asyncio.sleep(config.restart_after_s))
        procs.start_worker()
        begun = await drill.meanwhile(started(worker_log, line, before, config.timeout_s))
        back = await drill.meanwhile(caught_up(drill, db_url, bootstrap, config.timeout_s))
        return {"process_start_s": begun, **back}
    if kind == "pg-kill":
        await asyncio.to_thread(kill_postgres)
    elif kind == "pg-restart":
        await asyncio.to_thread(_postgres_script, "down")
    else:
        raise ValueError(f"unknown fault {kind!r}")
    began = time.perf_counter()
    await drill.meanwhile(asyncio.sleep(config.pg_down_s))
    await asyncio.to_thread(_postgres_script, "up")
    restarting = time.perf_counter() - began - config.pg_down_s
    back = await drill.meanwhile(caught_up(drill, db_url, bootstrap, config.timeout_s))
    return {"pg_start_s": round(restarting, 3), **back}


# ---- the players' own view ----------------------------------------------------------------


async def players_view(drill: Drill, db_url: str) -> dict[str, Any]:
    """Each player's balance as it saw it, against the read model's account, and against
    its deposit less the stakes plus the payouts of the rounds it saw settled."""
    connection = await connect_directly(db_url)
    try:
        rows = await connection.fetch(
            "SELECT stream_id, player_id, available, in_play, deposited FROM accounts"
        )
    finally:
        await connection.close()
    accounts = {(r["stream_id"], r["player_id"]): r for r in rows}
    deposit = 4 * drill.rules.min_bet * (MOST_ROUNDS + 1)
    problems: list[str] = []
    for player in drill.players:
        _, state = drill.views[player.stream_id]
        seen = state.players[player.player_id].balance
        wagered, paid = drill.settled[player.stream_id]
        spent = wagered[player.player_id] - paid[player.player_id]
        account = accounts.get((player.stream_id, player.player_id))
        if account is None:
            problems.append(f"{player.stream_id}: no account in the read model")
            continue
        if account["available"] + account["in_play"] != seen:
            problems.append(
                f"{player.stream_id}: the player sees {seen}, the read model "
                f"{account['available']} + {account['in_play']} in play"
            )
        if account["deposited"] != deposit:
            problems.append(f"{player.stream_id}: deposited {account['deposited']} != {deposit}")
        if deposit - spent != seen:
            problems.append(
                f"{player.stream_id}: deposit {deposit} - stakes + payouts {-spent} != {seen}"
            )
    return {
        "kind": "players_view",
        "ok": not problems,
        "players": len(drill.players),
        "balances_equal": len(drill.players) - len(problems),
        "problems": problems[:20],
    }


# ---- the run ------------------------------------------------------------------------------


async def run(config: ChaosConfig, emit: Emit) -> dict[str, Any]:
    bootstrap = infra.kafka_bootstrap()
    server_url = infra.postgres_url()
    drill = Drill(
        "chaos",
        bootstrap,
        partitions=config.partitions,
        tables=config.tables,
        variant=config.variant,
        timeout_s=config.timeout_s,
        resend_after_s=10.0,
    )
    database, db_url = await fresh_database(server_url)
    emit(
        {
            "kind": "setup",
            "tables": config.tables,
            "partitions": config.partitions,
            "faults": config.faults,
            "kinds": list(config.kinds),
            "seed": config.seed,
            "topic_prefix": drill.prefix,
            "database": database,
            "logs": str(config.log_dir),
        }
    )
    chance = random.Random(config.seed)
    procs = Processes(drill, db_url, bootstrap, config.log_dir)
    faults: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    try:
        async with drill.topics_in_use(keep=False):
            try:
                procs.start_handler("a")
                procs.start_handler("b")
                procs.start_worker()
                await drill.play()
                await drill.meanwhile(asyncio.sleep(config.settle_s))
                # the baseline: how far behind the read model is with no fault at all
                steady = await drill.meanwhile(
                    caught_up(drill, db_url, bootstrap, config.timeout_s)
                )
                emit({"kind": "baseline", **steady})
                order = [config.kinds[i % len(config.kinds)] for i in range(config.faults)]
                chance.shuffle(order)
                for number, kind in enumerate(order, 1):
                    procs.check_alive()
                    began = time.perf_counter()
                    figures = await fault(kind, config, drill, procs, chance)
                    faults.append(
                        {
                            "kind": "fault",
                            "number": number,
                            "fault": kind,
                            **figures,
                            "took_s": round(time.perf_counter() - began, 3),
                        }
                    )
                    emit(faults[-1])
                    wait = chance.uniform(config.settle_s, 2 * config.settle_s)
                    await drill.meanwhile(asyncio.sleep(wait))
                procs.check_alive()
                await drill.stop_playing([])
                # the handlers are processes: their memory is not read; the players' is
                drill.states = dict(drill.views)
                await caught_up(drill, db_url, bootstrap, config.timeout_s)
                checks.append(await players_view(drill, db_url))
                emit(checks[-1])
                checks.append(await audit(drill, db_url, bootstrap))
                emit(checks[-1])
            finally:
                try:
                    await drill.close()
                finally:
                    await asyncio.to_thread(procs.stop)
            proof = await drill.prove(emit)
    finally:
        await on_server(server_url, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    summary = {
        "kind": "summary",
        "ok": proof.ok and all(check["ok"] for check in checks),
        "faults": {kind: sum(f["fault"] == kind for f in faults) for kind in config.kinds},
        **drill.figures(),
        "commands_resent": sum(drill.resent().values()),
        "handler_processes_started": procs.started,
    }
    emit(summary)
    return summary


async def audit(drill: Drill, db_url: str, bootstrap: str) -> dict[str, Any]:
    """``blackjack audit`` on the read model, as an auditor runs it."""
    process = await asyncio.create_subprocess_exec(
        str(BLACKJACK),
        "audit",
        "--db-url",
        db_url,
        "--bootstrap",
        bootstrap,
        "--topic-prefix",
        drill.prefix,
        env={**os.environ, "BLACKJACK_SHOE_KEY": drill.shoe_key},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await process.communicate()
    text = out.decode(errors="replace")
    return {
        "kind": "audit",
        "ok": process.returncode == 0,
        "exit": process.returncode,
        "tail": text.strip().splitlines()[-6:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=12)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--faults", type=int, default=8)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--settle", type=float, default=4.0)
    parser.add_argument("--restart-after", type=float, default=1.0)
    parser.add_argument("--stop-s", type=float, default=65.0)
    parser.add_argument("--pg-down", type=float, default=5.0)
    args = parser.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown fault kinds: {sorted(unknown)} (known: {', '.join(KINDS)})")
    config = ChaosConfig(
        tables=args.tables,
        partitions=args.partitions,
        faults=args.faults,
        kinds=kinds,
        seed=args.seed,
        settle_s=args.settle,
        restart_after_s=args.restart_after,
        stop_s=args.stop_s,
        pg_down_s=args.pg_down,
    )
    summary = asyncio.run(run(config, lambda line: print(json.dumps(line), flush=True)))
    sys.exit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
