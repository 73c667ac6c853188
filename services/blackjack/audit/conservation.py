"""Money conservation in the read model, one snapshot of the store at a time
(``blackjack audit``'s step 3): every account and wallet adds up on its own, no balance is
negative, no money is in play at a table with no round open, and, per currency, what the
platform paid in less what it took out is where the store says it is (``MoneyTotals``).
Money between a player's wallet and the shared tables that arrived on one side more than it
left the other is a ``Crossing``: a violation unless the records the live store has not
folded yet explain it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.domain.currencies import money
from blackjack.projections import schema


@dataclass
class MoneyTotals:
    """Where the platform's money is, in one currency."""

    currency: str
    paid_in: int = 0
    """deposits from the platform: into wallets, and into single-player tables"""
    paid_out: int = 0
    """back to the platform: from wallets, and from single-player tables"""
    wallets: int = 0
    tables: int = 0
    in_play: int = 0
    in_transit: int = 0
    """between a wallet and a shared table, either way (zero once the handler is idle)"""
    house_result: int = 0
    """the players' losses minus their wins"""

    @property
    def held(self) -> int:
        """where the platform's money is, by the read model"""
        return self.wallets + self.tables + self.in_play + self.in_transit + self.house_result

    @property
    def balanced(self) -> bool:
        return self.paid_in - self.paid_out == self.held

    def imbalance(self) -> str:
        cur, net, held = self.currency, self.paid_in - self.paid_out, self.held
        return (
            f"{cur}: paid in less paid out is {money(net, cur)}, but where it is adds up to "
            f"{money(held, cur)} (off by {money(held - net, cur)})"
        )

    def __str__(self) -> str:
        cur = self.currency
        return (
            f"{cur}: paid in {money(self.paid_in, cur)} - paid out {money(self.paid_out, cur)} "
            f"= wallets {money(self.wallets, cur)} + tables {money(self.tables, cur)} + in play "
            f"{money(self.in_play, cur)} + in transit {money(self.in_transit, cur)} + house result "
            f"{money(self.house_result, cur)}  [{'ok' if self.balanced else 'UNBALANCED'}]"
        )


@dataclass(frozen=True)
class Crossing:
    """Money between a player's wallet and the shared tables that arrived on one side more
    than it left the other: a violation, unless that much arrived ahead of causes that lie in
    the records the live store has not folded yet (lag), matched transfer by transfer."""

    player_id: str
    amount: int
    currency: str
    to_tables: bool
    """the shared tables received more than the wallet sent (else the wallet received more
    than the tables paid out)"""

    def explained_by(self, ahead: Mapping[tuple[str, bool], int]) -> bool:
        """Whether the transfers matched one by one found at least this much arriving ahead
        of its cause, each cause in a stream whose partition lags (``Reconciled.ahead``):
        not a partition's lag anywhere, which a forged cash-out naming another table, or a
        junk record holding a worker back, would give."""
        return self.amount <= ahead.get((self.player_id, self.to_tables), 0)

    def __str__(self) -> str:
        amount = money(self.amount, self.currency)
        if self.to_tables:
            return f"{self.player_id}: shared tables received {amount} more than the wallet sent"
        return f"{self.player_id}: the wallet received {amount} more than the tables paid out"


@dataclass
class CountedMoney:
    """What ``count_money`` found in one snapshot of the store."""

    problems: list[str]
    """accounts and wallets that do not add up on their own"""
    totals: list[MoneyTotals]
    crossings: list[Crossing]

    def judged(
        self, ahead: Mapping[tuple[str, bool], int] | None = None
    ) -> tuple[list[str], list[Crossing]]:
        """The violations, and the crossings the lag explains (the others are violations):
        ``ahead`` as the transfers' matching found it (``Reconciled.ahead``)."""
        excused = [c for c in self.crossings if c.explained_by(ahead or {})]
        crossed = [str(c) for c in self.crossings if c not in excused]
        # Each account and wallet adding up makes each currency's sum add up: one that does
        # not is a finding of its own, not a line to read past.
        unbalanced = [total.imbalance() for total in self.totals if not total.balanced]
        return self.problems + crossed + unbalanced, excused


async def conservation(
    connection: AsyncConnection,
) -> tuple[list[str], list[MoneyTotals]]:
    """``count_money`` with nothing lagging: every crossing is a violation (a store whose
    workers have folded every record)."""
    counted = await count_money(connection)
    violations, _ = counted.judged()
    return violations, counted.totals


