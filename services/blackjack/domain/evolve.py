"""``evolve(state, event) -> state``: how each fact changes a table. No decisions here: the
decider has already checked everything; this only records it (and derives a hand's status
from its cards, so that the decider and replay cannot disagree about it).

Each rule below changes a *draft*: a copy of the state that nobody else holds yet (see
``TableState.copy``). ``evolve`` copies once per event, ``fold`` once per log and the decider
once per command, which is where a round's fifteen or so events would otherwise each copy the
whole table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from blackjack.domain import events as ev
from blackjack.domain.errors import CorruptLog
from blackjack.domain.hand import best_total, is_natural
from blackjack.domain.state import (
    EMPTY_BOX,
    INITIAL_STATE,
    Box,
    Hand,
    Player,
    Shoe,
    TableState,
)
from blackjack.domain.transfers import transfer_origin


def evolve(state: TableState, event: ev.Event) -> TableState:
    draft = state.copy()
    apply_event(draft, event)
    return draft


def fold(events: Iterable[ev.Event], state: TableState = INITIAL_STATE) -> TableState:
    draft = state.copy()
    for event in events:
        apply_event(draft, event)
    return draft


def apply_event(draft: TableState, event: ev.Event) -> None:
    """Record ``event`` in ``draft``, a state the caller has just copied and no one else holds."""
    handler = _HANDLERS.get(type(event))
    if handler is None:
        raise CorruptLog(f"no evolve rule for {type(event).__name__}")
    handler(draft, event)


# ---- helpers ------------------------------------------------------------------------------


def _set_player(draft: TableState, player: Player) -> None:
    draft.players = {**draft.players, player.player_id: player}


def _set_balance(draft: TableState, player_id: str, balance: int) -> None:
    _set_player(draft, draft.players[player_id].changed(balance=balance))


def _set_box(draft: TableState, index: int, box: Box) -> None:
    boxes = list(draft.boxes)
    boxes[index] = box
    draft.boxes = tuple(boxes)


def _set_hand(draft: TableState, box_index: int, hand_index: int, hand: Hand) -> None:
    box = draft.boxes[box_index]
    hands = list(box.hands)
    hands[hand_index] = hand
    _set_box(draft, box_index, box.changed(hands=tuple(hands)))


def _hand_after_card(hand: Hand, card: str) -> Hand:
    cards = (*hand.cards, card)
    best = best_total(cards)
    status = hand.status
    if best > 21:
        status = "bust"
    elif len(cards) == 2 and not hand.from_split and is_natural(cards):
        status = "blackjack"
    elif best == 21 or hand.doubled or (hand.split_aces and len(cards) == 2):
        status = "standing"  # a player cannot draw at 21; a double or a split ace gets one card
    return hand.changed(cards=cards, status=status)


# ---- the table ----------------------------------------------------------------------------


def _table_opened(draft: TableState, e: ev.TableOpened) -> None:
    draft.opened = True
    draft.rules = e.rules
    draft.boxes = (EMPTY_BOX,) * e.rules.boxes


def _seat_taken(draft: TableState, e: ev.SeatTaken) -> None:
    # A player who sits down while a round is open joins it late: what is left of its betting
    # clock is less than the page's 15 s (``decisions.clock``).
    joined = draft.round if draft.round_open else 0
    _set_player(draft, Player(player_id=e.player_id, seat=e.seat, joined_round=joined))


def _seat_changed(draft: TableState, e: ev.SeatChanged) -> None:
    _set_player(draft, draft.players[e.player_id].changed(seat=e.to_seat))


def _seat_left(draft: TableState, e: ev.SeatLeft) -> None:
    players = dict(draft.players)
    del players[e.player_id]
    draft.players = players


def _funds_withdrawn(draft: TableState, e: ev.FundsWithdrawn) -> None:
    _set_balance(draft, e.player_id, e.balance_after)


def _funds_deposited(draft: TableState, e: ev.FundsDeposited) -> None:
    _set_balance(draft, e.player_id, e.balance_after)
    if e.transfer is not None:
        _handled_buy_in(draft, e.transfer)


def _transfer_declined(draft: TableState, e: ev.TransferDeclined) -> None:
    _handled_buy_in(draft, e.transfer)


def _money_command_refused(draft: TableState, e: ev.MoneyCommandRefused) -> None:
    """No money moved: the stream keeps the command's id (``Stream.note_money``), not its
    state."""


def _handled_buy_in(draft: TableState, transfer: str) -> None:
    try:
        wallet, number = transfer_origin(transfer)
    except ValueError as error:
        raise CorruptLog(str(error)) from error
    if number <= draft.buy_ins.get(wallet, 0):
        raise CorruptLog(f"buy-in {transfer} handled after a later one of {wallet}")
    draft.buy_ins = {**draft.buy_ins, wallet: number}


def _connection(draft: TableState, e: ev.PlayerDisconnected | ev.PlayerReconnected) -> None:
    connected = isinstance(e, ev.PlayerReconnected)
    _set_player(draft, draft.players[e.player_id].changed(connected=connected))


def _shoe_shuffled(draft: TableState, e: ev.ShoeShuffled) -> None:
    draft.shoe = Shoe(number=e.shoe, order=e.order, salt=e.salt, commitment=e.commitment)
    draft.shoes_used = e.shoe


def _shoe_retired(draft: TableState, e: ev.ShoeRetired) -> None:
    draft.shoe = None


# ---- betting ------------------------------------------------------------------------------


def _round_opened(draft: TableState, e: ev.RoundOpened) -> None:
    draft.round = e.round
    draft.round_open = True
    draft.phase = "betting"
    draft.deadline = e.betting_deadline


def _bet_placed(draft: TableState, e: ev.BetPlaced) -> None:
    _set_balance(draft, e.player_id, e.balance_after)
    player = draft.players[e.player_id]
    if player.sitting_out or player.rounds_sat_out:
        _set_player(draft, player.changed(sitting_out=False, rounds_sat_out=0))
    _set_box(draft, e.box, Box(player_id=e.player_id, bet=e.box_total))


def _bet_refunded(draft: TableState, e: ev.BetRefunded) -> None:
    _set_balance(draft, e.player_id, e.balance_after)
    box = EMPTY_BOX if e.box_total == 0 else Box(player_id=e.player_id, bet=e.box_total)
    _set_box(draft, e.box, box)


def _deal_requested(draft: TableState, e: ev.DealRequested) -> None:
    _set_player(draft, draft.players[e.player_id].changed(ready=True))


def _player_passed(draft: TableState, e: ev.PlayerPassed) -> None:
    player = draft.players[e.player_id].changed(passed=True, sitting_out=False, rounds_sat_out=0)
    _set_player(draft, player)


def _close_round(draft: TableState) -> None:
    draft.players = {pid: p.changed(ready=False, passed=False) for pid, p in draft.players.items()}
    draft.round_open = False
    draft.phase = "betting"
    draft.boxes = (EMPTY_BOX,) * draft.rules.boxes
    draft.dealer = ()
    draft.active = None
    draft.deadline = None
    draft.sat_out_counted = False


def _round_cancelled(draft: TableState, e: ev.RoundCancelled) -> None:
    _close_round(draft)


def _round_voided(draft: TableState, e: ev.RoundVoided) -> None:
    for returned in e.returns:
        _set_balance(draft, returned.player_id, returned.balance_after)
    # "Malfunctions voids all pays and plays": a voided round is no round played, so no round
    # sat out either (as one dealt while suspended is not); no one sits out from the deal to
    # the void, so those who sit out now are those its deal counted. A version 1's handler
    # kept the count (``counts_as_round_sat_out``): its log folds as it decided.
    if draft.sat_out_counted and not e.counts_as_round_sat_out:
        draft.players = {
            pid: p.changed(rounds_sat_out=max(p.rounds_sat_out - 1, 0)) if p.sitting_out else p
            for pid, p in draft.players.items()
        }
    _close_round(draft)


# ---- the deal and the play ----------------------------------------------------------------


def _deal_started(draft: TableState, e: ev.DealStarted) -> None:
    boxes = list(draft.boxes)
    last: dict[str, list[tuple[int, int]]] = {}
    for index in e.boxes:
        box = boxes[index]
        boxes[index] = box.changed(hands=(Hand(stake=box.bet),))
        assert box.player_id is not None
        # Kept relative to the seat, so that a rebet follows a player who changed seats.
        offset = index % draft.rules.boxes_per_seat
        last.setdefault(box.player_id, []).append((offset, box.bet))
    players = dict(draft.players)
    for pid, bets in last.items():
        players[pid] = players[pid].changed(last_bets=tuple(bets))
    # A round dealt without a player who sits out is one more sat out in a row, where the
    # rules stand such a player up; not while the table is suspended (no one could bet).
    counted = draft.rules.seat_released_after_rounds_sat_out is not None and not draft.suspended
    if counted:
        for pid, player in list(players.items()):
            if player.sitting_out:
                players[pid] = player.changed(rounds_sat_out=player.rounds_sat_out + 1)
    draft.sat_out_counted = counted and any(p.sitting_out for p in players.values())
    draft.boxes = tuple(boxes)
    draft.players = players
    draft.phase = "playing"
    draft.deadline = None


def _card_dealt(draft: TableState, e: ev.CardDealt) -> None:
    shoe = draft.shoe
    if shoe is None or shoe.position >= len(shoe.order):
        raise CorruptLog("a card was dealt from an empty or missing shoe")
    card = shoe.order[shoe.position]
    # Each field read once: a pydantic attribute costs a few dictionary and type lookups, and
    # about five cards are dealt a round.
    shown = e.card
    if shown is not None and shown != card:
        # Not which card the shoe holds: the message reaches logs, and the shoe may be in play.
        raise CorruptLog(
            f"card {shown} dealt as card {shoe.position + 1} of shoe {shoe.number}, "
            "which the shoe does not hold there"
        )
    draft.shoe = shoe.after_card()
    if e.to == "dealer":
        # Exactly the hole card is face down, and a face-down card never shows in the event.
        face_up = e.face_up
        dealer = draft.dealer
        hole = len(dealer) == draft.hole_index
        if face_up == hole or (not face_up and shown is not None):
            where = f"dealer card {len(dealer) + 1}"
            raise CorruptLog(f"{where} dealt {'face up' if face_up else 'face down'}")
        draft.dealer = (*dealer, card)
        return
    box, hand = e.box, e.hand
    assert box is not None and hand is not None
    _set_hand(draft, box, hand, _hand_after_card(draft.boxes[box].hands[hand], card))


def _insurance_offered(draft: TableState, e: ev.InsuranceOffered) -> None:
    boxes = list(draft.boxes)
    for index in e.boxes:
        boxes[index] = boxes[index].changed(insurance="offered")
    draft.boxes = tuple(boxes)
    draft.phase = "insurance"
    draft.deadline = e.deadline


def _insurance_taken(draft: TableState, e: ev.InsuranceTaken) -> None:
    _set_balance(draft, e.player_id, e.balance_after)
    box = draft.boxes[e.box].changed(insurance="taken", insurance_stake=e.amount)
    _set_box(draft, e.box, box)


def _insurance_declined(draft: TableState, e: ev.InsuranceDeclined) -> None:
    _set_box(draft, e.box, draft.boxes[e.box].changed(insurance="declined"))


def _dealer_peeked(draft: TableState, e: ev.DealerPeeked) -> None:
    draft.phase = "playing"
    draft.deadline = None


def _insurance_settled(draft: TableState, e: ev.InsuranceSettled) -> None:
    _set_balance(draft, e.player_id, e.balance_after)
    box = draft.boxes[e.box].changed(insurance="settled", insurance_paid=e.payout)
    _set_box(draft, e.box, box)


def _turn_started(draft: TableState, e: ev.TurnStarted) -> None:
    draft.phase = "playing"
    draft.active = (e.box, e.hand)
    draft.deadline = e.deadline


def _player_hit(draft: TableState, e: ev.PlayerHit) -> None:
    return None  # the card follows as its own event


def _player_stood(draft: TableState, e: ev.PlayerStood) -> None:
    hand = draft.boxes[e.box].hands[e.hand]
    _set_hand(draft, e.box, e.hand, hand.changed(status="standing"))


def _hand_doubled(draft: TableState, e: ev.HandDoubled) -> None:
    _set_balance(draft, e.player_id, e.balance_after)
    hand = draft.boxes[e.box].hands[e.hand]
    _set_hand(draft, e.box, e.hand, hand.changed(doubled=True, stake=hand.stake + e.amount))


def _hand_split(draft: TableState, e: ev.HandSplit) -> None:
    _set_balance(draft, e.player_id, e.balance_after)
    box = draft.boxes[e.box]
    hand = box.hands[e.hand]
    aces = hand.cards[0][0] == "A" and hand.cards[1][0] == "A"
    one_card = aces and draft.rules.split_aces_one_card
    first = Hand(stake=hand.stake, cards=hand.cards[:1], from_split=True, split_aces=one_card)
    second = Hand(stake=e.amount, cards=hand.cards[1:], from_split=True, split_aces=one_card)
    hands = (*box.hands[: e.hand], first, second, *box.hands[e.hand + 1 :])
    _set_box(draft, e.box, box.changed(hands=hands))


def _hand_surrendered(draft: TableState, e: ev.HandSurrendered) -> None:
    hand = draft.boxes[e.box].hands[e.hand]
    _set_hand(draft, e.box, e.hand, hand.changed(status="surrendered"))


def _player_timed_out(draft: TableState, e: ev.PlayerTimedOut) -> None:
    # What the server did for the player follows as its own events. Left out of a round, the
    # player sits out: later rounds deal without waiting for one who bets or passes no more.
    if e.sits_out:
        _set_player(draft, draft.players[e.player_id].changed(sitting_out=True))


def _interrupted_round_closed(draft: TableState, e: ev.InterruptedRoundClosed) -> None:
    """Nothing changes yet: what the server does in the players' place follows as events."""


