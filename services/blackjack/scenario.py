"""Scripted rounds through the real decider, for people and for tests.

A scenario file (YAML) names a variant, the players and their balances, the exact order in which
cards leave the shoe, and the commands in order. The runner prints every event as a JSON line
and ends with one JSON summary line. Expectations written in the file (``reject:``, ``offered:``
per step, ``expect:`` at the end) are checked; ``failures`` lists every one that did not hold.

Card order: first each box in seat order and then the dealer's first card; then each box's
second card and then the dealer's second card; then every further card in order of play. The
dealer's first card is the upcard and the second the hole card, except under
``hole_card_first`` (mini-s17), where the first is the hole card and the second the upcard.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.cards import RANKS, fresh_shoe, parse_card
from blackjack.domain.decisions.funds import first_funding
from blackjack.domain.legal import legal_actions
from blackjack.domain.rejections import Rejection, in_one_line
from blackjack.domain.rules import Rules
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.messages.envelope import type_name
from blackjack.table import apply

_COMMAND = TypeAdapter(cmd.AnyCommand)
_COMMAND_TYPES = frozenset(type_name(t) for t in cmd.COMMAND_TYPES)
DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)


class ScenarioError(ValueError):
    """A scenario the runner cannot play (its table refused, a card its shoe does not hold):
    ``blackjack scenario`` says so in one line, exit 2; exit 1 is for an expectation that
    does not hold."""


MAX_AT_S = 10**9
"""The latest ``at:`` of a step, in seconds after the scenario's start (about 31 years)."""


def _checked_step(step: str | dict[str, Any]) -> str | dict[str, Any]:
    """A step the runner can read: its command's type named in ``do`` (a string), ``at`` a
    number of seconds, ``offered`` a list of buttons, ``reject`` a code, ``player`` an id.
    (Before, each of these wrong ended the run in a traceback and exit 1, read as a failed
    expectation.)"""
    if isinstance(step, str):
        return step
    kind = step.get("do")
    if not isinstance(kind, str):
        raise ValueError(f"a step names its command in do: (a string), not {step!r}"[:300])
    at = step.get("at", 0)
    if isinstance(at, bool) or not isinstance(at, int | float) or not 0 <= at <= MAX_AT_S:
        raise ValueError(f"{kind}: at: seconds from 0 to {MAX_AT_S}, not {at!r}"[:300])
    offered = step.get("offered", [])
    if not isinstance(offered, list) or not all(isinstance(b, str) for b in offered):
        raise ValueError(f"{kind}: offered: a list of buttons, not {offered!r}"[:300])
    for key in ("reject", "player", "note"):
        if key in step and not isinstance(step[key], str):
            raise ValueError(f"{kind}: {key}: a string, not {step[key]!r}"[:300])
    return step


class ScenarioPlayer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    seat: int = 0
    balance: int = 0


class Expectations(BaseModel):
    model_config = ConfigDict(extra="forbid")
    balances: dict[str, int] = Field(default_factory=dict)
    hands: list[dict[str, Any]] = Field(default_factory=list)
    messages: list[str] | None = None
    events: list[dict[str, Any]] = Field(
        default_factory=list, description="each must match (as a subset) some event, in order"
    )


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = ""
    seed: str | None = None
    cites: str = Field("", description="the seed's sentences this scenario checks")
    variant: str
    rules: dict[str, Any] = Field(default_factory=dict)
    players: list[ScenarioPlayer] = Field(default_factory=list)
    balance: int | None = None
    shoe: list[str | int] = Field(default_factory=list)
    shoes: list[list[str | int]] = Field(default_factory=list)
    commands: list[str | dict[str, Any]]
    expect: Expectations = Expectations()

    @field_validator("commands")
    @classmethod
    def _steps(cls, steps: list[str | dict[str, Any]]) -> list[str | dict[str, Any]]:
        return [_checked_step(step) for step in steps]

    def roster(self) -> list[ScenarioPlayer]:
        if self.players:
            return self.players
        return [ScenarioPlayer(id="player", balance=self.balance or 0)]


def build_shoe(decks: int, first_cards: list[str | int]) -> tuple[str, ...]:
    """The named cards first (a bare rank takes the next card of that rank), then the rest of
    a fresh shoe in its fixed order."""
    remaining = list(fresh_shoe(decks))
    left = Counter(remaining)
    chosen: list[str] = []
    for text in first_cards:
        spec = str(text).strip().upper()
        spec = "T" if spec == "10" else spec
        if len(spec) == 1 and spec in RANKS:
            card = next((c for c in remaining if c[0] == spec and left[c] > 0), None)
            if card is None:
                raise ScenarioError(f"the shoe of {decks} deck(s) has no {spec} left")
        else:
            try:
                card = parse_card(spec)
            except ValueError as error:
                raise ScenarioError(f"the shoe: {error}") from None
            if left[card] == 0:
                raise ScenarioError(f"the shoe of {decks} deck(s) has no {card} left")
        left[card] -= 1
        chosen.append(card)
    rest: list[str] = []
    for card in remaining:
        if left[card] > 0:
            left[card] -= 1
            rest.append(card)
    return (*chosen, *rest)


class _ScriptedShuffler:
    """Hands out the scenario's shoes in order, then unshuffled ones."""

    def __init__(self, shoes: list[list[str | int]]) -> None:
        self._shoes: Iterator[list[str | int]] = iter(shoes)
        self.count = 0

    def __call__(self, rules: Rules) -> cmd.ShuffleShoe:
        self.count += 1
        first = next(self._shoes, [])
        salt = f"scenario-salt-{self.count:04d}"
        return cmd.ShuffleShoe(order=build_shoe(rules.decks, first), salt=salt)


