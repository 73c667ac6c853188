"""``blackjack audit``: is the live read model what the event log says it should be?

1. Snapshot the live store: its positions and its canonical dump, in one read transaction
   (the dump streamed to a temporary file, never held in memory).
2. Rebuild a scratch store from offset 0 of the topic up to exactly those positions, with the
   same projection code, and compare the two row by row, table by table: a merge of the
   scratch store's rows and the live dump's lines, both in key order (``dump.compare``; the
   first ``differences`` of each table are kept and named, the rest counted). A record of
   the service's the rebuild cannot fold stops the audit there (``Unfoldable``).
3. Check money conservation in the live store (``audit.conservation``): for every account,
   ``deposited - withdrawn - cashed_out = available + in_play + (lost - won)``, no negative
   balance, and no money in play at a table with no round open.
4. Replay every table's events through the pure engine (``audit.replay``): balances, stakes,
   cards against the committed shoe, the dealer's drawing, every payout derived again; and
   every stream's events on its own partition (``events_off_their_partition``).
5. Match every buy-in and cash-out between a wallet and a shared table across the two logs
   (``audit.transfers``).
6. Fold what lies past the live positions into the scratch store, only to know that it can
   be: a record it cannot is the one a live worker is stuck at, not lag.

Every difference, violation and finding is reported; any one makes the audit fail.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import IO

from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.audit.acknowledged import Acknowledgment, UnreadableRecord, match
from blackjack.audit.conservation import CountedMoney, Crossing, MoneyTotals, count_money
from blackjack.audit.replay import TableReplayer
from blackjack.audit.replayed import Finding, StreamReplay
from blackjack.audit.transfers import STUCK_AFTER, Movements, Reconciled
from blackjack.audit.wallet_replay import WalletReplayer
from blackjack.bus.settings import PLAINTEXT, KafkaSecurity
from blackjack.bus.topics import partition_for
from blackjack.domain.wallet import is_wallet_stream
from blackjack.error_text import error_text
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections import queries
from blackjack.projections.dump import (
    DIFFERENCES_SHOWN,
    Difference,
    DumpFile,
    compare,
    table_lines,
    write_dump,
)
from blackjack.projections.rebuild import read_topic, rebuild, refuse_a_store_of_another_log
from blackjack.projections.revision import SchemaMismatch, another_revision_line, check_schema
from blackjack.projections.shown_url import shown_db_url
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import Position, ProjectionWriter, Record, read_positions


class LiveStoreAtAnotherRevision(Exception):
    """The live store is at another schema revision than this code's: a newer release
    migrated it, or it is older than this code's head (its workers are of an older release).
    This code's rebuild compared with it would compare the folds of two releases (differences
    that are none, or none where a release's columns differ), or fail on a column one of them
    lacks; so the audit refuses it before anything is rebuilt or compared. Not a
    ``SchemaMismatch``: that one, from the scratch store, says another thing."""

    def __init__(self, url: str, mismatch: SchemaMismatch) -> None:
        self.mismatch = mismatch
        shown = shown_db_url(url)
        super().__init__(
            another_revision_line(
                mismatch,
                f"the live store {shown} (--db-url or BLACKJACK_DB_URL)",
                newer="audit it with that release's `blackjack audit`",
                older="audit it with the release its workers run, or upgrade it first",
                untouched="nothing was compared",
            )
        )


async def refuse_a_live_store_at_another_revision(
    connection: AsyncConnection, live: ProjectionStore
) -> None:
    """``LiveStoreAtAnotherRevision`` unless the live store is at this code's schema revision:
    the workers' check (``revision.check_schema``), a look only (no lock held)."""
    try:
        await check_schema(connection, lock=False)
    except SchemaMismatch as mismatch:
        raise LiveStoreAtAnotherRevision(live.url, mismatch) from None


