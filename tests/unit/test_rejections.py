"""Every refusal the table decider can give, as given / when / then.

Given a table built from real commands, when one more command is decided, then it is refused
with the expected code and a message, ``decide`` returns no events, and the state it was given
is unchanged. ``malformed`` and ``unknown_command`` belong to the shell: a message that does not
validate against ``commands.AnyCommand`` never reaches the decider (the decider's one
``malformed`` is a buy-in reference it cannot read).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

import pytest
from pydantic import TypeAdapter, ValidationError

from blackjack.domain import commands as cmd
from blackjack.domain import decide as decide_module
from blackjack.domain import decisions
from blackjack.domain import events as ev
from blackjack.domain.decide import decide
from blackjack.domain.decisions.funds import buy_in_deposit
from blackjack.domain.evolve import fold
from blackjack.domain.payouts import MAX_BALANCE
from blackjack.domain.rejections import Rejection, RejectionCode
from blackjack.domain.rules import Rules
from blackjack.domain.state import INITIAL_STATE, Box, Hand, TableState
from blackjack.scenario import build_shoe
from blackjack.table import Shuffler, apply

NOW = datetime(2026, 1, 1, tzinfo=UTC)
COMMAND = TypeAdapter(cmd.AnyCommand)

TESTED: set[str] = set()
"""The codes that have a test below, recorded at import time by ``@rejects``."""

_F = TypeVar("_F", bound=Callable[..., None])


def rejects(code: RejectionCode) -> Callable[[_F], _F]:
    TESTED.add(code)
    return lambda test: test


# ---- given --------------------------------------------------------------------------------


def shoe_starting(*cards: str) -> Shuffler:
    """A shuffler whose every shoe starts with these cards (the rest in fresh order)."""

    def shuffler(rules: Rules) -> cmd.ShuffleShoe:
        return cmd.ShuffleShoe(order=build_shoe(rules.decks, list(cards)), salt="rejections-salt-0")

    return shuffler


def given(
    variant: str,
    *commands: cmd.Command,
    cards: Sequence[str] = (),
    overrides: dict[str, Any] | None = None,
) -> TableState:
    shuffler = shoe_starting(*cards)
    state = INITIAL_STATE
    for command in (cmd.OpenTable(variant=variant, overrides=overrides or {}), *commands):
        result = apply(state, command, NOW, shuffler)
        assert not isinstance(result, Rejection), f"given {command!r}: {result}"
        state = result.state
    return state


def given_more(state: TableState, *commands: cmd.Command) -> TableState:
    for command in commands:
        result = apply(state, command, NOW, shoe_starting())
        assert not isinstance(result, Rejection), f"given {command!r}: {result}"
        state = result.state
    return state


def seated(pid: str = "ann", seat: int = 0, balance: int = 10_000) -> list[cmd.Command]:
    return [cmd.SitDown(player_id=pid, seat=seat), cmd.Deposit(player_id=pid, amount=balance)]


def shared_seated(pid: str = "ann", seat: int = 0, balance: int = 10_000) -> list[cmd.Command]:
    """``seated`` at a table several players share: the money is a buy-in from the wallet."""
    return [cmd.SitDown(player_id=pid, seat=seat), buy_in_deposit(pid, balance)]


def dealt(amount: int = 1000, box: int = 0, pid: str = "ann") -> list[cmd.Command]:
    return [cmd.PlaceBet(player_id=pid, box=box, amount=amount), cmd.Deal(player_id=pid)]


# ---- then ---------------------------------------------------------------------------------


def then_rejected(
    state: TableState, command: cmd.Command, code: RejectionCode, now: datetime = NOW
) -> Rejection:
    before = TableState.from_doc(state.to_doc())  # a deep copy
    outcome = decide(state, command, now)
    assert isinstance(outcome, Rejection), f"expected {code}, got events {outcome}"
    assert outcome.code == code, outcome
    assert outcome.message
    assert state == before, "a rejection changes nothing"
    assert isinstance(apply(state, command, now, shoe_starting()), Rejection)
    return outcome


_EMIT = re.compile(r'(?<![\w.])refuse\(\s*"([a-z_]+)"|code="([a-z_]+)"')


def _codes_in_the_decider() -> set[str]:
    """Every code written in the table decider's source (``refuse("...")``/``code="..."``)."""
    modules = [decide_module.__file__, *Path(decisions.__file__).parent.glob("*.py")]
    source = "".join(Path(str(path)).read_text() for path in modules)
    return {code for pair in _EMIT.findall(source) for code in pair if code}


def test_every_code_the_decider_can_emit_has_a_test() -> None:
    emitted = _codes_in_the_decider()
    assert emitted <= set(get_args(RejectionCode))
    assert len(emitted) > 25
    assert emitted - TESTED == set()


def test_every_declared_code_is_given_somewhere() -> None:
    """A code nothing gives would be published in the schemas for nothing."""
    package = Path(decide_module.__file__).parents[1]
    sources = "".join(
        path.read_text() for path in package.rglob("*.py") if path.name != "rejections.py"
    )
    assert {c for c in get_args(RejectionCode) if f'"{c}"' not in sources} == set()