def _printable(event: ev.Event) -> dict[str, Any]:
    exclude = set(ev.SEALED_FIELDS) if isinstance(event, ev.ShoeShuffled | ev.ShoeRetired) else None
    return event.model_dump(mode="json", exclude=exclude)


def _subset(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    return all(key in actual and actual[key] == value for key, value in expected.items())


def _parse_step(
    step: str | dict[str, Any], default_player: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a step into the command's fields and the runner's own keys."""
    if isinstance(step, str):
        step = {"do": step}
    fields = dict(step)
    runner_keys = ("at", "reject", "offered", "note")
    meta: dict[str, Any] = {key: fields.pop(key) for key in runner_keys if key in fields}
    kind = fields.pop("do")
    player = fields.pop("player", default_player)
    fields["type"] = kind
    model = next((m for m in cmd.COMMAND_TYPES if type_name(m) == kind), None)
    if model is not None and issubclass(model, cmd.PlayerCommand):
        fields["player_id"] = player
    meta["player"] = player
    return fields, meta


def run(scenario: Scenario, emit: Callable[[str], None] = print) -> dict[str, Any]:
    """Play the scenario; print events and the summary; return the summary."""
    shoes = scenario.shoes or ([scenario.shoe] if scenario.shoe else [])
    shuffler = _ScriptedShuffler(shoes)
    state: TableState = INITIAL_STATE
    now = DEFAULT_START
    failures: list[str] = []
    all_events: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []

    def submit(command: cmd.Command) -> Rejection | None:
        nonlocal state
        result = apply(state, command, now, shuffler)
        if isinstance(result, Rejection):
            return result
        state = result.state
        for event in result.events:
            printable = _printable(event)
            all_events.append(printable)
            emit(json.dumps({"event": printable}))
        return None

    def set_up(command: cmd.Command) -> None:
        rejection = submit(command)
        if rejection is not None:
            raise ScenarioError(f"its set-up refused: {rejection.code}: {rejection.message}")

    roster = scenario.roster()
    set_up(cmd.OpenTable(variant=scenario.variant, overrides=scenario.rules))
    for p in roster:
        try:  # (a command its fields refuse: a traceback before)
            set_up(cmd.SitDown(player_id=p.id, seat=p.seat))
            if p.balance:
                set_up(first_funding(state.rules, p.id, p.balance))
        except ValidationError as error:
            raise ScenarioError(f"player {p.id!r}: {in_one_line(error)}"[:500]) from None

    for index, raw in enumerate(scenario.commands):
        fields, meta = _parse_step(raw, roster[0].id)
        if "at" in meta:
            now = DEFAULT_START + timedelta(seconds=float(meta["at"]))
        offered = legal_actions(state, meta["player"], now).buttons()
        record: dict[str, Any] = {"step": index, "command": fields, "offered": offered}
        if "offered" in meta and sorted(meta["offered"]) != sorted(offered):
            failures.append(f"step {index}: offered {offered}, expected {meta['offered']}")
        outcome: Rejection | None
        kind = fields.get("type")
        if kind not in _COMMAND_TYPES:  # as the service answers it
            outcome = Rejection(code="unknown_command", message=f"no command type {kind!r}")
        else:
            try:
                command = _COMMAND.validate_python(fields)
            except ValidationError as error:
                outcome = Rejection(code="malformed", message=in_one_line(error))
            else:
                outcome = submit(command)
        record["result"] = "accepted" if outcome is None else outcome.code
        if outcome is not None:
            record["message"] = outcome.message
        expected = meta.get("reject")
        if expected != (None if outcome is None else outcome.code):
            failures.append(
                f"step {index}: result {record['result']}, expected {expected or 'accepted'}"
            )
        steps.append(record)

    hands = [
        {key: e[key] for key in ("round", "box", "hand", "outcome", "stake", "payout")}
        | {"net": e["payout"] - e["stake"]}
        for e in all_events
        if e["type"] == "HandSettled"
    ]
    messages = [
        m["message"] for e in all_events if e["type"] == "RoundSettled" for m in e["messages"]
    ]
    balances = {pid: p.balance for pid, p in state.players.items()}
    failures += _check_expectations(scenario.expect, balances, hands, messages, all_events)
    summary = {
        "balances": balances,
        "hands": hands,
        "messages": messages,
        "steps": steps,
        "failures": failures,
    }
    emit(json.dumps({"summary": summary}))
    return summary


def _check_expectations(
    expect: Expectations,
    balances: dict[str, int],
    hands: list[dict[str, Any]],
    messages: list[str],
    events: list[dict[str, Any]],
) -> list[str]:
    failures = [
        f"balance of {pid} is {balances.get(pid)}, expected {amount}"
        for pid, amount in expect.balances.items()
        if balances.get(pid) != amount
    ]
    for wanted in expect.hands:
        if not any(_subset(wanted, hand) for hand in hands):
            failures.append(f"no settled hand matches {wanted}; hands: {hands}")
    if expect.messages is not None and expect.messages != messages:
        failures.append(f"messages {messages}, expected {expect.messages}")
    position = 0
    for wanted in expect.events:
        while position < len(events) and not _subset(wanted, events[position]):
            position += 1
        if position == len(events):
            failures.append(f"no event matching {wanted} (in order)")
            break
        position += 1
    return failures


def load(path: Path) -> Scenario:
    return Scenario.model_validate(yaml.safe_load(path.read_text()))
