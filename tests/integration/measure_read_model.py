"""The read model at a casino's size: the fold's throughput, every query's plan and the query
API's latency (docs/operations.md, "The read model at a casino's size"):

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_read_model \\
        [--pg URL] [--tables 120] [--rounds 120] [--copies 9] [--keep NAME] [--reuse NAME]
        [--fold-0009-tables 20] [--dropped-0009]

1. The fold: ``--fold-tables`` tables x ``--fold-rounds`` rounds of the tests' random play
   folded in batches of 500 into a fresh SQLite file and a fresh PostgreSQL database, by the
   service's writer and by the former one (``RowByRow``: a statement a row written and a
   few a stream and a round read), batch by batch in turn; events a second and the ratio.
   ``--fold-0009-tables``: the same on PostgreSQL by the service's writer with the three
   indexes migration 0009 dropped made again by hand and without them; the ratio and the
   databases' sizes.
2. The big read model (``big_read_model``): ``--tables`` x ``--rounds`` folded by the
   service's writer, copied ``--copies`` times in SQL; its tables' rows and bytes. ``--keep``
   keeps that database for another run (``--reuse`` it, which skips building).
3. ``EXPLAIN (ANALYZE, BUFFERS)`` of every statement the query API's answers and a worker's
   batch run there (caught as the code sends them), each with its top plan nodes, the pages
   it touched and its time; a statement whose plan reads a whole table (``Seq Scan`` over
   more than 1,000 rows) is marked ``SCAN``. ``--dropped-0009``: 0009's dropped indexes made
   again first (their sizes printed), so a plan that would read one names it.
4. The query API's latency there: each answer ``--repeats`` times, for ids picked at random,
   through the ASGI app (``QueryApi``, no HTTP server): p50, p95, p99 and max in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, event, insert, text, update
from sqlalchemy.engine import make_url

from blackjack.api.routes import QueryApi
from blackjack.loadtest.cli import quiet_logs
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import encode, to_wire
from blackjack.projections import schema
from blackjack.projections import writer as writing
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration import big_read_model as big
from tests.integration.conftest_projections import connect_directly, on_server, play_tables

DEFAULT_PG = "postgresql+asyncpg://blackjack:blackjack@127.0.0.1:55432/blackjack"


# ---- 1. the fold --------------------------------------------------------------------------


class _OneByOne(writing._Rows):
    """The former writes: a statement a row."""

    async def write(self, connection: Any) -> None:
        for table in schema.READ_MODEL:
            for (inserted, _), new in self.inserts.items():
                for row in new if inserted is table else []:
                    await connection.execute(insert(table), [row])
            for (updated, key, _), changed in self.updates.items():
                if updated is table:
                    where = [
                        table.c[name] == bindparam(f"{writing.KEY_PREFIX}{name}") for name in key
                    ]
                    for row in changed:
                        await connection.execute(update(table).where(*where), [row])
        for day in self.days:
            single = writing._Rows()
            single.days.append(day)
            await writing._Rows.write(single, connection)


class _RowByRowBatch(writing._Batch):
    """The former batch: each table, wallet and round read as the fold reaches it (two
    statements a table and a round), each row written on its own."""

    async def load(self, records: Sequence[Record]) -> None:
        return

    def _rows(self) -> writing._Rows:
        return _OneByOne()


class RowByRow(ProjectionWriter):
    batch = _RowByRowBatch


async def new_store(
    pg: str | None, tmp: Path, kind: str, made: list[str], *, bounded: bool = True
) -> ProjectionStore:
    """A migrated scratch store (an SQLite file in ``tmp``, or a database on ``pg`` named in
    ``made`` for the caller to drop)."""
    name = f"bjm_{uuid.uuid4().hex[:10]}"
    if kind == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp / (name + '.db')}"
    else:
        assert pg is not None
        await on_server(pg, f'CREATE DATABASE "{name}"')
        made.append(name)
        url = make_url(pg).set(database=name).render_as_string(hide_password=False)
    store = ProjectionStore(url, bounded=bounded)
    await store.migrate()
    return store


async def fold_rates(pg: str, tables: int, rounds: int) -> None:
    log = big.records(tables, rounds, seed=11)
    print(f"\n## the fold: {tables} tables x {rounds} rounds, {len(log):,} events, batches of 500")
    print(f"{'store':<11} {'former ev/s':>12} {'now ev/s':>9} {'ratio':>6}")
    made: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for kind in ("sqlite", "postgresql"):
                stores = [await new_store(pg, Path(tmp), kind, made) for _ in range(2)]
                spent = await interleaved([RowByRow(stores[0]), ProjectionWriter(stores[1])], log)
                for store in stores:
                    await store.close()
                former, now = len(log) / spent[0], len(log) / spent[1]
                print(f"{kind:<11} {former:>12,.0f} {now:>9,.0f} {now / former:>6.2f}")
        finally:
            for name in made:
                await on_server(pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def interleaved(writers: Sequence[ProjectionWriter], log: Sequence[Record]) -> list[float]:
    """Seconds each writer spent folding ``log`` batch by batch, taking turns (the first
    writer first on even batches, second on odd) so the machine's drift falls on both."""
    spent = [0.0] * len(writers)
    for number, start in enumerate(range(0, len(log), big.BATCH)):
        part = log[start : start + big.BATCH]
        for index in (0, 1) if number % 2 == 0 else (1, 0):
            began = time.perf_counter()
            await writers[index].apply(part)
            spent[index] += time.perf_counter() - began
    return spent


