"""Moving a test's read model to one of its schema revisions, as ``alembic`` would."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from blackjack.projections.store import MIGRATIONS, ProjectionStore

T = TypeVar("T")


def migrate(connection: Connection, revision: str, down: bool) -> None:
    """For ``AsyncConnection.run_sync``: down to ``revision``, or up to it."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    (command.downgrade if down else command.upgrade)(config, revision)


async def migrated(
    store: ProjectionStore, revision: str, down: bool, read: Callable[[Connection], T]
) -> T:
    """``store`` moved to ``revision`` (``migrate``), then what ``read`` finds in it."""
    async with store.migrating() as connection:
        await connection.run_sync(migrate, revision, down)
    async with store.reading() as connection:
        return await connection.run_sync(read)