@dataclass(frozen=True)
class Unfoldable:
    """A record of the service's that the projections cannot fold, and why (a sequence
    skipped, an event on another stream's partition: a log the handler did not write)."""

    topic: str
    partition: int
    offset: int
    error: str
    past_positions: bool
    """past the live positions: the record a live worker is stuck at; else the rebuild
    stopped there and nothing was compared"""

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}] offset {self.offset}: {self.error}"


@dataclass
class AuditReport:
    topic: str
    positions: dict[Position, int] = field(default_factory=dict)
    pending: dict[Position, int] = field(default_factory=dict)
    """committed records past the live positions (the projection's lag, not a failure)"""
    foreign: list[tuple[str, int, int]] = field(default_factory=list)
    """records the service did not write (topic, partition, offset), stepped over by the
    rebuild as the live store was (docs/operations.md, "A stuck projection worker")"""
    unreadable: list[UnreadableRecord] = field(default_factory=list)
    """records with a header name that is not UTF-8: stepped over unread by the rebuild as by
    the live worker, and findings (what they hold is not audited) unless an operator has
    acknowledged them (``audit.acknowledged``)"""
    acknowledged_elsewhere: list[Acknowledgment] = field(default_factory=list)
    """acknowledgments that match no record the rebuild stepped over (reported, not failed)"""
    events: int = 0
    rounds: int = 0
    """rounds replayed in the streams whose replays no longer hold them (``run_audit`` keeps
    a stream's findings, shoes and state, not its rounds)"""
    differences: list[Difference] = field(default_factory=list)
    """the first differences of each table (``differences_found`` counts them all)"""
    differences_found: dict[str, int] = field(default_factory=dict)
    """table -> differences found, listed or not"""
    violations: list[str] = field(default_factory=list)
    totals: list[MoneyTotals] = field(default_factory=list)
    crossing: list[Crossing] = field(default_factory=list)
    """money that arrived between a wallet and the shared tables while the side it left is
    past the live positions (lag: the rest of the way is in the records not folded yet)"""
    replays: list[StreamReplay] = field(default_factory=list)
    transfers: Reconciled = field(default_factory=Reconciled)
    """money between wallets and shared tables, matched across the logs"""
    unfoldable: Unfoldable | None = None
    """a record the projections cannot fold, below the live positions or past them"""
    foreign_past: list[tuple[str, int, int]] = field(default_factory=list)
    """records past the live positions the service did not write: a live worker stops at one
    until an operator steps it over"""
    unreadable_past: list[tuple[str, int, int]] = field(default_factory=list)
    """records no reader can read past the live positions (the workers will step over them;
    below them, each is a finding until acknowledged)"""

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.replays for f in r.findings]

    @property
    def ok(self) -> bool:
        return not (
            self.differences
            or self.violations
            or self.findings
            or self.transfers.findings
            or self.unacknowledged
            or self.unfoldable
        )

    @property
    def unacknowledged(self) -> list[UnreadableRecord]:
        return [r for r in self.unreadable if r.acknowledged is None]

    @property
    def complete(self) -> bool:
        """Every stream was replayed to its end (none stopped at a shoe it could not open)."""
        return all(r.stopped is None for r in self.replays)

    def _unreadable_lines(self) -> list[str]:
        findings = self.unacknowledged
        acknowledged = [r for r in self.unreadable if r.acknowledged is not None]
        lines = [
            f"\nRecords no reader can read (a header name that is not UTF-8, stepped over "
            f"unread, as in the live store): {len(findings)} finding(s)"
            + (f", {len(acknowledged)} acknowledged" if acknowledged else "")
        ]
        lines += [f"  {r}" for r in findings]
        if findings:
            lines.append(
                "  (once looked at, acknowledge one by its topic, partition, offset and sha256: "
                "blackjack audit --acknowledged FILE, docs/operations.md)"
            )
        lines += [f"  {r}" for r in acknowledged]
        lines += [
            f"  Note: acknowledged, but no such record was stepped over: {a.topic}"
            f"[{a.partition}] offset {a.offset} sha256 {a.sha256} ({a})"
            for a in self.acknowledged_elsewhere
        ]
        return lines

    def _difference_lines(self) -> list[str]:
        found = max(sum(self.differences_found.values()), len(self.differences))
        lines = [f"\nRebuild from offset 0 vs live: {found} difference(s)"]
        for table in dict.fromkeys(d.table for d in self.differences):
            listed = [d for d in self.differences if d.table == table]
            lines += [f"  {d}" for d in listed]
            more = self.differences_found.get(table, 0) - len(listed)
            if more > 0:
                lines.append(
                    f"  ... and {more} more difference(s) in {table} (the first {len(listed)} "
                    "of each table are listed: --differences N)"
                )
        return lines

    def render(self) -> str:
        rounds = self.rounds + sum(len(r.rounds) for r in self.replays)
        checks = sum(r.checks for r in self.replays)
        wallets = sum(1 for r in self.replays if is_wallet_stream(r.stream_id))
        tables = sum(1 for r in self.replays if r.state.opened)
        # a stream no table was opened under holds only refusals: buy-ins it declined (one a
        # release before made for an id no one opened, or a partition's
        # ``#declined/<partition>``), or a platform's money commands refused there
        others = len(self.replays) - wallets - tables
        lines = [
            f"Audit of {self.topic}: {self.events} events, {tables} tables, "
            f"{wallets} wallets"
            + (f", {others} streams with no table (refusals only)" if others else "")
            + f", {rounds} rounds replayed",
            "Positions (live = rebuilt up to): "
            + (", ".join(f"{p}:{o}" for (_, p), o in sorted(self.positions.items())) or "none"),
        ]
        if self.unfoldable is not None and not self.unfoldable.past_positions:
            lines += [
                f"\nRebuild from offset 0: stopped at a record the projections cannot fold, "
                f"{self.unfoldable}",
                "  (a log the handler did not write: nothing was compared or replayed)",
                "\nAUDIT FAILED",
            ]
            return "\n".join(lines)
        if any(self.pending.values()):
            behind = ", ".join(f"{p}:{n}" for (_, p), n in sorted(self.pending.items()) if n)
            lines.append(f"Note: events not yet folded into the live store (lag): {behind}")
        if self.unfoldable is not None:
            lines.append(
                f"Past the live positions, a record the projections cannot fold: "
                f"{self.unfoldable} (its partition's worker is stuck at it: not lag)"
            )
        if self.foreign_past:
            lines.append(
                f"Note: past the live positions, {len(self.foreign_past)} record(s) not written "
                f"by the service, at which a worker stops until stepped over "
                f'(docs/operations.md, "A stuck projection worker"): {_places(self.foreign_past)}'
            )
        if self.unreadable_past:
            lines.append(
                f"Note: past the live positions, {len(self.unreadable_past)} record(s) no reader "
                "can read, which a worker steps over (an audit once it has fails on each until "
                f"acknowledged): {_places(self.unreadable_past)}"
            )
        if self.foreign:
            lines.append(
                f"Note: {len(self.foreign)} record(s) not written by the service (no ce_type "
                f"header, not an event), stepped over as in the live store: "
                f"{_places(self.foreign)}"
            )
        if self.unreadable or self.acknowledged_elsewhere:
            lines += self._unreadable_lines()
        lines += self._difference_lines()
        lines.append(f"\nMoney conservation: {len(self.violations)} violation(s)")
        lines += [f"  {t}" for t in self.totals]
        lines += [f"  {v}" for v in self.violations]
        lines += [f"  (lag, the other side not folded yet) {c}" for c in self.crossing]
        unverified = [f"{r.stream_id}: {r.stopped}" for r in self.replays if r.stopped is not None]
        lines.append(
            f"\nEngine replay: {checks} checks, {len(self.findings)} finding(s)"
            + (f", {len(unverified)} table(s) replayed only in part" if unverified else "")
        )
        lines += [f"  {f}" for f in self.findings]
        lines += [f"  (not verified past) {u}" for u in unverified]
        transfers = self.transfers
        lines.append(
            f"\nTransfers between wallets and tables: {len(transfers.findings)} finding(s)"
            + (f", {transfers.in_transit} in transit" if transfers.in_transit else "")
            + (
                f", {transfers.unverifiable} from before tables recorded transfers"
                if transfers.unverifiable
                else ""
            )
        )
        lines += [f"  {f}" for f in transfers.findings]
        if transfers.stuck:
            lines.append(
                f"  ({len(transfers.stuck)} of them a step its receiver never answered: once every "
                "handler holds the key, `blackjack redrive --send` sends it again; "
                'docs/operations.md, "Money stuck between a wallet and a table")'
            )
        if not self.ok:
            lines.append("\nAUDIT FAILED")
        elif not self.complete:
            lines.append(
                "\nAUDIT INCOMPLETE: nothing wrong found, but the tables above were not verified "
                "to their end (set BLACKJACK_AUDIT_KEY, which `blackjack audit-key` prints; "
                "BLACKJACK_SHOE_KEY for a shoe sealed before the audit key)"
            )
        elif any(self.pending.values()):
            # lag is normal, but what lies past the live positions was not audited: a worker
            # stuck at a record leaves everything after it unread (a tampered log's own sign)
            lines.append(
                f"\nAUDIT PASSED up to the live store's positions: {sum(self.pending.values())} "
                "record(s) past them (the workers' lag) were not audited; audit again once "
                'the workers have caught up (one stuck at a record: docs/operations.md, "A '
                'stuck projection worker")'
            )
        elif transfers.in_transit:
            # each answered within seconds by a running handler: one stuck for STUCK_AFTER
            # before the logs' last event is a finding, but a quiet log has no later event
            lines.append(
                f"\nAUDIT PASSED, with {transfers.in_transit} movement(s) between wallets and "
                "tables not answered yet: audit again once the logs have moved on (one not "
                f"answered {STUCK_AFTER} before their last event is a finding)"
            )
        else:
            lines.append("\nAUDIT PASSED")
        return "\n".join(lines)


