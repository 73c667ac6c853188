"""The query API's revocations of players' tokens: per player, the moment before which the
tokens issued are refused (``api.revocations``). Not derived from the events: an operator
sets it; a row is dropped once every token it refuses has expired.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "token_revocations",
        sa.Column("player_id", sa.String(128), primary_key=True),
        sa.Column(
            "not_before",
            sa.BigInteger,
            nullable=False,
            comment="Unix seconds: the player's tokens issued (iat) before it are refused",
        ),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=False),
        comment="the query API's revocations of players' tokens (0008): set by an operator, not "
        "derived from the events; a row is dropped once every token it refuses has expired",
    )


DROP_ANYWAY = "drop_token_revocations"
"""``-x drop_token_revocations=yes``: downgrade past here though revocations are held."""


def downgrade() -> None:
    # Not derived from the events: dropped, every revocation is lost and a revoked player's
    # token works again, which no audit sees (an operations review: the documented repair of
    # migrations 0005 and 0006, a downgrade past them and an upgrade, did so). Refused while
    # any is held (or, writing a script with --sql, whether any is cannot be read), unless told.
    if context.get_x_argument(as_dictionary=True).get(DROP_ANYWAY) == "yes":
        op.drop_table("token_revocations")
        return
    held = (
        "an unknown number of"
        if context.is_offline_mode()
        else op.get_bind().execute(sa.text("SELECT count(*) FROM token_revocations")).scalar_one()
    )
    if held:
        raise RuntimeError(
            f"downgrade below 0008 refused: token_revocations holds {held} revocation(s) of "
            "players' tokens, which no fold of the events makes again (a revoked token would "
            "work again); fold the read model again into a new database instead, "
            "`blackjack projections rebuild --revocations-from` (docs/operations.md), or pass "
            f"-x {DROP_ANYWAY}=yes to drop them"
        )
    op.drop_table("token_revocations")