# ---- the message itself (the shell) -------------------------------------------------------


def _validation_error_types(data: dict[str, Any]) -> set[str]:
    with pytest.raises(ValidationError) as error:
        COMMAND.validate_python(data)
    return {e["type"] for e in error.value.errors()}


def test_malformed_float_amount() -> None:
    data = {"type": "PlaceBet", "player_id": "ann", "box": 0, "amount": 10.5}
    assert _validation_error_types(data) == {"int_type"}


def test_malformed_string_amount() -> None:
    data = {"type": "Deposit", "player_id": "ann", "amount": "1000"}
    assert _validation_error_types(data) == {"int_type"}


def test_malformed_unknown_type() -> None:
    data = {"type": "CashOutEverything", "player_id": "ann"}
    assert _validation_error_types(data) == {"union_tag_invalid"}


def test_malformed_extra_field_and_missing_field() -> None:
    assert "extra_forbidden" in _validation_error_types(
        {"type": "Hit", "player_id": "ann", "box": 0, "cards": 2}
    )
    assert _validation_error_types({"type": "PlaceBet", "player_id": "ann", "box": 0}) == {
        "missing"
    }


@rejects("invalid_amount")
def test_negative_amount_is_well_formed_but_invalid() -> None:
    command = COMMAND.validate_python(
        {"type": "PlaceBet", "player_id": "ann", "box": 0, "amount": -100}
    )
    then_rejected(given("mini-h17", *seated()), command, "invalid_amount")


@rejects("invalid_amount")
def test_zero_deposit_is_invalid() -> None:
    then_rejected(
        given("mini-h17", *seated()), cmd.Deposit(player_id="ann", amount=0), "invalid_amount"
    )


@rejects("balance_limit")
def test_a_deposit_past_the_balance_limit() -> None:
    """Paid-in money stops at payouts.MAX_BALANCE, so no balance outgrows a 64-bit column
    (a deposit of 10^30 cents was taken once, and no read model could fold it)."""
    state = given("mini-h17", *seated(balance=10_000))
    rejection = then_rejected(
        state, cmd.Deposit(player_id="ann", amount=2 * 10**15), "balance_limit"
    )
    assert str(MAX_BALANCE) in rejection.message
    then_rejected(
        state, cmd.Deposit(player_id="ann", amount=MAX_BALANCE - 10_000 + 1), "balance_limit"
    )
    up_to = cmd.Deposit(player_id="ann", amount=MAX_BALANCE - 10_000)
    events = decide(state, up_to, NOW)
    assert not isinstance(events, Rejection)
    assert fold(events, state).players["ann"].balance == MAX_BALANCE


@rejects("currency_mismatch")
def test_money_in_another_currency_is_refused() -> None:
    state = given("mini-h17", *seated())
    assert state.rules.currency == "USD"
    deposit = cmd.Deposit(player_id="ann", amount=500, currency="EUR")
    rejection = then_rejected(state, deposit, "currency_mismatch")
    assert "USD" in rejection.message and "EUR" in rejection.message
    same = cmd.Deposit(player_id="ann", amount=500, currency="USD")
    assert not isinstance(decide(state, same, NOW), Rejection)


@rejects("unknown_command")
def test_a_command_the_decider_does_not_know() -> None:
    class Teleport(cmd.PlayerCommand):
        type: Literal["Teleport"] = "Teleport"

    then_rejected(given("mini-h17", *seated()), Teleport(player_id="ann"), "unknown_command")


# ---- the table ----------------------------------------------------------------------------


@rejects("table_not_open")
def test_nothing_before_the_table_is_opened() -> None:
    then_rejected(INITIAL_STATE, cmd.SitDown(player_id="ann"), "table_not_open")


@rejects("table_already_open")
def test_a_table_opens_once() -> None:
    then_rejected(given("mini-h17"), cmd.OpenTable(variant="mini-s17"), "table_already_open")


@rejects("unknown_variant")
def test_an_unknown_variant() -> None:
    then_rejected(INITIAL_STATE, cmd.OpenTable(variant="spanish-21"), "unknown_variant")


def _suspended(*commands: cmd.Command) -> TableState:
    suspend = cmd.SuspendTable(operator="ops", reason="maintenance")
    return given("mini-h17", *seated(), *commands, suspend)


@rejects("table_suspended")
def test_no_new_wager_or_player_at_a_suspended_table() -> None:
    state = _suspended()
    assert state.suspended
    for command in (
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.Rebet(player_id="ann"),
        cmd.SitDown(player_id="bo", seat=0),
    ):
        rejection = then_rejected(state, command, "table_suspended")
        assert "suspended" in rejection.message
    # a snapshot keeps it: a restarted handler refuses the same
    then_rejected(
        TableState.from_doc(state.to_doc()), cmd.Rebet(player_id="ann"), "table_suspended"
    )


