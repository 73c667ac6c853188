"""``blackjack projections run|migrate|rebuild|dump|interrupted|report``: the projection worker and
its store."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from blackjack.bus.settings import BOOTSTRAP_HELP
from blackjack.configuration import ConfigurationError
from blackjack.error_text import error_text
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections.shown_url import shown_db_url

if TYPE_CHECKING:  # the command line starts without SQLAlchemy until a command needs it
    from sqlalchemy.ext.asyncio import AsyncConnection

    from blackjack.projections.store import ProjectionStore
    from blackjack.rules_sheet import Returns

T = TypeVar("T")


def add_store_options(parser: argparse.ArgumentParser, *, reads_the_broker: bool) -> None:
    """``--db-url``; and ``--bootstrap`` and ``--topic-prefix`` for a command that reads the
    broker (a store-only command offered them, and took them without a word)."""
    parser.add_argument(
        "--db-url",
        help="the read-model store (default: BLACKJACK_DB_URL, else "
        "sqlite+aiosqlite:///var/projections.db, relative to the current directory)",
    )
    if not reads_the_broker:
        return
    parser.add_argument("--bootstrap", help=BOOTSTRAP_HELP)
    parser.add_argument(
        "--topic-prefix", help="topic name prefix (default: BLACKJACK_TOPIC_PREFIX, else none)"
    )


def settings_from(args: argparse.Namespace) -> ProjectionSettings:
    env = dict(os.environ)
    if args.db_url is not None:  # a store named on the command line counts as the setting's
        env["BLACKJACK_DB_URL"] = args.db_url
    settings = ProjectionSettings.from_env(env)
    changes = {  # a store-only command has no broker options
        "db_url": args.db_url,
        "bootstrap": getattr(args, "bootstrap", None),
        "topic_prefix": getattr(args, "topic_prefix", None),
    }
    return replace(settings, **{k: v for k, v in changes.items() if v is not None})


def read_store(
    args: argparse.Namespace, read: Callable[[AsyncConnection], Awaitable[T]], command: str
) -> T:
    """``read`` on a connection to the store the options name, the store closed after; first
    ``StoreToReadAtAnotherRevision`` (exit 3) when the store is not at this code's schema
    revision (``command``, as typed, is what the refusal tells to run with the matching
    release)."""
    from blackjack.projections.revision import check_schema_to_read
    from blackjack.projections.store import ProjectionStore

    async def run() -> T:
        store = ProjectionStore(settings_from(args).db_url, existing=True)
        try:
            async with store.reading() as connection:
                await check_schema_to_read(connection, store.url, command)
                return await read(connection)
        finally:
            await store.close()

    return asyncio.run(run())


def _run(args: argparse.Namespace) -> int:
    from blackjack.bus.cut_short import close_clients_cut_short
    from blackjack.bus.metadata_backoff import back_off_failed_metadata_updates
    from blackjack.bus.refusals import REFUSED
    from blackjack.observability.logging import configure_logging
    from blackjack.projection_worker.worker import run_worker

    configure_logging(args.log_level)  # JSON lines, like `blackjack serve`

    http = None
    if args.http:
        host, _, port = args.http.rpartition(":")
        if not port.isdigit():
            print(
                f"blackjack projections run: --http wants HOST:PORT, not {args.http!r}",
                file=sys.stderr,
            )
            return 2
        http = (host or "127.0.0.1", int(port))
    close_clients_cut_short()  # a SIGTERM during a client's start leaves nothing open
    back_off_failed_metadata_updates()  # no busy retry while a broker is away
    settings = settings_from(args)
    try:
        asyncio.run(run_worker(settings, http))
    except REFUSED as error:  # (a traceback and exit 1 before, which reads as a bug)
        raise ConfigurationError(
            f"Kafka at {settings.bootstrap} refused the projection worker: {error_text(error)} "
            f"(its principal needs Read and Describe on {settings.events_topic} and Read on "
            f'the group {settings.group_id}: docs/kafka.md, "Securing the cluster")'
        ) from None
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
    from blackjack.projections.rebuild import rebuild, refuse_a_store_of_another_log
    from blackjack.projections.store import ProjectionStore, is_store_outage
    from blackjack.projections.writer import ProjectionWriter, Record

    settings = settings_from(args)

    async def run() -> None:
        store = ProjectionStore(settings.db_url)
        try:
            await store.migrate()
            writer = ProjectionWriter(store)
            stored = await writer.stored_positions()  # every topic's
            # first: a store of another log is refused before anything is copied or folded
            await refuse_a_store_of_another_log(
                stored,
                settings.bootstrap,
                settings.events_topic,
                settings.security,
                shown_db_url(settings.db_url),
            )
            fresh = not stored  # (another topic's positions count: refused above)
            if args.revocations_from is not None:  # first: refused from the store's first row
                await _copy_revocations(args.revocations_from, store, "--revocations-from")
            elif fresh:
                print(
                    "note: no revocation of players' tokens carried over into this new store "
                    "(--revocations-from LIVE_DB_URL copies the live store's)",
                    file=sys.stderr,
                )
            foreign: list[Record] = []
            unreadable: list[Record] = []
            try:
                await rebuild(
                    writer,
                    settings.bootstrap,
                    settings.events_topic,
                    batch=settings.batch,
                    security=settings.security,
                    foreign=foreign,
                    unreadable=unreadable,
                )
            except Exception as error:
                at = writer.failed_at
                if at is None or is_store_outage(error):  # (the store's, not the record's)
                    raise
                said = error_text(error).splitlines()[0]
                raise _Unfoldable(
                    f"{at.topic}[{at.partition}] offset {at.offset}: a record the projections "
                    f"cannot fold: {said}. The store {shown_db_url(store.url)} "
                    "holds the fold up to it (not a read model to serve); docs/operations.md, "
                    '"A stuck projection worker"'
                ) from None
            for record in unreadable:
                print(
                    f"{record.topic}[{record.partition}] offset {record.offset} stepped over: "
                    "a header name that is not UTF-8 (no reader can read it)"
                )
            for record in foreign:
                print(
                    f"{record.topic}[{record.partition}] offset {record.offset} stepped over: "
                    "not written by the service (no ce_type header, not an event)"
                )
            positions = await writer.stored_positions(settings.events_topic)
            for (topic, partition), offset in sorted(positions.items()):
                print(f"{topic}[{partition}] folded in up to offset {offset}")
            if args.revocations_from is not None:  # and those made while it folded
                await _copy_revocations(args.revocations_from, store, "--revocations-from")
        finally:
            await store.close()

    try:
        asyncio.run(run())
    except _Unfoldable as error:
        print(f"blackjack projections rebuild: {error}", file=sys.stderr)
        return 1
    except ConfigurationError:
        raise  # (one line, exit 2, from the command line)
    except Exception as error:
        from blackjack.cannot_reach import cannot_reach

        stores = (shown_db_url(settings.db_url),)
        said = cannot_reach(error, bootstrap=settings.bootstrap, stores=stores)
        if said is None:
            raise
        print(f"blackjack projections rebuild: {said}", file=sys.stderr)
        return 2
    return 0


class _Unfoldable(Exception):
    """The rebuild stopped at a record the projections cannot fold (exit 1, as the audit's
    finding of it; before, a traceback)."""


async def _copy_revocations(source_url: str, target: ProjectionStore, option: str) -> None:
    """The revocations of players' tokens of the store at ``source_url`` that may still
    refuse a token, merged into ``target`` (``api.revocations.copy_revocations``)."""
    from blackjack.api.revocations import copy_revocations
    from blackjack.projections.revision import check_schema_to_read
    from blackjack.projections.store import ProjectionStore

    source = ProjectionStore(
        source_url, existing=True, named=f"{option} names the store to copy from"
    )
    try:
        async with source.reading() as reading, target.writing() as writing:
            # the rows are a release's layout, as for the store readers (read_store)
            await check_schema_to_read(
                reading,
                source.url,
                "blackjack projections copy-revocations",
                named=option,
                untouched="nothing was copied",
            )
            copied = await copy_revocations(reading, writing)
    finally:
        await source.close()
    print(f"{copied} revocation(s) of players' tokens carried over from {shown_db_url(source_url)}")


async def _a_store_to_write(store: ProjectionStore, command: str, untouched: str) -> None:
    """A read model at ``store`` (``NoReadModel``: none is made) laid out as this release's
    (``StoreToReadAtAnotherRevision``, exit 3): a ``projections`` command that writes there."""
    from blackjack.projections.revision import check_schema_to_read

    async with store.reading() as connection:
        await check_schema_to_read(
            connection, store.url, f"blackjack projections {command}", untouched=untouched
        )


def _copy_revocations_command(args: argparse.Namespace) -> int:
    from blackjack.projections.store import ProjectionStore

    async def run() -> None:
        store = ProjectionStore(settings_from(args).db_url, existing=True)
        try:
            await _a_store_to_write(store, "copy-revocations", untouched="nothing was copied")
            await _copy_revocations(args.source, store, "--from")
        finally:
            await store.close()

    asyncio.run(run())
    return 0


def _dump(args: argparse.Namespace) -> int:
    from blackjack.projections.dump import write_dump

    # streamed: each page of lines written as read (or only hashed), never the whole dump
    write = (lambda text: None) if args.digest else sys.stdout.write
    digest = read_store(
        args, lambda connection: write_dump(connection, write), "blackjack projections dump"
    )
    if args.digest:
        sys.stdout.write(digest + "\n")
    return 0


def _interrupted(args: argparse.Namespace) -> int:
    from blackjack.projections.queries import MAX_PAGE, interrupted_rounds

    if not 1 <= args.idle_days <= 3650 or not 1 <= args.limit <= MAX_PAGE:
        print(
            f"blackjack projections interrupted: --idle-days is from 1 to 3650, --limit from 1 "
            f"to {MAX_PAGE}",
            file=sys.stderr,
        )
        return 2
    idle_before = datetime.now(UTC) - timedelta(days=args.idle_days)

    rounds = read_store(
        args,
        lambda c: interrupted_rounds(c, idle_before, args.limit, every_table=args.all_tables),
        "blackjack projections interrupted",
    )
    for found in rounds:
        held = ", ".join(f"{player} {amount}" for player, amount in found["in_play"].items())
        closable = found["closable_from"]
        closing = "waits for its player" if closable is None else f"may be closed from {closable}"
        print(
            f"{found['round_id']}  {found['variant']}  {found['status']}  "
            f"idle since {found['idle_since']}  {closing}  in play: {held or 'nothing'}"
        )
    tables = "every table" if args.all_tables else "tables whose rules let the operator close them"
    print(f"{len(rounds)} round(s) open with no event since {idle_before.isoformat()} at {tables}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from blackjack.projections.reports import MAX_DAYS, game_performance, last_day

    first = args.first or datetime.now(UTC).date()
    if not 1 <= args.days <= MAX_DAYS:
        print(f"blackjack projections report: --days is from 1 to {MAX_DAYS}", file=sys.stderr)
        return 2

    report = read_store(
        args,
        lambda c: game_performance(
            c,
            first,
            args.days,
            now=datetime.now(UTC),
            by_day=args.by_day,
            rules_apart=args.rules_apart,
        ),
        "blackjack projections report",
    )
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"Game performance, UTC days {first} to {last_day(first, args.days)} (money in minor units)"
    )
    own = _own_returns(args, report) if args.theoretical else {}
    if not report["ended"]:  # (a day to come read as a day with nothing to report)
        print(
            f"note: not over at {report['as_of']} (UTC days): rounds may still close in it, "
            "these lines are not final"
        )
    if args.by_day:
        for day in report["days"]:
            closed = "" if day["games"] else " no round closed"
            print(f"{day['day']}:{closed}" + ("" if day["ended"] else " (not over)"))
            for line in day["games"]:
                print(f"  {_report_line(line, args.theoretical, own)}")
        print(f"All {len(report['days'])} days:" + ("" if report["games"] else " no round closed"))
    for line in report["games"]:
        print(("  " if args.by_day else "") + _report_line(line, args.theoretical, own))
    if not report["games"] and not args.by_day:
        print("no round closed on those days")
    return 0


def _report_line(
    line: dict[str, Any],
    theoretical: bool,
    own_returns: Mapping[str, Returns | None] | None = None,
) -> str:
    """A line of the report; ``theoretical``: with the exact return under basic strategy of
    its preset, or of its own rules (``own_returns``, by fingerprint) on a line of them."""
    expected = _theoretical(line["variant"], theoretical)
    if "rules" not in line:  # the game's tables together
        rules = ""
        own = (
            f" ({line['tables_with_own_rules']} of the tables opened with their own rules)"
            if line["tables_with_own_rules"]
            else ""
        )
    elif line["own_rules"]:
        rules = f", own rules {line['rules']}"
        own = f" (their rules: blackjack rules --table {line['rules_table']})"
        expected = ""  # the preset's return is not theirs
        if theoretical and own_returns is not None and line["rules"] in own_returns:
            theirs = own_returns[line["rules"]]
            expected = (
                " (theoretical: these rules cannot be read)"
                if theirs is None
                else _returns_text(theirs, " and these rules")
            )
    else:
        rules, own = f", the preset's rules {line['rules'] or '-'}", ""
    return (
        f"{line['variant']} {line['currency']}{rules}: {_count(line['rounds'], 'round')} settled"
        f"{_closed_otherwise(line)} at {line['tables']} table(s), "
        f"{_count(line['player_rounds'], 'player round')}; initial bets {line['initial_bets']}, "
        f"wagered {line['wagered']}, paid {line['paid']}, hold {line['hold']}; "
        f"RTP {line['rtp_percent'] or '-'} % of wagers, "
        f"{line['return_per_initial_bet_percent'] or '-'} % per initial bet" + expected + own
    )


def _returns_text(returns: Returns, rules: str = "") -> str:
    """The exact return (``blackjack rules``' figures): at large bets, and the lowest at any
    bet the table takes where rounding to the minor unit (or further: ``atlantic-city``'s
    blackjack pays no cents) makes small bets return less."""
    text = f" (theoretical {returns.rtp_percent:.4f} % under basic strategy{rules}"
    if round(returns.lowest_percent, 4) < round(returns.rtp_percent, 4):
        text += f", {returns.lowest_percent:.4f} % at the lowest, at a bet of "
        text += f"{returns.lowest_at_bet}"
    return text + ")"


def _count(number: int, noun: str) -> str:
    """``1 round``, ``2 rounds``: the report's counts in a reader's words."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _closed_otherwise(line: dict[str, Any]) -> str:
    """The rounds cancelled, and the voided ones only when an operator voided one: most games
    never see one."""
    voided = int(line.get("voided") or 0)
    if not voided:
        return f" and {line['cancelled']} cancelled"
    return f", {line['cancelled']} cancelled and {voided} voided"


def _theoretical(variant: str, wanted: bool) -> str:
    """The preset's exact return per initial bet under basic strategy (``blackjack rtp``):
    what the line's return per initial bet tends to with many rounds of basic strategy
    without insurance (tables opened with rule overrides have their own)."""
    from blackjack.domain.rules import PRESETS

    if not wanted or variant not in PRESETS:
        return ""
    return _returns_text(_preset_returns(variant))


def _own_returns(args: argparse.Namespace, report: dict[str, Any]) -> dict[str, Returns | None]:
    """The exact returns under basic strategy of each rule set of the report's own-rules
    lines (``--rules-apart``), by fingerprint: computed from the rules of its first table, as
    ``blackjack rules --table`` prints them (a second or so a rule set). None: its rules
    cannot be read (no view, or rules this release does not know)."""
    from blackjack.domain.rules import stored_rules
    from blackjack.projections.reports import rules_documents
    from blackjack.rules_sheet import table_returns

    lines = [*report["games"], *(line for day in report.get("days", []) for line in day["games"])]
    first_tables = {line["rules"]: line["rules_table"] for line in lines if line.get("own_rules")}
    tables = sorted(set(first_tables.values()))
    documents = (
        read_store(args, lambda c: rules_documents(c, tables), "blackjack projections report")
        if tables
        else {}
    )
    returns: dict[str, Returns | None] = {}
    for rule_set, table in first_tables.items():
        try:
            rules = stored_rules(documents[table][1])
        except (KeyError, TypeError, AttributeError, ValueError):  # (ValidationError too)
            returns[rule_set] = None
        else:
            returns[rule_set] = table_returns(rules)
    return returns


@cache  # a second or so each: once per preset, whatever the lines (a day's each)
def _preset_returns(variant: str) -> Returns:
    from blackjack.domain.rules import PRESETS
    from blackjack.rules_sheet import table_returns

    return table_returns(PRESETS[variant])


def _day(text: str) -> date:
    from blackjack.projections.reports import parse_day

    day = parse_day(text)
    if day is None:
        raise argparse.ArgumentTypeError(f"a day as YYYY-MM-DD, not {text!r}")
    return day


def _revoke_tokens(args: argparse.Namespace) -> int:
    """The query API's ``POST /v1/players/{id}/token-revocation``, for an operator with the
    database's URL rather than an operator's token (one with player keys and no
    ``BLACKJACK_API_TOKENS`` has none): the same row, the same answer."""
    from blackjack.api.revocations import MAX_PLAYER_ID_CHARS, revoke_now
    from blackjack.api.tokens import ApiTokens
    from blackjack.projections.store import ProjectionStore

    player_id = args.player_id
    if not 0 < len(player_id) <= MAX_PLAYER_ID_CHARS or "\x00" in player_id:
        print(
            "blackjack projections revoke-tokens: a player id is 1-128 characters, none NUL",
            file=sys.stderr,
        )
        return 2
    players = ApiTokens.from_env().players  # the leeway and the longest lifetime

    async def run() -> int:
        store = ProjectionStore(settings_from(args).db_url, existing=True)
        try:
            await _a_store_to_write(store, "revoke-tokens", untouched="nothing was revoked")
            return await revoke_now(store, player_id, players)
        finally:
            await store.close()

    not_before = asyncio.run(run())
    print(json.dumps({"player_id": player_id, "not_before": not_before}))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("projections", help="the read-model worker and store")
    # COMMAND, as blackjack's own: the list of them made the usage line wider than 80 columns
    commands = parser.add_subparsers(dest="projections_command", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="fold blackjack.events into the store until stopped")
    add_store_options(run, reads_the_broker=True)
    run.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="also serve the query API, /healthz, /readyz and /metrics there",
    )
    run.add_argument(
        "--log-level",
        default=os.environ.get("BLACKJACK_LOG_LEVEL", "INFO"),
        help="DEBUG, INFO, WARNING, ... (default: BLACKJACK_LOG_LEVEL, else INFO)",
    )
    run.set_defaults(handler=_run)  # a SIGTERM while importing: exit 0 (cli.SERVICES)
    migrate = commands.add_parser("migrate", help="create or upgrade the store's tables")
    add_store_options(migrate, reads_the_broker=False)
    migrate.set_defaults(handler=_migrate)
    rebuild = commands.add_parser(
        "rebuild", help="fold the topic into the store from its positions (0 when new) to the end"
    )
    add_store_options(rebuild, reads_the_broker=True)
    rebuild.add_argument(
        "--revocations-from",
        metavar="DB_URL",
        help="the live store whose revocations of players' tokens the new store keeps "
        "(copied before and after the fold; a rebuilt store has none of its own)",
    )
    rebuild.set_defaults(handler=_rebuild)
    copy = commands.add_parser(
        "copy-revocations",
        help="merge the revocations of players' tokens of another store (--from) into this one: "
        "run it again after switching to a rebuilt store",
    )
    add_store_options(copy, reads_the_broker=False)
    copy.add_argument(
        "--from", dest="source", metavar="DB_URL", required=True, help="the store copied"
    )
    copy.set_defaults(handler=_copy_revocations_command)
    dump = commands.add_parser("dump", help="print the canonical dump of the read model")
    add_store_options(dump, reads_the_broker=False)
    dump.add_argument("--digest", action="store_true", help="only its sha256")
    dump.set_defaults(handler=_dump)
    interrupted = commands.add_parser(
        "interrupted",
        help="the open rounds an operator may close (CloseInterruptedRound) whose table has had "
        "no event for --idle-days",
    )
    add_store_options(interrupted, reads_the_broker=False)
    interrupted.add_argument(
        "--idle-days", type=int, default=30, help="days without an event (1-3650, default 30)"
    )
    interrupted.add_argument(
        "--limit", type=int, default=100, help="most rounds listed (1-100, default 100)"
    )
    interrupted.add_argument(
        "--all-tables",
        action="store_true",
        help="also the rounds at tables whose rules keep them for their player (single-player "
        "tables): every unfinished game, none for the operator to close",
    )
    interrupted.set_defaults(handler=_interrupted)
    report = commands.add_parser(
        "report",
        help="game performance: each game's rounds, wagers, payouts, hold and return over "
        "UTC days (the query API's /v1/reports/games)",
    )
    add_store_options(report, reads_the_broker=False)
    report.add_argument("--from", dest="first", type=_day, help="first UTC day (default: today)")
    report.add_argument("--days", type=int, default=1, help="how many days from --from (1)")
    report.add_argument(
        "--theoretical",
        action="store_true",
        help="also the exact return under basic strategy of each preset, and with "
        "--rules-apart of each rule set of its own (seconds each)",
    )
    report.add_argument(
        "--by-day",
        action="store_true",
        help="each UTC day's lines too, every day of the range (the API's by=day)",
    )
    report.add_argument(
        "--rules-apart",
        action="store_true",
        help="the tables opened with their own rules on lines of their own, one per rule set "
        "(the API's rules=apart)",
    )
    report.add_argument("--json", action="store_true", help="the query API's answer as JSON")
    report.set_defaults(handler=_report)
    revoke = commands.add_parser(
        "revoke-tokens",
        help="refuse the player's tokens issued until now on every query API over the store "
        "(the API's POST /v1/players/{id}/token-revocation)",
    )
    add_store_options(revoke, reads_the_broker=False)
    revoke.add_argument("player_id", help="the player whose tokens are cut off")
    revoke.set_defaults(handler=_revoke_tokens)
