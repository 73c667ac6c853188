"""On PostgreSQL the worker's and query API's store bounds statements and lock waits; the
tools' store (audit, dump, rebuild), which may read the whole read model in one statement,
does not. A lock held by hand makes the bounded store fail in seconds, as an outage. And the
migrations build on PostgreSQL exactly the tables the code declares."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text

from blackjack.projections import schema
from blackjack.projections.store import (
    LOCK_TIMEOUT_MS,
    ProjectionStore,
    is_lock_wait,
    is_store_outage,
)
from tests.integration.conftest_projections import StoreFactory, connect_directly
from tests.unit.test_projection_store import schema_drift

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration


async def test_the_workers_store_bounds_statements_and_locks_and_the_tools_do_not(
    postgres_server_url: str,
) -> None:
    bounded = ProjectionStore(postgres_server_url, bounded=True)
    tools = ProjectionStore(postgres_server_url)
    try:
        await bounded.migrate()  # a migration is not bounded: it may wait for another's lock
        async with bounded.reading() as connection:
            shown = [
                (await connection.execute(text(f"SHOW {name}"))).scalar_one()
                for name in (
                    "statement_timeout",
                    "lock_timeout",
                    "idle_in_transaction_session_timeout",
                )
            ]
        # (the last: a worker frozen in the middle of a fold held its row locks, and every
        # other worker's folds waited, for as long as it stayed frozen: a pause drill)
        assert shown == ["30s", "10s", "1min"]
        async with tools.reading() as connection:
            assert (await connection.execute(text("SHOW statement_timeout"))).scalar_one() == "0"

        holder = await connect_directly(postgres_server_url)
        try:
            locked = holder.transaction()
            await locked.start()
            await holder.execute("LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE")
            started = asyncio.get_running_loop().time()
            with pytest.raises(Exception) as failed:
                async with bounded.reading() as connection:
                    await connection.execute(text("SELECT count(*) FROM accounts"))
            waited = asyncio.get_running_loop().time() - started
            await locked.rollback()
        finally:
            await holder.close()
        assert is_store_outage(failed.value), repr(failed.value)
        assert is_lock_wait(failed.value)  # logged as a lock another session holds
        assert LOCK_TIMEOUT_MS / 1000 - 1 < waited < LOCK_TIMEOUT_MS / 1000 + 10
    finally:
        await bounded.close()
        await tools.close()


async def test_the_migrations_create_exactly_the_declared_tables_on_postgresql(
    postgres_server_url: str, tmp_path: Path
) -> None:
    """As the unit test checks on SQLite (alembic compares tables, columns and indexes, not
    an index's condition: that is read from the catalog)."""
    stores = StoreFactory("postgresql", tmp_path, postgres_server_url)
    try:
        store = await stores.store()
        async with store.reading() as connection:
            assert await connection.run_sync(schema_drift) == []
            query = "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_rounds_open'"
            condition = (await connection.execute(text(query))).scalar_one()
            query = "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_accounts_seated'"
            seated = (await connection.execute(text(query))).scalar_one()
            # its plan (the planner's costs, not the few rows here, choose the index)
            await connection.execute(text("SET LOCAL enable_seqscan = off"))
            statement = schema.seated_accounts(["t-1"]).compile(
                dialect=connection.dialect, compile_kwargs={"literal_binds": True}
            )
            plan = "\n".join((await connection.execute(text(f"EXPLAIN {statement}"))).scalars())
        assert "WHERE" in condition and "'betting'" in condition and "'playing'" in condition
        assert seated.endswith("WHERE (seated IS TRUE)")
        assert "ix_accounts_seated" in plan, plan
    finally:
        await stores.close()
