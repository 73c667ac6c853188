"""``blackjack projections run|migrate|rebuild|dump|interrupted``: the projection worker and
its store."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from blackjack.projections.settings import ProjectionSettings


def add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db-url", help="the read-model store (default: BLACKJACK_DB_URL)")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: from the env)")
    parser.add_argument("--topic-prefix", help="topic name prefix (default: from the env)")


def settings_from(args: argparse.Namespace) -> ProjectionSettings:
    settings = ProjectionSettings.from_env()
    changes = {
        "db_url": args.db_url,
        "bootstrap": args.bootstrap,
        "topic_prefix": args.topic_prefix,
    }
    return replace(settings, **{k: v for k, v in changes.items() if v is not None})


def _run(args: argparse.Namespace) -> int:
    from blackjack.observability.logging import configure_logging
    from blackjack.projections.worker import run_worker

    configure_logging(args.log_level)  # JSON lines, like `blackjack serve`

    http = None
    if args.http:
        host, _, port = args.http.rpartition(":")
        if not port.isdigit():
            print(f"--http wants HOST:PORT, not {args.http!r}", file=sys.stderr)
            return 2
        http = (host or "127.0.0.1", int(port))
    asyncio.run(run_worker(settings_from(args), http))
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from blackjack.projections.store import ProjectionStore

    async def migrate() -> None:
        store = ProjectionStore(settings_from(args).db_url)
        try:
            await store.migrate()
        finally:
            await store.close()

    asyncio.run(migrate())
    return 0


def _rebuild(args: argparse.Namespace) -> int:
    from blackjack.projections.rebuild import rebuild
    from blackjack.projections.store import ProjectionStore
    from blackjack.projections.writer import ProjectionWriter

    settings = settings_from(args)

    async def run() -> None:
        store = ProjectionStore(settings.db_url)
        try:
            await store.migrate()
            writer = ProjectionWriter(store)
            await rebuild(
                writer,
                settings.bootstrap,
                settings.events_topic,
                batch=settings.batch,
                security=settings.security,
            )
            positions = await writer.stored_positions(settings.events_topic)
            for (topic, partition), offset in sorted(positions.items()):
                print(f"{topic}[{partition}] folded in up to offset {offset}")
        finally:
            await store.close()

    asyncio.run(run())
    return 0


def _dump(args: argparse.Namespace) -> int:
    from blackjack.projections.dump import dump
    from blackjack.projections.store import ProjectionStore

    async def run() -> str:
        store = ProjectionStore(settings_from(args).db_url)
        try:
            async with store.reading() as connection:
                found = await dump(connection)
        finally:
            await store.close()
        return found.digest() if args.digest else found.text()

    sys.stdout.write(asyncio.run(run()) + ("\n" if args.digest else ""))
    return 0


def _interrupted(args: argparse.Namespace) -> int:
    from blackjack.projections.queries import MAX_PAGE, interrupted_rounds
    from blackjack.projections.store import ProjectionStore

    if not 1 <= args.idle_days <= 3650 or not 1 <= args.limit <= MAX_PAGE:
        print(
            f"blackjack projections interrupted: --idle-days is from 1 to 3650, --limit from 1 "
            f"to {MAX_PAGE}",
            file=sys.stderr,
        )
        return 2
    idle_before = datetime.now(UTC) - timedelta(days=args.idle_days)

    async def run() -> list[dict[str, Any]]:
        store = ProjectionStore(settings_from(args).db_url)
        try:
            async with store.reading() as connection:
                return await interrupted_rounds(connection, idle_before, args.limit)
        finally:
            await store.close()

    rounds = asyncio.run(run())
    for found in rounds:
        held = ", ".join(f"{player} {amount}" for player, amount in found["in_play"].items())
        print(
            f"{found['round_id']}  {found['variant']}  {found['status']}  "
            f"idle since {found['idle_since']}  may be closed from {found['closable_from']}  "
            f"in play: {held or 'nothing'}"
        )
    print(
        f"{len(rounds)} round(s) open with no event since {idle_before.isoformat()} at tables "
        "whose rules let the operator close them"
    )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("projections", help="the read-model worker and store")
    commands = parser.add_subparsers(dest="projections_command", required=True)
    run = commands.add_parser("run", help="fold blackjack.events into the store until stopped")
    add_store_options(run)
    run.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="also serve the query API, /healthz, /readyz and /metrics there",
    )
    run.add_argument("--log-level", default=os.environ.get("BLACKJACK_LOG_LEVEL", "INFO"))
    run.set_defaults(handler=_run)
    migrate = commands.add_parser("migrate", help="create or upgrade the store's tables")
    add_store_options(migrate)
    migrate.set_defaults(handler=_migrate)
    rebuild = commands.add_parser(
        "rebuild", help="fold the topic into the store from its positions (0 when new) to the end"
    )
    add_store_options(rebuild)
    rebuild.set_defaults(handler=_rebuild)
    dump = commands.add_parser("dump", help="print the canonical dump of the read model")
    add_store_options(dump)
    dump.add_argument("--digest", action="store_true", help="only its sha256")
    dump.set_defaults(handler=_dump)
    interrupted = commands.add_parser(
        "interrupted",
        help="the open rounds an operator may close (CloseInterruptedRound) whose table has had "
        "no event for --idle-days",
    )
    add_store_options(interrupted)
    interrupted.add_argument("--idle-days", type=int, default=30)
    interrupted.add_argument("--limit", type=int, default=100)
    interrupted.set_defaults(handler=_interrupted)
