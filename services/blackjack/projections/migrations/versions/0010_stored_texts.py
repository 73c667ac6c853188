"""No schema change: the check that the store holds no text in the former stored form.

The read model stores a NUL as U+FFFD (PostgreSQL's text cannot hold it) and, since this
release, a U+FFFD of the log as U+FFFD and U+0001, each U+0001 doubled
(``store.as_stored``): before, a U+FFFD was stored as itself, so an older log's
``al<NUL>ice`` and ``al<U+FFFD>ice`` were one key (one account row, one wallet answer for two
players). Ids and texts with neither character, and those with a NUL only, are stored as they
were. A store that folded an event holding a U+FFFD or a U+0001 (an older log's: the commands
refuse both) holds them in the former form, which this release's fold would not find again
(its next event of that player: a ``ProjectionError``, the partition stuck) and the audit's
rebuild would not match. Such a store is refused here, before this release folds anything
into it: rebuild it from offset 0 into a new database with this release (docs/projections.md,
"Upgrading the read model"). The check reads ``events`` whole, once (a sequential scan of
the largest table; it stops at the first such event). A ``--sql`` script cannot run it: it renders a
comment only.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# as the events table holds them (pydantic's JSON): U+FFFD as itself, U+0001 escaped
_FORMER = ("\ufffd", "\\u0001")


class FormerStoredTexts(RuntimeError):
    """The store folded events whose texts this release stores otherwise."""


def upgrade() -> None:
    context = op.get_context()
    if context.as_sql:
        op.execute(
            "-- 0010: a store that folded an event holding U+FFFD or U+0001 must be rebuilt; "
            "this script does not check it (run `blackjack projections migrate` to)"
        )
        return
    find = "instr" if context.dialect.name == "sqlite" else "strpos"
    query = sa.text(
        f"SELECT stream_id, sequence FROM events WHERE {find}(envelope, :fffd) > 0 "
        f"OR {find}(envelope, :mark) > 0 LIMIT 1"
    )
    found = op.get_bind().execute(query, {"fffd": _FORMER[0], "mark": _FORMER[1]}).first()
    if found is not None:
        raise FormerStoredTexts(
            f"migration 0010: event {found.sequence} of {found.stream_id!r} (and maybe others) "
            "holds U+FFFD or U+0001, which this read model stored in the former form (an "
            "older log's, before the commands refused them): this release stores them "
            "otherwise, so that two ids differing by a NUL and a U+FFFD are two keys. Rebuild "
            "the read model from offset 0 into a new database with this release "
            "(docs/projections.md, 'Upgrading the read model') and point the service at it; "
            "this database is left at 0009"
        )


def downgrade() -> None:
    """Nothing to undo (a store folded by this release may hold the new form: a release
    before it would not read such ids as it stored them)."""
