"""``fact`` builds the decider's events without validating them: each one built while
playing the scenarios and simulated rounds of every preset must equal, dump and serialize
exactly like the same call of pydantic's validating constructor."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from blackjack.domain import commands as cmd
from blackjack.domain import decide
from blackjack.domain import events as ev
from blackjack.domain.fact import fact
from blackjack.domain.rules import PRESETS
from blackjack.domain.state import INITIAL_STATE
from blackjack.scenario import load, run
from blackjack.simulation.player import CLOCK, SeededShuffler, play
from blackjack.strategy import compute_strategy
from blackjack.table import Applied, apply

Model = TypeVar("Model", bound=BaseModel)
SCENARIOS = sorted((Path(__file__).parents[1] / "scenarios").glob("*.yaml"))


def _play_everything() -> None:
    """The scenarios, simulated rounds of every preset, and a player who leaves with a bet out
    while the other passes (SeatLeft, RoundCancelled)."""
    for path in SCENARIOS:
        run(load(path), emit=lambda line: None)
    for rules in PRESETS.values():
        play(rules, compute_strategy(rules), 300, rules.min_bet, seed=11)
    state = INITIAL_STATE
    for command in (
        cmd.OpenTable(variant="atlantic-city-multi"),
        cmd.SitDown(player_id="a", seat=0),
        cmd.SitDown(player_id="b", seat=1),
        cmd.Deposit(player_id="a", amount=1000),
        cmd.Deposit(player_id="a", amount=300, transfer="wallet:a/1"),  # taken
        cmd.Deposit(player_id="c", amount=300, transfer="wallet:c/1"),  # declined: no seat
        cmd.PlaceBet(player_id="a", box=0, amount=100),
        cmd.LeaveTable(player_id="a"),
        cmd.Pass(player_id="b"),
    ):
        result = apply(state, command, CLOCK, SeededShuffler(1))
        assert isinstance(result, Applied), result
        state = result.state


def _assert_same(built: BaseModel, validated: BaseModel) -> None:
    assert type(built) is type(validated)
    assert built == validated
    assert built.model_dump() == validated.model_dump()
    assert list(built.model_dump()) == list(validated.model_dump())  # key order
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_dump_json(exclude_unset=True) == validated.model_dump_json(
        exclude_unset=True
    )
    assert repr(built) == repr(validated)
    assert built.model_fields_set == validated.model_fields_set
    assert built.__pydantic_extra__ == validated.__pydantic_extra__
    assert built.__pydantic_private__ == validated.__pydantic_private__
    assert list(built.__dict__) == list(validated.__dict__)
    assert hash(built) == hash(validated)  # frozen models hash their fields
    for name, value in built.__dict__.items():  # same types, e.g. tuples stay tuples
        assert type(value) is type(validated.__dict__[name]), name


def test_every_fact_of_the_decider_equals_validated_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each ``fact(cls, **fields)`` call of the decider is also made as ``cls(**fields)``."""
    built_types: set[type[BaseModel]] = set()

    def checking_fact(cls: type[Model], **fields: Any) -> Model:
        built = fact(cls, **fields)
        _assert_same(built, cls(**fields))
        built_types.add(cls)
        return built

    monkeypatch.setattr(decide, "fact", checking_fact)
    _play_everything()
    assert built_types == {*ev.EVENT_TYPES, ev.PlayerRoundResult, ev.BoxMessage}


def test_fact_fills_defaults_like_validation() -> None:
    dealt = fact(ev.CardDealt, round=3, to="dealer", card=None, face_up=False)
    assert dealt == ev.CardDealt(round=3, to="dealer", card=None, face_up=False)
    assert dealt.version == 1 and dealt.type == "CardDealt" and dealt.box is None
    assert dealt.model_fields_set == {"round", "to", "card", "face_up"}
    settled = fact(ev.RoundSettled, round=1, dealer_total=20, dealer_blackjack=False, results=())
    assert settled.messages == () and "messages" not in settled.model_fields_set


def test_fact_refuses_missing_and_unknown_fields() -> None:
    with pytest.raises(TypeError, match="missing fields \\['player_id'\\]"):
        fact(ev.PlayerHit, round=1, box=0, hand=0)
    with pytest.raises(TypeError, match="unknown fields \\['colour'\\]"):
        fact(ev.PlayerHit, round=1, player_id="p", box=0, hand=0, colour="red")