DROPPED_0009 = (  # the indexes migration 0009 dropped, as its downgrade makes them again
    "CREATE INDEX ix_events_stream_round ON events (stream_id, round)",
    "ALTER TABLE events ADD CONSTRAINT events_event_id_key UNIQUE (event_id)",
    "ALTER TABLE rounds ADD CONSTRAINT rounds_round_id_key UNIQUE (round_id)",
)
UNDROPPED_0009 = (
    "DROP INDEX ix_events_stream_round",
    "ALTER TABLE events DROP CONSTRAINT events_event_id_key",
    "ALTER TABLE rounds DROP CONSTRAINT rounds_round_id_key",
)
DROPPED_NAMES = ("ix_events_stream_round", "events_event_id_key", "rounds_round_id_key")


async def run_all(store: ProjectionStore, statements: Sequence[str]) -> None:
    async with store.writing() as connection:
        for statement in statements:
            await connection.execute(text(statement))


async def fold_rates_0009(pg: str, tables: int, rounds: int) -> None:
    """The fold on PostgreSQL with the three indexes 0009 dropped (made again by hand, as its
    downgrade does) and without (the service's schema), the same log batch by batch in turn."""
    log = big.records(tables, rounds, seed=11)
    print(
        f"\n## 0009: the fold with and without the dropped indexes: {tables} tables x {rounds} "
        f"rounds, {len(log):,} events, batches of 500, PostgreSQL"
    )
    made: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            stores = [await new_store(pg, Path(tmp), "postgresql", made) for _ in range(2)]
            await run_all(stores[0], DROPPED_0009)
            spent = await interleaved([ProjectionWriter(s) for s in stores], log)
            database = "SELECT pg_database_size(current_database())"
            size = []
            for store in stores:
                async with store.reading() as connection:
                    size.append((await connection.execute(text(database))).scalar_one())
                await store.close()
            with_, without = len(log) / spent[0], len(log) / spent[1]
            print(
                f"events a second: with {with_:,.0f}, without {without:,.0f} "
                f"(x{without / with_:.2f}); database {size[0] / 2**20:.1f} MB -> "
                f"{size[1] / 2**20:.1f} MB"
            )
        finally:
            for name in made:
                await on_server(pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ---- 2. the big read model ----------------------------------------------------------------


async def big_store(pg: str, args: argparse.Namespace) -> tuple[ProjectionStore, str]:
    name = args.reuse or args.keep or f"bjbig_{uuid.uuid4().hex[:8]}"
    url = make_url(pg).set(database=name).render_as_string(hide_password=False)
    if args.reuse:
        store = ProjectionStore(url, bounded=True)
        await store.migrate()
        print(f"\n## the big read model: {name}, reused")
        return store, name
    began = time.perf_counter()
    log = big.records(args.tables, args.rounds)
    generated = time.perf_counter() - began
    await on_server(pg, f'CREATE DATABASE "{name}"')
    store = ProjectionStore(url, bounded=True)
    await store.migrate()
    built = await big.build(store, log, args.copies)
    print(
        f"\n## the big read model: {args.tables} tables x {args.rounds} rounds, "
        f"{len(log):,} events played in {generated:.0f} s, folded in {built.fold_seconds:.0f} s "
        f"({built.events_folded / built.fold_seconds:,.0f} a second), copied {args.copies} "
        f"times in {built.copy_seconds:.0f} s (with VACUUM ANALYZE)"
    )
    return store, name


async def print_sizes(store: ProjectionStore) -> None:
    tables, indexes = await big.sizes(store)
    print(f"{'table':<22} {'rows':>12} {'table MB':>9} {'index MB':>9}")
    for name, rows, table_bytes, index_bytes in tables:
        print(f"{name:<22} {rows:>12,} {table_bytes / 2**20:>9.1f} {index_bytes / 2**20:>9.1f}")
    print(f"{'index':<30} {'on':<15} {'MB':>8}")
    for name, table, size in indexes:
        print(f"{name:<30} {table:<15} {size / 2**20:>8.1f}")


# ---- 3. the plans -------------------------------------------------------------------------

Statement = tuple[str, tuple[Any, ...]]


@contextmanager
def catching(store: ProjectionStore) -> Iterator[list[Statement]]:
    """Every statement ``store`` sends meanwhile, with its parameters."""
    caught: list[Statement] = []

    def _caught(_c: Any, _cur: Any, statement: str, parameters: Any, _x: Any, many: bool) -> None:
        if many:  # one UPDATE for many rows: explained for the first
            parameters = parameters[0] if parameters else ()
        caught.append((statement, tuple(parameters or ())))

    event.listen(store.engine.sync_engine, "before_cursor_execute", _caught)
    try:
        yield caught
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", _caught)


async def explain(pg_url: str, statements: Sequence[Statement], label: str) -> list[str]:
    """Each statement's plan, run (ANALYZE) in a transaction rolled back."""
    connection = await connect_directly(pg_url)
    lines = []
    try:
        for statement, parameters in statements:
            if statement.lstrip().upper().startswith(("INSERT", "SET", "BEGIN", "COMMIT")):
                continue  # an INSERT's plan is the insert; its cost is in the fold's rate
            transaction = connection.transaction()
            await transaction.start()
            try:
                found = await connection.fetchval(
                    f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}", *parameters
                )
            finally:
                await transaction.rollback()
            plan = json.loads(found)[0]
            lines.append(f"{label}: {one_line(statement)}")
            lines.append("    " + summary(plan))
    finally:
        await connection.close()
    return lines


