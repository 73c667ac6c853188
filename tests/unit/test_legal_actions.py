"""The buttons a player is shown, phase by phase, and that they are exactly what the decider
accepts: nothing for a player whose turn it is not, no split or double that cannot be paid, an
insurance decision per box."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from blackjack.domain import commands as cmd
from blackjack.domain.decide import decide
from blackjack.domain.decisions.funds import first_funding
from blackjack.domain.legal import legal_actions
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import Rules
from blackjack.domain.state import TableState
from blackjack.scenario import build_shoe
from blackjack.table import Shuffler, apply

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _shoe(*cards: str) -> Shuffler:
    def shuffler(rules: Rules) -> cmd.ShuffleShoe:
        return cmd.ShuffleShoe(order=build_shoe(rules.decks, list(cards)), salt="legal-salt-00000")

    return shuffler


class Table:
    def __init__(self, variant: str, cards: Sequence[str] = (), **overrides: Any) -> None:
        self.shuffler = _shoe(*cards)
        self.state = TableState()
        self.now = NOW
        self.do(cmd.OpenTable(variant=variant, overrides=overrides))

    def do(self, *commands: cmd.Command) -> Table:
        for command in commands:
            result = apply(self.state, command, self.now, self.shuffler)
            assert not isinstance(result, Rejection), (command, result)
            self.state = result.state
        return self

    def sit(self, pid: str, seat: int = 0, balance: int = 10_000) -> Table:
        return self.do(
            cmd.SitDown(player_id=pid, seat=seat),
            first_funding(self.state.rules, pid, balance),
        )

    def buttons(self, pid: str) -> list[str]:
        return legal_actions(self.state, pid, self.now).buttons()


def test_a_round_at_a_single_seat_table() -> None:
    t = Table("mini-h17", cards=["TS", "6S", "7S", "9S", "2S"]).sit("ann")
    assert t.buttons("ann") == ["bet:0"]
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    assert t.buttons("ann") == ["bet:0", "deal", "clear", "remove:0"]
    t.do(cmd.Deal(player_id="ann"))
    assert t.buttons("ann") == ["hit", "stand", "double", "surrender"]
    t.do(cmd.Hit(player_id="ann", box=0))
    assert t.buttons("ann") == ["hit", "stand"]  # 19 on three cards: no double, no surrender
    t.do(cmd.Stand(player_id="ann", box=0))
    assert t.buttons("ann") == ["bet:0", "rebet:x1", "rebet:x2"]
    assert legal_actions(t.state, "nobody", t.now).buttons() == []


def test_the_turn_is_shown_only_to_the_player_whose_turn_it_is() -> None:
    t = (
        Table("atlantic-city-multi", cards=["TS", "8S", "7S", "6S", "8H", "TH"])
        .sit("ann", 0)
        .sit("bob", 2)
        .sit("cy", 4)
    )
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    assert t.buttons("bob") == ["bet:2", "pass"]
    t.do(cmd.PlaceBet(player_id="bob", box=2, amount=1000), cmd.Deal(player_id="ann"))
    assert t.buttons("ann") == []  # dealt in, waiting for the others
    assert t.buttons("bob") == ["bet:2", "deal", "clear", "pass", "remove:2"]
    t.do(cmd.Deal(player_id="bob"), cmd.Pass(player_id="cy"))
    assert t.state.phase == "playing"
    assert t.buttons("ann") == ["hit", "stand", "double"]
    assert t.buttons("bob") == []
    assert t.buttons("cy") == []  # passed: nothing until the next round
    t.do(cmd.Stand(player_id="ann", box=0))
    assert t.buttons("ann") == []
    assert t.buttons("bob") == ["hit", "stand", "double", "split"]  # 8-8


def test_split_and_double_disappear_when_the_balance_cannot_pay_them() -> None:
    cards = ["8S", "7S", "8H", "TS"]
    rich = Table("mini-h17", cards=cards).sit("ann", balance=2000)
    rich.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    assert rich.buttons("ann") == ["hit", "stand", "double", "split", "surrender"]
    poor = Table("mini-h17", cards=cards).sit("ann", balance=1999)
    poor.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    assert poor.buttons("ann") == ["hit", "stand", "surrender"]


def test_insurance_per_box_while_the_balance_lasts() -> None:
    # Three boxes against a dealer ace; 5.00 left pays one insurance of 5.00 only.
    t = Table("surrender", cards=["TS", "9S", "8S", "AS", "7S", "9H", "TH", "6S"]).sit(
        "ann", balance=3500
    )
    for box in range(3):
        t.do(cmd.PlaceBet(player_id="ann", box=box, amount=1000))
    t.do(cmd.Deal(player_id="ann"))
    assert t.buttons("ann") == [
        "insurance:0",
        "insurance:1",
        "insurance:2",
        "no_insurance:0",
        "no_insurance:1",
        "no_insurance:2",
    ]
    t.do(cmd.TakeInsurance(player_id="ann", box=1))
    assert t.buttons("ann") == ["no_insurance:0", "no_insurance:2"]
    t.do(cmd.DeclineInsurance(player_id="ann", box=0), cmd.DeclineInsurance(player_id="ann", box=2))
    assert t.state.phase == "playing"
    assert t.buttons("ann") == ["hit", "stand", "surrender"]  # nothing left to double with


def test_repeat_at_the_surrender_table_and_no_rebet_on_a_fresh_seat() -> None:
    t = Table("surrender", cards=["TS", "7S", "9S", "TH"]).sit("ann")
    assert t.buttons("ann") == ["bet:0", "bet:1", "bet:2"]
    t.do(cmd.PlaceBet(player_id="ann", box=1, amount=500), cmd.Deal(player_id="ann"))
    t.do(cmd.Stand(player_id="ann", box=1))
    assert t.buttons("ann") == ["bet:0", "bet:1", "bet:2", "rebet:x1"]
    t.do(cmd.Rebet(player_id="ann", multiplier=1))
    assert t.buttons("ann") == ["bet:0", "bet:1", "bet:2", "deal", "clear", "remove:1"]


def test_every_button_is_accepted_and_every_other_play_refused() -> None:
    t = Table("mini-h17", cards=["AS", "6S", "AH", "TS"]).sit("ann")
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    plays: dict[str, cmd.Command] = {
        "hit": cmd.Hit(player_id="ann", box=0),
        "stand": cmd.Stand(player_id="ann", box=0),
        "double": cmd.Double(player_id="ann", box=0),
        "split": cmd.Split(player_id="ann", box=0),
        "surrender": cmd.Surrender(player_id="ann", box=0),
    }
    shown = t.buttons("ann")
    assert shown == ["hit", "stand", "double", "split", "surrender"]  # A-A is a soft 12
    t.do(cmd.Split(player_id="ann", box=0))  # split aces: one card each, the round is over
    assert t.state.phase == "betting" and t.state.round_open is False
    for name, command in plays.items():
        assert isinstance(decide(t.state, command, t.now), Rejection), name


def test_the_clock_does_not_change_what_is_offered_before_the_deadline() -> None:
    t = Table("atlantic-city-multi", cards=["TS", "7S", "9S", "TH"]).sit("ann", 0).sit("bob", 1)
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    before = t.buttons("bob")
    later = legal_actions(t.state, "bob", NOW + timedelta(seconds=14)).buttons()
    assert before == later == ["bet:1", "pass"]