def _places(records: list[tuple[str, int, int]]) -> str:
    """Records named by topic, partition and offset, as the report lists them."""
    return ", ".join(f"{topic}[{part}] offset {offset}" for topic, part, offset in records)


async def run_audit(
    live: ProjectionStore,
    scratch: ProjectionStore,
    bootstrap: str,
    topic: str,
    seal: ShoeSeal | None = None,
    *,
    security: KafkaSecurity = PLAINTEXT,
    acknowledged: Sequence[Acknowledgment] = (),
    differences: int = DIFFERENCES_SHOWN,
) -> AuditReport:
    """``acknowledged``: records no reader can read that an operator has acknowledged (a
    finding only when none of them names the record, by its digest too). ``differences``:
    how many differences between the rebuild and the live store are listed per table (the
    rest are counted). ``scratch`` is migrated here, once the live store is not refused."""
    report = AuditReport(topic)
    # first: a live store at another schema revision, or of another log, is refused at once,
    # before the scratch store is migrated or the live store's dump is written
    async with live.reading() as connection:
        await refuse_a_live_store_at_another_revision(connection, live)
        stored = await read_positions(connection)  # every topic's: one of another is refused
    shown = shown_db_url(live.url)
    await refuse_a_store_of_another_log(stored, bootstrap, topic, security, shown)
    await scratch.migrate()
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as live_dump:
        async with live.reading() as connection:
            # again in the snapshot dumped: a migration may have run since the first look
            await refuse_a_live_store_at_another_revision(connection, live)
            report.positions = await read_positions(connection, topic)
            await write_dump(connection, live_dump.write)
            counted = await count_money(connection)
        live_dump.seek(0)
        await _rebuild_and_compare(
            report,
            counted,
            live_dump,
            scratch,
            bootstrap=bootstrap,
            seal=seal,
            security=security,
            acknowledged=acknowledged,
            shown=differences,
        )
    return report


