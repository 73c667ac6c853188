"""Moving a test's read model to one of its schema revisions, as ``alembic`` would."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from blackjack.projections.store import MIGRATIONS


def migrate(connection: Connection, revision: str, down: bool) -> None:
    """For ``AsyncConnection.run_sync``: down to ``revision``, or up to it."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    (command.downgrade if down else command.upgrade)(config, revision)
