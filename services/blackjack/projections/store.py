"""The read-model store: SQLAlchemy 2 async on SQLite (aiosqlite, the embedded default) or
PostgreSQL (asyncpg), its migrations, and the two kinds of transaction the projections use.

``writing()`` serialises writers: on SQLite it begins with ``BEGIN IMMEDIATE`` (the database
write lock is taken up front), on PostgreSQL the writer locks the tracking rows it is about to
advance. ``reading()`` sees one consistent snapshot: a real ``BEGIN`` on SQLite (the sqlite3
driver would otherwise run each SELECT on its own) and ``REPEATABLE READ`` on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

from alembic import command
from alembic.config import Config
from alembic.util.exc import CommandError
from sqlalchemy import event, inspect, text
from sqlalchemy import exc as sql_errors
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from blackjack.configuration import ConfigurationError
from blackjack.domain import commands
from blackjack.projections.revision import SchemaMismatch, code_revision
from blackjack.projections.shown_url import shown_db_url

MIGRATIONS = Path(__file__).with_name("migrations")
T = TypeVar("T")
DEFAULT_DB_URL: Final = "sqlite+aiosqlite:///var/projections.db"
"""The embedded store, relative to the current directory: where ``make run`` folds."""
STATEMENT_TIMEOUT_MS: Final = 30_000
LOCK_TIMEOUT_MS: Final = 10_000
POOL_TIMEOUT_S: Final = 10
IDLE_IN_TRANSACTION_TIMEOUT_MS: Final = 60_000
MIGRATION_LOCK_TIMEOUT: Final = "5min"
"""On PostgreSQL no statement runs longer, no lock is waited for longer and no connection is
waited for longer than these: a table locked by hand or a database that no longer answers is
then an error the worker retries and reports, and the query API answers 503, instead of a
fold or a request that hangs without a trace (a fault drill held a lock for 60 s: every query
hung 60 s, the worker stopped folding and nothing said so). A session idle in a transaction
longer than ``IDLE_IN_TRANSACTION_TIMEOUT_MS`` is ended by the server: a worker frozen in the
middle of a fold (SIGSTOP, a paused VM; the kernel answers its keepalives) held the positions'
row locks, and every other worker's folds waited on them, for as long as it stayed frozen (a
pause drill; a fold never waits on anything but the database inside its transaction)."""

_OUTAGE_SQLSTATE_CLASSES: Final = frozenset({"08", "53", "57"})
"""connection exceptions, insufficient resources (too many connections), operator intervention
(starting up, shutting down, a statement cancelled by its timeout)"""
_OUTAGE_SQLSTATES: Final = frozenset({"55P03", "25006"})
"""lock_not_available (the lock timeout), read_only_sql_transaction (a read-only database)"""
_SQLITE_OUTAGES: Final = (
    "database is locked",
    "unable to open database",
    "disk i/o error",
    "readonly database",
    "database or disk is full",
)
"""What SQLite says (it has no SQLSTATE) when the file cannot serve, as against "no such
table" or a syntax error, which are the code's."""
STORE_UNREACHABLE: Final = (
    OSError,
    TimeoutError,
    sql_errors.InterfaceError,
    sql_errors.TimeoutError,
)


def is_lock_wait(error: BaseException) -> bool:
    """Whether ``error`` is a wait for a lock another session holds that timed out (another
    worker in the middle of a fold, a lock taken by hand), not the database being away."""
    orig = getattr(error, "orig", None)
    if isinstance(orig, sqlite3.Error):
        return "database is locked" in str(orig).lower()
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return state == "55P03"


