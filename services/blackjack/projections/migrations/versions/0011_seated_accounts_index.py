"""An index of the seated players' accounts. A table keeps the account of every player who
ever sat at it (their totals stay), and each projection batch and each table view read only
the seated ones: through the primary key they read every past player's row as well (a batch
at a table 20,000 players had left took 1.1-1.4x its time at a new one: docs/projections.md).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _seated(dialect: str) -> sa.TextClause:
    # As the code's statements write it (schema.SEATED), so each planner matches the two.
    return sa.text("seated IS 1" if dialect == "sqlite" else "seated IS true")


def upgrade() -> None:
    # A plain CREATE INDEX in the migration's transaction: writes to accounts wait while it
    # is built (one row a player a table: seconds at millions).
    seated = _seated(op.get_context().dialect.name)
    op.create_index(
        "ix_accounts_seated",
        "accounts",
        ["stream_id"],
        sqlite_where=seated,
        postgresql_where=seated,
    )


def downgrade() -> None:
    op.drop_index("ix_accounts_seated", table_name="accounts")
