"""What the game performance report's ``cancelled`` counts: every round that closed with no
box dealt (``RoundCancelled``), and most are no operator's doing: a shared table's round whose
only bet was taken back, its players passing or leaving, closes so. The published descriptions
must say that, or a regulator reads a count of operator interventions."""

from __future__ import annotations

from blackjack.api.contract import openapi_document
from blackjack.domain import commands as cmd
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import to_wire
from blackjack.projections.metrics import ROUNDS_CLOSED
from blackjack.projections.projector import StreamProjection
from tests.integration.conftest_projections import Script

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())


def test_a_round_no_one_was_dealt_in_is_cancelled_and_said_to_be_so() -> None:
    script = Script("atlantic-city-multi", [[]], players={"ann": 10_000, "ben": 10_000})
    script.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.RemoveBet(player_id="ann", box=0),
        cmd.Pass(player_id="ann"),
        cmd.Pass(player_id="ben"),
    )
    types = [e.type for e in script.envelopes]
    assert types[-1] == "RoundCancelled" and "InterruptedRoundClosed" not in types
    projection = StreamProjection.new("table-1")
    for envelope in (e for e in script.envelopes if e.stream_id == "table-1"):
        projection.apply(to_wire(envelope, SEAL))
    (day,) = projection.days.values()
    assert (day.rounds, day.cancelled, day.wagered) == (0, 1, 0)
    # what the answer's and the counter's readers are told it counts
    line = openapi_document()["components"]["schemas"]["GameLine"]["properties"]
    for said in (line["cancelled"]["description"], ROUNDS_CLOSED._documentation):
        assert "no box dealt" in said, said
