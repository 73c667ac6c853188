"""When a table the player's wallet funds last paid them back (``accounts.paid_out_at``): the
earliest a payout still on its way to the wallet can have left, which the projection workers
export as the money in transit to wallets (``projections/transit.py``).

The accounts already folded get it from the events already folded (``events``), as the
projector folds it: the time of the player's last ``SeatLeft`` with a balance returned or
``FundsWithdrawn`` with an amount, at a table the wallet funds. Each such table's payouts are
read from the newest back, only as far as the last payout of each of its players paid any.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None
# its downgrade drops a column, which SQLite does by copying the table as the live database
# has it: `downgrade --sql` on SQLite refuses it (env.py)
sqlite_downgrade_renders_offline = False
renders_offline = False  # its upgrade reads the events: `--sql` refuses it (env.py)

_PAID_OUT_AT = "a wallet-funded table's last payout to the wallet (0012); null: none"
_PAYOUTS = {"SeatLeft": "balance_returned", "FundsWithdrawn": "amount"}
_PAGE = 1000

_accounts = sa.table(
    "accounts",
    sa.column("stream_id", sa.String),
    sa.column("player_id", sa.String),
    sa.column("funded_by_wallet", sa.Boolean),
    sa.column("withdrawn", sa.BigInteger),
    sa.column("cashed_out", sa.BigInteger),
    sa.column("paid_out_at", sa.DateTime(timezone=True)),
)
_events = sa.table(
    "events",
    sa.column("stream_id", sa.String),
    sa.column("sequence", sa.BigInteger),
    sa.column("type", sa.String),
    sa.column("occurred_at", sa.DateTime(timezone=True)),
    sa.column("envelope", sa.Text),
)


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(
            sa.Column(
                "paid_out_at", sa.DateTime(timezone=True), nullable=True, comment=_PAID_OUT_AT
            )
        )
    connection = op.get_bind()
    a = _accounts
    paid: dict[str, set[str]] = {}
    for stream_id, player_id in connection.execute(
        sa.select(a.c.stream_id, a.c.player_id).where(
            a.c.funded_by_wallet.is_(True), a.c.withdrawn + a.c.cashed_out > 0
        )
    ):
        paid.setdefault(stream_id, set()).add(player_id)
    for stream_id, players in sorted(paid.items()):
        for player_id, at in _last_payouts(connection, stream_id, players).items():
            connection.execute(
                sa.update(a)
                .where(a.c.stream_id == stream_id, a.c.player_id == player_id)
                .values(paid_out_at=at)
            )


def _last_payouts(connection: Any, stream_id: str, players: set[str]) -> dict[str, datetime]:
    """Each player's last payout at the table that paid anything, from its events newest
    first (a player none of whose events do is left out: null)."""
    found: dict[str, datetime] = {}
    before: int | None = None
    e = _events
    while len(found) < len(players):
        query = (
            sa.select(e.c.sequence, e.c.type, e.c.occurred_at, e.c.envelope)
            .where(e.c.stream_id == stream_id, e.c.type.in_(list(_PAYOUTS)))
            .order_by(e.c.sequence.desc())
            .limit(_PAGE)
        )
        if before is not None:
            query = query.where(e.c.sequence < before)
        rows = connection.execute(query).all()
        if not rows:
            break
        before = rows[-1].sequence
        for row in rows:
            data = json.loads(row.envelope)["data"]
            player_id = data.get("player_id")
            if player_id in players and player_id not in found and data[_PAYOUTS[row.type]] > 0:
                found[player_id] = row.occurred_at
    return found


def downgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("paid_out_at")
