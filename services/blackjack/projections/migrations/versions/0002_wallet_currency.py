"""A wallet's currency (set by its first deposit).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None
# its downgrade drops a column, which SQLite does by copying the table as the live database
# has it: `downgrade --sql` on SQLite refuses it (env.py)
sqlite_downgrade_renders_offline = False


def upgrade() -> None:
    # Nullable: a wallet folded before this revision has none until a rebuild from the log.
    with op.batch_alter_table("wallets") as batch:
        batch.add_column(
            sa.Column("currency", sa.String(8), nullable=True, comment="set by the first deposit")
        )


def downgrade() -> None:
    with op.batch_alter_table("wallets") as batch:
        batch.drop_column("currency")
