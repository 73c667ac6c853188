"""The commands that read the store's rows (``projections dump``, ``report``,
``interrupted``, ``rules --table``, ``replay --source store``, ``randomness --source store``;
``revoke-tokens`` and ``copy-revocations``, which write there too)
over a store at another schema revision than their code's, on SQLite and on PostgreSQL: a
newer release's (an unknown revision) or an older one (its rows unchanged). Each refuses it
before reading anything, in one line naming both revisions and what to run, with the workers'
check (``revision.check_schema``): exit 3 for the ``projections`` commands and ``rules`` (the
workers' exit for a schema mismatch), 2 for ``replay`` and ``randomness``, whose 3 means "not
verified". Before, they read another release's rows as their own: a dump and a report of an
empty store printed and exited 0, ``replay`` said "No round", ``randomness`` "NOT TESTED"."""

from __future__ import annotations

import os
import subprocess

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from blackjack.projections.revision import code_revision
from tests.integration import cli_runs
from tests.integration.conftest_projections import StoreFactory

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

NEWER = "0999"  # a schema revision no release of this code knows
OLDER = "0005"  # one before this code's head

COMMANDS = [  # (arguments, exit, how its line begins, the command the line tells to run)
    (
        ("projections", "revoke-tokens", "ann"),
        3,
        "blackjack: ",
        "blackjack projections revoke-tokens",
    ),
    (
        ("projections", "copy-revocations", "--from", "sqlite+aiosqlite:///unused.db"),
        3,
        "blackjack: ",
        "blackjack projections copy-revocations",
    ),
    (("projections", "dump"), 3, "blackjack: ", "blackjack projections dump"),
    (("projections", "dump", "--digest"), 3, "blackjack: ", "blackjack projections dump"),
    (("projections", "report"), 3, "blackjack: ", "blackjack projections report"),
    (("projections", "interrupted"), 3, "blackjack: ", "blackjack projections interrupted"),
    (("rules", "--table", "table-1"), 3, "blackjack: ", "blackjack rules --table"),
    (("replay", "table-1:1"), 2, "blackjack replay: ", "blackjack replay"),
    (
        ("randomness", "--source", "store"),
        2,
        "blackjack randomness: ",
        "blackjack randomness --source store",
    ),
]


def blackjack(*args: str, db_url: str) -> subprocess.CompletedProcess[str]:
    return cli_runs.blackjack(*args, env={**os.environ, "BLACKJACK_DB_URL": db_url}, timeout=120)


@pytest.mark.parametrize(
    ("command", "code", "begins", "named"), COMMANDS, ids=[" ".join(c[0]) for c in COMMANDS]
)
async def test_a_store_at_another_schema_revision_is_refused_before_anything_is_read(
    command: tuple[str, ...], code: int, begins: str, named: str, stores: StoreFactory
) -> None:
    store = await stores.store()
    shown = make_url(store.url).render_as_string(hide_password=True)
    head = code_revision()
    for found in (NEWER, OLDER):
        async with store.writing() as connection:
            await connection.execute(text(f"UPDATE alembic_version SET version_num = '{found}'"))
        done = blackjack(*command, db_url=store.url)
        said = done.stdout + done.stderr
        assert done.returncode == code, (found, said[-3000:])
        assert done.stdout == "" and "Traceback" not in done.stderr, said[-3000:]
        [line] = done.stderr.splitlines()
        assert line.startswith(f"{begins}the store {shown} (--db-url or BLACKJACK_DB_URL): ")
        if found == NEWER:
            newer = f"a newer release migrated it (schema revision {NEWER}; this release is "
            assert newer + f"built for {head}): run that release's `{named}`" in line, line
        else:
            older = f"it is at schema revision {OLDER}, older than this release's {head}: "
            assert older + f"run the `{named}` of the release its workers run" in line, line
            assert "`blackjack projections migrate`" in line, line
        assert line.endswith(f"; nothing was {UNTOUCHED.get(command[1], 'read')}"), line
        async with store.reading() as connection:  # the commands that write wrote nothing
            revoked = await connection.execute(text("SELECT count(*) FROM token_revocations"))
            assert revoked.scalar_one() == 0


UNTOUCHED = {"revoke-tokens": "revoked", "copy-revocations": "copied"}
"""what the commands that write say they left undone (the readers: nothing was read)"""


async def test_a_store_to_copy_revocations_from_at_another_revision_is_refused(
    stores: StoreFactory,
) -> None:
    """``copy-revocations --from`` and ``rebuild --revocations-from`` read the source store's
    rows as their own release lays them out, as the readers above do."""
    source, target = await stores.store(), await stores.store()
    shown = make_url(source.url).render_as_string(hide_password=True)
    async with source.writing() as connection:
        await connection.execute(text(f"UPDATE alembic_version SET version_num = '{NEWER}'"))
    done = blackjack("projections", "copy-revocations", "--from", source.url, db_url=target.url)
    assert done.returncode == 3, (done.stdout + done.stderr)[-3000:]
    [line] = done.stderr.splitlines()
    assert line.startswith(f"blackjack: the store {shown} (--from): a newer release"), line
    assert line.endswith("; nothing was copied"), line