def is_store_outage(error: BaseException) -> bool:
    """Whether ``error`` says the database cannot serve now (down, starting, refusing
    connections, read-only, timing out), not that a query or a record is wrong: what the
    query API answers 503 for and what the worker retries without blaming a record."""
    if isinstance(error, STORE_UNREACHABLE):
        return True
    if not isinstance(error, sql_errors.DBAPIError):
        return False
    if error.connection_invalidated:
        return True
    orig = error.orig
    if isinstance(orig, sqlite3.Error):
        return any(text in str(orig).lower() for text in _SQLITE_OUTAGES)
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if isinstance(state, str):
        return state[:2] in _OUTAGE_SQLSTATE_CLASSES or state in _OUTAGE_SQLSTATES
    # a driver's own failure to reach the server, with no answer from it
    return isinstance(error, sql_errors.OperationalError)


WORKERS_STORE: Final = "--db-url or BLACKJACK_DB_URL name the workers' store"
"""how the refusals below name the setting a store's URL came from, unless told another"""


def db_url_from_env(env: Mapping[str, str]) -> str:
    """The store ``BLACKJACK_DB_URL`` names, else the embedded one; for a named worker
    (``BLACKJACK_PROJECTION_INSTANCE``: a deployment's) none is refused, as the embedded
    SQLite file would fork the read model away from the shared database the query API reads
    (the worker and the alembic command line alike)."""
    url = env.get("BLACKJACK_DB_URL", "").strip()
    if not url and env.get("BLACKJACK_PROJECTION_INSTANCE", "").strip():
        raise ConfigurationError("BLACKJACK_PROJECTION_INSTANCE is set but BLACKJACK_DB_URL is not")
    return url or DEFAULT_DB_URL


class NoReadModel(ConfigurationError):
    """A tool that only reads the read model (``projections dump|report|interrupted``,
    ``replay``, ``audit``, ``rules --table``, ``randomness --source store``) was pointed at a
    database no worker ever migrated: a mistyped ``--db-url``, or the default SQLite file
    looked for from another directory. It said so with a SQLAlchemy traceback ("no such
    table") and exit 1, which for ``replay`` and ``audit`` means a mismatch, and left an
    empty file (and its folders) where it looked."""

    def __init__(self, url: str, named: str = WORKERS_STORE) -> None:
        shown = shown_db_url(url)
        where = (
            "the default store, relative to the current directory: run it in the directory of "
            "make run"
            if url == DEFAULT_DB_URL
            else "no projection worker ever folded into it"
        )
        super().__init__(f"no read model in {shown} ({where}); {named}")


EXIT_STORE_REFUSED: Final = 4
"""What the command line exits with when the database refuses this process (``StoreRefused``)."""
_REFUSED_SQLSTATE_CLASSES: Final = frozenset({"28"})
"""invalid authorization: a wrong password (28P01), a user the server does not let in (28000)"""
_REFUSED_SQLSTATES: Final = frozenset({"3D000"})
"""invalid_catalog_name: the URL names a database that does not exist"""


class StoreRefused(ConfigurationError):
    """The database answered and refused this process: a wrong password or user in
    ``BLACKJACK_DB_URL``, or a database that does not exist. No retry mends it, so it is not an
    outage (``is_store_outage``): ``projections run`` (and ``serve``, ``rebuild``, ``migrate``,
    any tool over the store) exits ``EXIT_STORE_REFUSED`` with this one line, the URL's
    password masked, instead of SQLAlchemy's traceback (exit 1)."""

    exit_code = EXIT_STORE_REFUSED

    def __init__(self, url: str, reason: str, sqlstate: str, named: str = WORKERS_STORE) -> None:
        shown = shown_db_url(url)
        super().__init__(
            f"the database refused this process: {reason} (SQLSTATE {sqlstate}); check the user, "
            f"password and database of {shown} ({named})"
        )

    @classmethod
    def of(cls, error: BaseException, url: str, named: str = WORKERS_STORE) -> StoreRefused | None:
        """The refusal ``error`` says, or None when it says something else."""
        if not isinstance(error, sql_errors.DBAPIError):
            return None
        orig = error.orig
        state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
        if not isinstance(state, str):
            return None
        if state[:2] not in _REFUSED_SQLSTATE_CLASSES and state not in _REFUSED_SQLSTATES:
            return None
        reason = str(getattr(orig, "args", [""])[0] or orig).splitlines()[0][:200]
        return cls(url, reason, state, named)


