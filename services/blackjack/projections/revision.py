"""The read model's schema revision: the one this code folds into, and the check every writer
makes inside its own transaction before it writes anything.

A worker of one release folding into a store another release migrated writes rows the other
schema does not expect: an older worker after migration 0005 folded rounds that were never
summed into ``game_days`` (40 of 60 in a drill), after 0006 left a player marked as sitting
out. Checking only at start is not enough: a worker started before the migration keeps
folding after it. So every fold transaction (``ProjectionWriter.apply``: the worker, ``serve``,
``projections rebuild``, the audit's rebuild) first reads ``alembic_version`` and stops with
``SchemaMismatch`` when it is not this code's head; nothing of the batch is written and the
stored positions do not move.

The check and a migration are ordered by a lock, so a fold of the old schema cannot commit
after a migration has read the data it transforms:

- PostgreSQL: a fold reads the version ``FOR SHARE`` (holding the table's ROW SHARE lock to its
  commit); every migration (``ProjectionStore.migrating``, the ``alembic`` command line too:
  ``migrations/env.py``) first takes ``LOCK TABLE alembic_version IN EXCLUSIVE MODE``, which
  waits for the folds in progress and makes the next ones wait for its commit. A fold that
  waited reads the row as the migration left it (READ COMMITTED re-reads a locked row's newest
  version), so it stops.
- SQLite: there is one writer at a time. Folds and migrations both begin with ``BEGIN
  IMMEDIATE`` (the database's write lock, taken before anything is read), so a fold runs
  wholly before a migration (which then reads its rows) or wholly after it (and reads the new
  revision).

Releases before this check have none: their workers must still be stopped before a migration
(docs/projections.md, "Upgrading the read model").
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Final

from alembic.util import CommandError

from blackjack.configuration import ConfigurationError
from blackjack.projections.shown_url import shown_db_url

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection

EXIT_SCHEMA_MISMATCH: Final = 3
"""``blackjack projections run`` (and ``rebuild``, ``migrate``) exit with it on a mismatch."""

MIGRATE_COMMAND: Final = "blackjack projections migrate"
HOLD_FOLDS: Final = "LOCK TABLE alembic_version IN EXCLUSIVE MODE"
"""a migration's first statement on PostgreSQL (``hold_folds``)"""


class NotRenderable(CommandError):
    """``alembic ... upgrade --sql`` over a migration that reads the stored rows to fill what
    it adds (``renders_offline = False`` in its module): a script cannot hold what they say.
    Raised before anything is rendered; the alembic command line prints it as ``FAILED: ...``
    and exits non-zero."""

    def __init__(
        self, online: Sequence[tuple[str, str]], start: str | None, destination: str
    ) -> None:
        """``online``: each such migration on the way, in order, with the revision before it."""
        self.revision = online[0][0]
        steps = []
        at = start
        for revision, before in online:
            if before != at:  # what comes between renders
                steps.append(
                    f"render up to {before} (`upgrade {at + ':' if at else ''}{before} --sql`)"
                )
            steps.append(f"run {revision} online (`alembic ... upgrade {revision}`, without --sql)")
            at = revision
        if destination != at:
            steps.append(f"render the rest from it (`upgrade {at}:{destination} --sql`)")
        if len(online) == 1:
            why = (
                f"revision {self.revision} cannot be rendered as a SQL script (--sql): its "
                "upgrade reads the stored events to fill the columns it adds"
            )
        else:
            names = " and ".join(revision for revision, _ in online)
            why = (
                f"revisions {names} cannot be rendered as a SQL script (--sql): their "
                "upgrades read the stored events to fill the columns they add"
            )
        super().__init__(
            f"{why}. Instead: {', then '.join(steps)}; or migrate online to the head "
            f"(`{MIGRATE_COMMAND}`)"
        )


class DowngradeNotRenderable(NotRenderable):
    """``alembic ... downgrade --sql`` on SQLite over a migration whose downgrade drops a
    column (``sqlite_downgrade_renders_offline = False`` in its module): SQLite's batch mode
    copies the table as the live database has it, which a script cannot see. Raised before
    anything is rendered, as ``NotRenderable`` (it stopped at that step, with part of a script
    already written)."""

    def __init__(self, revision: str, start: str, destination: str) -> None:
        self.revision = revision
        steps = []
        if revision != start:  # the downgrades above it render
            steps.append(f"render down to {revision} (`downgrade {start}:{revision} --sql`)")
        steps.append(f"downgrade online (`alembic ... downgrade {destination}`, without --sql)")
        CommandError.__init__(
            self,
            f"the downgrade of revision {revision} cannot be rendered as a SQL script (--sql) "
            "on SQLite: it drops a column, which SQLite does by copying the table as the live "
            f"database has it. Instead: {', then '.join(steps)}",
        )


class SchemaMismatch(ConfigurationError):
    """The store's schema revision is not the one this code was built for."""

    exit_code = EXIT_SCHEMA_MISMATCH

    def __init__(self, expected: str, found: Sequence[str], newer: bool) -> None:
        self.expected = expected
        self.found = tuple(found)
        self.newer = newer
        shown = ", ".join(self.found) or "none (not migrated)"
        if newer:
            message = (
                f"a newer release migrated this database (schema revision {shown}; this "
                f"release is built for {expected}): this worker must be replaced by one of "
                "that release; or downgrade the store with it (docs/projections.md, 'Rolling "
                "back'), or point BLACKJACK_DB_URL at a store of this release"
            )
        else:
            message = (
                f"the read model is at schema revision {shown}, older than this release's "
                f"{expected}: run `{MIGRATE_COMMAND}` first (a worker of this release also "
                "migrates the store when it starts)"
            )
        super().__init__(message)

    @property
    def direction(self) -> str:
        return "newer" if self.newer else "older"


