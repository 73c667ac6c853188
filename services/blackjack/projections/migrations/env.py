"""Alembic environment of the read-model store.

The service runs the migrations itself (``ProjectionStore.migrate``) on the connection it
hands over in ``config.attributes["connection"]``; the ``alembic`` command line works too, with
``-x url=...`` or ``BLACKJACK_DB_URL`` (see docs/projections.md).
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from sqlalchemy.engine import Connection, make_url

from blackjack.projections.revision import (
    HOLD_FOLDS,
    DowngradeNotRenderable,
    NotRenderable,
    hold_folds,
)
from blackjack.projections.schema import metadata
from blackjack.projections.store import ProjectionStore, db_url_from_env

config = context.config


def _url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
        or db_url_from_env(os.environ)
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


def _refuse_what_cannot_render(url: str) -> None:
    """A script (``--sql``) that could not be rendered whole is refused before a line of it is
    written: an upgrade through a migration that reads the stored rows in Python
    (``renders_offline = False``: its reads would find nothing, ``TypeError`` halfway through
    the script before this), or on SQLite a downgrade through one that drops a column
    (``sqlite_downgrade_renders_offline = False``: alembic's batch mode stopped at it, the
    downgrades above it already written)."""
    given = context.get_starting_revision_argument()
    start = given if isinstance(given, str) else None
    destination = context.get_revision_argument() or "base"  # None: base (a downgrade's)
    if not isinstance(destination, str):
        return
    script = ScriptDirectory.from_config(config)
    try:
        steps = list(script.iterate_revisions(destination, start or "base"))
    except RevisionError:  # not an upgrade: from above to below
        steps = []
    online = [
        (step.revision, str(step.down_revision))
        for step in reversed(steps)  # in the order the script would run them
        if not getattr(step.module, "renders_offline", True)
    ]
    if online:
        raise NotRenderable(online, start, destination)
    if start is None or make_url(url).get_backend_name() != "sqlite":
        return
    try:
        downgrades = list(script.iterate_revisions(start, destination))
    except RevisionError:  # not a downgrade either: alembic says what is wrong with it
        return
    for step in downgrades:  # from the top down, as the script would run them
        if not getattr(step.module, "sqlite_downgrade_renders_offline", True):
            raise DowngradeNotRenderable(step.revision, start, destination)


if context.is_offline_mode():
    url = _url()
    _refuse_what_cannot_render(url)
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
