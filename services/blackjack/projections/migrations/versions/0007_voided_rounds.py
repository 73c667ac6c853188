"""The rounds an operator voided for a malfunction (``RoundVoided``), counted per table and
day in ``game_days``. No round was voided before this release, so every row starts at 0.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_COMMENT = "rounds voided for a malfunction, wagers returned (0007)"


def upgrade() -> None:
    with op.batch_alter_table("game_days") as batch:
        batch.add_column(
            sa.Column("voided", sa.BigInteger, nullable=False, server_default="0", comment=_COMMENT)
        )


def downgrade() -> None:
    with op.batch_alter_table("game_days") as batch:
        batch.drop_column("voided")
