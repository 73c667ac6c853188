"""``blackjack replay ROUND_ID`` and ``blackjack audit``.

Exit codes: 0 everything checked out; 1 a mismatch (a finding, a difference, a violation); 2
bad input, the brokers or the store not reached or refusing this command (its credentials,
its ACLs: one line, nothing verified), an unknown round, a store at another schema revision
than this code's (the audit's live store, ``audit.LiveStoreAtAnotherRevision``; the one
``replay --source store`` reads), a live store folded from another log (its positions past
the end of the topic's partitions: ``projections.other_log``), or a ``--scratch-url`` store
a newer release migrated (not the exit 3 that ``SchemaMismatch`` gives the projection
commands): refused before anything is compared; 3 nothing wrong found, but not everything
could be verified (a shoe still sealed: no ``BLACKJACK_AUDIT_KEY``, ``BLACKJACK_SHOE_KEY``
or ``BLACKJACK_SHOE_KEY_FILE`` was given, or only the audit key for a shoe sealed before
it)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from blackjack.audit import randomness_cli, redrive_cli
from blackjack.command_handler.keys import load_audit_keys, load_shoe_keys
from blackjack.configuration import ConfigurationError
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import decode, not_the_service_s
from blackjack.projection_worker.cli import add_store_options, settings_from
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections.dump import DIFFERENCES_SHOWN
from blackjack.projections.revision import SchemaMismatch
from blackjack.projections.shown_url import shown_db_url

if TYPE_CHECKING:
    from blackjack.audit.recall import RoundReplayer

OK, MISMATCH, BAD_INPUT, UNVERIFIED = 0, 1, 2, 3
SHOE_KEY_SETTINGS = ("BLACKJACK_SHOE_KEY", "BLACKJACK_SHOE_KEY_FILE")


class _BadInput(Exception):
    pass


def _seal() -> ShoeSeal | None:
    """The handlers' master keys, read as they read them (``BLACKJACK_SHOE_KEY``, else the file
    that ``BLACKJACK_SHOE_KEY_FILE`` names, as ``make run`` keeps it, but never a new file):
    they open every shoe; else the auditor's keys (``BLACKJACK_AUDIT_KEY``: they open the shoes
    sealed since they were derived, and nothing else); None without either."""
    try:
        audit_keys = load_audit_keys(os.environ)
        if any(os.environ.get(name, "").strip() for name in SHOE_KEY_SETTINGS):
            return load_shoe_keys(os.environ, create=False).seal()
        return ShoeSeal.for_auditor(*audit_keys) if audit_keys else None
    except ConfigurationError as error:
        raise _BadInput(str(error)) from None


REPLAY_READ_S = 3_600.0
"""How long ``blackjack replay --source kafka`` reads the events topic and replays the table
as it reads (the read alone had ``read_topic``'s 120 s): the replay takes about 28 us an
event here, some 25 s for a month of a busy table's 860,000 events, beside reading the
topic's every partition."""


async def _from_store(settings: ProjectionSettings, replayer: RoundReplayer) -> list[str]:
    """The table's events from the read-model store, a page at a time (a month of a busy
    table is about 860,000 events: not in memory at once)."""
    from blackjack.projections.queries import stream_envelope_pages
    from blackjack.projections.revision import check_schema_to_read
    from blackjack.projections.store import ProjectionStore

    store = ProjectionStore(settings.db_url, existing=True)
    try:
        async with store.reading() as connection:
            # a store at another schema revision: what it holds is another release's rows
            await check_schema_to_read(connection, store.url, "blackjack replay")
            async for page in stream_envelope_pages(connection, replayer.stream_id):
                for envelope in page:
                    replayer.feed(envelope)
    finally:
        await store.close()
    return []  # where each lay is the audit's to check (``events_off_their_partition``)


async def _from_kafka(settings: ProjectionSettings, replayer: RoundReplayer) -> list[str]:
    """The table's events from the events topic, fed as they are read (an event written twice
    counted once, as the projections count it: ``OnceEach``), within ``REPLAY_READ_S``; and
    those of them the handler did not write (on another partition than the table's, or not
    readable). A record under the table's key that
    the service did not write (``wire.not_the_service_s``, or a header name that is not UTF-8)
    is stepped over and named on stderr, as the audit and a rebuild step over it (before, a
    traceback and exit 1, which means a mismatch). An event whose envelope names the table is
    the table's whatever its key, as the store and the handler's rebuild read it (the key
    only routes it): one under another key is fed and named on stderr; one on another
    partition is fed and returned, a mismatch: the handler, which reads the table's
    partition, never reads it where the store folded it (before, only the table's key was
    read, and a forged payout the store had folded replayed OK from the topic)."""
    from aiokafka.structs import ConsumerRecord

    from blackjack.audit.replay import OnceEach
    from blackjack.bus.header_names import header_name_not_utf8
    from blackjack.bus.topics import partition_for
    from blackjack.projections.rebuild import read_consumer_records

    stream_id = replayer.stream_id
    key = stream_id.encode()
    once = OnceEach()
    stepped_over: list[str] = []
    other_keys: list[str] = []
    unreadable: list[str] = []
    read_from: list[tuple[int, int]] = []

    def names_the_table(value: bytes) -> bool:
        """The record's envelope names the table (JSON parsed: a name may be escaped)."""
        try:
            document = json.loads(value)
        except ValueError:
            return False
        return isinstance(document, dict) and document.get("stream_id") == stream_id

    def feed(records: list[ConsumerRecord]) -> None:
        for record in records:
            value = record.value or b""
            where = f"{record.topic}[{record.partition}] offset {record.offset}"
            if header_name_not_utf8(record.headers) or not_the_service_s(value, record.headers):
                if record.key == key:
                    stepped_over.append(where)
                continue
            if record.key != key:
                if not names_the_table(value):
                    continue
                shown = (record.key or b"").decode("utf-8", "replace")
                other_keys.append(f"{where} (key {shown!r})")
            try:
                envelope = decode(value)
            except Exception as error:  # the store's worker stops at it: not the handler's
                unreadable.append(f"{where}: an event of {stream_id} that cannot be read: {error}")
                continue
            read_from.append((record.partition, record.offset))
            if once.first(envelope):
                replayer.feed(envelope)

    ends = await read_consumer_records(
        settings.bootstrap,
        settings.events_topic,
        feed,
        timeout=REPLAY_READ_S,
        security=settings.security,
    )
    if stepped_over:
        print(
            f"Note: {len(stepped_over)} record(s) under {stream_id}'s key not written "
            f"by the service, stepped over: {', '.join(stepped_over)}",
            file=sys.stderr,
        )
    if other_keys:
        print(
            f"Note: {len(other_keys)} event(s) of {stream_id} under another key than the "
            f"table's, read as the store and the handler read them: {', '.join(other_keys)}",
            file=sys.stderr,
        )
    home = partition_for(stream_id, len(ends))
    return unreadable + [
        f"{settings.events_topic}[{partition}] offset {offset}: an event of {stream_id} on "
        f"partition {partition}, not the table's {home}, which the handler never reads"
        for partition, offset in read_from
        if partition != home
    ]


def _replay(args: argparse.Namespace) -> int:
    from blackjack.audit.recall import RoundReplayer, render
    from blackjack.projections.ids import parse_round_id

    try:
        stream_id, number = parse_round_id(args.round_id)
        seal = _seal()
    except (ValueError, _BadInput) as error:
        print(error, file=sys.stderr)
        return BAD_INPUT
    settings = settings_from(args)
    source = _from_kafka if args.source == "kafka" else _from_store
    replayer = RoundReplayer(number, seal, stream_id, complete=args.source == "kafka")
    try:
        misplaced = asyncio.run(source(settings, replayer))
    except SchemaMismatch as error:  # the store's (``StoreToReadAtAnotherRevision``): not the
        # command line's exit 3 for it, which for replay means not verifiable
        print(f"blackjack replay: {error}", file=sys.stderr)
        return BAD_INPUT
    except ConfigurationError:
        raise  # (one line, exit 2, from the command line)
    except Exception as error:
        return _not_reached("blackjack replay", error, settings)
    verdict = replayer.finish()
    print(render(verdict))
    if not verdict.found:
        if args.source == "store":
            print(
                "(read from the read-model store, which may lag the log or be stuck before "
                "it: --source kafka reads the events topic itself)"
            )
        return BAD_INPUT
    if misplaced:
        print("\nRecords of the table not as the handler writes them:")
        print("\n".join(f"  {where}" for where in misplaced))
        print("REPLAY FAILED")
    if verdict.findings or misplaced:
        return MISMATCH
    return UNVERIFIED if verdict.stopped else OK


def _audit(args: argparse.Namespace) -> int:
    from blackjack.audit import acknowledged as acknowledgments
    from blackjack.audit.audit import LiveStoreAtAnotherRevision, run_audit
    from blackjack.projections.store import ProjectionStore

    try:
        seal = _seal()
    except _BadInput as error:
        print(error, file=sys.stderr)
        return BAD_INPUT
    try:
        acknowledged = [] if args.acknowledged is None else acknowledgments.load(args.acknowledged)
    except acknowledgments.BadAcknowledgments as error:
        print(f"blackjack audit: {error}", file=sys.stderr)
        return BAD_INPUT
    settings = settings_from(args)

    async def run(scratch_url: str) -> int:
        live = ProjectionStore(settings.db_url, existing=True)
        scratch = ProjectionStore(scratch_url)
        try:  # the scratch store is migrated once the live store is not refused
            report = await run_audit(
                live,
                scratch,
                settings.bootstrap,
                settings.events_topic,
                seal,
                security=settings.security,
                acknowledged=acknowledged,
                differences=args.differences,
            )
        except LiveStoreAtAnotherRevision as error:  # before the scratch store is migrated
            print(f"blackjack audit: {error}", file=sys.stderr)
            return BAD_INPUT
        except SchemaMismatch as error:  # only the scratch store is migrated and folded into
            # not the command line's exit 3 for it, which here means AUDIT INCOMPLETE
            print(_scratch_refused(scratch_url, error), file=sys.stderr)
            return BAD_INPUT
        finally:
            await live.close()
            await scratch.close()
        print(report.render())
        if not report.ok:
            return MISMATCH
        return OK if report.complete else UNVERIFIED

    scratch = shown_db_url(args.scratch_url) if args.scratch_url else "the audit's scratch store"
    try:
        if args.scratch_url:
            return asyncio.run(run(args.scratch_url))
        with tempfile.TemporaryDirectory(prefix="blackjack-audit-") as folder:
            return asyncio.run(run(f"sqlite+aiosqlite:///{Path(folder) / 'scratch.db'}"))
    except Exception as error:
        return _not_reached("blackjack audit", error, settings, scratch)


def _not_reached(
    command: str, error: Exception, settings: ProjectionSettings, *scratch: str
) -> int:
    """Exit 2 and one line for a broker or store not reached, or refusing (``cannot_reach``:
    not the mismatch exit 1 means); anything else raises on."""
    from blackjack.cannot_reach import cannot_reach

    stores = (shown_db_url(settings.db_url), *scratch)
    said = cannot_reach(error, bootstrap=settings.bootstrap, stores=stores)
    if said is None:
        raise error
    print(f"{command}: {said}; nothing was verified", file=sys.stderr)
    return BAD_INPUT


def _scratch_refused(url: str, error: SchemaMismatch) -> str:
    """The one line for a ``--scratch-url`` at another schema revision than this code's."""
    shown = shown_db_url(url)
    found = ", ".join(error.found) or "none"
    if error.newer:
        why = f"a newer release migrated it (schema revision {found}; this release is built for "
    else:  # moved back while the audit folded into it: an operator's downgrade
        why = f"it was moved to schema revision {found} while the audit folded into it (this "
        why += "release is built for "
    return (
        f"blackjack audit: --scratch-url {shown}: {why}{error.expected}): give it a new or "
        "empty database (without it the audit rebuilds in a temporary SQLite file), or audit "
        "with that release; nothing was compared"
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = sub.add_parser(
        "replay", help="rebuild one round (STREAM_ID:ROUND) with the engine and check it"
    )
    replay.add_argument("round_id", metavar="ROUND_ID", help="TABLE:ROUND, e.g. table-1:3")
    replay.add_argument(
        "--source",
        choices=("store", "kafka"),
        default="store",
        help="read the events from the read-model store (default) or the events topic",
    )
    add_store_options(replay, reads_the_broker=True)
    replay.set_defaults(handler=_replay)
    audit = sub.add_parser(
        "audit", help="rebuild the read model from offset 0 and compare; conservation; payouts"
    )
    add_store_options(audit, reads_the_broker=True)
    audit.add_argument("--scratch-url", help="where to rebuild (default: a temporary SQLite)")
    audit.add_argument(
        "--acknowledged",
        type=Path,
        metavar="FILE",
        help="JSON file of records no reader can read that an operator acknowledged, each by "
        "topic, partition, offset and sha256 (as the audit prints them), with by, date and "
        "reason: reported as acknowledged instead of failing the audit (docs/operations.md)",
    )
    audit.add_argument(
        "--differences",
        type=_at_least_one,
        default=DIFFERENCES_SHOWN,
        metavar="N",
        help="differences between the rebuild and the live store listed per table, the rest "
        f"counted (default {DIFFERENCES_SHOWN})",
    )
    audit.set_defaults(handler=_audit)
    audit_key = sub.add_parser(
        "audit-key",
        help="print the auditor's keys (BLACKJACK_AUDIT_KEY) derived from the handlers' shoe "
        "keys, one a line",
    )
    audit_key.set_defaults(handler=_audit_key)
    randomness_cli.register(sub)
    redrive_cli.register(sub)


def _at_least_one(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {text!r}")
    return number


def _audit_key(args: argparse.Namespace) -> int:
    """The keys that open every shoe sealed since they were derived, and nothing else: what an
    auditor holds instead of the master keys (which also yield the signing keys of money
    steps). One a line, the current key's first: every key of a rotation, retired ones too
    (their shoes are still in the log)."""
    if not any(os.environ.get(name, "").strip() for name in SHOE_KEY_SETTINGS):
        print(
            "blackjack audit-key: set BLACKJACK_SHOE_KEY or BLACKJACK_SHOE_KEY_FILE",
            file=sys.stderr,
        )
        return BAD_INPUT
    try:
        keys = load_shoe_keys(os.environ, create=False)
    except ConfigurationError as error:
        print(f"blackjack audit-key: {error}", file=sys.stderr)
        return BAD_INPUT
    print("\n".join(keys.seal().audit_keys_hex()))
    return OK