async def _rebuild_and_compare(
    report: AuditReport,
    counted: CountedMoney,
    live_dump: IO[str],
    scratch: ProjectionStore,
    *,
    bootstrap: str,
    seal: ShoeSeal | None,
    security: KafkaSecurity,
    acknowledged: Sequence[Acknowledgment],
    shown: int,
) -> None:
    topic = report.topic
    writer = ProjectionWriter(scratch)
    # A record the service did not write can lie below the live positions only if an operator
    # stepped the live store over it; the scratch store steps over it too (and it is named).
    foreign: list[Record] = []
    unreadable: list[Record] = []
    report.unfoldable = await _folded(
        writer,
        rebuild(
            writer,
            bootstrap,
            topic,
            stop=report.positions,
            security=security,
            foreign=foreign,
            unreadable=unreadable,
        ),
        past_positions=False,
    )
    if report.unfoldable is not None:
        return
    report.foreign = [(r.topic, r.partition, r.offset) for r in foreign]
    report.unreadable, report.acknowledged_elsewhere = match(
        ((r.topic, r.partition, r.offset, r.sha256 or "") for r in unreadable), acknowledged
    )
    report.pending, partitions = await _pending(bootstrap, topic, report.positions, security)
    # Events past the live positions: a movement's cause may be among them (lag, not a finding).
    behind = {partition for (_, partition), count in report.pending.items() if count}

    def lagging(stream_id: str) -> bool:
        return partition_for(stream_id, partitions) in behind

    async with scratch.reading() as connection:
        live_rows = DumpFile(live_dump)
        comparison = await compare(
            lambda table: table_lines(connection, table), live_rows.table, shown
        )
        report.differences, report.differences_found = comparison.shown, comparison.counts
        await replay_streams(report, connection, seal, lagging)
        await events_off_their_partition(report, connection, partitions)
    report.totals = counted.totals
    report.violations, report.crossing = counted.judged(report.transfers.ahead)
    if any(report.pending.values()):
        # What lies past the live positions is folded too, only to know it can be: a worker
        # stuck at a record (a sequence skipped, a stream's event on another partition) left
        # everything after it unread, and the audit called it lag and passed.
        foreign_past: list[Record] = []
        unreadable_past: list[Record] = []
        report.unfoldable = await _folded(
            writer,
            rebuild(
                writer,
                bootstrap,
                topic,
                security=security,
                foreign=foreign_past,
                unreadable=unreadable_past,
            ),
            past_positions=True,
        )
        report.foreign_past = [(r.topic, r.partition, r.offset) for r in foreign_past]
        report.unreadable_past = [(r.topic, r.partition, r.offset) for r in unreadable_past]


