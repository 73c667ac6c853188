"""Insurance and the dealer's peek: who is offered it, taking or declining it, and what the
peek decides before anyone plays."""

from __future__ import annotations

from blackjack.domain import commands as cmd
from blackjack.domain import facts
from blackjack.domain.cards import is_ace, is_ten_value
from blackjack.domain.decisions.checks import check_affordable, own_box, seated
from blackjack.domain.decisions.draft import Draft, refuse
from blackjack.domain.decisions.play import next_turn
from blackjack.domain.decisions.settlement import reveal_and_settle, settle_hand, settle_insurance
from blackjack.domain.hand import is_natural
from blackjack.domain.payouts import (
    insurance_stake,
)
from blackjack.domain.state import Player


def after_deal(r: Draft) -> None:
    state = r.state
    upcard = state.upcard
    assert upcard is not None
    if is_ace(upcard) and state.rules.insurance:
        offered = []
        for index in state.boxes_in_play():
            box = state.boxes[index]
            assert box.player_id is not None
            stake = insurance_stake(box.bet)
            # "Insurance is not offered to you if you get a blackjack", nor when it can't be paid.
            if box.hands[0].status != "blackjack" and 0 < stake <= (
                state.players[box.player_id].balance
            ):
                offered.append(index)
        if offered:
            r.emit(
                facts.insurance_offered(
                    round=state.round,
                    boxes=tuple(offered),
                    deadline=r.deadline(),
                )
            )
            return
    peek_then_play(r)


def _insurance_box(r: Draft, player_id: str, box: int) -> Player:
    player = seated(r.state, player_id)
    own_box(r.state, player, box)
    if r.state.phase != "insurance" or r.state.boxes[box].insurance != "offered":
        raise refuse("insurance_not_offered", f"no insurance decision is open on box {box}")
    return player


def take_insurance(r: Draft, c: cmd.TakeInsurance) -> None:
    player = _insurance_box(r, c.player_id, c.box)
    stake = insurance_stake(r.state.boxes[c.box].bet)
    check_affordable(player, stake, "insurance")
    r.emit(
        facts.insurance_taken(
            round=r.state.round,
            player_id=c.player_id,
            box=c.box,
            amount=stake,
            balance_after=player.balance - stake,
        )
    )
    _peek_when_insurance_decided(r)


def decline_insurance(r: Draft, c: cmd.DeclineInsurance) -> None:
    _insurance_box(r, c.player_id, c.box)
    r.emit(facts.insurance_declined(round=r.state.round, player_id=c.player_id, box=c.box))
    _peek_when_insurance_decided(r)


def _peek_when_insurance_decided(r: Draft) -> None:
    if not any(box.insurance == "offered" for box in r.state.boxes):
        peek_then_play(r)


def peek_then_play(r: Draft) -> None:
    state = r.state
    upcard = state.upcard
    assert upcard is not None
    rules = state.rules
    insured = any(box.insurance_stake > 0 for box in state.boxes)
    peeks = rules.peeks_under(upcard, insured)
    if peeks:
        dealer_blackjack = is_natural(state.dealer)
        r.emit(facts.dealer_peeked(round=state.round, has_blackjack=dealer_blackjack))
        settle_insurance(r)
        if dealer_blackjack:
            reveal_and_settle(r, dealer_draws=False)
            return
    # The dealer is now known not to have a blackjack (peeked, or an upcard that cannot make
    # one): where the rules say so, a player's blackjack is paid before anyone plays.
    if rules.blackjack_paid_at_once and (peeks or not (is_ace(upcard) or is_ten_value(upcard))):
        _pay_blackjacks(r)
    next_turn(r)


def _pay_blackjacks(r: Draft) -> None:
    """The surrender page: "If you are dealt Blackjack, you are immediately paid 1.5 times the
    placed bet" (the balance then covers a double or a split on another box)."""
    for index in r.state.boxes_in_play():
        for hand_index, hand in enumerate(r.state.boxes[index].hands):
            if hand.status == "blackjack":
                settle_hand(r, index, hand_index, hand)