def one_line(statement: str, width: int = 150) -> str:
    flat = " ".join(statement.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += nodes(child)
    return found


def summary(plan: dict[str, Any]) -> str:
    top = plan["Plan"]
    parts = []
    scan = False
    for node in nodes(top):
        kind = node["Node Type"]
        index = node.get("Index Name")
        relation = node.get("Relation Name")
        if (
            kind == "Seq Scan"
            and node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0) > 1000
        ):
            scan = True
        if index or relation:
            parts.append(f"{kind} {index or relation} ({node.get('Actual Rows')} rows)")
        elif kind in ("Sort", "Limit", "Aggregate", "HashAggregate", "Nested Loop", "Hash Join"):
            parts.append(kind + (f" [{node.get('Sort Method')}]" if kind == "Sort" else ""))
    pages = top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)
    took = plan.get("Execution Time", 0.0)
    return f"{'SCAN ' if scan else ''}{took:.2f} ms, {pages} pages: " + "; ".join(parts)


# ---- 4. the answers -----------------------------------------------------------------------


async def sample(store: ProjectionStore) -> dict[str, list[Any]]:
    """Ids to ask about: players (those with the most rounds first), tables, rounds."""
    picked: dict[str, list[Any]] = {}
    async with store.reading() as connection:

        async def rows(sql: str) -> list[Any]:
            return [tuple(row) for row in (await connection.execute(text(sql))).all()]

        picked["players"] = [
            r[0] for r in await rows("SELECT player_id FROM accounts ORDER BY random() LIMIT 200")
        ]
        picked["busiest"] = [
            r[0]
            for r in await rows(
                "SELECT player_id FROM round_players GROUP BY player_id ORDER BY count(*) DESC "
                "LIMIT 5"
            )
        ]
        picked["tables"] = [r[0] for r in await rows("SELECT stream_id FROM table_views")]
        picked["rounds"] = await rows(
            "SELECT stream_id, round, player_id FROM round_players ORDER BY random() LIMIT 500"
        )
    return picked


