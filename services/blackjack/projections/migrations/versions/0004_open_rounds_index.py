"""An index of the open rounds (the operators' list of interrupted rounds reads only those).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_OPEN = sa.text("status IN ('betting', 'playing')")


def upgrade() -> None:
    # Partial: a table plays thousands of rounds and has at most one open. A plain CREATE
    # INDEX in the migration's transaction: writes to rounds wait while it is built.
    op.create_index(
        "ix_rounds_open", "rounds", ["stream_id"], sqlite_where=_OPEN, postgresql_where=_OPEN
    )


def downgrade() -> None:
    op.drop_index("ix_rounds_open", table_name="rounds")
