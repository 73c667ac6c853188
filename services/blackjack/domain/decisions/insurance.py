"""Insurance and the dealer's peek: who is offered it, taking or declining it, and what the
peek decides before anyone plays."""

from __future__ import annotations

from blackjack.domain import commands as cmd
from blackjack.domain import facts
from blackjack.domain.cards import is_ace, is_ten_value
from blackjack.domain.decisions import play
from blackjack.domain.decisions.checks import check_affordable, own_box, require, seated
from blackjack.domain.decisions.draft import Draft, Refused, refuse
from blackjack.domain.decisions.options import (
    double_refusal,
    hit_refusal,
    split_refusal,
    surrender_refusal,
)
from blackjack.domain.decisions.play import next_turn
from blackjack.domain.decisions.settlement import reveal_and_settle, settle_hand, settle_insurance
from blackjack.domain.hand import is_natural
from blackjack.domain.payouts import (
    insurance_stake,
)
from blackjack.domain.state import Player, TableState


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


# ---- a move that declines (page 002) ------------------------------------------------------
#
# "If you do not wish to take insurance, you may simply click on one of the other buttons
# (hit, double down, stand, etc.) to proceed with the rest of the hand." Where the rules say so
# (``move_declines_insurance``), a move on a box whose insurance is undecided is that box's
# DeclineInsurance followed by the move, in one command: the same events, then the peek, then
# the move on the hand whose turn it now is. A move that could not follow at once (other boxes
# still deciding, or another box plays first) is refused whole: a command never half-applies,
# and whether it is accepted never depends on the hole card. A dealer blackjack found by the
# peek settles the round, and the move is moot: accepted, its events say so (DealerPeeked
# has_blackjack, the settlement, no move). Without the option a move during insurance is
# refused as before (``not_your_turn``: no hand is waiting for a decision).


def hit(r: Draft, c: cmd.Hit) -> None:
    if _declined_by_move(r, c, "hit"):
        play.hit(r, c)


def stand(r: Draft, c: cmd.Stand) -> None:
    if _declined_by_move(r, c, "stand"):
        play.stand(r, c)


def double(r: Draft, c: cmd.Double) -> None:
    if _declined_by_move(r, c, "double"):
        play.double(r, c)


def split(r: Draft, c: cmd.Split) -> None:
    if _declined_by_move(r, c, "split"):
        play.split(r, c)


def surrender(r: Draft, c: cmd.Surrender) -> None:
    if _declined_by_move(r, c, "surrender"):
        play.surrender(r, c)


def _declined_by_move(r: Draft, c: cmd.HandCommand, move: str) -> bool:
    """Whether the move is to be played now: outside the insurance phase, or at a table
    without the option, it is (its own checks decide); at a table with it, the box's
    insurance is declined first, and the move follows unless the peek ended the round."""
    state = r.state
    if state.phase != "insurance" or not state.rules.move_declines_insurance:
        return True
    player = seated(state, c.player_id)
    own_box(state, player, c.box)
    if state.boxes[c.box].insurance != "offered":
        raise refuse(
            "not_your_turn",
            f"box {c.box} has no insurance decision open and the others' are still being "
            "made: play when its turn comes",
        )
    undecided = [i for i, b in enumerate(state.boxes) if b.insurance == "offered" and i != c.box]
    if undecided:
        waiting = ", ".join(str(i) for i in undecided)
        raise refuse(
            "not_your_turn",
            f"insurance is still being decided on box {waiting}: decline it on box {c.box} "
            "(DeclineInsurance) or take it, and play when its turn comes",
        )
    first = _first_to_play(state)
    if c.box != first or c.hand not in (None, 0):
        raise refuse(
            "not_your_turn",
            f"box {first} hand 0 plays first: decline insurance on box {c.box} "
            "(DeclineInsurance) or take it, and play when its turn comes",
        )
    require(_move_refusal(state, player, c.box, move))
    r.emit(facts.insurance_declined(round=state.round, player_id=c.player_id, box=c.box))
    peek_then_play(r)
    # The dealer's blackjack settled the round: the move is moot (and the events say so).
    return r.state.phase == "playing"


def _first_to_play(state: TableState) -> int | None:
    """The box whose first hand the turn goes to once the insurance is decided and the peek
    finds no blackjack: the first box in play with an open hand (the peek changes no hand)."""
    for index in state.boxes_in_play():
        if state.boxes[index].hands[0].status == "open":
            return index
    return None


def _move_refusal(state: TableState, player: Player, box: int, move: str) -> Refused | None:
    """The move's own check on the box's first hand, made before anything is declined, on
    the cards and the balance the player sees (the decline and a peek that finds no
    blackjack change neither)."""
    hand = state.boxes[box].hands[0]
    if move == "hit":
        return hit_refusal(state, hand)
    if move == "double":
        return double_refusal(state, player, hand)
    if move == "split":
        return split_refusal(state, player, box, hand)
    if move == "surrender":
        return surrender_refusal(state, box, hand)
    return None