def test_no_money_comes_in_at_a_suspended_table() -> None:
    """Game disable (GLI-19): a disabled game takes no new money, only lets it out. The lab
    saw a platform's Deposit at a suspended single-player table and a BuyIn from the wallet
    into a suspended shared table both taken; a buy-in is declined (its money goes back to the
    wallet), never simply refused."""
    state = _suspended()
    rejection = then_rejected(state, cmd.Deposit(player_id="ann", amount=500), "table_suspended")
    assert "suspended" in rejection.message
    assert not isinstance(decide(state, cmd.Withdraw(player_id="ann", amount=500), NOW), Rejection)
    shared = given(
        "atlantic-city-multi",
        cmd.SitDown(player_id="ann"),
        cmd.Deposit(player_id="ann", amount=300, transfer="wallet:ann/1"),
        cmd.SuspendTable(operator="ops", reason="maintenance"),
    )
    buy_in = cmd.Deposit(player_id="ann", amount=300, transfer="wallet:ann/2")
    [declined] = decide(shared, buy_in, NOW)
    assert isinstance(declined, ev.TransferDeclined)
    assert (declined.reason_code, declined.amount) == ("table_suspended", 300)
    resumed = given_more(shared, cmd.ResumeTable(operator="ops"))
    [taken] = decide(resumed, buy_in, NOW)
    assert isinstance(taken, ev.FundsDeposited) and taken.balance_after == 600


def test_a_suspended_table_takes_the_wagers_of_the_cycle_under_way() -> None:
    """The cycle already dealt completes under the rules: insurance, a split and a double
    are part of it (refusing them would change the game in the middle of a round)."""
    state = given(
        "mini-h17",
        *seated(),
        *dealt(),
        cards=["8S", "AS", "8H", "9D", "3C", "2D", "TC"],
    )
    state = given_more(state, cmd.SuspendTable(operator="ops", reason="maintenance"))
    state = given_more(
        state,
        cmd.TakeInsurance(player_id="ann", box=0),
        cmd.Split(player_id="ann", box=0),
        cmd.Double(player_id="ann", box=0, hand=0),
    )
    assert state.suspended
    assert [hand.stake for hand in state.boxes[0].hands] == [2000, 1000]


def test_a_suspended_table_completes_the_round_under_way_and_lets_money_out() -> None:
    """The bet on the layout is dealt and settled (TS 9S = 19 against 7S TD = 17: a win);
    the balance can be withdrawn."""
    state = given(
        "mini-h17",
        *seated(),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.SuspendTable(operator="ops", reason="maintenance"),
        cmd.Deal(player_id="ann"),
        cmd.Stand(player_id="ann", box=0),
        cards=["TS", "7S", "9S", "TD"],
    )
    assert not state.round_open and state.suspended
    assert state.players["ann"].balance == 11_000
    state = given_more(state, cmd.Withdraw(player_id="ann", amount=11_000))
    assert state.players["ann"].balance == 0


@rejects("already_suspended")
def test_a_table_is_suspended_once() -> None:
    then_rejected(
        _suspended(), cmd.SuspendTable(operator="ops", reason="again"), "already_suspended"
    )


@rejects("not_suspended")
def test_only_a_suspended_table_resumes() -> None:
    state = given("mini-h17", *seated())
    then_rejected(state, cmd.ResumeTable(operator="ops"), "not_suspended")
    resumed = given_more(_suspended(), cmd.ResumeTable(operator="ops"))
    assert not resumed.suspended
    assert resumed.to_doc() == state.to_doc()  # as if it had never been suspended
    # an older handler reads a never-suspended table's snapshot: it is written as before
    assert "suspended" not in state.to_doc() and _suspended().to_doc()["suspended"] is True
    given_more(resumed, cmd.PlaceBet(player_id="ann", box=0, amount=1000))


@rejects("invalid_rules")
@pytest.mark.parametrize(
    "overrides",
    [
        {"min_bet": 60_000},
        {"decks": 0},
        {"double_on": "totals", "double_totals": []},
        {"x": 1},
        {"name": "atlantic-city"},  # the variant's label is not a rule
    ],
)
def test_overrides_that_break_the_rules(overrides: dict[str, Any]) -> None:
    rejection = then_rejected(
        INITIAL_STATE, cmd.OpenTable(variant="mini-h17", overrides=overrides), "invalid_rules"
    )
    # a message for a client: where and what, one line, no links to pydantic's site
    assert "\n" not in rejection.message and "http" not in rejection.message
    assert rejection.message.split(":")[0] in (*overrides, "rules"), rejection.message


# ---- seats and ownership ------------------------------------------------------------------


@rejects("not_seated")
def test_a_bet_from_someone_without_a_seat() -> None:
    state = given("mini-h17", *seated())
    then_rejected(state, cmd.PlaceBet(player_id="bob", box=0, amount=100), "not_seated")


