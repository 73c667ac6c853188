"""The query API's revocations of players' tokens: per player, the moment before which the
tokens issued are refused (``api.revocations``). Not derived from the events: an operator
sets it; a row is dropped once every token it refuses has expired.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

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


def downgrade() -> None:
    op.drop_table("token_revocations")
