"""``/readyz`` needs no token, so it answers why a projection is stuck or waiting with a reason
code and how long, never the error's text: a database error quotes the statement's SQL
parameters (a player's id, an amount), a refused record its data. The log keeps the text."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import exc as sql_errors
from structlog.testing import capture_logs

from blackjack.projections import health as health_module
from blackjack.projections.health import FoldHealth, probes
from blackjack.projections.revision import SchemaMismatch
from blackjack.projections.views import ProjectionError
from blackjack.projections.writer import Record

SECRET = "ann-4417"
TOPIC = "t-readyz.blackjack.events"


async def no_fallback(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("only the probes are asked")


async def readyz(health: FoldHealth) -> dict[str, Any]:
    transport = httpx.ASGITransport(app=probes(health, no_fallback))
    async with httpx.AsyncClient(transport=transport, base_url="http://worker") as http:
        answer = await http.get("/readyz")
    assert answer.status_code == 200 and SECRET not in answer.text
    report: dict[str, Any] = answer.json()["projections"]
    return report


def database_error() -> sql_errors.IntegrityError:
    return sql_errors.IntegrityError(
        "INSERT INTO accounts (player_id, available) VALUES (?, ?)",
        (SECRET, 1234),
        Exception("UNIQUE constraint failed: accounts.player_id"),
    )


async def test_a_stuck_record_is_answered_by_reason_and_time_and_logged_with_its_text() -> None:
    health = FoldHealth(stuck_after=2)
    poison = Record(TOPIC, 0, 17, b"")
    refused = Record(TOPIC, 1, 40, b"")
    with capture_logs() as logs:
        for _ in range(2):
            health.failed([poison], poison, database_error())
            health.failed([refused], refused, ProjectionError(f"{SECRET} has no account"))
    assert SECRET in str(database_error())  # what was on /readyz before
    report = await readyz(health)
    assert report["status"] == "stuck"
    assert [(f["partition"], f["reason"], f["error_type"]) for f in report["stuck"]] == [
        (0, "database_error", "IntegrityError"),
        (1, "fold_refused", "ProjectionError"),
    ]
    for failure in report["stuck"] + report["failing"]:
        assert "error" not in failure and failure["stuck_for_s"] >= 0
    stuck = [line for line in logs if line["event"] == "projection worker stuck"]
    assert len(stuck) == 2 and all(SECRET in line["error"] for line in stuck)


async def test_the_time_stuck_is_counted_from_the_first_failure(monkeypatch: Any) -> None:
    health = FoldHealth(stuck_after=1)
    poison = Record(TOPIC, 0, 17, b"")
    health.failed([poison], poison, ValueError(SECRET))
    later = health_module._now() + timedelta(seconds=90)
    monkeypatch.setattr(health_module, "_now", lambda: later)
    [failure] = (await readyz(health))["stuck"]
    assert (failure["reason"], failure["stuck_for_s"]) == ("fold_error", 90)


async def test_a_database_outage_is_answered_without_the_driver_s_message() -> None:
    health = FoldHealth()
    with capture_logs() as logs:
        health.store_failed(database_error())
    report = await readyz(health)
    store = report["store"]
    assert store["status"] == "unreachable" and store["reason"] == "store_unreachable"
    assert store["error_type"] == "IntegrityError" and store["unreachable_for_s"] >= 0
    assert "error" not in store
    assert health.store_outage is not None and SECRET in health.store_outage.error
    assert SECRET in str(logs[0]["exc_info"])  # the log has the trace


async def test_a_schema_mismatch_is_answered_by_reason_code_without_the_revisions() -> None:
    """The store at another release's schema: /readyz says which way (``store_newer`` or
    ``store_older``), not the message with the revision ids and what to run; the
    critical log line keeps them."""
    for newer, reason in ((True, "store_newer"), (False, "store_older")):
        health = FoldHealth()
        error = SchemaMismatch("0007", ("0099x",), newer=newer)
        with capture_logs() as logs:
            health.schema_mismatched(error)
        transport = httpx.ASGITransport(app=probes(health, no_fallback))
        async with httpx.AsyncClient(transport=transport, base_url="http://worker") as http:
            answer = await http.get("/readyz")
        assert answer.status_code == 503 and answer.json()["status"] == "schema_mismatch"
        assert "0099x" not in answer.text and "0007" not in answer.text
        report = answer.json()["projections"]
        assert (report["status"], report["schema_mismatch"]) == ("schema_mismatch", reason)
        [line] = [e for e in logs if e["event"] == "read model schema mismatch; the worker stops"]
        assert (line["found"], line["expected"]) == ("0099x", "0007") and "0099x" in line["error"]
