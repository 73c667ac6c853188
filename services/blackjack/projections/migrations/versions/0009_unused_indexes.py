"""Three indexes no statement of the service reads, dropped: ``ix_events_stream_round``
(nothing filters ``events`` by round), and the unique indexes on ``events.event_id`` and
``rounds.round_id``. Both ids derive from the row's primary key (an event's id is
``uuid5(stream_id/sequence)``, ``command_handler.ids.event_id``; a round's is
``STREAM_ID:ROUND``, ``projections.ids.round_id``), so the primary keys already make them
unique; and an event is never folded twice without them: the stored position skips a
redelivered offset, the fold compares an event at or below its stream's last sequence with
the one stored at that place (skipped if the same, refused if not), and the primary key
``(stream_id, sequence)`` refuses a second row at one place. At 3 million events on
PostgreSQL the three were 177 MB of the database and a share of every insert
(docs/operations.md).

PostgreSQL drops them in place. SQLite cannot drop a UNIQUE written in CREATE TABLE: the two
tables are copied (alembic's batch mode, from the structure below, so ``--sql`` renders it);
this takes as long as copying ``events`` and ``rounds``.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_ID = 128
_OPEN = sa.text("status IN ('betting', 'playing')")


def _events(unique: bool) -> sa.Table:
    """``events`` as of 0008 (``unique``: with its unique ``event_id`` and its index)."""
    table = sa.Table(
        "events",
        sa.MetaData(),
        sa.Column("stream_id", sa.String(_ID), primary_key=True),
        sa.Column("sequence", sa.BigInteger(), primary_key=True),
        sa.Column("event_id", sa.String(_ID), nullable=False, unique=unique),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("round", sa.Integer(), nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("kafka_partition", sa.Integer(), nullable=False),
        sa.Column("kafka_offset", sa.BigInteger(), nullable=False),
        sa.Column(
            "envelope", sa.Text(), nullable=False, comment="the wire envelope as JSON (shoe sealed)"
        ),
        comment="every public event folded in, for recall and replay",
    )
    if unique:
        sa.Index("ix_events_stream_round", table.c.stream_id, table.c.round)
    return table


def _rounds(unique: bool) -> sa.Table:
    """``rounds`` as of 0008 (``unique``: with its unique ``round_id``)."""
    table = sa.Table(
        "rounds",
        sa.MetaData(),
        sa.Column("stream_id", sa.String(_ID), primary_key=True),
        sa.Column("round", sa.Integer(), primary_key=True),
        sa.Column("round_id", sa.String(_ID + 12), nullable=False, unique=unique),
        sa.Column("variant", sa.String(64), nullable=False),
        sa.Column("currency", sa.String(8), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("first_sequence", sa.BigInteger(), nullable=False),
        sa.Column("last_sequence", sa.BigInteger(), nullable=False),
        sa.Column("record", _DOCUMENT, nullable=False, comment="the full game cycle (RoundRecord)"),
    )
    sa.Index("ix_rounds_open", table.c.stream_id, sqlite_where=_OPEN, postgresql_where=_OPEN)
    return table


def _sqlite() -> bool:
    return op.get_context().dialect.name == "sqlite"


def upgrade() -> None:
    if _sqlite():
        for table in (_events(unique=False), _rounds(unique=False)):
            with op.batch_alter_table(table.name, recreate="always", copy_from=table):
                pass
        return
    op.drop_index("ix_events_stream_round", table_name="events")
    op.drop_constraint("events_event_id_key", "events", type_="unique")
    op.drop_constraint("rounds_round_id_key", "rounds", type_="unique")


def downgrade() -> None:
    if _sqlite():
        for table in (_events(unique=True), _rounds(unique=True)):
            with op.batch_alter_table(table.name, recreate="always", copy_from=table):
                pass
        return
    op.create_unique_constraint("rounds_round_id_key", "rounds", ["round_id"])
    op.create_unique_constraint("events_event_id_key", "events", ["event_id"])
    op.create_index("ix_events_stream_round", "events", ["stream_id", "round"])
