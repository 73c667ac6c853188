"""The process fault drill (``measure_chaos``) at a small size: two ``blackjack handler``
processes and a ``blackjack projections run`` worker on PostgreSQL, players playing without
pause; every PostgreSQL process killed with SIGKILL under the worker while it folds (crash
recovery on restart; the server runs with ``synchronous_commit = off``, so the last commits
may be lost, and the worker must fold them again). Then: every command record answered
exactly once and every table's log folding to what its player saw (the load test's proof),
``blackjack audit`` passing on the read model, and each player's balance, as it saw it, equal
to the read model's account and to its deposit - stakes + payouts.

The other faults take longer than a test should (a handler's wait out a 10 s session
timeout; a new worker process's start, 20-30 s on a loaded machine): they are in the drill
(docs/load.md, "Process faults under load"; SIGKILL and SIGSTOP of a handler process, one
each, in ``test_handler_failover.py``). No timing threshold: only that the figures are
measured.

PostgreSQL is a server of the test's own (its port, its data directory): the other tests'
server must stay up, and the drill kills the one ``PG_PORT``/``PG_DATA_ROOT`` name."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration import infra

# the drill imports the projections' test helpers: marked first, as every test module does
from tests.integration.measure_chaos import ChaosConfig, run

pytestmark = pytest.mark.integration


@pytest.fixture
def private_postgres(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A PostgreSQL server started for this test alone, named to the drill through the
    environment; stopped (and its data removed) after it."""
    port = str(infra.below_ephemeral_ports(1)[0])
    # Under /tmp, not pytest's tmp_path: the server runs as the postgres user, which
    # cannot enter root's private pytest directories.
    root = tempfile.mkdtemp(prefix=f"blackjack-pg-faults-{port}-")
    env = {**os.environ, "PG_PORT": port, "PG_DATA_ROOT": root}
    script = str(infra.POSTGRES_SCRIPT)
    up = subprocess.run([script, "up"], env=env, check=True, capture_output=True, text=True)
    url = up.stdout.strip().splitlines()[-1]
    for name, value in (("PG_PORT", port), ("PG_DATA_ROOT", root)):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("BLACKJACK_TEST_PG_URL", url)
    try:
        yield url
    finally:
        subprocess.run([script, "down"], env=env, check=False, capture_output=True)
        subprocess.run(["rm", "-rf", root], check=False)


async def test_postgres_killed_under_the_worker_loses_and_doubles_nothing(
    tmp_path: Path, private_postgres: str
) -> None:
    lines: list[dict[str, Any]] = []
    config = ChaosConfig(
        tables=3,
        partitions=2,
        faults=1,
        kinds=("pg-kill",),
        settle_s=1.0,
        restart_after_s=0.5,
        pg_down_s=1.0,
        timeout_s=120.0,
        log_dir=tmp_path,
    )
    summary = await run(config, lines.append)
    kinds = {line["kind"]: line for line in lines}
    assert kinds["proof"]["ok"], kinds["proof"]["problems"]
    assert kinds["proof"]["missing_results"] == kinds["proof"]["duplicated_results"] == 0
    assert kinds["players_view"]["ok"], kinds["players_view"]["problems"]
    assert kinds["players_view"]["balances_equal"] == 3
    assert kinds["audit"]["ok"], kinds["audit"]["tail"]
    faults = [line for line in lines if line["kind"] == "fault"]
    assert [f["fault"] for f in faults] == ["pg-kill"]
    for one in faults:
        assert one["caught_up_after_s"] >= 0
    assert summary["ok"] and summary["rounds"] > 0
