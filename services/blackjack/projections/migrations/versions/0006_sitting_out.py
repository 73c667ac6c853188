"""Whether a seated player sits out, and the rounds they have sat out in a row (the table
answer: an operator sees who sits out, and how soon the table's rules free the seat).

The accounts already folded get their values from the events already folded (``events``),
as the projector folds them: a player who is not seated does not sit out; a seated player
sits out when the last of their bets, passes, seat and time-outs that left them out of a
round is such a time-out, and has sat out, where the table's rules free such a seat, the
rounds dealt while the table was not suspended, and not voided (by a ``RoundVoided`` of
version 2: a version 1's handler counted the round), since the first of those time-outs. Each
table's events are read from the newest back, only as far as its seated players' last bet,
pass or seat. A seated player whose events do not say (none found) stays null: not known.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None
# its downgrade drops a column, which SQLite does by copying the table as the live database
# has it: `downgrade --sql` on SQLite refuses it (env.py)
sqlite_downgrade_renders_offline = False
renders_offline = False  # its upgrade reads the events: `--sql` refuses it (env.py)

_SITTING_OUT = "left out by the betting clock, no bet or pass since; null: not known (0006)"
_ROUNDS_SAT_OUT = "rounds dealt in a row while sitting out, where counted; null: not known"
_BACK_IN = ("SeatTaken", "BetPlaced", "PlayerPassed")
_TYPES = (
    *_BACK_IN,
    "PlayerTimedOut",
    "DealStarted",
    "TableSuspended",
    "TableResumed",
    "RoundVoided",
)
_PAGE = 1000

_accounts = sa.table(
    "accounts",
    sa.column("stream_id", sa.String),
    sa.column("player_id", sa.String),
    sa.column("seated", sa.Boolean),
    sa.column("sitting_out", sa.Boolean),
    sa.column("rounds_sat_out", sa.Integer),
)
_events = sa.table(
    "events",
    sa.column("stream_id", sa.String),
    sa.column("sequence", sa.BigInteger),
    sa.column("type", sa.String),
    sa.column("envelope", sa.Text),
)
_views = sa.table("table_views", sa.column("stream_id", sa.String), sa.column("view", sa.JSON))


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("sitting_out", sa.Boolean, nullable=True, comment=_SITTING_OUT))
        batch.add_column(
            sa.Column("rounds_sat_out", sa.Integer, nullable=True, comment=_ROUNDS_SAT_OUT)
        )
    connection = op.get_bind()
    a = _accounts
    connection.execute(
        sa.update(a).where(a.c.seated.is_(False)).values(sitting_out=False, rounds_sat_out=0)
    )
    seated: dict[str, set[str]] = {}
    for stream_id, player_id in connection.execute(
        sa.select(a.c.stream_id, a.c.player_id).where(a.c.seated.is_(True))
    ):
        seated.setdefault(stream_id, set()).add(player_id)
    for stream_id, players in sorted(seated.items()):
        for player_id, (out, rounds) in _refold(connection, stream_id, players).items():
            connection.execute(
                sa.update(a)
                .where(a.c.stream_id == stream_id, a.c.player_id == player_id)
                .values(sitting_out=out, rounds_sat_out=rounds)
            )


def _refold(connection: Any, stream_id: str, players: set[str]) -> dict[str, tuple[bool, int]]:
    """Each seated player's (sitting out, rounds sat out), from the stream's events read
    newest first; a player none of whose events say is left out (null: not known)."""
    view = connection.execute(
        sa.select(_views.c.view).where(_views.c.stream_id == stream_id)
    ).scalar_one_or_none()
    if isinstance(view, str):
        view = json.loads(view)
    view = view or {}
    limit = (view.get("rules") or {}).get("seat_released_after_rounds_sat_out")
    suspended = view.get("suspended") is not None  # after the newest event; walked back below
    deals = dict.fromkeys(players, 0)  # rounds dealt unsuspended, from the newest event back
    first_out: dict[str, int] = {}  # deals counted when walking back past the earliest left_out
    found: dict[str, tuple[bool, int]] = {}
    voided: set[int] = set()  # rounds voided (seen before their deal, walking back)
    before: int | None = None
    while len(found) < len(players):
        e = _events
        query = (
            sa.select(e.c.sequence, e.c.type, e.c.envelope)
            .where(e.c.stream_id == stream_id, e.c.type.in_(_TYPES))
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
            if row.type == "TableResumed":
                suspended = True  # before it, the table was suspended
            elif row.type == "TableSuspended":
                suspended = False
            elif row.type == "RoundVoided":
                voided_round = json.loads(row.envelope)["data"]
                # a version 1's handler counted the round voided (upcast: it counts as sat out)
                if voided_round.get("version", 1) >= 2 and not voided_round.get(
                    "counts_as_round_sat_out"
                ):
                    voided.add(voided_round["round"])
            elif row.type == "DealStarted":
                # a voided round is no round sat out (the projector takes its count back)
                if voided and json.loads(row.envelope)["data"]["round"] in voided:
                    continue
                if limit is not None and not suspended:
                    for player_id in deals:
                        deals[player_id] += 1
            else:
                data = json.loads(row.envelope)["data"]
                player_id = data.get("player_id")
                if player_id not in deals:
                    continue
                if row.type == "PlayerTimedOut":
                    if data.get("sits_out"):
                        first_out[player_id] = deals[player_id]
                    continue
                # the player's last bet, pass or seat: what follows it decides
                out = player_id in first_out
                found[player_id] = (out, first_out[player_id] if out and limit is not None else 0)
                del deals[player_id]
    return found


def downgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("rounds_sat_out")
        batch.drop_column("sitting_out")
