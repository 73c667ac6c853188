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
# a script (--sql) cannot read whether revocations are held: PostgreSQL's checks when it runs
# (below); SQLite's has no way to, so a downgrade script through here is refused (env.py)
sqlite_downgrade_renders_offline = False


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
    if context.is_offline_mode():  # PostgreSQL (SQLite's is refused): the script checks
        refused = _REFUSED.format(held="some").replace("'", "''")
        op.execute(
            "DO $$ BEGIN IF EXISTS (SELECT 1 FROM token_revocations) THEN "
            f"RAISE EXCEPTION '{refused}'; END IF; END $$"
        )
    else:
        held = op.get_bind().execute(sa.text("SELECT count(*) FROM token_revocations"))
        count = held.scalar_one()
        if count:
            raise RuntimeError(_REFUSED.format(held=count))
    op.drop_table("token_revocations")


_REFUSED = (
    "downgrade below 0008 refused: token_revocations holds {held} revocation(s) of players' "
    "tokens, which no fold of the events makes again (a revoked token would work again); fold "
    "the read model again into a new database instead, `blackjack projections rebuild "
    f"--revocations-from` (docs/operations.md), or pass -x {DROP_ANYWAY}=yes to drop them"
)