def _round_resumed(draft: TableState, e: ev.RoundResumed) -> None:
    """The round goes on exactly as the events before it left it, its clock restarted at a
    table of one seat (``decisions.clock.resumption``)."""
    if e.deadline is not None:
        draft.deadline = e.deadline


def _table_suspended(draft: TableState, e: ev.TableSuspended) -> None:
    draft.suspended = True


def _table_resumed(draft: TableState, e: ev.TableResumed) -> None:
    draft.suspended = False


def _hole_card_revealed(draft: TableState, e: ev.DealerHoleCardRevealed) -> None:
    if draft.hole_card != e.card:
        raise CorruptLog(f"hole card revealed as {e.card}, dealt as {draft.hole_card}")
    draft.phase = "dealer"
    draft.active = None
    draft.deadline = None


def _hand_settled(draft: TableState, e: ev.HandSettled) -> None:
    _set_balance(draft, e.player_id, e.balance_after)
    hand = draft.boxes[e.box].hands[e.hand]
    _set_hand(draft, e.box, e.hand, hand.changed(settled=True))


def _round_settled(draft: TableState, e: ev.RoundSettled) -> None:
    _close_round(draft)


_HANDLERS: Final[dict[type[ev.Event], Callable[[TableState, Any], None]]] = {
    ev.TableOpened: _table_opened,
    ev.SeatTaken: _seat_taken,
    ev.SeatChanged: _seat_changed,
    ev.SeatLeft: _seat_left,
    ev.FundsDeposited: _funds_deposited,
    ev.TransferDeclined: _transfer_declined,
    ev.FundsWithdrawn: _funds_withdrawn,
    ev.MoneyCommandRefused: _money_command_refused,
    ev.PlayerDisconnected: _connection,
    ev.PlayerReconnected: _connection,
    ev.TableSuspended: _table_suspended,
    ev.TableResumed: _table_resumed,
    ev.ShoeShuffled: _shoe_shuffled,
    ev.ShoeRetired: _shoe_retired,
    ev.RoundOpened: _round_opened,
    ev.BetPlaced: _bet_placed,
    ev.BetRefunded: _bet_refunded,
    ev.DealRequested: _deal_requested,
    ev.PlayerPassed: _player_passed,
    ev.RoundCancelled: _round_cancelled,
    ev.RoundVoided: _round_voided,
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
    ev.InterruptedRoundClosed: _interrupted_round_closed,
    ev.RoundResumed: _round_resumed,
    ev.DealerHoleCardRevealed: _hole_card_revealed,
    ev.HandSettled: _hand_settled,
    ev.RoundSettled: _round_settled,
}
