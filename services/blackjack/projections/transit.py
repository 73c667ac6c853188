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
partition), so their gauges agree: aggregate them with ``max``, not ``sum``. A worker that
cannot read the store drops its series until it can (``metrics.transit_unread``): a time it
kept would grow old and page for money no longer stuck.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
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
    oldest: datetime
    """the earliest last change of a wallet holding money in transit (UTC)"""


async def money_in_transit(connection: AsyncConnection) -> list[InTransit]:
    """The money in transit per currency; none where nothing is in transit.

    A scan of ``wallets`` (no index on ``in_transit``): about as costly as counting the
    wallets, once every ``positions.TRANSIT_EVERY`` lag watches (a minute)."""
    wallets = schema.wallets
    currency = func.coalesce(wallets.c.currency, "")
    rows = await connection.execute(
        select(
            currency,
            func.sum(wallets.c.in_transit),
            func.count(),
            func.min(wallets.c.updated_at),
        )
        .where(wallets.c.in_transit > 0)
        .group_by(currency)
        .order_by(currency)
    )
    return [
        InTransit(currency=c, amount=int(amount), wallets=int(count), oldest=utc(oldest))
        for c, amount, count, oldest in rows
    ]