_MIGRATION_LOCK = 0x626A_7072  # "bjpr": one migrating process at a time on PostgreSQL
_SQLITE_BUSY_MS = 30_000


class ProjectionStore:
    def __init__(
        self, url: str, *, bounded: bool = False, existing: bool = False, named: str = WORKERS_STORE
    ) -> None:
        """``bounded``: the long-running worker's and query API's store, whose statements,
        lock waits and pool waits are bounded on PostgreSQL (``STATEMENT_TIMEOUT_MS``...). The
        tools (audit, dump, rebuild) may read the whole read model in one statement: not
        bounded. ``existing``: a tool's that only reads it, ``NoReadModel`` where there is none
        (a SQLite file that is not there is neither made nor its folders). ``named``: which
        setting gave ``url``, as the refusals name it (a copy's source is not the workers')."""
        try:
            parsed = make_url(url)
        except sql_errors.ArgumentError:  # (a traceback before, as for a dialect not served below)
            raise ConfigurationError(f"{named}: not a database URL: {url[:80]!r}") from None
        self.url = url
        self.named = named
        self.bounded = bounded
        self.existing = existing
        self.dialect = parsed.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise ConfigurationError(
                f"{named}: the read model runs on SQLite or PostgreSQL "
                f"(sqlite+aiosqlite:///FILE, postgresql+asyncpg://...), not {self.dialect}"
            )
        options: dict[str, Any] = {}
        if self.dialect == "sqlite":
            database = parsed.database or ""
            if database in ("", ":memory:"):
                options["poolclass"] = StaticPool  # one connection, or each would be empty
            elif existing and not Path(database).is_file():
                raise NoReadModel(url, named)
            else:
                Path(database).parent.mkdir(parents=True, exist_ok=True)
        elif bounded:
            settings = {
                "statement_timeout": str(STATEMENT_TIMEOUT_MS),
                "lock_timeout": str(LOCK_TIMEOUT_MS),
                "idle_in_transaction_session_timeout": str(IDLE_IN_TRANSACTION_TIMEOUT_MS),
            }
            # The server's timeouts need a server that answers; a host gone silent is bounded
            # on this side (a statement's limit and a little more, a connection's 10 s).
            options["connect_args"] = {
                "server_settings": settings,
                "command_timeout": STATEMENT_TIMEOUT_MS / 1000 + 5,
                "timeout": POOL_TIMEOUT_S,
            }
            options["pool_timeout"] = POOL_TIMEOUT_S
            options["pool_pre_ping"] = True  # a connection the restart broke is replaced
        options["json_serializer"] = _json_without_nul
        self.engine: AsyncEngine = create_async_engine(url, **options)
        _text_without_nul(self.engine)
        if self.dialect == "sqlite":
            _take_over_sqlite_transactions(self.engine)

    def for_queries(self) -> ProjectionStore:
        """The query API's store: on PostgreSQL a pool of its own, so that a burst of slow
        queries cannot take the connections a fold needs (a drill: 25 of 40 concurrent queries
        waited out the shared pool); on SQLite this one (one file, one write lock)."""
        return (
            self
            if self.is_sqlite
            else ProjectionStore(self.url, bounded=self.bounded, named=self.named)
        )

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    async def migrate(self) -> None:
        """Bring the schema to the newest migration (safe to call from several workers)."""
        async with self.migrating() as connection:
            await connection.run_sync(_upgrade)

    @asynccontextmanager
    async def migrating(self) -> AsyncIterator[AsyncConnection]:
        """The transaction a migration runs in, whoever runs it (``migrate``, the ``alembic``
        command line): one migrating process at a time, and no fold in between
        (``migrations/env.py`` locks ``alembic_version`` first: ``revision.py``)."""
        async with self.writing() as connection:
            if not self.is_sqlite:
                # A migration may take longer than a fold's statement, and another worker's
                # may hold the lock meanwhile: no statement timeout, and a lock waited for up
                # to MIGRATION_LOCK_TIMEOUT (then the worker tries again, ``migrated``).
                await connection.execute(text("SET LOCAL statement_timeout = 0"))
                await connection.execute(
                    text(f"SET LOCAL lock_timeout = '{MIGRATION_LOCK_TIMEOUT}'")
                )
                await connection.execute(text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"))
            yield connection

    async def close(self) -> None:
        await self.engine.dispose()

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[AsyncConnection]:
        """A connection of the pool; ``StoreRefused`` when the database refuses this process."""
        try:
            connection = await self.engine.connect()
        except sql_errors.DBAPIError as error:
            refused = StoreRefused.of(error, self.url, self.named)
            if refused is None:
                raise
            raise refused from None  # the driver's trace says no more than its line
        try:
            yield connection
        finally:  # as AsyncConnection's own __aexit__: a cancelled request still closes it
            await asyncio.shield(connection.close())

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[AsyncConnection]:
        async with self.connected() as connection:
            if self.is_sqlite:
                await connection.execution_options(sqlite_begin="BEGIN IMMEDIATE")
            async with connection.begin():
                yield connection

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncConnection]:
        async with self.connected() as connection:
            if not self.is_sqlite:
                await connection.execution_options(isolation_level="REPEATABLE READ")
            async with connection.begin():
                if self.existing and not await connection.run_sync(_migrated):
                    raise NoReadModel(self.url, self.named)
                yield connection


