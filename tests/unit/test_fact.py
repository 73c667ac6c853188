"""``fact`` builds the decider's events without validating them: each one built while
playing the scenarios and simulated rounds of every preset must equal, dump and serialize
exactly like the same call of pydantic's validating constructor."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

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
SOURCE = Path(__file__).parents[2] / "services" / "blackjack"
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
    assert repr(built) == repr(validated)
    assert built.model_fields_set == set(type(built).model_fields)  # the decider sets them all
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
    assert dealt.model_fields_set == set(ev.CardDealt.model_fields)
    settled = fact(ev.RoundSettled, round=1, dealer_total=20, dealer_blackjack=False, results=())
    assert settled.messages == ()


def test_fact_refuses_unknown_fields() -> None:
    with pytest.raises(TypeError, match="unknown fields \\['colour'\\]"):
        fact(ev.PlayerHit, round=1, player_id="p", box=0, hand=0, colour="red")


def test_a_fact_missing_a_required_field_cannot_be_serialized() -> None:
    """The source check below is what prevents it; this is what would happen without it."""
    half_made = fact(ev.PlayerHit, round=1, box=0, hand=0)
    with pytest.raises(PydanticSerializationError):
        half_made.model_dump_json()


def test_the_shared_fields_set_survives_model_copy() -> None:
    one = fact(ev.PlayerHit, round=1, player_id="p", box=0, hand=0)
    two = fact(ev.PlayerHit, round=2, player_id="q", box=1, hand=0)
    copied = one.model_copy(update={"round": 5})
    copied.model_fields_set.discard("round")
    assert two.model_fields_set == set(ev.PlayerHit.model_fields)


FactCall = tuple[str, type[BaseModel], set[str]]  # where, the class, the names given
_MODULES = {"ev": ev, "cmd": cmd}


def _classes(expression: ast.expr) -> list[type[BaseModel]] | None:
    """``ev.X``, or ``ev.X | ev.Y`` (a parameter's ``type[...]``): the classes it names."""
    if isinstance(expression, ast.BinOp) and isinstance(expression.op, ast.BitOr):
        left, right = _classes(expression.left), _classes(expression.right)
        return None if left is None or right is None else left + right
    if (
        isinstance(expression, ast.Attribute)
        and isinstance(expression.value, ast.Name)
        and expression.value.id in _MODULES
    ):
        return [getattr(_MODULES[expression.value.id], expression.attr)]
    return None


def _parameter_classes(function: ast.FunctionDef, name: str) -> list[type[BaseModel]] | None:
    """The classes of a parameter annotated ``type[ev.X | ev.Y]``."""
    arguments = function.args
    for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
        annotation = argument.annotation
        if (
            argument.arg == name
            and isinstance(annotation, ast.Subscript)
            and isinstance(annotation.value, ast.Name)
            and annotation.value.id == "type"
        ):
            return _classes(annotation.slice)
    return None


def _fact_calls(source: Path) -> list[FactCall]:
    """Every ``fact(ev.Class, name=...)`` call under ``source``, one entry per class it can
    build. A call in any other shape is an error: its names could not be checked."""
    calls: list[FactCall] = []
    for path in sorted(source.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "fact"
            ):
                continue
            where = f"{path.relative_to(source)}:{node.lineno}"
            target = node.args[0] if len(node.args) == 1 else None
            classes = None if target is None else _classes(target)
            if isinstance(target, ast.Name):  # a parameter of the function around the call
                around = [f for f in functions if f.lineno <= node.lineno <= (f.end_lineno or 0)]
                classes = _parameter_classes(around[-1], target.id) if around else None
            assert classes and all(k.arg is not None for k in node.keywords), (
                f"{where}: call fact(ev.Event, name=value, ...) so that its names can be checked"
            )
            names = {keyword.arg for keyword in node.keywords if keyword.arg is not None}
            calls.extend((where, model, names) for model in classes)
    return calls


def _check(calls: list[FactCall]) -> None:
    for where, model, names in calls:
        required = {name for name, field in model.model_fields.items() if field.is_required()}
        assert required <= names, f"{where}: {model.__name__} misses {sorted(required - names)}"
        unknown = names - set(model.model_fields)
        assert not unknown, f"{where}: {model.__name__} has no fields {sorted(unknown)}"


def test_every_fact_call_in_the_source_names_each_required_field_and_no_other() -> None:
    calls = _fact_calls(SOURCE)
    assert len(calls) >= 40  # the decider's events and the simulator's shuffle
    _check(calls)


def test_the_source_check_finds_a_missing_field(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("fact(ev.PlayerHit, round=1, box=0, hand=0)\n")
    with pytest.raises(AssertionError, match=r"bad.py:1: PlayerHit misses \['player_id'\]"):
        _check(_fact_calls(tmp_path))
