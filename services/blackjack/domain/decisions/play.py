"""The players' decisions on their hands (hit, stand, double, split, surrender) and whose turn
it is next."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import facts
from blackjack.domain.decisions.checks import require, seated
from blackjack.domain.decisions.dealing import deal_card
from blackjack.domain.decisions.draft import Draft
from blackjack.domain.decisions.options import (
    double_refusal,
    hand_actions,
    hit_refusal,
    split_refusal,
    surrender_refusal,
    turn_hand,
)
from blackjack.domain.decisions.settlement import reveal_and_settle, settle_hand
from blackjack.domain.hand import best_total
from blackjack.domain.state import Hand, Player


def next_turn(r: Draft) -> None:
    """Ask for the next decision: on the hand that just moved while it stays open (after a hit
    or a split), else on the first open hand; the dealer plays when none is left."""
    state = r.state
    if state.active is not None:
        active_box, active_hand = state.active
        if state.boxes[active_box].hands[active_hand].status == "open":
            start_turn(r, active_box, active_hand, state.deadline)  # one clock per hand
            return
    for index in state.boxes_in_play():
        for hand_index, hand in enumerate(state.boxes[index].hands):
            if hand.status == "open":
                start_turn(r, index, hand_index, r.deadline())
                return
    live = any(h.status == "standing" for b in state.boxes for h in b.hands)
    reveal_and_settle(r, dealer_draws=live)


def start_turn(r: Draft, box: int, hand: int, deadline: datetime | None) -> None:
    state = r.state
    player_id = state.boxes[box].player_id
    assert player_id is not None
    r.emit(
        facts.turn_started(
            round=state.round,
            player_id=player_id,
            box=box,
            hand=hand,
            actions=hand_actions(state, box, hand),
            deadline=deadline,
        )
    )


def _play(r: Draft, c: cmd.HandCommand) -> tuple[Player, int, Hand]:
    player = seated(r.state, c.player_id)
    hand = turn_hand(r.state, player, c.box, c.hand)
    assert r.state.active is not None
    return player, r.state.active[1], hand


def hit(r: Draft, c: cmd.Hit) -> None:
    _, hand_index, hand = _play(r, c)
    require(hit_refusal(r.state, hand))
    r.emit(facts.player_hit(round=r.state.round, player_id=c.player_id, box=c.box, hand=hand_index))
    deal_card(r, c.box, hand_index)
    settle_if_bust(r, c.box, hand_index)
    next_turn(r)


def settle_if_bust(r: Draft, box: int, hand_index: int) -> None:
    """Pages 001 and 003 (``bust_settled_at_once``): "If your hand busts ..., this hand loses
    and is removed from the table", "you immediately lose": a hand that has just bust is
    settled now (nothing back), out of play while the player's other hands are played; the
    round's settlement counts it without settling it again."""
    hand = r.state.boxes[box].hands[hand_index]
    if r.state.rules.bust_settled_at_once and hand.status == "bust":
        settle_hand(r, box, hand_index, hand)


def stand(r: Draft, c: cmd.Stand) -> None:
    _, hand_index, hand = _play(r, c)
    stand_hand(r, c.player_id, c.box, hand_index, hand)
    next_turn(r)


def stand_hand(r: Draft, player_id: str, box: int, hand_index: int, hand: Hand) -> None:
    r.emit(
        facts.player_stood(
            round=r.state.round,
            player_id=player_id,
            box=box,
            hand=hand_index,
            total=best_total(hand.cards),
        )
    )


class _StakeEvent(Protocol):
    """``facts.hand_doubled`` or ``facts.hand_split``: the same fields."""

    def __call__(
        self, *, round: int, player_id: str, box: int, hand: int, amount: int, balance_after: int
    ) -> ev.HandDoubled | ev.HandSplit: ...


def _stake_again(
    r: Draft,
    c: cmd.HandCommand,
    event: _StakeEvent,
    *,
    player: Player,
    hand_index: int,
    hand: Hand,
) -> None:
    """A double or a split: the hand's stake once more, from the balance."""
    r.emit(
        event(
            round=r.state.round,
            player_id=c.player_id,
            box=c.box,
            hand=hand_index,
            amount=hand.stake,
            balance_after=player.balance - hand.stake,
        )
    )


def double(r: Draft, c: cmd.Double) -> None:
    player, hand_index, hand = _play(r, c)
    require(double_refusal(r.state, player, hand))
    _stake_again(r, c, facts.hand_doubled, player=player, hand_index=hand_index, hand=hand)
    deal_card(r, c.box, hand_index)
    settle_if_bust(r, c.box, hand_index)
    next_turn(r)


def split(r: Draft, c: cmd.Split) -> None:
    player, hand_index, hand = _play(r, c)
    require(split_refusal(r.state, player, c.box, hand))
    _stake_again(r, c, facts.hand_split, player=player, hand_index=hand_index, hand=hand)
    deal_card(r, c.box, hand_index)
    deal_card(r, c.box, hand_index + 1)
    if r.state.boxes[c.box].hands[hand_index].status == "open":
        # Two new hands, each with a whole turn of its own: the first does not keep what was
        # left of the pair's clock (the second's starts when its turn comes).
        start_turn(r, c.box, hand_index, r.deadline())
    else:
        next_turn(r)


def surrender(r: Draft, c: cmd.Surrender) -> None:
    _, hand_index, hand = _play(r, c)
    require(surrender_refusal(r.state, c.box, hand))
    r.emit(
        facts.hand_surrendered(
            round=r.state.round,
            player_id=c.player_id,
            box=c.box,
            hand=hand_index,
        )
    )
    if r.state.rules.surrender_paid_at_once:
        # Page 003: "Upon Surrender you receive half of your initial bet back": the hand is
        # settled now (the half pays for a move on another box), the round goes on for the
        # others, and its settlement counts the hand without paying it again.
        settle_hand(r, c.box, hand_index, r.state.boxes[c.box].hands[hand_index])
    next_turn(r)
