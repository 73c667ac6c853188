"""Money in transit between wallets and tables, as the read model shows it, each way:

- ``to_table``: buy-ins a wallet sent that no table has confirmed or refunded yet
  (``wallets.in_transit``);
- ``to_wallet``: payouts a table the wallet funds made (a withdrawal, the balance of a player
  who left: ``accounts.withdrawn + cashed_out``) that the wallet has not received from that
  table (``wallets.cashed_in_from``), table by table; a wallet whose partition the workers
  have folded further than the table's shows a payout received before it was made, which
  counts as none, and while it does, the player's other tables are not looked at (the
  players owed some are first found by their sums: a scan of every player's tables each
  minute otherwise), so another table's stuck payout shows once the partitions are in step.

A step is answered within a second; money still in transit after minutes is a step stuck (a
handler refusing the service's signature, a table that never answered: docs/operations.md,
"Money stuck between a wallet and a table"), which ``blackjack redrive`` sends again. The
refusal's own alert clears after 15 minutes while the money stays where it is, so the workers
export what the read model holds, and ``BlackjackMoneyInTransit`` fires while it stays (for a
payout, not while the workers catch up: the table's partition folded ahead of the wallet's
shows a payout the wallet has received as on its way).

Each way has a time money has waited since: for buy-ins, the earliest a wallet sent of those
it holds pending (``Transfer.sent_at``: exact; before, its wallet's last change, which a
player who went on using the wallet moved forward, and the alert cleared while the money was
still stuck: a runbook drill); for payouts, the last payout to the player of a table that
owes them some (``accounts.paid_out_at``: the one still on its way was made at or before it,
so a lower bound, which only a later payout of the same table to the player moves forward).
Every worker of a store reads the whole tables (the rows are not split by partition), so their
gauges agree, each as of its last read (a minute apart at most): aggregate them with ``max``,
not ``sum``. Every currency a wallet holds has its series each way, 0 when nothing is in
transit; the time only while something is. A worker that cannot read the store three times in
a row drops its series until it can (``positions.TRANSIT_KEPT_FAILURES``): a time it kept
would grow old and page for money no longer stuck.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.projections import schema
from blackjack.projections.ids import utc
from blackjack.projections.store import in_chunks
from blackjack.projections.wallets import Transfer

TO_TABLE = "to_table"
TO_WALLET = "to_wallet"


@dataclass(frozen=True)
class InTransit:
    """The money in transit one way in one currency."""

    direction: str
    """``TO_TABLE`` (buy-ins) or ``TO_WALLET`` (payouts)"""
    currency: str
    amount: int
    """minor units"""
    wallets: int
    """the wallets holding some on its way from them (buy-ins) or to them (payouts)"""
    oldest: datetime | None
    """the earliest time the money has waited at least since (UTC); None if none waits"""


async def money_in_transit(connection: AsyncConnection) -> list[InTransit]:
    """The money in transit each way in each currency a wallet holds (0 where none is) or a
    payout on its way is in.

    Two scans, once every ``positions.TRANSIT_EVERY`` lag watches (a minute): of ``wallets``
    (no index on ``in_transit``), about as costly as counting the wallets, and of the accounts
    at tables wallets fund, summed player by player; then the tables of the players owed some."""
    buy_ins = await _buy_ins(connection)
    cash_outs = await _cash_outs(connection)
    currencies = sorted(buy_ins.keys() | cash_outs.keys())
    nothing = _Sum()
    return [
        (found.get(currency) or nothing).transit(direction, currency)
        for direction, found in ((TO_TABLE, buy_ins), (TO_WALLET, cash_outs))
        for currency in currencies
    ]


@dataclass
class _Sum:
    amount: int = 0
    wallets: int = 0
    oldest: datetime | None = None

    def since(self, at: datetime) -> None:
        if self.oldest is None or utc(at) < self.oldest:
            self.oldest = utc(at)

    def transit(self, direction: str, currency: str) -> InTransit:
        return InTransit(direction, currency, self.amount, self.wallets, self.oldest)


async def _buy_ins(connection: AsyncConnection) -> dict[str, _Sum]:
    """Every wallet currency's buy-ins in transit, since the earliest sent (its wallet's
    ``pending``: read for the wallets holding some only)."""
    wallets = schema.wallets
    holding = wallets.c.in_transit > 0
    rows = await connection.execute(
        select(
            wallets.c.currency,
            func.sum(wallets.c.in_transit),
            func.sum(case((holding, 1), else_=0)),
        )
        .where(wallets.c.currency.is_not(None))  # set by a wallet's first deposit
        .group_by(wallets.c.currency)
    )
    found = {currency: _Sum(int(amount), int(count)) for currency, amount, count in rows}
    for currency, pending in await connection.execute(
        select(wallets.c.currency, wallets.c.pending).where(holding)
    ):
        for transfer in pending:  # (a currency's first wallet since the sums: counted next read)
            found.setdefault(currency, _Sum()).since(Transfer.model_validate(transfer).sent_at)
    return found


async def _cash_outs(connection: AsyncConnection) -> dict[str, _Sum]:
    """The players whose funded tables paid them more than their wallet received, by the
    tables' currency (the wallet's: a table declines a buy-in in another): found by their
    sums, then told table by table (``wallets.cashed_in_from``), each table owing since its
    last payout to the player."""
    a, w = schema.accounts, schema.wallets
    paid = (
        select(a.c.player_id, func.sum(a.c.withdrawn + a.c.cashed_out).label("paid"))
        .where(a.c.funded_by_wallet.is_(True))
        .group_by(a.c.player_id)
        .subquery()
    )
    owed = paid.c.paid - func.coalesce(w.c.cashed_in, 0)
    owing = select(paid.c.player_id, w.c.cashed_in_from).select_from(
        paid.outerjoin(w, w.c.player_id == paid.c.player_id)
    )
    received: dict[str, dict[str, int] | None] = {
        player_id: from_tables
        for player_id, from_tables in await connection.execute(owing.where(owed > 0))
    }
    found: dict[str, _Sum] = {}
    counted: set[tuple[str, str]] = set()
    for some in in_chunks(sorted(received)):
        tables = await connection.execute(
            select(
                a.c.player_id,
                a.c.stream_id,
                a.c.currency,
                a.c.withdrawn + a.c.cashed_out,
                a.c.paid_out_at,
            ).where(a.c.funded_by_wallet.is_(True), a.c.player_id.in_(some))
        )
        for player_id, table_id, currency, paid_out, at in tables:
            waiting = paid_out - (received.get(player_id) or {}).get(table_id, 0)
            if waiting <= 0:
                continue  # all received, or received before this store folded the payout
            total = found.setdefault(currency, _Sum())
            if (player_id, currency) not in counted:
                counted.add((player_id, currency))
                total.wallets += 1
            total.amount += int(waiting)
            if at is not None:
                total.since(at)
    return found
