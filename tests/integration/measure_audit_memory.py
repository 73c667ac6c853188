"""Peak memory and time of ``blackjack projections dump`` and of the audit's comparison of the
live read model with its rebuild, before (a1b3777: the whole read model in memory,
``former_dump``) and after (streamed: ``dump.write_dump``, ``dump.compare``), at two sizes of
the same tables (docs/operations.md, "The read model at a casino's size"):

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_audit_memory \\
        [--tables 20] [--rounds 50 250] [--pg URL [--pg-only]] [--replay]

For each size, ``--tables`` tables of ``--rounds`` rounds of the tests' random play
(``big_read_model.records``) are folded by the projection writer into a store (an SQLite file;
with ``--pg`` a PostgreSQL database too) and copied (the audit's rebuilt scratch store). Each
step then runs in a fresh Python process, twice: once under ``tracemalloc`` (its peak: what
Python allocated), once without (its time, and its peak resident memory: ``ru_maxrss`` after
the step less before it, SQLite's and the drivers' C memory included):

- ``dump``: the dump of the live store written to /dev/null (before: built in memory, then
  written, as ``projections dump`` did);
- ``compare``: the audit's comparison (before: both dumps in memory, then ``differences``;
  after: the live store's dump streamed to a temporary file, merged with the scratch store's
  rows table by table);
- with ``--replay``, ``replay``: the audit's engine replay and transfers (before: 3494d20's
  ``audit.replay_streams``, each table's log read whole, every round of it kept while it is
  replayed; after: a page of the store at a time, fed to ``replay.TableReplayer``, which holds
  back one shoe's events at most and keeps the round in play only). ``--replay-only``: that
  step alone. (Before the thirty-third session, "before" was a1b3777's: every stream's events
  kept for the transfers; docs/operations.md keeps those figures.)

Printed: each step's peaks (MiB) at each size, their ratio large/small, and the time ratio
after/before at the same size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from blackjack.audit.audit import AuditReport, replay_streams, shoes_on_two_tables
from blackjack.audit.replay import replay_stream
from blackjack.audit.transfers import Movements
from blackjack.loadtest.cli import quiet_logs
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections import queries
from blackjack.projections.dump import DumpFile, compare, table_lines, write_dump
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration import big_read_model as big
from tests.integration import former_dump
from tests.integration.conftest_projections import on_server

SEAL = ShoeSeal(bytes(range(32)))
"""the seal ``big_read_model.records`` seals its shoes with"""
STEPS = ("dump", "compare", "replay")
MIB = 1024 * 1024


# ---- the steps, each run in a process of its own ---------------------------------------


async def _dump(live: ProjectionStore, scratch: ProjectionStore, before: bool) -> None:
    with open(os.devnull, "w", encoding="utf-8") as out:
        async with live.reading() as connection:
            if before:
                out.write((await former_dump.dump(connection)).text())
            else:
                await write_dump(connection, out.write)


async def _compare(live: ProjectionStore, scratch: ProjectionStore, before: bool) -> None:
    if before:
        async with live.reading() as connection:
            expected_live = await former_dump.dump(connection)
        async with scratch.reading() as connection:
            rebuilt = await former_dump.dump(connection)
        assert former_dump.differences(rebuilt, expected_live) == []
        return
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as file:
        async with live.reading() as connection:
            await write_dump(connection, file.write)
        file.seek(0)
        dumped = DumpFile(file)
        async with scratch.reading() as connection:
            found = await compare(lambda t: table_lines(connection, t), dumped.table)
    assert found.total == 0


async def _replay(live: ProjectionStore, scratch: ProjectionStore, before: bool) -> None:
    report = AuditReport("blackjack.events")
    async with scratch.reading() as connection:
        if before:  # 3494d20's replay_streams: a table's log whole
            movements = Movements(lambda stream_id: False)
            for stream_id in await queries.stream_ids(connection):
                wires = await queries.stream_envelopes(connection, stream_id)
                report.events += len(wires)
                replay = replay_stream(wires, SEAL, stream_id)
                report.rounds += len(replay.rounds)
                replay.rounds = {}
                report.replays.append(replay)
                movements.read(stream_id, wires)
            shoes_on_two_tables(report.replays)
            report.transfers = movements.matched()
        else:
            await replay_streams(report, connection, SEAL)
    assert report.ok, report.render()


STEP: dict[str, Callable[[ProjectionStore, ProjectionStore, bool], Any]] = {
    "dump": _dump,
    "compare": _compare,
    "replay": _replay,
}


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


async def _child(args: argparse.Namespace) -> None:
    quiet_logs(sys.stderr)
    live = ProjectionStore(args.live, existing=True)
    scratch = ProjectionStore(args.scratch, existing=True)
    try:
        async with live.reading(), scratch.reading():
            pass  # connections and dialects made before the measure
        rss = _maxrss()
        if args.trace:
            tracemalloc.start()
        began = time.perf_counter()
        await STEP[args.step](live, scratch, args.before)
        seconds = time.perf_counter() - began
        peak = tracemalloc.get_traced_memory()[1] if args.trace else 0
    finally:
        await live.close()
        await scratch.close()
    print(json.dumps({"seconds": seconds, "traced": peak, "rss": _maxrss() - rss}))


def _run_step(step: str, before: bool, live: str, scratch: str, trace: bool) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.integration.measure_audit_memory", "--step", step]
    command += ["--live", live, "--scratch", scratch]
    command += ["--before"] if before else []
    command += ["--trace"] if trace else []
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


# ---- the stores -------------------------------------------------------------------------


async def _stores(
    kind: str, tmp: Path, pg: str | None, rounds: int, tables: int
) -> tuple[str, str, int, list[str]]:
    """(live url, scratch url, events folded, PostgreSQL databases made)"""
    log = big.records(tables, rounds, seed=7)
    name = f"bja_{uuid.uuid4().hex[:10]}"
    made: list[str] = []
    if kind == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp / (name + '.db')}"
    else:
        assert pg is not None
        await on_server(pg, f'CREATE DATABASE "{name}"')
        made.append(name)
        url = make_url(pg).set(database=name).render_as_string(hide_password=False)
    store = ProjectionStore(url)
    await store.migrate()
    writer = ProjectionWriter(store)
    for start in range(0, len(log), big.BATCH):
        await writer.apply(log[start : start + big.BATCH])
    await store.close()
    if kind == "sqlite":
        copy = tmp / (name + "-scratch.db")
        shutil.copy(tmp / (name + ".db"), copy)
        return url, f"sqlite+aiosqlite:///{copy}", len(log), made
    assert pg is not None
    await on_server(pg, f'CREATE DATABASE "{name}_s" TEMPLATE "{name}"')
    made.append(f"{name}_s")
    scratch = make_url(pg).set(database=f"{name}_s").render_as_string(hide_password=False)
    return url, scratch, len(log), made


def _measure(steps: Sequence[str], live: str, scratch: str) -> dict[tuple[str, bool], Any]:
    found = {}
    for step in steps:
        for before in (True, False):
            timed = _run_step(step, before, live, scratch, trace=False)
            traced = _run_step(step, before, live, scratch, trace=True)
            found[step, before] = {**timed, "traced": traced["traced"]}
    return found


def _report(kind: str, sizes: list[int], steps: Sequence[str], runs: list[dict[Any, Any]]) -> None:
    small, large = sizes
    print(f"\n## {kind}: {small:,} and {large:,} events")
    print(
        f"{'step':<8} {'':<7} {'traced MiB':>21} {'ratio':>6} {'RSS growth MiB':>21} "
        f"{'ratio':>6} {'seconds':>17}"
    )
    for step in steps:
        for before in (True, False):
            a, b = runs[0][step, before], runs[1][step, before]
            label = "before" if before else "after"
            print(
                f"{step:<8} {label:<7} {a['traced'] / MIB:>10.1f} {b['traced'] / MIB:>10.1f} "
                f"{b['traced'] / a['traced']:>6.2f} {a['rss'] / MIB:>10.1f} "
                f"{b['rss'] / MIB:>10.1f} {b['rss'] / max(a['rss'], MIB):>6.2f} "
                f"{a['seconds']:>8.2f} {b['seconds']:>8.2f}"
            )
        for index, size in enumerate(sizes):
            ratio = runs[index][step, False]["seconds"] / runs[index][step, True]["seconds"]
            print(f"{step:<8} time after/before at {size:,} events: {ratio:.2f}")


async def _main(args: argparse.Namespace) -> None:
    quiet_logs(sys.stderr)
    steps = [s for s in STEPS if s != "replay" or args.replay]
    if args.replay_only:
        steps = ["replay"]
    kinds = ([] if args.pg_only else ["sqlite"]) + (["postgresql"] if args.pg else [])
    with tempfile.TemporaryDirectory() as folder:
        for kind in kinds:
            runs, sizes, made = [], [], []
            try:
                for rounds in args.rounds:
                    live, scratch, events, names = await _stores(
                        kind, Path(folder), args.pg, rounds, args.tables
                    )
                    made += names
                    sizes.append(events)
                    runs.append(_measure(steps, live, scratch))
            finally:
                for name in reversed(made):
                    assert args.pg is not None
                    await on_server(args.pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            _report(kind, sizes, steps, runs)


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--rounds", type=int, nargs=2, default=[50, 250])
    parser.add_argument("--pg", help="a PostgreSQL server's URL (its databases made and dropped)")
    parser.add_argument("--pg-only", action="store_true", help="with --pg: not SQLite")
    parser.add_argument("--replay", action="store_true", help="measure the engine replay too")
    parser.add_argument("--replay-only", action="store_true", help="the engine replay alone")
    # a step in a process of its own (the parent calls these)
    parser.add_argument("--step", choices=STEPS)
    parser.add_argument("--live")
    parser.add_argument("--scratch")
    parser.add_argument("--before", action="store_true")
    parser.add_argument("--trace", action="store_true")
    return parser.parse_args(argv)


if __name__ == "__main__":
    parsed = arguments()
    asyncio.run(_child(parsed) if parsed.step else _main(parsed))
