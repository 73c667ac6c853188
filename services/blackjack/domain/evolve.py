"""``evolve(state, event) -> state``: how each fact changes a table. No decisions here: the
decider has already checked everything; this only records it (and derives a hand's status
from its cards, so that the decider and replay cannot disagree about it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from blackjack.domain import events as ev
from blackjack.domain.hand import is_natural, total
from blackjack.domain.state import INITIAL_STATE, Box, Hand, Player, Shoe, TableState, replace


class CorruptLog(ValueError):
    """The events contradict each other (a tampered or misordered log)."""


def evolve(state: TableState, event: ev.Event) -> TableState:
    handler = _HANDLERS.get(type(event))
    if handler is None:
        raise CorruptLog(f"no evolve rule for {type(event).__name__}")
    return handler(state, event)


def fold(events: Iterable[ev.Event], state: TableState = INITIAL_STATE) -> TableState:
    for event in events:
        state = evolve(state, event)
    return state


# ---- helpers ------------------------------------------------------------------------------


def _with_player(state: TableState, player: Player) -> TableState:
    return replace(state, players={**state.players, player.player_id: player})


def _with_balance(state: TableState, player_id: str, balance: int) -> TableState:
    player = state.players[player_id]
    return _with_player(state, replace(player, balance=balance))


def _with_box(state: TableState, index: int, box: Box) -> TableState:
    boxes = list(state.boxes)
    boxes[index] = box
    return replace(state, boxes=tuple(boxes))


def _with_hand(state: TableState, box_index: int, hand_index: int, hand: Hand) -> TableState:
    box = state.boxes[box_index]
    hands = list(box.hands)
    hands[hand_index] = hand
    return _with_box(state, box_index, replace(box, hands=tuple(hands)))


def _hand_after_card(hand: Hand, card: str) -> Hand:
    cards = (*hand.cards, card)
    best = total(cards).best
    status = hand.status
    if best > 21:
        status = "bust"
    elif len(cards) == 2 and not hand.from_split and is_natural(cards):
        status = "blackjack"
    elif best == 21 or hand.doubled or (hand.split_aces and len(cards) == 2):
        status = "standing"  # a player cannot draw at 21; a double or a split ace gets one card
    return replace(hand, cards=cards, status=status)


# ---- the table ----------------------------------------------------------------------------


def _table_opened(state: TableState, e: ev.TableOpened) -> TableState:
    return replace(state, opened=True, rules=e.rules, boxes=(Box(),) * e.rules.boxes)


def _seat_taken(state: TableState, e: ev.SeatTaken) -> TableState:
    return _with_player(state, Player(player_id=e.player_id, seat=e.seat))


def _seat_changed(state: TableState, e: ev.SeatChanged) -> TableState:
    return _with_player(state, replace(state.players[e.player_id], seat=e.to_seat))


def _seat_left(state: TableState, e: ev.SeatLeft) -> TableState:
    players = dict(state.players)
    del players[e.player_id]
    return replace(state, players=players)


def _funds_moved(state: TableState, e: ev.FundsWithdrawn) -> TableState:
    return _with_balance(state, e.player_id, e.balance_after)


def _funds_deposited(state: TableState, e: ev.FundsDeposited) -> TableState:
    state = _with_balance(state, e.player_id, e.balance_after)
    if e.transfer is None:
        return state
    return replace(state, transfers=state.transfers | {e.transfer})


def _transfer_declined(state: TableState, e: ev.TransferDeclined) -> TableState:
    return replace(state, transfers=state.transfers | {e.transfer})


def _connection(state: TableState, e: ev.PlayerDisconnected | ev.PlayerReconnected) -> TableState:
    player = state.players[e.player_id]
    connected = isinstance(e, ev.PlayerReconnected)
    return _with_player(state, replace(player, connected=connected))


def _shoe_shuffled(state: TableState, e: ev.ShoeShuffled) -> TableState:
    shoe = Shoe(number=e.shoe, order=e.order, salt=e.salt, commitment=e.commitment)
    return replace(state, shoe=shoe, shoes_used=e.shoe)


def _shoe_retired(state: TableState, e: ev.ShoeRetired) -> TableState:
    return replace(state, shoe=None)


# ---- betting ------------------------------------------------------------------------------


def _round_opened(state: TableState, e: ev.RoundOpened) -> TableState:
    return replace(
        state,
        round=e.round,
        round_open=True,
        phase="betting",
        deadline=e.betting_deadline,
    )


def _bet_placed(state: TableState, e: ev.BetPlaced) -> TableState:
    state = _with_balance(state, e.player_id, e.balance_after)
    return _with_box(state, e.box, Box(player_id=e.player_id, bet=e.box_total))


def _bet_refunded(state: TableState, e: ev.BetRefunded) -> TableState:
    state = _with_balance(state, e.player_id, e.balance_after)
    return _with_box(state, e.box, Box())


def _deal_requested(state: TableState, e: ev.DealRequested) -> TableState:
    return _with_player(state, replace(state.players[e.player_id], ready=True))


def _player_passed(state: TableState, e: ev.PlayerPassed) -> TableState:
    return _with_player(state, replace(state.players[e.player_id], passed=True))


def _close_round(state: TableState) -> TableState:
    players = {pid: replace(p, ready=False, passed=False) for pid, p in state.players.items()}
    return replace(
        state,
        players=players,
        round_open=False,
        phase="betting",
        boxes=(Box(),) * state.rules.boxes,
        dealer=(),
        active=None,
        deadline=None,
    )


def _round_cancelled(state: TableState, e: ev.RoundCancelled) -> TableState:
    return _close_round(state)


# ---- the deal and the play ----------------------------------------------------------------


def _deal_started(state: TableState, e: ev.DealStarted) -> TableState:
    boxes = list(state.boxes)
    last: dict[str, list[tuple[int, int]]] = {}
    for index in e.boxes:
        box = boxes[index]
        boxes[index] = replace(box, hands=(Hand(stake=box.bet),))
        assert box.player_id is not None
        # Kept relative to the seat, so that a rebet follows a player who changed seats.
        offset = index % state.rules.boxes_per_seat
        last.setdefault(box.player_id, []).append((offset, box.bet))
    players = dict(state.players)
    for pid, bets in last.items():
        players[pid] = replace(players[pid], last_bets=tuple(bets))
    return replace(state, boxes=tuple(boxes), players=players, phase="playing", deadline=None)


def _card_dealt(state: TableState, e: ev.CardDealt) -> TableState:
    shoe = state.shoe
    if shoe is None or shoe.position >= len(shoe.order):
        raise CorruptLog("a card was dealt from an empty or missing shoe")
    card = shoe.order[shoe.position]
    if e.card is not None and e.card != card:
        raise CorruptLog(f"card {e.card} dealt where the shoe holds {card}")
    # One TableState copy per card (shoe and hand together): five cards a round at least.
    shoe = replace(shoe, position=shoe.position + 1)
    if e.to == "dealer":
        return replace(state, shoe=shoe, dealer=(*state.dealer, card))
    assert e.box is not None and e.hand is not None
    box = state.boxes[e.box]
    hands = list(box.hands)
    hands[e.hand] = _hand_after_card(hands[e.hand], card)
    boxes = list(state.boxes)
    boxes[e.box] = replace(box, hands=tuple(hands))
    return replace(state, shoe=shoe, boxes=tuple(boxes))


def _insurance_offered(state: TableState, e: ev.InsuranceOffered) -> TableState:
    boxes = list(state.boxes)
    for index in e.boxes:
        boxes[index] = replace(boxes[index], insurance="offered")
    return replace(state, boxes=tuple(boxes), phase="insurance", deadline=e.deadline)


def _insurance_taken(state: TableState, e: ev.InsuranceTaken) -> TableState:
    state = _with_balance(state, e.player_id, e.balance_after)
    box = replace(state.boxes[e.box], insurance="taken", insurance_stake=e.amount)
    return _with_box(state, e.box, box)


def _insurance_declined(state: TableState, e: ev.InsuranceDeclined) -> TableState:
    return _with_box(state, e.box, replace(state.boxes[e.box], insurance="declined"))


def _dealer_peeked(state: TableState, e: ev.DealerPeeked) -> TableState:
    return replace(state, phase="playing", deadline=None)


def _insurance_settled(state: TableState, e: ev.InsuranceSettled) -> TableState:
    state = _with_balance(state, e.player_id, e.balance_after)
    return _with_box(
        state, e.box, replace(state.boxes[e.box], insurance="settled", insurance_paid=e.payout)
    )


def _turn_started(state: TableState, e: ev.TurnStarted) -> TableState:
    return replace(state, phase="playing", active=(e.box, e.hand), deadline=e.deadline)


def _player_hit(state: TableState, e: ev.PlayerHit) -> TableState:
    return state


def _player_stood(state: TableState, e: ev.PlayerStood) -> TableState:
    hand = state.boxes[e.box].hands[e.hand]
    return _with_hand(state, e.box, e.hand, replace(hand, status="standing"))


def _hand_doubled(state: TableState, e: ev.HandDoubled) -> TableState:
    state = _with_balance(state, e.player_id, e.balance_after)
    hand = state.boxes[e.box].hands[e.hand]
    doubled = replace(hand, doubled=True, stake=hand.stake + e.amount)
    return _with_hand(state, e.box, e.hand, doubled)


def _hand_split(state: TableState, e: ev.HandSplit) -> TableState:
    state = _with_balance(state, e.player_id, e.balance_after)
    box = state.boxes[e.box]
    hand = box.hands[e.hand]
    aces = hand.cards[0][0] == "A" and hand.cards[1][0] == "A"
    one_card = aces and state.rules.split_aces_one_card
    first = Hand(stake=hand.stake, cards=hand.cards[:1], from_split=True, split_aces=one_card)
    second = Hand(stake=e.amount, cards=hand.cards[1:], from_split=True, split_aces=one_card)
    hands = (*box.hands[: e.hand], first, second, *box.hands[e.hand + 1 :])
    return _with_box(state, e.box, replace(box, hands=hands))


def _hand_surrendered(state: TableState, e: ev.HandSurrendered) -> TableState:
    hand = state.boxes[e.box].hands[e.hand]
    return _with_hand(state, e.box, e.hand, replace(hand, status="surrendered"))


def _player_timed_out(state: TableState, e: ev.PlayerTimedOut) -> TableState:
    return state


def _hole_card_revealed(state: TableState, e: ev.DealerHoleCardRevealed) -> TableState:
    if state.hole_card != e.card:
        raise CorruptLog(f"hole card revealed as {e.card}, dealt as {state.hole_card}")
    return replace(state, phase="dealer", active=None, deadline=None)


def _hand_settled(state: TableState, e: ev.HandSettled) -> TableState:
    return _with_balance(state, e.player_id, e.balance_after)


def _round_settled(state: TableState, e: ev.RoundSettled) -> TableState:
    return _close_round(state)


_HANDLERS: dict[type[ev.Event], Callable[[TableState, Any], TableState]] = {
    ev.TableOpened: _table_opened,
    ev.SeatTaken: _seat_taken,
    ev.SeatChanged: _seat_changed,
    ev.SeatLeft: _seat_left,
    ev.FundsDeposited: _funds_deposited,
    ev.TransferDeclined: _transfer_declined,
    ev.FundsWithdrawn: _funds_moved,
    ev.PlayerDisconnected: _connection,
    ev.PlayerReconnected: _connection,
    ev.ShoeShuffled: _shoe_shuffled,
    ev.ShoeRetired: _shoe_retired,
    ev.RoundOpened: _round_opened,
    ev.BetPlaced: _bet_placed,
    ev.BetRefunded: _bet_refunded,
    ev.DealRequested: _deal_requested,
    ev.PlayerPassed: _player_passed,
    ev.RoundCancelled: _round_cancelled,
    ev.DealStarted: _deal_started,
    ev.CardDealt: _card_dealt,
    ev.InsuranceOffered: _insurance_offered,
    ev.InsuranceTaken: _insurance_taken,
    ev.InsuranceDeclined: _insurance_declined,
    ev.DealerPeeked: _dealer_peeked,
    ev.InsuranceSettled: _insurance_settled,
    ev.TurnStarted: _turn_started,
    ev.PlayerHit: _player_hit,
    ev.PlayerStood: _player_stood,
    ev.HandDoubled: _hand_doubled,
    ev.HandSplit: _hand_split,
    ev.HandSurrendered: _hand_surrendered,
    ev.PlayerTimedOut: _player_timed_out,
    ev.DealerHoleCardRevealed: _hole_card_revealed,
    ev.HandSettled: _hand_settled,
    ev.RoundSettled: _round_settled,
}
