"""Money in transit between wallets and tables, as the read model shows it: buy-ins a wallet
sent that no table has confirmed or refunded yet (``wallets.in_transit``).

A buy-in is answered within a second; money still in transit after minutes is a step stuck
(a handler refusing the service's signature, a table that never answered: docs/operations.md,
"Money stuck between a wallet and a table"), which ``blackjack redrive`` sends again. The
refusal's own alert clears after 15 minutes while the money stays where it is, so the workers
export what the read model holds, and ``BlackjackMoneyInTransit`` fires while it stays.

A wallet's ``updated_at`` is its last event: a wallet that has held money in transit since
then has held it at least that long (its buy-in was sent at or before), so the oldest such
time is a lower bound of how long money has waited; a wallet the player goes on using moves it
forward. Every worker of a store reads the whole table (its wallets are not split by
partition), so their gauges agree, each as of its last read (a minute apart at most):
aggregate them with ``max``, not ``sum``. Every currency a wallet holds has its series, 0 when
nothing is in transit in it; the time only while something is. A worker that
cannot read the store three times in a row drops its series until it can
(``positions.TRANSIT_KEPT_FAILURES``): a time it kept would grow old and page for money no
longer stuck.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.projections import schema
from blackjack.projections.ids import utc


@dataclass(frozen=True)
class InTransit:
    """The money in transit in one currency."""

    currency: str
    amount: int
    """minor units"""
    wallets: int
    """the wallets holding some"""
    oldest: datetime | None
    """the earliest last change of a wallet holding money in transit (UTC); None if none"""


async def money_in_transit(connection: AsyncConnection) -> list[InTransit]:
    """The money in transit in each currency a wallet holds (0 where none is).

    A scan of ``wallets`` (no index on ``in_transit``): about as costly as counting the
    wallets, once every ``positions.TRANSIT_EVERY`` lag watches (a minute)."""
    wallets = schema.wallets
    holding = wallets.c.in_transit > 0
    rows = await connection.execute(
        select(
            wallets.c.currency,
            func.sum(wallets.c.in_transit),
            func.sum(case((holding, 1), else_=0)),
            func.min(case((holding, wallets.c.updated_at))),
        )
        .where(wallets.c.currency.is_not(None))  # set by a wallet's first deposit
        .group_by(wallets.c.currency)
        .order_by(wallets.c.currency)
    )
    return [
        InTransit(
            currency=currency,
            amount=int(amount),
            wallets=int(count),
            oldest=None if oldest is None else utc(oldest),
        )
        for currency, amount, count, oldest in rows
    ]
