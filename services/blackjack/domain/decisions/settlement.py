"""The dealer's hand and the settlement: what each hand and each insurance pays, and the
round's result per player."""

from __future__ import annotations

from blackjack.domain import events as ev
from blackjack.domain import facts
from blackjack.domain.decisions.dealing import deal_dealer
from blackjack.domain.decisions.draft import Draft
from blackjack.domain.hand import best_total, is_natural, total
from blackjack.domain.payouts import (
    blackjack_winnings,
    insurance_return,
    surrender_refund,
)
from blackjack.domain.state import Hand


def settle_insurance(r: Draft) -> None:
    state = r.state
    won = is_natural(state.dealer)
    for index, box in enumerate(state.boxes):
        if box.insurance != "taken" or box.player_id is None:
            continue
        payout = insurance_return(state.rules, box.insurance_stake) if won else 0
        balance = r.state.players[box.player_id].balance + payout
        r.emit(
            facts.insurance_settled(
                round=state.round,
                player_id=box.player_id,
                box=index,
                stake=box.insurance_stake,
                won=won,
                payout=payout,
                balance_after=balance,
            )
        )


def reveal_and_settle(r: Draft, dealer_draws: bool) -> None:
    state = r.state
    hole = state.hole_card
    assert hole is not None
    r.emit(facts.dealer_hole_card_revealed(round=state.round, card=hole))
    settle_insurance(r)  # insurance not yet settled by a peek is settled on the hole card
    if dealer_draws:
        hits_soft_17 = r.state.rules.dealer_hits_soft_17
        while True:
            dealer_total = total(r.state.dealer)
            if dealer_total.best > 17 or (
                dealer_total.best == 17 and not (dealer_total.soft and hits_soft_17)
            ):
                break
            deal_dealer(r, face_up=True)
    _settle_round(r)


def hand_result(r: Draft, hand: Hand) -> tuple[ev.Outcome, int]:
    rules = r.state.rules
    dealer = r.state.dealer
    dealer_blackjack = is_natural(dealer)
    dealer_total = best_total(dealer)
    if hand.status == "surrendered":
        return "surrender", surrender_refund(hand.stake)
    if hand.status == "bust":
        return "bust", 0
    if hand.status == "blackjack":
        if dealer_blackjack:
            return "push", hand.stake
        return "blackjack", hand.stake + blackjack_winnings(rules, hand.stake)
    if dealer_blackjack:
        return "lose", 0
    mine = best_total(hand.cards)
    if dealer_total > 21 or mine > dealer_total:
        return "win", 2 * hand.stake
    if mine == dealer_total:
        return "push", hand.stake
    return "lose", 0


def settle_hand(r: Draft, box: int, hand_index: int, hand: Hand) -> tuple[ev.Outcome, int]:
    """Pay one hand: its ``HandSettled``; returns (outcome, payout)."""
    outcome, payout = hand_result(r, hand)
    player_id = r.state.boxes[box].player_id
    assert player_id is not None
    r.emit(
        facts.hand_settled(
            round=r.state.round,
            player_id=player_id,
            box=box,
            hand=hand_index,
            outcome=outcome,
            total=best_total(hand.cards),
            stake=hand.stake,
            payout=payout,
            balance_after=r.state.players[player_id].balance + payout,
        )
    )
    return outcome, payout


def _settle_round(r: Draft) -> None:
    state = r.state
    dealer_blackjack = is_natural(state.dealer)
    wagered: dict[str, int] = {}
    paid: dict[str, int] = {}
    messages: list[ev.BoxMessage] = []
    for index in state.boxes_in_play():
        box = state.boxes[index]
        player_id = box.player_id
        assert player_id is not None
        box_wagered = sum(h.stake for h in box.hands) + box.insurance_stake
        box_paid = box.insurance_paid  # settled at the peek or on the hole card, just before
        outcomes = []
        for hand_index, hand in enumerate(box.hands):
            if hand.settled:  # at once (a blackjack, a surrender, a bust): counted, not paid again
                outcome, payout = hand_result(r, hand)
            else:
                outcome, payout = settle_hand(r, index, hand_index, hand)
            outcomes.append(outcome)
            box_paid += payout
        # The mini-h17 page: "After split, if you win one hand & lose another hand you will be
        # shown a message 'Break Even' which indicates that you don't win or lose anything."
        if (
            state.rules.break_even_message
            and len(box.hands) > 1
            and "win" in outcomes
            and ("lose" in outcomes or "bust" in outcomes)
            and box_paid == box_wagered
        ):
            messages.append(facts.box_message(box=index, message="Break Even"))
        wagered[player_id] = wagered.get(player_id, 0) + box_wagered
        paid[player_id] = paid.get(player_id, 0) + box_paid
    results = tuple(
        facts.player_round_result(
            player_id=pid,
            wagered=wagered[pid],
            paid=paid[pid],
            net=paid[pid] - wagered[pid],
            balance_after=r.state.players[pid].balance,
        )
        for pid in wagered
    )
    r.emit(
        facts.round_settled(
            round=state.round,
            dealer_total=best_total(state.dealer),
            dealer_blackjack=dealer_blackjack,
            results=results,
            messages=tuple(messages),
        )
    )
    stand_up_players_sat_out(r)


def stand_up_players_sat_out(r: Draft) -> None:
    """At the end of a game cycle, the server stands up each player who has sat out the
    table's ``seat_released_after_rounds_sat_out`` rounds in a row, as ``LeaveTable`` would:
    the seat is free and the player's money is paid out (at a shared table, to the wallet).
    Called once the round is settled, so no bet or hand of theirs is out (one who bet or
    passed since has a count of 0)."""
    limit = r.state.rules.seat_released_after_rounds_sat_out
    if limit is None:
        return
    due = [p for p in r.state.players.values() if p.rounds_sat_out >= limit]
    for player in sorted(due, key=lambda p: p.seat):
        r.emit(
            facts.seat_left(
                player_id=player.player_id,
                seat=player.seat,
                balance_returned=player.balance,
                reason="sat_out",
                rounds_sat_out=player.rounds_sat_out,
            )
        )
