"""Game recall shows which decisions the server made in a player's place (GLI-19): each entry
of a round's log in the query API names its command and, for a decision, who made it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest

from blackjack.api.routes import query_api
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decided_by import PLAYER_DECISIONS, WRITTEN_FOR_THE_PLAYER, decided_by
from blackjack.projections.store import ProjectionStore
from tests.integration.conftest_projections import Script
from tests.unit.test_interrupted_query import fold


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[ProjectionStore, httpx.AsyncClient]]:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    await store.migrate()
    transport = httpx.ASGITransport(app=query_api(store))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        yield store, http
    await store.close()


async def recalled_log(
    api: tuple[ProjectionStore, httpx.AsyncClient], script: Script, round_id: str
) -> list[dict[str, Any]]:
    store, http = api
    await fold(store, script)
    answer = await http.get(f"/v1/rounds/{round_id}")
    assert answer.status_code == 200
    log: list[dict[str, Any]] = answer.json()["log"]
    return log


def decisions(log: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [
        (e["event"], e["data"]["player_id"], e["decided_by"])
        for e in log
        if e["decided_by"] is not None
    ]


async def test_a_turn_the_clock_ran_out_is_the_servers_decision(
    api: tuple[ProjectionStore, httpx.AsyncClient],
) -> None:
    """atlantic-city-multi: ann stands herself, ben's turn timer runs out."""
    table = Script(
        "atlantic-city-multi",
        [["TS", "9S", "7S", "8H", "TD", "TH"]],
        players={"ann": 10_000, "ben": 10_000},
    )
    table.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1_000),
        cmd.PlaceBet(player_id="ben", box=1, amount=1_000),
        cmd.Deal(player_id="ann"),
        cmd.Deal(player_id="ben"),
        cmd.Stand(player_id="ann", box=0),
    )
    deadline = table.state.deadline
    assert deadline is not None
    table.now = deadline
    expired = table.do(cmd.ExpireTimers())
    log = await recalled_log(api, table, "table-1:1")
    assert decisions(log) == [
        ("BetPlaced", "ann", "player"),
        ("BetPlaced", "ben", "player"),
        ("DealRequested", "ann", "player"),
        ("DealRequested", "ben", "player"),
        ("PlayerStood", "ann", "player"),
        ("PlayerStood", "ben", "server"),
    ]
    clock = {e["command_id"] for e in log if e["sequence"] >= expired[0].sequence}
    assert clock == {expired[0].causation_id}  # the clock's command wrote the rest
    assert all(e["command_id"] is not None for e in log)
    assert [e["decided_by"] for e in log if e["event"] == "CardDealt"] == [None] * 6


async def test_an_operators_closing_decides_for_the_player(
    api: tuple[ProjectionStore, httpx.AsyncClient],
) -> None:
    table = Script("surrender", [["TS", "6H", "5S", "TD", "9C"]])
    table.do(cmd.PlaceBet(player_id="alice", box=0, amount=1_000), cmd.Deal(player_id="alice"))
    idle_since = table.now
    table.now += timedelta(days=30)
    table.do(cmd.CloseInterruptedRound(operator="ops", idle_since=idle_since))
    log = await recalled_log(api, table, "table-1:1")
    assert decisions(log)[-1] == ("PlayerStood", "alice", "server")
    timed_out = next(e for e in log if e["event"] == "PlayerTimedOut")
    stood = next(e for e in log if e["event"] == "PlayerStood")
    assert timed_out["command_id"] == stood["command_id"] != log[0]["command_id"]


def test_a_timeout_hands_over_only_its_players_next_decision() -> None:
    timed_out = (ev.PlayerTimedOut.__name__, "ben")
    assert decided_by("PlayerStood", "ben", [timed_out]) == "server"
    assert decided_by("PlayerStood", "ann", [timed_out]) == "player"  # another player's
    stood = ("PlayerStood", "ben")
    assert decided_by("PlayerStood", "ben", [timed_out, stood]) == "player"  # already taken
    # a closing stands every hand left: one timeout for each
    assert decided_by("PlayerStood", "ben", [timed_out, stood, timed_out]) == "server"
    assert decided_by("PlayerHit", "ben", [timed_out]) == "player"  # no timeout hits
    assert decided_by("CardDealt", "ben", [timed_out]) is None