def _migrated(connection: Connection) -> bool:
    """Whether a migration ever ran here (alembic's version table is its first)."""
    return inspect(connection).has_table("alembic_version")


def _upgrade(connection: Connection) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    try:
        command.upgrade(config, "head")
    except CommandError as error:
        if "Can't locate revision" not in str(error):
            raise
        # a rollback that kept the store a newer version migrated: say so in one line
        found = connection.execute(text("SELECT version_num FROM alembic_version")).scalars()
        raise SchemaMismatch(code_revision(), list(found), newer=True) from None


NUL_STORED_AS: Final = commands.NUL_STORED_AS
"""What the read model stores for a NUL character, which PostgreSQL's text refuses (and its
JSONB the escape ``\\u0000``). The commands refuse a NUL in what they carry, but a log
written before may hold one (a player id, a reason): refused by the database, the event
stopped its partition's projection for good. SQLite stores the same, so that the audit's
rebuild (SQLite by default) matches a live read model on PostgreSQL. The log keeps the
character; the API refuses an id with one (no store holds it)."""


READ_CHUNK = 1_000
"""The most keys one of a batch's reads names (``in_chunks``): on PostgreSQL a statement takes
at most 32,767 parameters (asyncpg), and a list of (stream, round) pairs of a few thousand
exceeds the server's expression depth (``max_stack_depth``, 2 MB: 8,000 pairs did); a batch
of 32,768 wallets, or of 8,000 rounds, was refused at every retry, its partition stuck. A
batch of 500 events reads each table in one statement still."""


def in_chunks(keys: Sequence[T]) -> Iterator[Sequence[T]]:
    """``keys`` in slices of ``READ_CHUNK``, each for one statement's list."""
    for start in range(0, len(keys), READ_CHUNK):
        yield keys[start : start + READ_CHUNK]


