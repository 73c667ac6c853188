"""``blackjack replay ROUND_ID`` and ``blackjack audit``.

Exit codes: 0 everything checked out; 1 a mismatch (a finding, a difference, a violation);
2 bad input or an unknown round; 3 the round could not be verified (its shoe is still sealed
and no ``BLACKJACK_SHOE_KEY`` was given).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import WireEnvelope, decode
from blackjack.projections.cli import add_store_options, settings_from
from blackjack.projections.settings import ProjectionSettings

OK, MISMATCH, BAD_INPUT, UNVERIFIED = 0, 1, 2, 3


class _BadInput(Exception):
    pass


def _seal() -> ShoeSeal | None:
    key = os.environ.get("BLACKJACK_SHOE_KEY", "").strip()
    if not key:
        return None
    try:
        return ShoeSeal.from_hex(key)
    except ValueError as error:
        raise _BadInput(f"BLACKJACK_SHOE_KEY is not a 64-digit hex AES-256 key: {error}") from None


async def _from_store(settings: ProjectionSettings, stream_id: str) -> list[WireEnvelope]:
    from blackjack.projections.queries import stream_envelopes
    from blackjack.projections.store import ProjectionStore

    store = ProjectionStore(settings.db_url)
    try:
        async with store.reading() as connection:
            return await stream_envelopes(connection, stream_id)
    finally:
        await store.close()


async def _from_kafka(settings: ProjectionSettings, stream_id: str) -> list[WireEnvelope]:
    from blackjack.audit.replay import in_sequence
    from blackjack.projections.rebuild import read_topic
    from blackjack.projections.writer import Record

    key = stream_id.encode()
    found: list[WireEnvelope] = []

    def keep(records: list[Record]) -> None:
        found.extend(decode(r.value) for r in records if r.key == key)

    await read_topic(settings.bootstrap, settings.events_topic, keep)
    return in_sequence(found)


def _replay(args: argparse.Namespace) -> int:
    from blackjack.audit.recall import render, replay_round
    from blackjack.projections.projector import parse_round_id

    try:
        stream_id, number = parse_round_id(args.round_id)
        seal = _seal()
    except (ValueError, _BadInput) as error:
        print(error, file=sys.stderr)
        return BAD_INPUT
    settings = settings_from(args)
    source = _from_kafka if args.source == "kafka" else _from_store
    wires = asyncio.run(source(settings, stream_id))
    verdict = replay_round(wires, number, seal, stream_id)
    print(render(verdict))
    if not verdict.found:
        return BAD_INPUT
    if verdict.findings:
        return MISMATCH
    return UNVERIFIED if verdict.stopped else OK


def _audit(args: argparse.Namespace) -> int:
    from blackjack.audit.audit import run_audit
    from blackjack.projections.store import ProjectionStore

    try:
        seal = _seal()
    except _BadInput as error:
        print(error, file=sys.stderr)
        return BAD_INPUT
    settings = settings_from(args)

    async def run(scratch_url: str) -> bool:
        live = ProjectionStore(settings.db_url)
        scratch = ProjectionStore(scratch_url)
        try:
            await scratch.migrate()
            report = await run_audit(live, scratch, settings.bootstrap, settings.events_topic, seal)
        finally:
            await live.close()
            await scratch.close()
        print(report.render())
        return report.ok

    if args.scratch_url:
        passed = asyncio.run(run(args.scratch_url))
    else:
        with tempfile.TemporaryDirectory(prefix="blackjack-audit-") as folder:
            passed = asyncio.run(run(f"sqlite+aiosqlite:///{Path(folder) / 'scratch.db'}"))
    return OK if passed else MISMATCH


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = sub.add_parser(
        "replay", help="rebuild one round (STREAM_ID:ROUND) with the engine and check it"
    )
    replay.add_argument("round_id", metavar="ROUND_ID")
    replay.add_argument(
        "--source",
        choices=("store", "kafka"),
        default="store",
        help="read the events from the read-model store (default) or the events topic",
    )
    add_store_options(replay)
    replay.set_defaults(handler=_replay)
    audit = sub.add_parser(
        "audit", help="rebuild the read model from offset 0 and compare; conservation; payouts"
    )
    add_store_options(audit)
    audit.add_argument("--scratch-url", help="where to rebuild (default: a temporary SQLite)")
    audit.set_defaults(handler=_audit)
