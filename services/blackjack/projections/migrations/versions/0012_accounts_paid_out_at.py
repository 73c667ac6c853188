"""The times money in transit between wallets and tables left, which the projection workers
export (``projections/transit.py``):

- ``accounts.paid_out_at``: when a table the player's wallet funds last paid them back, the
  earliest a payout still on its way to the wallet can have left;
- ``sent_at`` of each buy-in a wallet holds pending (``wallets.pending``, a document): when the
  wallet sent it;
- ``wallets.cashed_in_from``: what each table paid the wallet back (a document, table id to
  minor units), so that a table's payout the wallet has not received is told from the
  others'.

The rows already folded get them from the events already folded (``events``), as the
projector folds them: the time of the player's last ``SeatLeft`` with a balance returned or
``FundsWithdrawn`` with an amount, at a table the wallet funds, each such table's payouts read
from the newest back only as far as the last payout of each of its players paid any; and the
time of each pending buy-in's ``BuyInSent``, each wallet holding one read from the newest back
only as far as its earliest pending; the sums of each wallet's ``CashOutReceived`` by table
(every one of a wallet that received any). The downgrade takes ``sent_at`` out of the documents
again (the release before refuses a field it does not know).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

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
_document = sa.JSON().with_variant(JSONB(), "postgresql")  # as the schema's Document
_wallets = sa.table(
    "wallets",
    sa.column("stream_id", sa.String),
    sa.column("in_transit", sa.BigInteger),
    sa.column("cashed_in", sa.BigInteger),
    sa.column("pending", _document),
    sa.column("cashed_in_from", _document),
)
_CASHED_IN_FROM = "what each table paid back: table id -> minor units (0012)"
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
    for stream_id, pending in _holding(connection):
        sent = _sent(connection, stream_id, {t["transfer"] for t in pending})
        _set_pending(connection, stream_id, [t | {"sent_at": sent[t["transfer"]]} for t in pending])
    with op.batch_alter_table("wallets") as batch:
        batch.add_column(
            sa.Column(
                "cashed_in_from",
                _document,
                nullable=False,
                server_default=sa.text("'{}'"),
                comment=_CASHED_IN_FROM,
            )
        )
    w = _wallets
    for (stream_id,) in connection.execute(sa.select(w.c.stream_id).where(w.c.cashed_in > 0)).all():
        by_table: dict[str, int] = {}
        for row in _newest_first(connection, stream_id, ["CashOutReceived"]):
            data = json.loads(row.envelope)["data"]
            by_table[data["table_id"]] = by_table.get(data["table_id"], 0) + data["amount"]
        connection.execute(
            sa.update(w).where(w.c.stream_id == stream_id).values(cashed_in_from=by_table)
        )


def _holding(connection: Any) -> list[tuple[str, list[dict[str, Any]]]]:
    """The wallets holding buy-ins pending, and those buy-ins."""
    w = _wallets
    rows = connection.execute(sa.select(w.c.stream_id, w.c.pending).where(w.c.in_transit > 0))
    return [
        (stream_id, json.loads(pending) if isinstance(pending, str) else pending)
        for stream_id, pending in rows
    ]


def _set_pending(connection: Any, stream_id: str, pending: list[dict[str, Any]]) -> None:
    w = _wallets
    connection.execute(sa.update(w).where(w.c.stream_id == stream_id).values(pending=pending))


def _sent(connection: Any, stream_id: str, transfers: set[int]) -> dict[int, str]:
    """When the wallet sent each of these buy-ins, as the fold writes it (ISO 8601, UTC, Z)."""
    found: dict[int, str] = {}
    for row in _newest_first(connection, stream_id, ["BuyInSent"]):
        transfer = json.loads(row.envelope)["data"]["transfer"]
        if transfer in transfers:
            found[transfer] = _iso(row.occurred_at)
            if len(found) == len(transfers):
                return found
    missing = sorted(transfers - set(found))
    raise RuntimeError(f"{stream_id}: no BuyInSent folded of its pending buy-ins {missing}")


def _iso(moment: datetime) -> str:
    """As pydantic writes a time in UTC in JSON (a naive one, SQLite's, is UTC already)."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.isoformat().replace("+00:00", "Z")


def _last_payouts(connection: Any, stream_id: str, players: set[str]) -> dict[str, datetime]:
    """Each player's last payout at the table that paid anything, from its events newest
    first (a player none of whose events do is left out: null)."""
    found: dict[str, datetime] = {}
    for row in _newest_first(connection, stream_id, list(_PAYOUTS)):
        data = json.loads(row.envelope)["data"]
        player_id = data.get("player_id")
        if player_id in players and player_id not in found and data[_PAYOUTS[row.type]] > 0:
            found[player_id] = row.occurred_at
            if len(found) == len(players):
                break
    return found


def _newest_first(connection: Any, stream_id: str, types: list[str]) -> Iterator[Any]:
    """The stream's folded events of these types, newest first, read a page at a time."""
    e = _events
    before: int | None = None
    while True:
        query = (
            sa.select(e.c.sequence, e.c.type, e.c.occurred_at, e.c.envelope)
            .where(e.c.stream_id == stream_id, e.c.type.in_(types))
            .order_by(e.c.sequence.desc())
            .limit(_PAGE)
        )
        if before is not None:
            query = query.where(e.c.sequence < before)
        rows = connection.execute(query).all()
        if not rows:
            return
        yield from rows
        before = rows[-1].sequence


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":  # in SQL: a script (--sql) renders it
        op.execute(_WITHOUT_SENT_AT)
    else:  # SQLite's documents in Python (its downgrade does not render as a script anyway)
        connection = op.get_bind()
        for stream_id, pending in _holding(connection):
            _set_pending(connection, stream_id, [_without(t, "sent_at") for t in pending])
    with op.batch_alter_table("wallets") as batch:
        batch.drop_column("cashed_in_from")
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("paid_out_at")


_WITHOUT_SENT_AT = """
UPDATE wallets SET pending = (
    SELECT coalesce(jsonb_agg(t.transfer - 'sent_at' ORDER BY t.n), '[]'::jsonb)
    FROM jsonb_array_elements(wallets.pending) WITH ORDINALITY AS t(transfer, n)
)
WHERE in_transit > 0
"""


def _without(document: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != key}
