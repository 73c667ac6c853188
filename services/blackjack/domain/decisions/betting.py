"""Betting: chips on a box, taking them back, Deal, Rebet and Pass, and closing the bets with
the deal."""

from __future__ import annotations

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import facts
from blackjack.domain.decisions.checks import (
    check_affordable,
    check_amount,
    check_bet_maximum,
    check_bet_minimum,
    check_betting,
    check_not_suspended,
    check_shoe,
    own_box,
    seated,
)
from blackjack.domain.decisions.dealing import deal_card, deal_dealer
from blackjack.domain.decisions.draft import Draft, refuse
from blackjack.domain.decisions.insurance import after_deal


def _open_round_if_needed(r: Draft) -> None:
    if not r.state.round_open:
        r.emit(facts.round_opened(round=r.state.round + 1, betting_deadline=r.deadline()))


def _add_to_box(r: Draft, player_id: str, box: int, amount: int) -> None:
    state = r.state
    player = state.players[player_id]
    box_total = state.boxes[box].bet + amount
    check_bet_maximum(state, box_total)
    check_affordable(player, amount, "the bet")
    _open_round_if_needed(r)
    r.emit(
        facts.bet_placed(
            round=r.state.round,
            player_id=player_id,
            box=box,
            amount=amount,
            box_total=box_total,
            balance_after=player.balance - amount,
        )
    )


def place_bet(r: Draft, c: cmd.PlaceBet) -> None:
    player = seated(r.state, c.player_id)
    check_not_suspended(r.state, "no new bets")
    own_box(r.state, player, c.box)
    check_betting(r.state, player)
    check_amount(c.amount)
    _add_to_box(r, c.player_id, c.box, c.amount)


def refund_bets(r: Draft, player_id: str, reason: ev.RefundReason) -> None:
    for index in r.state.boxes_of(player_id):
        if not r.state.boxes[index].hands:
            refund_box(r, player_id, index, reason)


def refund_box(r: Draft, player_id: str, index: int, reason: ev.RefundReason) -> None:
    """The whole bet on a box not dealt goes back to its player, and the box is free."""
    bet = r.state.boxes[index].bet
    r.emit(
        facts.bet_refunded(
            round=r.state.round,
            player_id=player_id,
            box=index,
            amount=bet,
            reason=reason,
            balance_after=r.state.players[player_id].balance + bet,
        )
    )


def close_if_no_bet_left(r: Draft) -> None:
    """A round whose every bet was taken back before the deal ends there where no betting
    clock will close it (a single-player table's): the next bet opens the next game cycle,
    with an id and a start of its own, instead of one opened by a bet since taken back. Where
    a clock runs, the round stays open to its deadline for the others to bet."""
    state = r.state
    if (
        state.round_open
        and state.phase == "betting"
        and state.deadline is None
        and not any(box.bet for box in state.boxes)
    ):
        r.emit(facts.round_cancelled(round=state.round))


def clear_bets(r: Draft, c: cmd.ClearBets) -> None:
    player = seated(r.state, c.player_id)
    check_betting(r.state, player)
    if not r.state.boxes_of(c.player_id):
        raise refuse("no_bets", "there is no bet to clear")
    refund_bets(r, c.player_id, "cleared")
    close_if_no_bet_left(r)
    deal_when_all_decided(r)  # a late joiner with no bet left is waited for no longer


def remove_bet(r: Draft, c: cmd.RemoveBet) -> None:
    """The surrender page: "To remove a bet completely or decrease its value, you should remove
    the chip or chips placed". Only before the deal (and before pressing Deal at a shared
    table). What stays may be under the table minimum, as a stack being built is: the minimum
    binds when the player deals."""
    state = r.state
    player = seated(state, c.player_id)
    own_box(state, player, c.box)
    check_betting(state, player)
    bet = state.boxes[c.box].bet
    if bet == 0:
        raise refuse("no_bets", f"there is no bet on box {c.box} to remove")
    amount = bet if c.amount is None else c.amount
    check_amount(amount)
    if amount > bet:
        raise refuse("invalid_amount", f"box {c.box} holds a bet of {bet}, not {amount}")
    left = bet - amount
    r.emit(
        facts.bet_refunded(
            round=state.round,
            player_id=c.player_id,
            box=c.box,
            amount=amount,
            box_total=left,
            reason="removed",
            balance_after=player.balance + amount,
        )
    )
    close_if_no_bet_left(r)
    deal_when_all_decided(r)  # a late joiner with no bet left is waited for no longer