Ask = Callable[[random.Random], str]


def asks(picked: dict[str, list[Any]]) -> dict[str, Ask]:
    players, busiest = picked["players"], picked["busiest"]
    tables, rounds = picked["tables"], picked["rounds"]

    def one(items: list[Any]) -> Callable[[random.Random], Any]:
        return lambda rng: rng.choice(items)

    player, table, a_round, heavy = one(players), one(tables), one(rounds), one(busiest)

    def recall(rng: random.Random) -> str:
        stream, number, _ = a_round(rng)
        return f"/v1/rounds/{stream}:{number}"

    def own_recall(rng: random.Random) -> str:
        stream, number, who = a_round(rng)
        return f"/v1/players/{who}/rounds/{stream}:{number}"

    return {
        "wallet": lambda rng: f"/v1/players/{player(rng)}/wallet",
        "history, first page": lambda rng: f"/v1/players/{heavy(rng)}/rounds?limit=20",
        "history, page 20": lambda rng: "PAGE20 " + heavy(rng),
        "round recall": recall,
        "round as its player sees it": own_recall,
        "table": lambda rng: f"/v1/tables/{table(rng)}",
        "table's events, first 1000": lambda rng: f"/v1/streams/{table(rng)}/events?after=0",
        "table's events, deep": lambda rng: f"/v1/streams/{table(rng)}/events?after=2000&limit=100",
        "interrupted rounds": lambda rng: "/v1/interrupted-rounds?idle_days=30&limit=100",
        "game report, 31 days": lambda rng: "/v1/reports/games?from=2026-03-01&days=31",
        "game report, a year by day": lambda rng: (
            "/v1/reports/games?from=2026-03-01&days=366&by=day"
        ),
    }


