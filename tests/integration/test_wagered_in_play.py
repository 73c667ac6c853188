"""The money a round in play holds, as the query API shows it at each of its events, on SQLite
and PostgreSQL: ``current_round.players[].wagered`` of ``/v1/tables/{id}`` is every bet,
insurance, split and double placed so far, less a bet taken back (what a player's screen and a
platform's game recall show as wagered while the round plays), and the settlement's figure once
it settles.

Found following the README: it read 0 until the round settled."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from blackjack.api.routes import query_api
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import (
    SHOE_KEY,
    Script,
    StoreFactory,
    event_records,
)

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

A = "alice"
STAKES = {
    ev.BetPlaced: 1,
    ev.BetRefunded: -1,
    ev.InsuranceTaken: 1,
    ev.HandSplit: 1,
    ev.HandDoubled: 1,
}


def a_round() -> Script:
    """mini-h17: chips of 1000 and 500 on the box, 500 taken back; 8 8 against an ace, insured,
    no dealer blackjack; split, the first 8 doubled to 21, the second stands on 18."""
    script = Script("mini-h17", [["8H", "AS", "8D", "7C", "3S", "TD", "TH"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=0, amount=500),
        cmd.RemoveBet(player_id=A, box=0, amount=500),
        cmd.Deal(player_id=A),
        cmd.TakeInsurance(player_id=A, box=0),
        cmd.Split(player_id=A, box=0),
        cmd.Double(player_id=A, box=0),
        cmd.Stand(player_id=A, box=0),
    )
    return script


async def test_a_round_in_play_shows_the_money_it_holds_as_wagered(stores: StoreFactory) -> None:
    script = a_round()
    types = [type(e.data) for e in script.envelopes]
    assert set(STAKES) <= set(types) and ev.RoundSettled in types
    store = await stores.store()
    writer = ProjectionWriter(store)
    records = event_records(script.envelopes, ShoeSeal.from_hex(SHOE_KEY))
    held = 0
    seen: list[int] = []
    transport = httpx.ASGITransport(app=query_api(store))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        for envelope, record in zip(script.envelopes, records, strict=True):
            await writer.apply([record])
            data = envelope.data
            sign = STAKES.get(type(data), 0)
            if sign:
                held += sign * data.amount  # type: ignore[union-attr]
            if isinstance(data, ev.RoundSettled):
                break
            table: Any = (await client.get(f"/v1/tables/{script.stream_id}")).json()
            current = table["current_round"]
            if current is None or not current["players"]:
                continue
            (player,) = current["players"]
            assert player["wagered"] == held, type(data).__name__
            # the line still adds up while the round plays: the money out of the balance
            assert player["balance_before"] - player["wagered"] == player["balance_after"] or (
                isinstance(data, ev.HandSettled | ev.InsuranceSettled)
            )
            seen.append(held)
        settled = next(e.data for e in script.envelopes if isinstance(e.data, ev.RoundSettled))
        (result,) = settled.results
        assert result.wagered == held == 1000 + 500 + 1000 + 1000  # bet, insurance, split, double
        assert {1000, 1500, 2500, 3500} <= set(seen)
        (line,) = (await client.get(f"/v1/rounds/{script.stream_id}:1")).json()["players"]
        assert (line["wagered"], line["paid"], line["net"]) == (
            result.wagered,
            result.paid,
            result.net,
        )