@rejects("already_seated")
def test_sitting_down_twice() -> None:
    state = given("atlantic-city-multi", *shared_seated())
    then_rejected(state, cmd.SitDown(player_id="ann", seat=3), "already_seated")
    # a move to one's own seat: not "seat 0 is taken", which reads as someone else's
    own = then_rejected(state, cmd.MoveSeat(player_id="ann", seat=0), "already_seated")
    assert own.message == "ann is at seat 0 already"


@rejects("seat_out_of_range")
def test_a_seat_the_table_does_not_have() -> None:
    then_rejected(
        given("atlantic-city-multi"), cmd.SitDown(player_id="ann", seat=5), "seat_out_of_range"
    )
    then_rejected(given("mini-h17"), cmd.SitDown(player_id="ann", seat=1), "seat_out_of_range")


@rejects("no_wallet")
def test_a_player_no_wallet_can_fund_cannot_sit_at_a_table_funded_from_wallets() -> None:
    """``wallet:ann lee`` is no stream id: such a player sat down, and no BuyIn could ever
    reach the seat (an integrator review). A single-player table, funded by Deposit, takes
    any player id."""
    for player_id in ("ann lee", "a" * 122, "ann/lee"):
        refused = then_rejected(
            given("atlantic-city-multi"), cmd.SitDown(player_id=player_id, seat=0), "no_wallet"
        )
        assert "wallet:<player id>" in refused.message
    assert not isinstance(
        decide(given("atlantic-city-multi"), cmd.SitDown(player_id="a" * 121, seat=0), NOW),
        Rejection,
    )
    assert not isinstance(
        decide(given("mini-h17"), cmd.SitDown(player_id="ann lee", seat=0), NOW), Rejection
    )


@rejects("seat_taken")
def test_a_seat_someone_holds() -> None:
    state = given("atlantic-city-multi", *shared_seated("ann", 2), *shared_seated("bob", 0))
    then_rejected(state, cmd.SitDown(player_id="cat", seat=2), "seat_taken")
    then_rejected(state, cmd.MoveSeat(player_id="bob", seat=2), "seat_taken")


@rejects("box_out_of_range")
def test_a_box_the_table_does_not_have() -> None:
    state = given("surrender", *seated())
    then_rejected(state, cmd.PlaceBet(player_id="ann", box=3, amount=100), "box_out_of_range")
    then_rejected(state, cmd.PlaceBet(player_id="ann", box=-1, amount=100), "box_out_of_range")


@rejects("not_your_box")
def test_a_bet_on_another_seats_box() -> None:
    state = given("atlantic-city-multi", *shared_seated("ann", 0), *shared_seated("bob", 1))
    then_rejected(state, cmd.PlaceBet(player_id="ann", box=1, amount=100), "not_your_box")
    # A box is numbered across the table (seat x boxes_per_seat + i): the refusal says which
    # box the player's seat has, since nothing else tells a client that bob's is not box 0.
    refused = then_rejected(state, cmd.PlaceBet(player_id="bob", box=0, amount=100), "not_your_box")
    assert refused.message == "box 0 belongs to seat 0; seat 1 bets on box 1"
    three = given(
        "atlantic-city-multi",
        *shared_seated("ann", 0),
        *shared_seated("bob", 1),
        overrides={"boxes_per_seat": 3, "seats": 2},
    )
    refused = then_rejected(three, cmd.PlaceBet(player_id="bob", box=2, amount=100), "not_your_box")
    assert refused.message == "box 2 belongs to seat 0; seat 1 bets on boxes 3-5"


@rejects("round_in_progress")
def test_no_seat_change_leaving_or_new_shoe_while_a_hand_is_played() -> None:
    state = given(
        "atlantic-city-multi",
        *shared_seated("ann", 0),
        *shared_seated("bob", 1),
        *dealt(pid="ann"),
        *dealt(box=1, pid="bob"),
        cards=["TS", "TH", "7S", "9S", "8S", "TD"],
    )
    assert state.phase == "playing"
    then_rejected(state, cmd.MoveSeat(player_id="ann", seat=4), "round_in_progress")
    then_rejected(state, cmd.LeaveTable(player_id="bob"), "round_in_progress")
    shoe = cmd.ShuffleShoe(order=build_shoe(8, []), salt="a-new-shoe-midway")
    then_rejected(state, shoe, "round_in_progress")