async def get(api: QueryApi, path: str) -> tuple[int, dict[str, Any]]:
    """One GET through the ASGI app; its status and JSON answer."""
    route, _, query = path.partition("?")
    scope = {
        "type": "http",
        "method": "GET",
        "path": route,
        "raw_path": route.encode(),
        "query_string": query.encode(),
        "headers": [],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    await api(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(body)


async def page20(api: QueryApi, player_id: str) -> str:
    path = f"/v1/players/{player_id}/rounds?limit=20"
    for _ in range(19):
        status, answer = await get(api, path)
        if status != 200 or answer.get("next") is None:
            break
        path = f"/v1/players/{player_id}/rounds?limit=20&cursor={answer['next']}"
    return path


async def latencies(
    store: ProjectionStore, picked: dict[str, list[Any]], repeats: int
) -> dict[str, tuple[str, list[float]]]:
    api = QueryApi(store)
    rng = random.Random(5)
    found: dict[str, tuple[str, list[float]]] = {}
    for name, ask in asks(picked).items():
        times = []
        example = ""
        for _ in range(repeats):
            path = ask(rng)
            if path.startswith("PAGE20 "):
                path = await page20(api, path.split(" ", 1)[1])
            began = time.perf_counter()
            status, _ = await get(api, path)
            times.append((time.perf_counter() - began) * 1000)
            if status != 200:
                raise AssertionError(f"{path}: {status}")
            example = path
        found[name] = (example, times)
    return found


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def plans(store: ProjectionStore, url: str, picked: dict[str, list[Any]]) -> None:
    """Every statement of each answer and of a worker's batch, explained."""
    api = QueryApi(store)
    rng = random.Random(9)
    print("\n## the plans (EXPLAIN ANALYZE, BUFFERS; one example of each)")
    for name, ask in asks(picked).items():
        path = ask(rng)
        if path.startswith("PAGE20 "):
            path = await page20(api, path.split(" ", 1)[1])
        with catching(store) as caught:
            await get(api, path)
        for line in await explain(url, caught, name):
            print(line)


async def worker_plans(store: ProjectionStore, url: str, tables: int, rounds: int) -> None:
    """Batches of 500 new events of the big read model's first ``tables`` tables (their play
    continued to ``rounds``): folded by the former writer and the service's in turn (three
    each), the last one's statements caught and explained."""
    played = [(f"big-{n}", big.VARIANTS[n % len(big.VARIANTS)]) for n in range(tables)]
    log = play_tables(played, rounds, seed=7)
    seal = ShoeSeal(bytes(range(32)))
    spent: dict[str, list[float]] = {"former": [], "now": []}
    statements: list[Statement] = []
    for turn in range(6):
        async with store.reading() as connection:
            last = {
                row[0]: row[1]
                for sql in (
                    "SELECT stream_id, last_sequence FROM table_views",
                    "SELECT stream_id, last_sequence FROM wallets",
                )
                for row in (await connection.execute(text(sql))).all()
            }
            offset = (
                await connection.execute(text("SELECT max(next_offset) FROM projection_positions"))
            ).scalar_one()
        fresh = [e for e in log.envelopes if e.sequence > last.get(e.stream_id, 0)][: big.BATCH]
        batch = [
            Record(big.TOPIC, 0, offset + n, encode(to_wire(envelope, seal)))
            for n, envelope in enumerate(fresh)
        ]
        which = "former" if turn % 2 == 0 else "now"
        writer = RowByRow(store) if which == "former" else ProjectionWriter(store)
        with catching(store) as caught:
            began = time.perf_counter()
            await writer.apply(batch)
            spent[which].append((time.perf_counter() - began) * 1000)
        statements = caught
    print(
        f"\n## a worker's batch of {big.BATCH} new events of {tables} tables at this size, ms "
        f"(three each, in turn): former {', '.join(f'{t:.0f}' for t in spent['former'])}; "
        f"now {', '.join(f'{t:.0f}' for t in spent['now'])} ({len(statements)} statements)"
    )
    for line in await explain(url, statements, "worker"):
        print(line)


async def main(args: argparse.Namespace) -> None:
    quiet_logs(sys.stderr)
    if args.fold_tables:
        await fold_rates(args.pg, args.fold_tables, args.fold_rounds)
    if args.fold_0009_tables:
        await fold_rates_0009(args.pg, args.fold_0009_tables, args.fold_rounds)
    store, name = await big_store(args.pg, args)
    url = make_url(args.pg).set(database=name).render_as_string(hide_password=False)
    try:
        await print_sizes(store)
        picked = await sample(store)
        if args.dropped_0009:  # 0009's indexes made again: does any plan read one?
            await run_all(store, DROPPED_0009)
            await run_all(store, ["ANALYZE events", "ANALYZE rounds"])
            _, indexes = await big.sizes(store)
            print("\n## 0009: the dropped indexes made again at this size (MB)")
            for index_name, table, size in indexes:
                if index_name in DROPPED_NAMES:
                    print(f"{index_name:<30} {table:<15} {size / 2**20:>8.1f}")
        await plans(store, url, picked)
        await worker_plans(store, url, 20, args.rounds + 30)
        if args.dropped_0009:
            await run_all(store, UNDROPPED_0009)
        print(f"\n## the query API's answers, {args.repeats} each, ms")
        print(f"{'answer':<30} {'p50':>7} {'p95':>7} {'p99':>7} {'max':>7}  example")
        for answer, (example, times) in (await latencies(store, picked, args.repeats)).items():
            print(
                f"{answer:<30} {statistics.median(times):>7.2f} {percentile(times, 0.95):>7.2f} "
                f"{percentile(times, 0.99):>7.2f} {max(times):>7.2f}  {example[:70]}"
            )
    finally:
        await store.close()
        if not (args.keep or args.reuse):
            await on_server(args.pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default=DEFAULT_PG)
    parser.add_argument("--tables", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=120)
    parser.add_argument("--copies", type=int, default=9)
    parser.add_argument("--fold-tables", type=int, default=20)
    parser.add_argument("--fold-rounds", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument(
        "--fold-0009-tables",
        type=int,
        default=0,
        help="also fold this many tables with and without the indexes 0009 dropped",
    )
    parser.add_argument(
        "--dropped-0009",
        action="store_true",
        help="make the indexes 0009 dropped again in the big database before the plans",
    )
    parser.add_argument("--keep", help="keep the big database under this name")
    parser.add_argument("--reuse", help="measure this big database, built before with --keep")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(arguments()))
