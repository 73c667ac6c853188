"""``blackjack.domain.facts`` builds the decider's events without validating them: each one
built while playing the scenarios and simulated rounds of every preset must equal, dump and
serialize exactly like pydantic's validating constructor given the same values; and the
generated module must be what the models generate now."""

from __future__ import annotations

import inspect
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from blackjack.codegen import facts as codegen
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import facts
from blackjack.domain.fact import made
from blackjack.domain.rules import PRESETS
from blackjack.domain.state import INITIAL_STATE
from blackjack.scenario import load, run
from blackjack.simulation.player import CLOCK, SeededShuffler, play
from blackjack.strategy import compute_strategy
from blackjack.table import Applied, apply

Model = TypeVar("Model", bound=BaseModel)
SCENARIOS = sorted((Path(__file__).parents[1] / "scenarios").glob("**/*.yaml"))


def _play_everything() -> None:
    """The scenarios, simulated rounds of every preset, a player who leaves with a bet out
    while the other passes (SeatLeft, RoundCancelled), an interrupted round closed and a round
    voided."""
    for path in SCENARIOS:
        run(load(path), emit=lambda line: None)
    for rules in PRESETS.values():
        play(rules, compute_strategy(rules), 300, rules.min_bet, seed=11)
    state = INITIAL_STATE
    for command in (
        cmd.OpenTable(variant="atlantic-city-multi"),
        cmd.SitDown(player_id="a", seat=0),
        cmd.SitDown(player_id="b", seat=1),
        cmd.Deposit(player_id="a", amount=1000, transfer="wallet:a/1"),  # taken
        cmd.Deposit(player_id="a", amount=300, transfer="wallet:a/2"),  # taken
        cmd.Deposit(player_id="c", amount=300, transfer="wallet:c/1"),  # declined: no seat
        cmd.PlaceBet(player_id="a", box=0, amount=100),
        cmd.LeaveTable(player_id="a"),
        cmd.Pass(player_id="b"),
    ):
        result = apply(state, command, CLOCK, SeededShuffler(1))
        assert isinstance(result, Applied), result
        state = result.state
    # a bet left 30 days at the surrender table, returned when the operator closes the round
    state = INITIAL_STATE
    closing: list[tuple[cmd.Command, datetime]] = [
        (cmd.OpenTable(variant="surrender"), CLOCK),
        (cmd.SitDown(player_id="a", seat=0), CLOCK),
        (cmd.Deposit(player_id="a", amount=1000), CLOCK),
        (cmd.PlaceBet(player_id="a", box=0, amount=100), CLOCK),
        (cmd.CloseInterruptedRound(operator="o", idle_since=CLOCK), CLOCK + timedelta(days=30)),
    ]
    for closing_command, at in closing:
        result = apply(state, closing_command, at, SeededShuffler(1))
        assert isinstance(result, Applied), result
        state = result.state
    # a mini-h17 round voided for a malfunction once dealt
    state = INITIAL_STATE
    steps: list[cmd.Command] = [
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id="a", seat=0),
        cmd.Deposit(player_id="a", amount=1000),
        cmd.PlaceBet(player_id="a", box=0, amount=100),
        cmd.Deal(player_id="a"),
    ]
    for step in steps:
        result = apply(state, step, CLOCK, SeededShuffler(1))
        assert isinstance(result, Applied), result
        state = result.state
    assert state.hands_in_play  # seed 1 deals no blackjack here
    voiding = cmd.VoidRound(round=state.round, operator="o", reason="a malfunction")
    assert isinstance(apply(state, voiding, CLOCK, SeededShuffler(1)), Applied)


def _assert_same(built: BaseModel, validated: BaseModel) -> None:
    assert type(built) is type(validated)
    assert built == validated
    assert built.model_dump() == validated.model_dump()
    assert list(built.model_dump()) == list(validated.model_dump())  # key order
    assert built.model_dump_json() == validated.model_dump_json()
    assert repr(built) == repr(validated)
    assert built.model_fields_set == set(type(built).model_fields)  # the decider sets them all
    assert built.__pydantic_extra__ == validated.__pydantic_extra__
    assert built.__pydantic_private__ == validated.__pydantic_private__
    assert list(built.__dict__) == list(validated.__dict__)
    assert hash(built) == hash(validated)  # frozen models hash their fields
    for name, value in built.__dict__.items():  # same types, e.g. tuples stay tuples
        assert type(value) is type(validated.__dict__[name]), name


def test_every_model_the_decider_builds_equals_validated_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each model built by a generated constructor is also built by ``cls(**values)``."""
    built_types: set[type[BaseModel]] = set()

    def checking_made(cls: type[Model], values: dict[str, Any], names: set[str]) -> Model:
        built = made(cls, values, names)
        _assert_same(built, cls(**values))
        built_types.add(cls)
        return built

    monkeypatch.setattr(facts, "made", checking_made)
    _play_everything()
    assert built_types == {*codegen.built_models()}


def test_the_generated_module_is_what_the_models_generate() -> None:
    assert codegen.TARGET.read_text() == codegen.render(), "run make facts"


@pytest.mark.parametrize("model", codegen.built_models(), ids=lambda m: m.__name__)
def test_each_constructor_takes_the_fields_of_its_model(model: type[BaseModel]) -> None:
    """Keyword-only, one per field but ``type`` and ``version``, the same ones required, the
    same defaults."""
    parameters = inspect.signature(getattr(facts, codegen.function_name(model))).parameters
    fields = {n: f for n, f in model.model_fields.items() if n not in codegen.FIXED}
    assert list(parameters) == list(fields)
    for name, parameter in parameters.items():
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        default = fields[name].default
        expected = inspect.Parameter.empty if default is PydanticUndefined else default
        assert parameter.default == expected, name


def test_fixed_fields_take_the_models_current_defaults() -> None:
    refund = facts.bet_refunded(
        round=1, player_id="p", box=0, amount=5, reason="cleared", balance_after=5
    )
    assert refund.version == 2 and refund.type == "BetRefunded" and refund.box_total == 0


def test_defaults_are_filled_like_validation() -> None:
    dealt = facts.card_dealt(round=3, to="dealer", card=None, face_up=False)
    assert dealt == ev.CardDealt(round=3, to="dealer", card=None, face_up=False)
    assert dealt.version == 1 and dealt.type == "CardDealt" and dealt.box is None
    assert dealt.model_fields_set == set(ev.CardDealt.model_fields)
    settled = facts.round_settled(round=1, dealer_total=20, dealer_blackjack=False, results=())
    assert settled.messages == ()


def test_unknown_or_missing_fields_are_refused() -> None:
    hit: Any = facts.player_hit
    with pytest.raises(TypeError, match="colour"):
        hit(round=1, player_id="p", box=0, hand=0, colour="red")
    with pytest.raises(TypeError, match="player_id"):
        hit(round=1, box=0, hand=0)


def test_the_shared_fields_set_survives_model_copy() -> None:
    one = facts.player_hit(round=1, player_id="p", box=0, hand=0)
    two = facts.player_hit(round=2, player_id="q", box=1, hand=0)
    copied = one.model_copy(update={"round": 5})
    copied.model_fields_set.discard("round")
    assert two.model_fields_set == set(ev.PlayerHit.model_fields)