class StoreToReadAtAnotherRevision(SchemaMismatch):
    """A command that only reads the store's rows (``projections dump``, ``report``,
    ``interrupted``, ``rules --table``, ``replay --source store``) found it at another schema
    revision than its code's: what it reads is laid out by a release's schema (the columns
    it selects, the form a text is stored in), so it would read another release's rows as its
    own (a dump missing a newer release's columns, a digest equal where the stores differ) or
    fail on a column one of them lacks (a traceback). Raised before anything is read; the
    ``projections`` commands exit 3 with it, as for the workers (``replay`` 2: its 3 means
    not verifiable)."""

    def __init__(
        self,
        mismatch: SchemaMismatch,
        url: str,
        command: str,
        named: str = "--db-url or BLACKJACK_DB_URL",
        untouched: str = "nothing was read",
    ) -> None:
        self.expected = mismatch.expected
        self.found = mismatch.found
        self.newer = mismatch.newer
        line = another_revision_line(
            mismatch,
            f"the store {shown_db_url(url)} ({named})",
            newer=f"run that release's `{command}`",
            older=f"run the `{command}` of the release its workers run, or upgrade the store first",
            untouched=untouched,
        )
        ConfigurationError.__init__(self, line)


def another_revision_line(
    mismatch: SchemaMismatch, store: str, *, newer: str, older: str, untouched: str
) -> str:
    """The one line of a command refusing ``store`` (how it is named) at ``mismatch``'s
    revision: both revisions, what to do (``newer``: a newer release migrated it; ``older``,
    before the migrate command that would upgrade it) and what was left ``untouched``."""
    found = ", ".join(mismatch.found) or "none"
    if mismatch.newer:
        why = (
            f"a newer release migrated it (schema revision {found}; this release is built "
            f"for {mismatch.expected}): {newer}"
        )
    else:
        why = (
            f"it is at schema revision {found}, older than this release's {mismatch.expected}: "
            f"{older} (`{MIGRATE_COMMAND}`, which stops that release's workers: "
            "docs/projections.md, 'Upgrading the read model')"
        )
    return f"{store}: {why}; {untouched}"


@cache
def _script() -> tuple[str, frozenset[str]]:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from blackjack.projections.store import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    script = ScriptDirectory.from_config(config)
    head = script.get_current_head()
    assert head is not None, "the migrations have one head"
    return head, frozenset(r.revision for r in script.walk_revisions())


def code_revision() -> str:
    """The alembic head of this code's migrations: the schema its fold writes."""
    return _script()[0]


def mismatch(found: Sequence[str]) -> SchemaMismatch | None:
    """None when ``found`` (the store's ``alembic_version`` rows) is this code's head; else
    the error, newer when a revision is one this code does not know."""
    head, known = _script()
    if tuple(found) == (head,):
        return None
    return SchemaMismatch(head, found, newer=any(r not in known for r in found))


async def check_schema(connection: AsyncConnection, *, lock: bool = True) -> None:
    """Raise ``SchemaMismatch`` unless the store is at this code's head; on PostgreSQL, with
    ``lock``, the version row stays share-locked until the transaction ends (see the module's
    docstring): the first statement of a fold's transaction. Without ``lock``, a look only (an
    idle worker's, between batches)."""
    from sqlalchemy import exc as sql_errors
    from sqlalchemy import text

    share = lock and connection.dialect.name == "postgresql"
    query = "SELECT version_num FROM alembic_version" + (" FOR SHARE" if share else "")
    try:
        found = list((await connection.execute(text(query))).scalars())
    except (sql_errors.ProgrammingError, sql_errors.OperationalError) as error:
        if "alembic_version" not in str(error):
            raise
        found = []  # never migrated
    wrong = mismatch(found)
    if wrong is not None:
        raise wrong


async def check_schema_to_read(
    connection: AsyncConnection, url: str, command: str, **told: str
) -> None:
    """``StoreToReadAtAnotherRevision`` unless the store at ``url`` is at this code's head:
    the workers' check (``check_schema``), a look only, first in the transaction that reads
    (the snapshot read is then of that revision). ``command``: the one to run of the release
    that matches it, as an operator types it; ``told``: the refusal's ``named`` (the option
    that names the store) and ``untouched`` (what was left undone)."""
    try:
        await check_schema(connection, lock=False)
    except SchemaMismatch as mismatch:
        raise StoreToReadAtAnotherRevision(mismatch, url, command, **told) from None


def hold_folds(connection: Connection) -> None:
    """A migration's first statement, before it reads anything (``migrations/env.py``): on
    PostgreSQL wait for the folds in progress and hold the next ones until the migration
    commits (each reads ``alembic_version`` FOR SHARE first, then finds the new revision and
    stops). On SQLite the migration's ``BEGIN IMMEDIATE`` (``ProjectionStore.migrating``)
    already holds every other writer."""
    from sqlalchemy import text

    if connection.dialect.name != "postgresql":
        return
    if connection.execute(text("SELECT to_regclass('alembic_version')")).scalar() is None:
        return  # never migrated: no fold gets past its check meanwhile
    connection.execute(text(HOLD_FOLDS))
