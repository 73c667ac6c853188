"""Finding interrupted rounds in the read model: the open rounds of tables with no event
since a moment, with the money each player has in them (the query API's
``/v1/interrupted-rounds`` and ``blackjack projections interrupted``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from blackjack.api.routes import query_api
from blackjack.cli import main
from blackjack.domain import commands as cmd
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import encode, to_wire
from blackjack.projections.queries import interrupted_rounds
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration.conftest_projections import Script

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())


def tables() -> tuple[Script, Script, Script]:
    """surrender-1: alice's hand left waiting mid-round; ac-1: a round played to its end;
    mini-1: a round left waiting at a table whose rules let no one close it (not listed)."""
    waiting = Script("surrender", [["TS", "6H", "5S", "TD", "9C"]], stream_id="surrender-1")
    waiting.do(cmd.PlaceBet(player_id="alice", box=0, amount=1_000), cmd.Deal(player_id="alice"))
    done = Script("atlantic-city", [["TH", "7S", "9H", "QD"]], stream_id="ac-1")
    done.do(
        cmd.PlaceBet(player_id="alice", box=0, amount=1_000),
        cmd.Deal(player_id="alice"),
        cmd.Stand(player_id="alice", box=0),
    )
    forever = Script("mini-h17", [["TS", "6H", "5S", "TD", "9C"]], stream_id="mini-1")
    forever.now -= timedelta(days=1)  # the longest waiting: it would come first
    forever.do(cmd.PlaceBet(player_id="alice", box=0, amount=500), cmd.Deal(player_id="alice"))
    return waiting, done, forever


async def fold(store: ProjectionStore, *scripts: Script) -> None:
    await fold_envelopes(store, [e for script in scripts for e in script.envelopes])


async def fold_envelopes(
    store: ProjectionStore, envelopes: list[EventEnvelope], first_offset: int = 0
) -> None:
    records = [
        Record("events", 0, first_offset + i, encode(to_wire(e, SEAL)))
        for i, e in enumerate(envelopes)
    ]
    await ProjectionWriter(store).apply(records)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ProjectionStore]:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    await store.migrate()
    yield store
    await store.close()


async def test_the_open_rounds_of_idle_tables_are_listed_with_the_money_in_them(
    store: ProjectionStore,
) -> None:
    waiting, done, forever = tables()
    await fold(store, waiting, done, forever)
    last_event = waiting.envelopes[-1].occurred_at
    async with store.reading() as connection:
        [found] = await interrupted_rounds(connection, last_event, 1)
        assert await interrupted_rounds(connection, last_event - timedelta(seconds=1), 100) == []
    assert found == {
        "round_id": "surrender-1:1",
        "table": "surrender-1",
        "round": 1,
        "variant": "surrender",
        "status": "playing",
        "opened_at": found["opened_at"],
        "idle_since": last_event.isoformat().replace("+00:00", "Z"),
        "closable_from": (last_event + timedelta(days=30)).isoformat().replace("+00:00", "Z"),
        "in_play": {"alice": 1_000},
    }


async def test_a_round_the_operator_closed_is_no_longer_listed(store: ProjectionStore) -> None:
    waiting, _, _ = tables()
    idle_since = waiting.now
    waiting.now += timedelta(days=30)
    waiting.do(cmd.CloseInterruptedRound(operator="ops", idle_since=idle_since))
    await fold(store, waiting)
    async with store.reading() as connection:
        assert await interrupted_rounds(connection, waiting.now + timedelta(days=1), 100) == []


async def test_the_api_lists_them(store: ProjectionStore) -> None:
    await fold(store, *tables())  # played in March 2026: more than 30 days ago
    transport = httpx.ASGITransport(app=query_api(store))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        answer = await http.get("/v1/interrupted-rounds?idle_days=30")
        assert answer.status_code == 200
        assert [r["round_id"] for r in answer.json()["rounds"]] == ["surrender-1:1"]
        # every table: the round waiting for its player at mini-1 too, the longest waiting
        # first, with no time from which it may be closed (GLI-19's unfinished games: an
        # operator could list only the closable ones, a certification review found)
        every = (await http.get("/v1/interrupted-rounds?idle_days=30&tables=all")).json()
        assert [(r["round_id"], r["closable_from"]) for r in every["rounds"]] == [
            ("mini-1:1", None),
            ("surrender-1:1", every["rounds"][1]["closable_from"]),
        ]
        assert every["rounds"][0]["in_play"] == {"alice": 500}
        assert every["rounds"][1]["closable_from"] is not None
        for bad in ("idle_days=0", "idle_days=x", "limit=101", "idle_days=3651", "tables=some"):
            refused = await http.get(f"/v1/interrupted-rounds?{bad}")
            assert refused.status_code == 400, bad
            assert refused.json()["error"]["code"] == "bad_parameter"


def test_the_cli_lists_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'read.db'}"

    async def folded() -> None:
        store = ProjectionStore(url)
        await store.migrate()
        await fold(store, *tables())
        await store.close()

    asyncio.run(folded())
    assert main(["projections", "interrupted", "--db-url", url, "--idle-days", "30"]) == 0
    out = capsys.readouterr().out
    assert "surrender-1:1  surrender  playing" in out and "in play: alice 1000" in out
    assert out.splitlines()[-1].startswith("1 round(s) open with no event since ")
    assert "mini-1" not in out
    assert main(["projections", "interrupted", "--db-url", url, "--all-tables"]) == 0
    out = capsys.readouterr().out
    assert "mini-1:1  mini-h17  playing" in out and "waits for its player" in out
    assert "surrender-1:1" in out and out.splitlines()[-1].endswith("at every table")
    assert main(["projections", "interrupted", "--db-url", url, "--idle-days", "0"]) == 2