async def _folded(
    writer: ProjectionWriter, rebuilding: Awaitable[object], *, past_positions: bool
) -> Unfoldable | None:
    """``rebuilding`` run; the record it stopped at, if the projections could not fold one
    (an error reading the topic is raised)."""
    try:
        await rebuilding
    except Exception as error:
        at = writer.failed_at
        if at is None:
            raise
        return Unfoldable(at.topic, at.partition, at.offset, error_text(error), past_positions)
    return None


async def replay_streams(
    report: AuditReport,
    connection: AsyncConnection,
    seal: ShoeSeal | None,
    lagging: Callable[[str], bool] = lambda stream_id: False,
) -> None:
    """Replay every stream of the store through the engine and match the transfers between
    them, a page of a stream's events at a time: a table's replay keeps its findings, shoes
    and state, not its rounds, and holds back one shoe's events at most, until the shoe's
    reveal; a wallet's keeps its state; the transfers keep the movements of money, not the
    logs."""
    movements = Movements(lagging)
    for stream_id in await queries.stream_ids(connection):
        complete = not lagging(stream_id)  # else the next events may end a decision
        replayer: WalletReplayer | TableReplayer = (
            WalletReplayer(stream_id)
            if is_wallet_stream(stream_id)
            else TableReplayer(stream_id, seal, complete, keep=lambda number: False)
        )
        async for page in queries.stream_envelope_pages(connection, stream_id):
            for envelope in page:
                replayer.feed(envelope)
            movements.read(stream_id, page)
            report.events += len(page)
        replay = replayer.finish()
        report.rounds += replay.rounds_replayed
        replay.rounds = {}
        report.replays.append(replay)
    shoes_on_two_tables(report.replays)
    shoes_under_keys_not_given(report.replays)
    report.transfers = movements.matched()