def nul_replaced(value: Any) -> Any:
    """``value`` (JSON-like: texts, dicts, lists) with every NUL as ``NUL_STORED_AS``."""
    if isinstance(value, str):
        return value.replace("\x00", NUL_STORED_AS)
    if isinstance(value, dict):
        return {nul_replaced(key): nul_replaced(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [nul_replaced(item) for item in value]
    return value


ESCAPE_MARK: Final = "\x01"
"""What follows U+FFFD in the stored form of a U+FFFD of the log (``as_stored``): a control
character, which the commands refuse in an id, so only an older log's ids hold it."""

_MOST_CHARS: Final = 128  # the id columns' length (``schema.ID``)


def as_stored(text: str) -> str:
    """``text`` as the store holds a player's id or a text of an event, one to one: a NUL as
    U+FFFD (``NUL_STORED_AS``, as before), a U+FFFD of the log as U+FFFD and ``ESCAPE_MARK``,
    and each ``ESCAPE_MARK`` of the log doubled. Before, a U+FFFD was stored as itself, so an
    older log's ``al<NUL>ice`` and ``al<U+FFFD>ice`` were one key: one account row, one wallet
    answer for two players. A text with neither character (every id the commands take now)
    and one with a NUL only are stored as before: the rows folded before read as they did.

    One to one: after a U+FFFD comes a run of ``ESCAPE_MARK``s, odd for a U+FFFD of the log,
    even for a NUL; a run anywhere else is even. An escaped text longer than an id column whose
    text was not (``_MOST_CHARS``) is stored as ``ESCAPE_MARK``, ``#`` and the SHA-256 of the
    escaped text: a run of one at the start, which no escaped text has."""
    if "\x00" not in text and NUL_STORED_AS not in text and ESCAPE_MARK not in text:
        return text
    escaped = (
        text.replace(ESCAPE_MARK, ESCAPE_MARK * 2)
        .replace(NUL_STORED_AS, NUL_STORED_AS + ESCAPE_MARK)
        .replace("\x00", NUL_STORED_AS)
    )
    if len(escaped) <= _MOST_CHARS or len(text) > _MOST_CHARS:
        return escaped
    return f"{ESCAPE_MARK}#{hashlib.sha256(escaped.encode()).hexdigest()}"


def stored_texts(value: Any, *, long_as_logged: bool = False) -> Any:
    """``value`` (JSON-like) with every text ``as_stored``, keys too. ``long_as_logged``: a
    text longer than any id (``_MOST_CHARS``) only has a NUL replaced (``nul_replaced``), so
    it keeps its length: escaped, an older log's text full of U+FFFDs could pass its field's
    length, and no key needs such a text one to one."""
    if isinstance(value, str):
        if long_as_logged and len(value) > _MOST_CHARS:
            return nul_replaced(value)
        return as_stored(value)
    if isinstance(value, dict):
        return {
            as_stored(key): stored_texts(item, long_as_logged=long_as_logged)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [stored_texts(item, long_as_logged=long_as_logged) for item in value]
    return value


def _json_without_nul(value: Any) -> str:
    """A JSONB document's text: json.dumps, as SQLAlchemy's own, and a NUL replaced."""
    text = json.dumps(value)
    return json.dumps(nul_replaced(value)) if "\\u0000" in text else text


def _text_without_nul(engine: AsyncEngine) -> None:
    """Every text parameter a statement sends the database without a NUL character."""

    @event.listens_for(engine.sync_engine, "before_cursor_execute", retval=True)
    def _before(
        _connection: Any,
        _cursor: Any,
        statement: str,
        parameters: Any,
        _context: Any,
        executemany: bool,
    ) -> tuple[str, Any]:
        def one(row: Any) -> Any:
            if isinstance(row, tuple | list) and any(
                isinstance(item, str) and "\x00" in item for item in row
            ):
                return type(row)(nul_replaced(item) for item in row)
            return row

        return statement, [one(row) for row in parameters] if executemany else one(parameters)


def _take_over_sqlite_transactions(engine: AsyncEngine) -> None:
    """The recipe of SQLAlchemy's SQLite notes: the driver emits no BEGIN of its own, we do."""

    @event.listens_for(engine.sync_engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql(connection.get_execution_options().get("sqlite_begin", "BEGIN"))