@rejects("round_in_progress")
def test_no_new_shoe_once_a_round_has_bets() -> None:
    """The shoe is committed before anyone wagers on it: whoever shuffles must not choose the
    cards once the bets are known (the fairness review's shoe swapped after a 500.00 bet)."""
    state = given("surrender", *seated(), cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    assert not state.hands_in_play and state.round_open
    shoe = cmd.ShuffleShoe(order=build_shoe(4, []), salt="a-shoe-chosen-after-the-bet")
    then_rejected(state, shoe, "round_in_progress")
    # a bet taken back while another stays: still no new shoe until the round is over
    second = apply(state, cmd.PlaceBet(player_id="ann", box=1, amount=500), NOW, shoe_starting())
    assert not isinstance(second, Rejection)
    removed = apply(second.state, cmd.RemoveBet(player_id="ann", box=0), NOW, shoe_starting())
    assert not isinstance(removed, Rejection) and removed.state.round_open
    then_rejected(removed.state, shoe, "round_in_progress")


# ---- money --------------------------------------------------------------------------------


@rejects("transfer_already_handled")
def test_a_buy_in_the_table_has_already_taken_is_not_taken_again() -> None:
    transfer = cmd.Deposit(player_id="ann", amount=300, transfer="wallet:ann/1")
    state = given("atlantic-city-multi", cmd.SitDown(player_id="ann"), transfer)
    then_rejected(state, transfer, "transfer_already_handled")


@rejects("malformed")
def test_a_buy_in_reference_that_names_no_wallet_buy_in_is_malformed() -> None:
    """The handler writes a buy-in's reference from its signed header; a command that
    reaches the decider any other way is still refused, not taken."""
    state = given("atlantic-city-multi", cmd.SitDown(player_id="ann"))
    for ref in ("wallet:ann", "wallet:ann/", "/3", "wallet:ann/-1", "wallet:ann/٣"):
        then_rejected(state, cmd.Deposit(player_id="ann", amount=5, transfer=ref), "malformed")


@rejects("unauthorized")
def test_a_shared_table_takes_no_platform_deposit() -> None:
    """Page 002's table several players share is funded from each player's wallet (a
    ``BuyIn``): the platform's ``Deposit`` is refused by the decider itself, so the simulator
    and the scenarios play the table as the handler does."""
    state = given("atlantic-city-multi", *shared_seated())
    rejection = then_rejected(state, cmd.Deposit(player_id="ann", amount=500), "unauthorized")
    assert rejection.message.endswith("send BuyIn to wallet:ann")
    # the buy-in's own Deposit is taken
    [event] = decide(state, buy_in_deposit("ann", 500, 2), NOW)
    assert isinstance(event, ev.FundsDeposited) and event.balance_after == 10_500


def test_a_buy_in_to_a_single_player_table_is_declined_not_refused() -> None:
    """A buy-in's ``Deposit`` at a single-player table is declined ``unauthorized``, not
    refused: the table is funded by the platform, the wallet gets its money back."""
    state = given("mini-h17", *seated())
    command = cmd.Deposit(player_id="ann", amount=300, transfer="wallet:ann/1")
    [event] = decide(state, command, NOW)
    assert isinstance(event, ev.TransferDeclined) and event.reason_code == "unauthorized"


@rejects("bet_below_minimum")
def test_a_deal_with_a_stack_under_the_table_minimum() -> None:
    # 003: "You may need several chips to reach the desired bet amount": a chip under the
    # minimum is taken, and the deal waits until the stack reaches it
    state = given("mini-h17", *seated(), cmd.PlaceBet(player_id="ann", box=0, amount=99))
    assert state.boxes[0].bet == 99
    rejection = then_rejected(state, cmd.Deal(player_id="ann"), "bet_below_minimum")
    assert "box 0 holds 99" in rejection.message and "add at least 1" in rejection.message
    topped_up = given("mini-h17", *seated(), *[cmd.PlaceBet(player_id="ann", box=0, amount=50)] * 2)
    assert not isinstance(decide(topped_up, cmd.Deal(player_id="ann"), NOW), Rejection)


@rejects("bet_above_maximum")
def test_bets_adding_up_over_the_maximum() -> None:
    state = given(
        "mini-h17", *seated(balance=100_000), cmd.PlaceBet(player_id="ann", box=0, amount=40_000)
    )
    then_rejected(state, cmd.PlaceBet(player_id="ann", box=0, amount=10_001), "bet_above_maximum")


@rejects("insufficient_funds")
def test_money_the_player_does_not_have() -> None:
    state = given("mini-h17", *seated(balance=500))
    then_rejected(state, cmd.PlaceBet(player_id="ann", box=0, amount=501), "insufficient_funds")
    then_rejected(state, cmd.Withdraw(player_id="ann", amount=501), "insufficient_funds")


# ---- betting ------------------------------------------------------------------------------


@rejects("not_betting_time")
def test_no_bet_while_a_hand_is_played() -> None:
    state = given("mini-h17", *seated(), *dealt(), cards=["TS", "7S", "9S", "TH"])
    then_rejected(state, cmd.PlaceBet(player_id="ann", box=0, amount=100), "not_betting_time")
    then_rejected(state, cmd.ClearBets(player_id="ann"), "not_betting_time")


@rejects("not_betting_time")
def test_no_pass_before_a_round_is_open() -> None:
    state = given("atlantic-city-multi", *shared_seated("ann", 0), *shared_seated("bob", 1))
    then_rejected(state, cmd.Pass(player_id="bob"), "not_betting_time")


@rejects("no_bets")
def test_deal_or_clear_with_nothing_on_the_table() -> None:
    state = given("mini-h17", *seated())
    then_rejected(state, cmd.Deal(player_id="ann"), "no_bets")
    then_rejected(state, cmd.ClearBets(player_id="ann"), "no_bets")


@rejects("already_dealt_in")
def test_no_new_bet_after_pressing_deal() -> None:
    state = given(
        "atlantic-city-multi", *shared_seated("ann", 0), *shared_seated("bob", 1), *dealt(pid="ann")
    )
    assert state.phase == "betting"
    then_rejected(state, cmd.PlaceBet(player_id="ann", box=0, amount=100), "already_dealt_in")
    then_rejected(state, cmd.Pass(player_id="ann"), "already_dealt_in")


@rejects("no_previous_bet")
def test_no_rebet_before_a_first_bet() -> None:
    state = given("mini-h17", *seated())
    then_rejected(state, cmd.Rebet(player_id="ann", multiplier=1), "no_previous_bet")


@rejects("rebet_not_offered")
def test_a_rebet_multiplier_the_table_does_not_have() -> None:
    state = given(
        "surrender",
        *seated(),
        *dealt(),
        cmd.Stand(player_id="ann", box=0),
        cards=["TS", "7S", "9S", "TH"],
    )
    then_rejected(state, cmd.Rebet(player_id="ann", multiplier=2), "rebet_not_offered")


@rejects("pass_not_offered")
def test_pass_is_for_shared_tables() -> None:
    state = given("mini-h17", *seated(), cmd.PlaceBet(player_id="ann", box=0, amount=100))
    then_rejected(state, cmd.Pass(player_id="ann"), "pass_not_offered")


@rejects("shoe_not_ready")
def test_no_deal_from_a_shoe_that_is_due_for_a_shuffle() -> None:
    # Straight through decide, without the shell that shuffles: the table has no shoe yet.
    state = INITIAL_STATE
    for command in (
        cmd.OpenTable(variant="mini-h17"),
        *seated(),
        cmd.PlaceBet(player_id="ann", box=0, amount=100),
    ):
        outcome = decide(state, command, NOW)
        assert not isinstance(outcome, Rejection)
        state = fold(outcome, state)
    assert state.shoe is None
    then_rejected(state, cmd.Deal(player_id="ann"), "shoe_not_ready")


@rejects("invalid_shoe")
def test_a_shoe_that_is_not_a_permutation_of_the_decks() -> None:
    state = given("surrender")
    four_decks = build_shoe(4, [])
    then_rejected(state, cmd.ShuffleShoe(order=four_decks[:-1], salt="x" * 16), "invalid_shoe")
    doctored = ("AS", *four_decks[1:-1], "AS")
    then_rejected(state, cmd.ShuffleShoe(order=doctored, salt="x" * 16), "invalid_shoe")


# ---- the play -----------------------------------------------------------------------------


@rejects("not_your_turn")
def test_play_out_of_turn() -> None:
    state = given(
        "atlantic-city-multi",
        *shared_seated("ann", 0),
        *shared_seated("bob", 1),
        *dealt(pid="ann"),
        *dealt(box=1, pid="bob"),
        cards=["TS", "TH", "7S", "9S", "8S", "TD"],
    )
    then_rejected(state, cmd.Stand(player_id="bob", box=1), "not_your_turn")
    then_rejected(state, cmd.Hit(player_id="ann", box=0, hand=1), "not_your_turn")
    betting = given("mini-h17", *seated())
    then_rejected(betting, cmd.Hit(player_id="ann", box=0), "not_your_turn")


@rejects("insurance_not_offered")
def test_insurance_only_against_an_ace() -> None:
    state = given("mini-h17", *seated(), *dealt(), cards=["TS", "KS", "9S", "7S"])
    then_rejected(state, cmd.TakeInsurance(player_id="ann", box=0), "insurance_not_offered")
    then_rejected(state, cmd.DeclineInsurance(player_id="ann", box=0), "insurance_not_offered")


@rejects("cannot_hit")
def test_no_card_to_a_hand_at_21() -> None:
    # Play never leaves the turn on a hand at 21 (it stands by itself): the guard protects a
    # state restored from elsewhere, here made by hand.
    state = given("mini-h17", *seated(), *dealt(), cards=["7S", "6S", "7H", "TS"])
    box = state.boxes[0]
    at_21 = Hand(cards=("7S", "7H", "7D"), stake=box.hands[0].stake)
    state = state.copy()
    state.boxes = (Box(player_id=box.player_id, bet=box.bet, hands=(at_21,)),)
    assert state.active == (0, 0)
    then_rejected(state, cmd.Hit(player_id="ann", box=0), "cannot_hit")


@rejects("cannot_double")
def test_double_only_on_two_cards_and_the_allowed_totals() -> None:
    on_16 = given("mini-s17", *seated(), *dealt(), cards=["TS", "TH", "6S", "7S"])
    then_rejected(on_16, cmd.Double(player_id="ann", box=0), "cannot_double")
    three_cards = given(
        "mini-h17",
        *seated(),
        *dealt(),
        cmd.Hit(player_id="ann", box=0),
        cards=["2S", "7S", "3S", "TH", "4S"],
    )
    then_rejected(three_cards, cmd.Double(player_id="ann", box=0), "cannot_double")


@rejects("cannot_split")
def test_split_only_a_pair_and_only_once() -> None:
    no_pair = given("atlantic-city", *seated(), *dealt(), cards=["KS", "7S", "QS", "TH"])
    then_rejected(no_pair, cmd.Split(player_id="ann", box=0), "cannot_split")
    resplit = given(
        "mini-h17",
        *seated(),
        *dealt(),
        cmd.Split(player_id="ann", box=0),
        cards=["8S", "7S", "8H", "TH", "8D", "3S"],
    )
    then_rejected(resplit, cmd.Split(player_id="ann", box=0, hand=0), "cannot_split")


@rejects("cannot_surrender")
def test_no_surrender_at_a_table_without_it_or_after_a_hit() -> None:
    no_rule = given("atlantic-city", *seated(), *dealt(), cards=["TS", "7S", "6S", "TH"])
    then_rejected(no_rule, cmd.Surrender(player_id="ann", box=0), "cannot_surrender")
    after_hit = given(
        "mini-h17",
        *seated(),
        *dealt(),
        cmd.Hit(player_id="ann", box=0),
        cards=["2S", "7S", "3S", "TH", "4S"],
    )
    then_rejected(after_hit, cmd.Surrender(player_id="ann", box=0), "cannot_surrender")


def test_the_clock_before_a_deadline_is_not_a_refusal() -> None:
    """ExpireTimers before the deadline is accepted and does nothing."""
    state = given(
        "atlantic-city-multi",
        *shared_seated("ann", 0),
        *shared_seated("bob", 1),
        cmd.PlaceBet(player_id="ann", box=0, amount=100),
    )
    assert decide(state, cmd.ExpireTimers(), NOW + timedelta(seconds=14)) == []


@rejects("closing_not_allowed")
def test_closing_an_interrupted_round_where_the_rules_say_nothing_of_it() -> None:
    state = given("mini-h17", *seated(), *dealt(), cards=["TS", "6H", "5S", "TD"])
    close = cmd.CloseInterruptedRound(operator="ops", idle_since=NOW)
    then_rejected(state, close, "closing_not_allowed", NOW + timedelta(days=365))


@rejects("round_not_interrupted")
def test_closing_a_round_before_it_has_waited_the_rules_days() -> None:
    state = given("surrender", *seated(), *dealt(), cards=["TS", "6H", "5S", "TD"])
    close = cmd.CloseInterruptedRound(operator="ops", idle_since=NOW)
    then_rejected(state, close, "round_not_interrupted", NOW + timedelta(days=29, hours=23))
    settled = given("surrender", *seated())
    then_rejected(settled, close, "round_not_interrupted", NOW + timedelta(days=31))


@rejects("voiding_not_allowed")
def test_voiding_a_round_where_the_rules_say_nothing_of_malfunctions() -> None:
    state = given("atlantic-city", *seated(), *dealt(), cards=["TS", "6H", "5S", "TD"])
    void = cmd.VoidRound(round=1, operator="ops", reason="the card reader failed")
    then_rejected(state, void, "voiding_not_allowed")


@rejects("round_not_in_play")
def test_voiding_a_round_that_is_not_the_one_in_play() -> None:
    state = given("mini-h17", *seated(), *dealt(), cards=["TS", "6H", "5S", "TD"])
    then_rejected(
        state, cmd.VoidRound(round=2, operator="ops", reason="jammed"), "round_not_in_play"
    )
    between_rounds = given("mini-h17", *seated())
    then_rejected(
        between_rounds,
        cmd.VoidRound(round=1, operator="ops", reason="jammed"),
        "round_not_in_play",
    )


# ---- a command naming its round (``round``) ----------------------------------------------


def _settled_round_one() -> TableState:
    """Ann's round 1 at the single-player mini-h17 table, bet with ``round=1``, played out."""
    state = given(
        "mini-h17",
        *seated(),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000, round=1),
        cmd.Deal(player_id="ann", round=1),
        cmd.Stand(player_id="ann", box=0, hand=0, round=1),
        cards=["TS", "7S", "TH", "9S"],
    )
    assert (state.round, state.round_open) == (1, False)
    return state