def _request_deal(r: Draft, player_id: str) -> None:
    if not r.state.boxes_of(player_id):
        raise refuse("no_bets", "place a bet before the deal")
    check_bet_minimum(r.state, player_id)
    check_shoe(r.state)
    r.emit(facts.deal_requested(round=r.state.round, player_id=player_id))
    deal_when_all_decided(r)


def deal(r: Draft, c: cmd.Deal) -> None:
    player = seated(r.state, c.player_id)
    check_betting(r.state, player)
    _request_deal(r, c.player_id)


def rebet(r: Draft, c: cmd.Rebet) -> None:
    state = r.state
    player = seated(state, c.player_id)
    check_not_suspended(state, "no new bets")
    if c.multiplier not in state.rules.rebet_multipliers:
        raise refuse("rebet_not_offered", f"no rebet x{c.multiplier} at this table")
    check_betting(state, player)
    if not player.last_bets:
        raise refuse("no_previous_bet", "there is no previous bet to repeat")
    if state.boxes_of(c.player_id):
        raise refuse("not_betting_time", "clear the bets on the table before a rebet")
    first_box = player.seat * state.rules.boxes_per_seat
    bets = [(first_box + offset, amount * c.multiplier) for offset, amount in player.last_bets]
    check_affordable(player, sum(amount for _, amount in bets), "the rebet")
    for box, amount in bets:
        _add_to_box(r, c.player_id, box, amount)
    if state.rules.rebet_deals:
        _request_deal(r, c.player_id)


def pass_round(r: Draft, c: cmd.Pass) -> None:
    player = seated(r.state, c.player_id)
    if r.state.rules.seats == 1:
        raise refuse("pass_not_offered", "Pass is for tables shared by several players")
    check_betting(r.state, player)
    if not r.state.round_open:
        raise refuse("not_betting_time", "no round is open to pass")
    refund_bets(r, c.player_id, "passed")
    r.emit(facts.player_passed(round=r.state.round, player_id=c.player_id))
    deal_when_all_decided(r)


def deal_when_all_decided(r: Draft) -> None:
    """Deal once every seated player has pressed Deal or Pass. One the clock left out of a
    round and who has not bet or passed since sits out: not waited for (one who never acts
    would hold every round up for the whole clock), yet may still bet while betting is open.
    Nor is one who sat down once the round was open and has no bet on it: "if you join a
    table in the middle of a hand, you must wait until the round is over" (page 002), not the
    others for you; a bet of theirs is waited for like anyone's. Nor, where the rules return a
    bet on a disconnection before Deal (``refund_bets_on_disconnect``, page 003), is one
    disconnected with no bet: the table put them out of the round (a bet of theirs placed
    after they come back is waited for)."""
    state = r.state
    if not state.round_open or state.phase != "betting":
        return
    out_when_gone = state.rules.refund_bets_on_disconnect
    if all(
        p.ready
        or p.passed
        or p.sitting_out
        or (p.joined_round == state.round and not state.boxes_of(p.player_id))
        or (out_when_gone and not p.connected and not state.boxes_of(p.player_id))
        for p in state.players.values()
    ):
        close_betting(r)


def close_betting(r: Draft) -> None:
    state = r.state
    ready = [
        i
        for i, box in enumerate(state.boxes)
        if box.player_id is not None and state.players[box.player_id].ready
    ]
    if not ready:
        r.emit(facts.round_cancelled(round=state.round))
        return
    check_shoe(state)
    assert state.shoe is not None
    r.emit(facts.deal_started(round=state.round, shoe=state.shoe.number, boxes=tuple(ready)))
    # Each box's first card, the dealer's first card, each box's second card, the dealer's
    # second card; the hole card (face down, no card in the event) is the first or the second.
    hole_first = state.rules.hole_card_first
    for index in ready:
        deal_card(r, index, 0)
    deal_dealer(r, face_up=not hole_first)
    for index in ready:
        deal_card(r, index, 0)
    deal_dealer(r, face_up=hole_first)
    after_deal(r)
