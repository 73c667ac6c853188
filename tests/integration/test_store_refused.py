"""A database that refuses the process (a wrong password in ``BLACKJACK_DB_URL``, a database
that does not exist), on the real PostgreSQL: ``blackjack projections run``, ``serve`` and the
tools over the store end with one typed line, the URL's password masked, and exit 4
(``store.EXIT_STORE_REFUSED``). Before, ``projections run`` and the tools ended in SQLAlchemy's
traceback (exit 1), and ``serve`` logged the trace and exited 1."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from blackjack.projections.store import EXIT_STORE_REFUSED
from tests.integration import cli_runs

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

WRONG = "not-the-Passw0rd-xyzzy"


def blackjack(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return cli_runs.blackjack(*args, env={**os.environ, **env}, timeout=120)


def refused_in_one_line(done: subprocess.CompletedProcess[str], reason: str) -> None:
    assert done.returncode == EXIT_STORE_REFUSED, done.stderr[-3000:]
    assert "Traceback" not in done.stderr + done.stdout
    [line] = done.stderr.splitlines()
    assert line.startswith("blackjack: the database refused this process: ")
    assert reason in line and ":***@" in line
    assert WRONG not in done.stderr + done.stdout


@pytest.mark.parametrize(
    "command",
    [
        ("projections", "run"),
        ("projections", "rebuild"),
        ("projections", "migrate"),
        ("projections", "dump"),
        ("projections", "revoke-tokens", "ann"),
    ],
)
def test_a_wrong_password_is_one_line_and_exit_4(
    command: tuple[str, ...], postgres_server_url: str
) -> None:
    wrong = make_url(postgres_server_url).set(password=WRONG)
    url = wrong.render_as_string(hide_password=False)
    done = blackjack(*command, "--db-url", url, BLACKJACK_KAFKA_BOOTSTRAP="127.0.0.1:1")
    refused_in_one_line(done, "password authentication failed")


def test_a_database_that_does_not_exist_is_one_line_too(postgres_server_url: str) -> None:
    url = make_url(postgres_server_url).set(database="bjp_no_such_database", password=WRONG)
    right = make_url(postgres_server_url).password
    done = blackjack(
        "projections",
        "run",
        "--db-url",
        url.set(password=right).render_as_string(hide_password=False),
    )
    assert done.returncode == EXIT_STORE_REFUSED, done.stderr[-3000:]
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1


def test_serve_with_a_wrong_password_is_one_line_and_exit_4(
    postgres_server_url: str, projection_bootstrap: str
) -> None:
    wrong = make_url(postgres_server_url).set(password=WRONG)
    with socket.socket() as probe:  # a free port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = blackjack(
        "serve",
        "--port",
        str(port),
        BLACKJACK_DB_URL=wrong.render_as_string(hide_password=False),
        BLACKJACK_KAFKA_BOOTSTRAP=projection_bootstrap,
        BLACKJACK_SHOE_KEY="ab" * 32,
        BLACKJACK_SHOE_KEY_FILE="",
    )
    refused_in_one_line(done, "password authentication failed")
    failed = [line for line in done.stdout.splitlines() if '"start failed"' in line]
    assert len(failed) == 1 and '"exception"' not in failed[0]  # logged without its trace


def test_a_copy_s_source_refusing_is_named_by_its_option(
    postgres_server_url: str, tmp_path: Path
) -> None:
    """``copy-revocations --from`` (and ``rebuild --revocations-from``) name the live store by
    their option: a wrong password there said "BLACKJACK_DB_URL or --db-url", the target's."""
    target = f"sqlite+aiosqlite:///{tmp_path / 'rebuilt.db'}"
    assert blackjack("projections", "migrate", "--db-url", target).returncode == 0
    wrong = make_url(postgres_server_url).set(password=WRONG)
    source = wrong.render_as_string(hide_password=False)
    for command in (
        ("copy-revocations", "--from", source),
        ("rebuild", "--revocations-from", source),
    ):
        done = blackjack(
            "projections", *command, "--db-url", target, BLACKJACK_KAFKA_BOOTSTRAP="127.0.0.1:1"
        )
        refused_in_one_line(done, "password authentication failed")
        assert f"{command[1]} names the store to copy from" in done.stderr
        assert "BLACKJACK_DB_URL" not in done.stderr