@rejects("stale_command")
def test_a_bet_for_a_round_that_is_over_bets_nothing_in_the_next() -> None:
    """A copy of round 1's PlaceBet sent after its answer left the idempotency window (an
    outbox replayed after an outage) must not put a chip in round 2."""
    state = _settled_round_one()
    copy = cmd.PlaceBet(player_id="ann", box=0, amount=1000, round=1)
    rejection = then_rejected(state, copy, "stale_command")
    assert rejection.message == "round 1 is over; the next round is 2"
    # the same copy once round 2 is open, with chips of its own on the box
    open_two = given_more(state, cmd.PlaceBet(player_id="ann", box=0, amount=500, round=2))
    assert (open_two.round, open_two.round_open) == (2, True)
    then_rejected(open_two, copy, "stale_command")
    # every command that acts in a round is told so
    for stale in (
        cmd.ClearBets(player_id="ann", round=1),
        cmd.RemoveBet(player_id="ann", box=0, round=1),
        cmd.Deal(player_id="ann", round=1),
        cmd.Rebet(player_id="ann", round=1),
    ):
        then_rejected(open_two, stale, "stale_command")
    # the round meant now is taken; one not started yet is not
    assert not isinstance(
        decide(open_two, cmd.PlaceBet(**{**copy.model_dump(), "round": 2}), NOW), Rejection
    )
    then_rejected(
        open_two, cmd.PlaceBet(player_id="ann", box=0, amount=100, round=3), "round_not_in_play"
    )