def test_every_timeout_action_names_the_decision_it_writes() -> None:
    actions = get_args(ev.PlayerTimedOut.model_fields["action"].annotation)
    assert set(WRITTEN_FOR_THE_PLAYER) == set(actions)
    names = {e.__name__ for e in ev.Event.__subclasses__()} | {
        e.__name__ for e in ev.RoundEvent.__subclasses__()
    }
    assert names >= PLAYER_DECISIONS
    assert {t for t in WRITTEN_FOR_THE_PLAYER.values() if t} <= PLAYER_DECISIONS


async def test_a_bet_given_back_says_who_gave_it_back(
    api: tuple[ProjectionStore, httpx.AsyncClient],
) -> None:
    """A bet taken back by its player (RemoveBet, ClearBets) is the player's decision; one the
    server returns in the player's place (a disconnection before Deal, page 003) is the
    server's. The lab's recall of a cancelled round showed the refund with no one deciding."""
    table = Script("surrender", [["TS", "6H", "5S", "TD", "9C"]])
    table.do(
        cmd.PlaceBet(player_id="alice", box=0, amount=1_000),
        cmd.PlaceBet(player_id="alice", box=1, amount=1_000),
        cmd.RemoveBet(player_id="alice", box=1),
        cmd.ClearBets(player_id="alice"),
        cmd.PlaceBet(player_id="alice", box=0, amount=1_000),
        cmd.Disconnect(player_id="alice"),
    )
    refunds = []
    for cycle in ("table-1:1", "table-1:2"):  # every bet taken back ends its cycle
        log = await recalled_log(api, table, cycle)
        refunds.append(
            [(e["data"]["reason"], e["decided_by"]) for e in log if e["event"] == "BetRefunded"]
        )
    assert refunds == [[("removed", "player"), ("cleared", "player")], [("disconnected", "server")]]


async def test_bets_returned_by_an_operators_closing_are_the_servers(
    api: tuple[ProjectionStore, httpx.AsyncClient],
) -> None:
    table = Script("surrender", [["TS", "6H", "5S", "TD", "9C"]])
    table.do(cmd.PlaceBet(player_id="alice", box=0, amount=1_000))
    idle_since = table.now
    table.now += timedelta(days=30)
    table.do(cmd.CloseInterruptedRound(operator="ops", idle_since=idle_since))
    log = await recalled_log(api, table, "table-1:1")
    assert [(e["data"]["reason"], e["decided_by"]) for e in log if e["event"] == "BetRefunded"] == [
        ("cancelled", "server")
    ]
    assert log[-1]["event"] == "RoundCancelled"


def test_every_refund_reason_says_who_decided_it() -> None:
    reasons = get_args(ev.RefundReason)
    by = {reason: decided_by("BetRefunded", "ann", [], {"reason": reason}) for reason in reasons}
    assert by == {
        "cleared": "player",
        "removed": "player",
        "passed": "player",
        "left": "player",
        "timed_out": "server",
        "disconnected": "server",
        "cancelled": "server",
        "stood_up": "server",
    }


async def test_bets_returned_by_an_operators_stand_up_are_the_servers(
    api: tuple[ProjectionStore, httpx.AsyncClient],
) -> None:
    """The operator stands ann up (a platform's self-exclusion) with her bet on the layout:
    the bet given back is no decision of hers, as her seat left is not (``operator``)."""
    table = Script(
        "atlantic-city-multi", [["TS", "9S", "7S", "8H"]], players={"ann": 10_000, "ben": 10_000}
    )
    table.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1_000),
        cmd.PlaceBet(player_id="ben", box=1, amount=1_000),
        cmd.StandUpPlayer(player_id="ann", operator="ops", reason="self-excluded"),
    )
    log = await recalled_log(api, table, "table-1:1")
    refunds = [(e["data"]["reason"], e["decided_by"]) for e in log if e["event"] == "BetRefunded"]
    assert refunds == [("stood_up", "server")]
    assert [(e["data"]["reason"], e["decided_by"]) for e in log if e["event"] == "SeatLeft"] == [
        ("operator", "server")
    ]
