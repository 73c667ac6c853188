"""A table's state survives its snapshot document: every state reached while playing rounds of
every preset (and a shared table with timers, insurance and a buy-in) comes back equal from the
JSON of ``to_doc``."""

from __future__ import annotations

import inspect
import json
from datetime import UTC, datetime

import pytest

from blackjack.domain.rules import PRESETS
from blackjack.domain.state import Box, Hand, Player, Shoe, TableState
from blackjack.simulation.player import play
from blackjack.strategy import compute_strategy
from blackjack.table import Applied


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_state_comes_back_from_its_document(name: str) -> None:
    rules = PRESETS[name]
    seen: list[TableState] = []

    def watch(applied: Applied) -> None:
        seen.append(applied.state)

    play(rules, compute_strategy(rules), 60, rules.min_bet, seed=3, watch=watch)
    assert len(seen) > 120
    for state in seen:
        document = json.loads(json.dumps(state.to_doc()))
        assert TableState.from_doc(document) == state
        assert TableState.from_doc(document).to_doc() == document


def test_a_state_with_every_kind_of_field_comes_back() -> None:
    state = TableState(
        opened=True,
        rules=PRESETS["surrender"],
        players={"ann": Player(player_id="ann", seat=1, balance=7, last_bets=((0, 500),))},
        shoe=Shoe(number=3, order=("AS", "TD"), salt="s", commitment="c", position=1),
        round=4,
        round_open=True,
        phase="insurance",
        boxes=(Box(player_id="ann", bet=500, hands=(Hand(cards=("AS", "TD"), stake=500),)),),
        dealer=("AH", "9C"),
        active=(0, 0),
        deadline=datetime(2026, 1, 1, 12, 0, 15, tzinfo=UTC),
        buy_ins={"wallet:ann": 2, "wallet:bob": 7},
    )
    document = json.loads(json.dumps(state.to_doc()))
    assert document["buy_ins"] == {"wallet:ann": 2, "wallet:bob": 7}
    assert TableState.from_doc(document) == state
    assert TableState.from_doc(document) != TableState()


def test_an_older_snapshot_s_list_of_buy_ins_becomes_the_last_number_per_wallet() -> None:
    # Before, a table's snapshot listed every buy-in reference it had handled.
    document = TableState().to_doc()
    del document["buy_ins"]
    document["transfers"] = ["wallet:ann/1", "wallet:a/b/3", "wallet:ann/12", "wallet:ann/2"]
    state = TableState.from_doc(document)
    assert state.buy_ins == {"wallet:ann": 12, "wallet:a/b": 3}
    document["transfers"] = ["wallet:ann/x"]
    with pytest.raises(ValueError, match="not a buy-in reference"):
        TableState.from_doc(document)


@pytest.mark.parametrize("cls", [Hand, Box, Player, Shoe, TableState])
def test_every_constructor_argument_is_a_compared_and_saved_field(
    cls: type[Hand | Box | Player | Shoe | TableState],
) -> None:
    # Equality, repr and the snapshot document all read ``_FIELDS``: a field left out of it
    # would be silently ignored by all three.
    parameters = [name for name in inspect.signature(cls.__init__).parameters if name != "self"]
    assert list(cls._FIELDS) == parameters