def test_a_bet_naming_the_next_round_opens_it() -> None:
    state = _settled_round_one()
    events = decide(state, cmd.PlaceBet(player_id="ann", box=0, amount=1000, round=2), NOW)
    assert isinstance(events, list)
    assert [type(e) for e in events] == [ev.RoundOpened, ev.BetPlaced]
    assert all(isinstance(e, ev.RoundEvent) and e.round == 2 for e in events)


def test_a_command_without_a_round_is_decided_as_before_rounds_were_named() -> None:
    """Backward compatible: a command already on the topic, or from a platform that does not
    send ``round`` yet, acts in the round in play (the handler may require it:
    ``BLACKJACK_COMMAND_ROUND``)."""
    state = _settled_round_one()
    named = decide(state, cmd.PlaceBet(player_id="ann", box=0, amount=1000, round=2), NOW)
    unnamed = decide(state, cmd.PlaceBet(player_id="ann", box=0, amount=1000), NOW)
    assert unnamed == named
    assert isinstance(unnamed, list) and [type(e) for e in unnamed] == [
        ev.RoundOpened,
        ev.BetPlaced,
    ]


def test_a_move_for_a_round_that_is_over_does_not_play_the_hand_in_play() -> None:
    """A Double, Hit, Stand, Split or Surrender of round 1 arriving while round 2's hand 0 is
    in play: refused, the hand untouched; the same move naming round 2 (or no round) plays."""
    state = given_more(
        _settled_round_one(),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000, round=2),
        cmd.Deal(player_id="ann", round=2),
    )
    assert state.active == (0, 0) and state.round == 2
    for move in (cmd.Double, cmd.Hit, cmd.Stand, cmd.Split, cmd.Surrender):
        then_rejected(state, move(player_id="ann", box=0, hand=0, round=1), "stale_command")
    for double in (
        cmd.Double(player_id="ann", box=0, hand=0, round=2),
        cmd.Double(player_id="ann", box=0, hand=0),
    ):
        events = decide(state, double, NOW)
        assert isinstance(events, list) and isinstance(events[0], ev.HandDoubled), events


