"""``blackjack audit``: is the live read model what the event log says it should be?

1. Snapshot the live store: its positions and its canonical dump, in one read transaction.
2. Rebuild a scratch store from offset 0 of the topic up to exactly those positions, with the
   same projection code, and compare the two dumps row by row.
3. Check money conservation in the live store: for every account,
   ``deposited - withdrawn - cashed_out = available + in_play + (lost - won)``, no negative
   balance, and no money in play at a table with no round open.
4. Replay every table's events through the pure engine (``audit.replay``): balances, stakes,
   cards against the committed shoe, the dealer's drawing, every payout derived again.

Every difference, violation and finding is reported; any one makes the audit fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.audit.replay import Finding, StreamReplay, money, replay_stream
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections import queries, schema
from blackjack.projections.dump import Difference, differences, dump
from blackjack.projections.rebuild import read_topic, rebuild
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import Position, ProjectionWriter, Record, read_positions


@dataclass
class CurrencyTotals:
    currency: str
    deposited: int = 0
    withdrawn: int = 0
    cashed_out: int = 0
    available: int = 0
    in_play: int = 0
    house_result: int = 0  # lost - won: what the players' losses left with the house

    @property
    def balanced(self) -> bool:
        paid_in = self.deposited - self.withdrawn - self.cashed_out
        return paid_in == self.available + self.in_play + self.house_result


@dataclass
class AuditReport:
    topic: str
    positions: dict[Position, int] = field(default_factory=dict)
    pending: dict[Position, int] = field(default_factory=dict)
    """committed records past the live positions (the projection's lag, not a failure)"""
    events: int = 0
    differences: list[Difference] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    totals: list[CurrencyTotals] = field(default_factory=list)
    replays: list[StreamReplay] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.replays for f in r.findings]

    @property
    def ok(self) -> bool:
        return not (self.differences or self.violations or self.findings)

    def render(self) -> str:
        rounds = sum(len(r.rounds) for r in self.replays)
        checks = sum(r.checks for r in self.replays)
        lines = [
            f"Audit of {self.topic}: {self.events} events, {len(self.replays)} tables, "
            f"{rounds} rounds",
            "Positions (live = rebuilt up to): "
            + (", ".join(f"{p}:{o}" for (_, p), o in sorted(self.positions.items())) or "none"),
        ]
        if any(self.pending.values()):
            behind = ", ".join(f"{p}:{n}" for (_, p), n in sorted(self.pending.items()) if n)
            lines.append(f"Note: events not yet folded into the live store (lag): {behind}")
        lines.append(f"\nRebuild from offset 0 vs live: {len(self.differences)} difference(s)")
        lines += [f"  {d}" for d in self.differences]
        lines.append(f"\nMoney conservation: {len(self.violations)} violation(s)")
        for t in self.totals:
            lines.append(
                f"  {t.currency}: deposited {money(t.deposited)} - withdrawn "
                f"{money(t.withdrawn)} - cashed out {money(t.cashed_out)} = balances "
                f"{money(t.available)} + in play {money(t.in_play)} + house result "
                f"{money(t.house_result)}  [{'ok' if t.balanced else 'UNBALANCED'}]"
            )
        lines += [f"  {v}" for v in self.violations]
        unverified = [f"{r.stream_id}: {r.stopped}" for r in self.replays if r.stopped is not None]
        lines.append(
            f"\nEngine replay: {checks} checks, {len(self.findings)} finding(s)"
            + (f", {len(unverified)} table(s) replayed only in part" if unverified else "")
        )
        lines += [f"  {f}" for f in self.findings]
        lines += [f"  (not verified past) {u}" for u in unverified]
        lines.append("\nAUDIT PASSED" if self.ok else "\nAUDIT FAILED")
        return "\n".join(lines)


async def run_audit(
    live: ProjectionStore,
    scratch: ProjectionStore,
    bootstrap: str,
    topic: str,
    seal: ShoeSeal | None = None,
) -> AuditReport:
    report = AuditReport(topic)
    async with live.reading() as connection:
        report.positions = await read_positions(connection, topic)
        expected_live = await dump(connection)
        report.violations, report.totals = await conservation(connection)
    writer = ProjectionWriter(scratch)
    await rebuild(writer, bootstrap, topic, stop=report.positions)
    report.pending = await _pending(bootstrap, topic, report.positions)
    async with scratch.reading() as connection:
        rebuilt = await dump(connection)
        for stream_id in await queries.stream_ids(connection):
            wires = await queries.stream_envelopes(connection, stream_id)
            report.events += len(wires)
            report.replays.append(replay_stream(wires, seal, stream_id))
    report.differences = differences(rebuilt, expected_live)
    return report


async def _pending(
    bootstrap: str, topic: str, positions: dict[Position, int]
) -> dict[Position, int]:
    counts: dict[Position, int] = {}

    def count(records: list[Record]) -> None:
        for record in records:
            counts[record.position] = counts.get(record.position, 0) + 1

    start = {partition: offset for (_, partition), offset in positions.items()}
    await read_topic(bootstrap, topic, count, start=start)
    return counts


async def conservation(
    connection: AsyncConnection,
) -> tuple[list[str], list[CurrencyTotals]]:
    a, t = schema.accounts, schema.table_views
    open_tables = {
        row.stream_id
        for row in (await connection.execute(select(t.c.stream_id, t.c.view))).all()
        if row.view.get("round_open")
    }
    violations: list[str] = []
    totals: dict[str, CurrencyTotals] = {}
    query = select(a).order_by(a.c.stream_id, a.c.player_id)
    for row in (await connection.execute(query)).all():
        who = f"{row.player_id} at {row.stream_id}"
        paid_in = row.deposited - row.withdrawn - row.cashed_out
        held = row.available + row.in_play + row.lost - row.won
        if paid_in != held:
            violations.append(
                f"{who}: deposits - withdrawals = {money(paid_in)}, but balance + in play + "
                f"losses - wins = {money(held)} (off by {money(held - paid_in)})"
            )
        if row.available < 0 or row.in_play < 0:
            violations.append(
                f"{who}: negative money (balance {money(row.available)}, "
                f"in play {money(row.in_play)})"
            )
        if row.in_play and row.stream_id not in open_tables:
            violations.append(f"{who}: {money(row.in_play)} in play with no round open")
        total = totals.setdefault(row.currency, CurrencyTotals(row.currency))
        total.deposited += row.deposited
        total.withdrawn += row.withdrawn
        total.cashed_out += row.cashed_out
        total.available += row.available
        total.in_play += row.in_play
        total.house_result += row.lost - row.won
    return violations, [totals[c] for c in sorted(totals)]
