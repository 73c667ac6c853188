"""Alembic environment of the read-model store.

The service runs the migrations itself (``ProjectionStore.migrate``) on the connection it
hands over in ``config.attributes["connection"]``; the ``alembic`` command line works too, with
``-x url=...`` or ``BLACKJACK_DB_URL`` (see docs/projections.md).
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from blackjack.projections.schema import metadata
from blackjack.projections.settings import ProjectionSettings

config = context.config


def _url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
        or ProjectionSettings.from_env().db_url
    )


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_online(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
elif (shared := config.attributes.get("connection")) is not None:
    _run(shared)
else:
    asyncio.run(_run_online(_url()))