def shoes_under_keys_not_given(replays: list[StreamReplay]) -> None:
    """Where the key opens shoes of the log (it is the deployment's), a shoe sealed under a
    key id it does not hold is a finding at every table, not only at one whose earlier shoes
    it opened (``TableReplayer`` finds those): a whole table whoever writes the events topic
    made up, shoes sealed under a key of their own with reveals to match, passed the audit.
    A key not the deployment's opens none, and the audit is incomplete, not failed."""
    if not any(replay.opened_by_key for replay in replays):
        return
    for replay in replays:
        for shoe, key_id in replay.under_other_keys.items():
            message = (
                f"shoe {shoe} is sealed under a key this audit was not given (key id {key_id}), "
                "where the key opens the log's other shoes: a key rotation's key missing from "
                "BLACKJACK_AUDIT_KEY (`blackjack audit-key` prints every one), or a shoe no "
                "handler sealed"
            )
            replay.findings.append(Finding(replay.stream_id, None, None, message))


async def events_off_their_partition(
    report: AuditReport, connection: AsyncConnection, partitions: int
) -> None:
    """A stream's events are all on its partition (its key's; the partition count never
    changes): one read from another was put there by something else than the handler, which
    reads its stream's partition only, and the store folded it where the handler never will
    (a forged payout the engine's replay of the stream cannot tell from its own)."""
    replays = {replay.stream_id: replay for replay in report.replays}
    for stream_id, partition, first, count in await queries.event_partitions(connection):
        home = partition_for(stream_id, partitions)
        if partition == home:
            continue
        message = (
            f"{count} event(s) from sequence {first} read from partition {partition}, not the "
            f"stream's partition {home}: not written by the handler"
        )
        replay = replays.get(stream_id)
        if replay is None:  # a stream with no view: its events are folded all the same
            replay = StreamReplay(stream_id)
            report.replays.append(replay)
            replays[stream_id] = replay
        replay.findings.append(Finding(stream_id, first, None, message))


def shoes_on_two_tables(replays: list[StreamReplay]) -> None:
    """A shoe's commitment is on one table only: the same order dealt at a second table would
    be known to whoever saw it revealed at the first (each replay finds a repeat at its own
    table)."""
    first: dict[str, tuple[str, int]] = {}
    for replay in replays:
        for shoe in replay.shoes.values():
            table, number = first.setdefault(shoe.commitment, (replay.stream_id, shoe.shoe))
            if table != replay.stream_id:
                message = f"shoe {shoe.shoe} has the commitment of {table}'s shoe {number}"
                replay.findings.append(Finding(replay.stream_id, None, None, message))


async def _pending(
    bootstrap: str, topic: str, positions: dict[Position, int], security: KafkaSecurity
) -> tuple[dict[Position, int], int]:
    """Records past the live positions, per partition; and how many partitions the topic has."""
    counts: dict[Position, int] = {}

    def count(records: list[Record]) -> None:
        for record in records:
            counts[record.position] = counts.get(record.position, 0) + 1

    start = {partition: offset for (_, partition), offset in positions.items()}
    ends = await read_topic(bootstrap, topic, count, start=start, security=security)
    return counts, len(ends)
