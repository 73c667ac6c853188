"""Alembic environment of the read-model store.

The service runs the migrations itself (``ProjectionStore.migrate``) on the connection it
hands over in ``config.attributes["connection"]``; the ``alembic`` command line works too, with
``-x url=...`` or ``BLACKJACK_DB_URL`` (see docs/projections.md).
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection, make_url

from blackjack.projections.revision import HOLD_FOLDS, hold_folds
from blackjack.projections.schema import metadata
from blackjack.projections.settings import ProjectionSettings
from blackjack.projections.store import ProjectionStore

config = context.config


def _url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
        or ProjectionSettings.from_env().db_url
    )


def _run(connection: Connection) -> None:
    hold_folds(connection)  # before anything is read: no fold of the old schema in between
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_online(url: str) -> None:
    # the service's own migration transaction: the migration lock on PostgreSQL, BEGIN
    # IMMEDIATE on SQLite (the driver would otherwise run the DDL outside any transaction)
    store = ProjectionStore(url)
    try:
        async with store.migrating() as connection:
            await connection.run_sync(_run)
    finally:
        await store.close()


if context.is_offline_mode():
    url = _url()
    context.configure(url=url, target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        # a DBA's script from a revision on (`upgrade 0005:head --sql`) holds the folds too;
        # one from nothing creates alembic_version, which no fold gets past meanwhile
        starting = context.get_starting_revision_argument()
        if make_url(url).get_backend_name() == "postgresql" and starting not in (None, "base"):
            context.execute(HOLD_FOLDS)
        context.run_migrations()
elif (shared := config.attributes.get("connection")) is not None:
    _run(shared)
else:
    asyncio.run(_run_online(_url()))
