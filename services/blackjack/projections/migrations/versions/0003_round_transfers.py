"""The money a player paid in or took out at the table during a round (game recall).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None
# its downgrade drops a column, which SQLite does by copying the table as the live database
# has it: `downgrade --sql` on SQLite refuses it (env.py)
sqlite_downgrade_renders_offline = False

_MOVED = "paid in / taken out at the table during the round (not wagers or payouts)"


def upgrade() -> None:
    # 0 for the rounds folded before this revision: only a re-fold of the log into an empty
    # store fills them in (docs/projections.md, "Upgrading the read model").
    with op.batch_alter_table("round_players") as batch:
        for name in ("deposited", "withdrawn"):
            batch.add_column(
                sa.Column(name, sa.BigInteger, nullable=False, server_default="0", comment=_MOVED)
            )


def downgrade() -> None:
    with op.batch_alter_table("round_players") as batch:
        batch.drop_column("withdrawn")
        batch.drop_column("deposited")