def test_a_double_for_a_hand_played_already_is_refused() -> None:
    """After a split, hand 0 stood: a Double naming hand 0 of this round while hand 1 is in
    play is refused (``not_your_turn``), hand 1 untouched."""
    state = given(
        "mini-h17",
        *seated(),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000, round=1),
        cmd.Deal(player_id="ann", round=1),
        cmd.Split(player_id="ann", box=0, hand=0, round=1),
        cmd.Stand(player_id="ann", box=0, hand=0, round=1),
        cards=["8S", "7S", "8H", "TH", "3D", "2S"],
    )
    assert state.active == (0, 1)
    then_rejected(state, cmd.Double(player_id="ann", box=0, hand=0, round=1), "not_your_turn")
    events = decide(state, cmd.Double(player_id="ann", box=0, hand=1, round=1), NOW)
    assert isinstance(events, list) and isinstance(events[0], ev.HandDoubled), events


def test_an_insurance_decision_for_a_round_that_is_over() -> None:
    state = given_more(
        _settled_round_one(),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000, round=2),
        cmd.Deal(player_id="ann", round=2),
    )
    for decision in (cmd.TakeInsurance, cmd.DeclineInsurance):
        then_rejected(state, decision(player_id="ann", box=0, round=1), "stale_command")


def test_a_pass_for_a_round_that_is_over() -> None:
    state = given(
        "atlantic-city-multi",
        *shared_seated("ann", 0),
        *shared_seated("bob", 1),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000, round=1),
        cmd.Pass(player_id="bob", round=1),
        cmd.Deal(player_id="ann", round=1),
        cmd.Stand(player_id="ann", box=0, round=1),
        cards=["TS", "7S", "TH", "9S"],
    )
    assert (state.round, state.round_open) == (1, False)
    open_two = given_more(state, cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    then_rejected(open_two, cmd.Pass(player_id="bob", round=1), "stale_command")