async def count_money(connection: AsyncConnection) -> CountedMoney:
    """Every account and wallet adds up; money between wallets and tables is never negative;
    and per currency, what the platform paid in less what it took out is where it says."""
    a, w, t = schema.accounts, schema.wallets, schema.table_views
    open_tables = {
        row.stream_id
        for row in (await connection.execute(select(t.c.stream_id, t.c.view))).all()
        if row.view.get("round_open")
    }
    accounts = (await connection.execute(select(a).order_by(a.c.stream_id, a.c.player_id))).all()
    wallets = {
        row.player_id: row
        for row in (await connection.execute(select(w).order_by(w.c.stream_id))).all()
    }
    currencies = {row.currency for row in accounts}
    only = next(iter(currencies)) if len(currencies) == 1 else "(wallets)"
    totals: dict[str, MoneyTotals] = {}
    problems: list[str] = []
    crossings: list[Crossing] = []
    to_tables: dict[str, int] = {}
    from_tables: dict[str, int] = {}
    # a player's currency at the shared tables, else their wallet's: where what is between
    # them is counted (one currency, on both sides of the sum)
    currency_of: dict[str, str] = {}
    for row in accounts:
        problems += _account_problems(row, row.stream_id in open_tables)
        total = totals.setdefault(row.currency, MoneyTotals(row.currency))
        total.tables += row.available
        total.in_play += row.in_play
        total.house_result += row.lost - row.won
        if row.funded_by_wallet:
            to_tables[row.player_id] = to_tables.get(row.player_id, 0) - row.deposited
            back = row.withdrawn + row.cashed_out
            from_tables[row.player_id] = from_tables.get(row.player_id, 0) + back
            currency_of[row.player_id] = row.currency
        else:
            total.paid_in += row.deposited
            total.paid_out += row.withdrawn + row.cashed_out
    for player_id, row in wallets.items():
        held = row.deposited - row.withdrawn - row.bought_in + row.refunded + row.cashed_in
        currency = row.currency or currency_of.get(player_id, only)
        currency_of.setdefault(player_id, currency)
        if held != row.balance:
            problems.append(
                f"wallet of {player_id}: its movements leave {money(held, currency)}, its "
                f"balance is {money(row.balance, currency)}"
            )
        if row.balance < 0:
            problems.append(
                f"wallet of {player_id}: negative balance {money(row.balance, currency)}"
            )
        total = totals.setdefault(currency, MoneyTotals(currency))
        total.paid_in += row.deposited
        total.paid_out += row.withdrawn
        total.wallets += row.balance
        to_tables[player_id] = to_tables.get(player_id, 0) + row.bought_in - row.refunded
        from_tables[player_id] = from_tables.get(player_id, 0) - row.cashed_in
    for player_id in sorted(set(to_tables) | set(from_tables)):
        going, coming = to_tables.get(player_id, 0), from_tables.get(player_id, 0)
        currency = currency_of.get(player_id, only)
        if going < 0:
            crossings.append(Crossing(player_id, -going, currency, to_tables=True))
        if coming < 0:
            crossings.append(Crossing(player_id, -coming, currency, to_tables=False))
        totals.setdefault(currency, MoneyTotals(currency)).in_transit += going + coming
    return CountedMoney(problems, [totals[c] for c in sorted(totals)], crossings)


def _account_problems(row: Any, round_open: bool) -> list[str]:
    who, cur = f"{row.player_id} at {row.stream_id}", row.currency
    problems = []
    paid_in = row.deposited - row.withdrawn - row.cashed_out
    held = row.available + row.in_play + row.lost - row.won
    if paid_in != held:
        problems.append(
            f"{who}: deposits - withdrawals = {money(paid_in, cur)}, but balance + in play + "
            f"losses - wins = {money(held, cur)} (off by {money(held - paid_in, cur)})"
        )
    if row.available < 0 or row.in_play < 0:
        problems.append(
            f"{who}: negative money (balance {money(row.available, cur)}, in play "
            f"{money(row.in_play, cur)})"
        )
    if row.in_play and not round_open:
        problems.append(f"{who}: {money(row.in_play, cur)} in play with no round open")
    return problems
