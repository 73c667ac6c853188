"""Folding the public events of one table into its read model, in memory and without I/O.

``StreamProjection`` holds what the events of one stream (a table) have made of the read model
so far: the table's public view, each player's account at the table, and the rounds (game
cycles) touched. ``apply`` folds one wire envelope into it; the writer loads the pieces an event
needs from the store beforehand and saves what changed afterwards.

Only the public form of the events is used: the shoe order stays sealed, and the dealer's hole
card is shown face down (``None``) until ``DealerHoleCardRevealed``.

Money (integer minor units) per account:
    available  the balance at the table (every money event carries ``balance_after``)
    in_play    moved in by BetPlaced, HandDoubled, HandSplit, InsuranceTaken and back out by
               BetRefunded, HandSettled and InsuranceSettled (the stake)
    won, lost  per settled wager, payout - stake when positive, stake - payout when positive
so that ``deposited - withdrawn - cashed_out = available + in_play + (lost - won)``, the money
conservation that the audit checks.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel

from blackjack.domain import events as ev
from blackjack.domain.hand import is_natural
from blackjack.domain.rules import Rules
from blackjack.messages.wire import SealedShoeShuffled, WireEnvelope
from blackjack.projections.ids import round_id, utc
from blackjack.projections.views import (
    Account,
    BoxMessageView,
    BoxView,
    GameDay,
    HandView,
    InsuranceView,
    LogEntry,
    ProjectionError,
    RoundPlayer,
    RoundRecord,
    ShoeView,
    Suspension,
    TableView,
    Turn,
)


def check_next(stream_id: str, last_sequence: int, envelope: WireEnvelope) -> None:
    """The envelope must be the stream's next event: its own stream, the next sequence."""
    if envelope.stream_id != stream_id:
        raise ProjectionError(f"event of {envelope.stream_id} folded into {stream_id}")
    if envelope.sequence != last_sequence + 1:
        raise ProjectionError(f"{stream_id}: event {envelope.sequence} follows {last_sequence}")


# ---- the fold -----------------------------------------------------------------------------

_LOG_EXCLUDE = {"type", "version", "round"}


class StreamProjection:
    """The read model of one stream; ``apply`` folds the next event of that stream into it.

    The ``*_dirty`` sets name what ``apply`` changed since they were last cleared.
    """

    def __init__(
        self,
        view: TableView,
        accounts: dict[str, Account] | None = None,
        rounds: dict[int, RoundRecord] | None = None,
        players: dict[tuple[int, str], RoundPlayer] | None = None,
    ) -> None:
        self.view = view
        self.accounts = accounts or {}
        self.rounds = rounds or {}
        self.players = players or {}
        self.accounts_dirty: set[str] = set()
        self.rounds_dirty: set[int] = set()
        self.players_dirty: set[tuple[int, str]] = set()
        self.days: dict[date, GameDay] = {}
        """the game cycles closed since this projection was made, by UTC day: what the
        writer adds to ``game_days``"""

    @classmethod
    def new(cls, stream_id: str) -> StreamProjection:
        return cls(TableView(stream_id=stream_id))

    def apply(self, envelope: WireEnvelope) -> None:
        view = self.view
        check_next(view.stream_id, view.last_sequence, envelope)
        event = envelope.data
        at = utc(envelope.occurred_at)
        record: RoundRecord | None = None
        if isinstance(event, ev.RoundEvent):
            record = self._round_for(event, at, envelope.sequence)
        elif (number := recalled_in(view, event)) is not None:
            record = self.round(number)  # a deposit or a disconnection during the round...
        if record is not None:
            entry = LogEntry(
                sequence=envelope.sequence,
                at=at,
                event=envelope.type,
                data=event.model_dump(mode="json", exclude=_LOG_EXCLUDE),
            )
            record.log.append(entry)
            record.last_sequence = envelope.sequence
            self.rounds_dirty.add(record.round)
        handler = _HANDLERS.get(type(event))
        if handler is None:
            raise ProjectionError(f"no projection rule for {type(event).__name__}")
        handler(self, event, at)
        view.last_sequence = envelope.sequence
        view.updated_at = at

    # ---- pieces -------------------------------------------------------------------------

    def _round_for(self, event: ev.RoundEvent, at: datetime, sequence: int) -> RoundRecord:
        if isinstance(event, ev.RoundOpened):
            if event.round in self.rounds:
                raise ProjectionError(f"round {event.round} of {self.view.stream_id} reopened")
            self.rounds[event.round] = RoundRecord(
                round_id=round_id(self.view.stream_id, event.round),
                stream_id=self.view.stream_id,
                round=event.round,
                variant=self.view.variant or "",
                currency=self.view.currency or "",
                opened_at=at,
                betting_deadline=utc(event.betting_deadline) if event.betting_deadline else None,
                first_sequence=sequence,
                last_sequence=sequence,
            )
        record = self.rounds.get(event.round)
        if record is None:
            raise ProjectionError(f"{type(event).__name__} for unknown round {event.round}")
        return record

    def round(self, number: int) -> RoundRecord:
        return self.rounds[number]

    def account(self, player_id: str) -> Account:
        account = self.accounts.get(player_id)
        if account is None:
            raise ProjectionError(f"{player_id} has no account at {self.view.stream_id}")
        self.accounts_dirty.add(player_id)
        return account

    def round_player(self, number: int, player_id: str) -> RoundPlayer:
        player = self.players.get((number, player_id))
        if player is None:
            raise ProjectionError(f"{player_id} has no bet in round {number}")
        self.players_dirty.add((number, player_id))
        return player

    def money_moved(self, e: ev.RoundEvent, player_id: str, balance_after: int) -> Account:
        """The account after a money event of a round, and that round's balance after."""
        account = self.account(player_id)
        account.available = balance_after
        self.round_player(e.round, player_id).balance_after = balance_after
        return account

    def moved_at_the_table(self, player_id: str, amount: int, balance_after: int) -> None:
        """Money paid in (``amount`` > 0) or taken out at the table: counted in the player's
        line of the open round, if they bet in it, so the line still adds up."""
        key = (self.view.round, player_id)
        player = self.players.get(key)
        if not self.view.round_open or player is None:
            return
        if amount > 0:
            player.deposited += amount
        else:
            player.withdrawn -= amount
        player.balance_after = balance_after
        self.players_dirty.add(key)

    def seat_release(self) -> int | None:
        """The table's ``seat_released_after_rounds_sat_out``: None where its rules free no
        seat (or a view folded before the option existed, whose rules had none)."""
        limit = (self.view.rules or {}).get("seat_released_after_rounds_sat_out")
        return limit if isinstance(limit, int) else None

    def day(self, at: datetime) -> GameDay:
        return self.days.setdefault(utc(at).date(), GameDay())

    def close_round(self) -> None:
        view = self.view
        view.round_open = False
        view.phase = "betting"
        view.active = None
        view.deadline = None


Handler = Callable[[StreamProjection, Any, datetime], None]


def recalled_in(view: TableView, event: object) -> int | None:
    """The round whose recall holds ``event``, a table's event that is not a round's own:
    the open round's, for a deposit, a disconnection, a seat taken or left while it plays;
    the round just settled, for a player the server stood up as it ended (``SeatLeft``,
    reason ``sat_out``: a decision the server made for the player, and why)."""
    if isinstance(event, ev.SeatLeft) and event.reason == "sat_out" and view.round:
        return view.round
    if isinstance(event, ev.IN_A_ROUND_S_RECALL) and view.round_open:
        return view.round
    return None


# ---- the table ----------------------------------------------------------------------------


def _table_opened(p: StreamProjection, e: ev.TableOpened, at: datetime) -> None:
    view = p.view
    if view.opened:
        raise ProjectionError(f"{view.stream_id} opened twice")
    view.opened = True
    view.variant = e.rules.name
    view.currency = e.rules.currency
    view.rules = e.rules.model_dump(mode="json")


def _seat_taken(p: StreamProjection, e: ev.SeatTaken, at: datetime) -> None:
    account = p.accounts.get(e.player_id)
    if account is None:
        rules = Rules.model_validate(p.view.rules or {})
        account = Account(
            stream_id=p.view.stream_id,
            player_id=e.player_id,
            currency=p.view.currency or "",
            funded_by_wallet=rules.funded_by_wallet,
        )
        p.accounts[e.player_id] = account
    p.accounts_dirty.add(e.player_id)
    account.seat = e.seat
    account.seated = True
    account.connected = True
    _back_in(account)


def _back_in(account: Account) -> None:
    """Seated again, or a bet or a pass: the player does not sit out (and is known not to)."""
    account.sitting_out = False
    account.rounds_sat_out = 0


def _seat_changed(p: StreamProjection, e: ev.SeatChanged, at: datetime) -> None:
    p.account(e.player_id).seat = e.to_seat


def _seat_left(p: StreamProjection, e: ev.SeatLeft, at: datetime) -> None:
    account = p.account(e.player_id)
    account.cashed_out += e.balance_returned
    account.available = 0
    p.moved_at_the_table(e.player_id, -e.balance_returned, 0)
    account.seat = None
    account.seated = False
    _back_in(account)  # the decider forgets the player; seated again, they start afresh


def _funds_deposited(p: StreamProjection, e: ev.FundsDeposited, at: datetime) -> None:
    account = p.account(e.player_id)
    account.deposited += e.amount
    account.available = e.balance_after
    p.moved_at_the_table(e.player_id, e.amount, e.balance_after)


def _transfer_declined(p: StreamProjection, e: ev.TransferDeclined, at: datetime) -> None:
    """No money moved: the wallet's view shows the refund."""


def _funds_withdrawn(p: StreamProjection, e: ev.FundsWithdrawn, at: datetime) -> None:
    account = p.account(e.player_id)
    account.withdrawn += e.amount
    account.available = e.balance_after
    p.moved_at_the_table(e.player_id, -e.amount, e.balance_after)


def _connection(
    p: StreamProjection, e: ev.PlayerDisconnected | ev.PlayerReconnected, at: datetime
) -> None:
    p.account(e.player_id).connected = isinstance(e, ev.PlayerReconnected)


def _table_suspended(p: StreamProjection, e: ev.TableSuspended, at: datetime) -> None:
    p.view.suspended = Suspension(reason=e.reason, since=at)


def _table_resumed(p: StreamProjection, e: ev.TableResumed, at: datetime) -> None:
    p.view.suspended = None


def _shoe_shuffled(p: StreamProjection, e: SealedShoeShuffled, at: datetime) -> None:
    p.view.shoe = ShoeView(shoe=e.shoe, commitment=e.commitment, cards=e.cards)


def _shoe_retired(p: StreamProjection, e: ev.ShoeRetired, at: datetime) -> None:
    p.view.shoe = None


# ---- betting ------------------------------------------------------------------------------


def _round_opened(p: StreamProjection, e: ev.RoundOpened, at: datetime) -> None:
    view = p.view
    view.round = e.round
    view.round_open = True
    view.phase = "betting"
    view.active = None
    view.deadline = utc(e.betting_deadline) if e.betting_deadline else None


def _bet_placed(p: StreamProjection, e: ev.BetPlaced, at: datetime) -> None:
    account = p.account(e.player_id)
    key = (e.round, e.player_id)
    if key not in p.players:
        p.players[key] = RoundPlayer(
            stream_id=p.view.stream_id,
            round=e.round,
            player_id=e.player_id,
            started_at=at,
            balance_before=account.available,
            balance_after=account.available,
        )
    p.money_moved(e, e.player_id, e.balance_after).in_play += e.amount
    _back_in(account)
    record = p.round(e.round)
    boxes = [b for b in record.boxes if b.box != e.box]
    boxes.append(BoxView(box=e.box, player_id=e.player_id, bet=e.box_total))
    record.boxes = sorted(boxes, key=lambda b: b.box)


def _bet_refunded(p: StreamProjection, e: ev.BetRefunded, at: datetime) -> None:
    p.money_moved(e, e.player_id, e.balance_after).in_play -= e.amount
    record = p.round(e.round)
    boxes = [b for b in record.boxes if b.box != e.box]
    if e.box_total:  # RemoveBet took back part of the bet: the rest stays on the box
        boxes.append(BoxView(box=e.box, player_id=e.player_id, bet=e.box_total))
    record.boxes = sorted(boxes, key=lambda b: b.box)


def _logged_only(p: StreamProjection, e: ev.RoundEvent, at: datetime) -> None:
    """DealRequested, PlayerHit, InterruptedRoundClosed, RoundResumed: the round's log has
    them."""


def _player_passed(p: StreamProjection, e: ev.PlayerPassed, at: datetime) -> None:
    _back_in(p.account(e.player_id))


def _player_timed_out(p: StreamProjection, e: ev.PlayerTimedOut, at: datetime) -> None:
    """Left out of a round by the clock, the player sits out. The rounds already sat out
    stay as they were: a player who sits out is left out again when the clock runs out on
    others, and one not known to sit out (folded before 0006) may have sat out some."""
    if e.sits_out:
        account = p.account(e.player_id)
        account.sitting_out = True
        if p.seat_release() is None:
            account.rounds_sat_out = 0  # not counted at this table: the decider's 0


def _round_cancelled(p: StreamProjection, e: ev.RoundCancelled, at: datetime) -> None:
    record = p.round(e.round)
    record.status = "cancelled"
    record.closed_at = at
    p.day(at).cancelled += 1
    p.close_round()


# ---- the deal and the play ----------------------------------------------------------------


def _deal_started(p: StreamProjection, e: ev.DealStarted, at: datetime) -> None:
    record = p.round(e.round)
    record.status = "playing"
    record.dealt_at = at
    record.shoe = e.shoe
    shoe = p.view.shoe
    record.shoe_commitment = shoe.commitment if shoe is not None and shoe.shoe == e.shoe else None
    dealt = set(e.boxes)
    for box in record.boxes:
        if box.box in dealt:
            box.hands = [HandView(stake=box.bet)]
    p.view.phase = "playing"
    p.view.deadline = None
    # A round dealt without a player who sits out is one more sat out in a row, where the
    # rules free such a seat; not while the table is suspended (as ``evolve`` counts).
    if p.seat_release() is not None and p.view.suspended is None:
        for account in p.accounts.values():
            if account.seated and account.sitting_out:
                count = account.rounds_sat_out
                p.account(account.player_id).rounds_sat_out = None if count is None else count + 1


def _card_dealt(p: StreamProjection, e: ev.CardDealt, at: datetime) -> None:
    record = p.round(e.round)
    if p.view.shoe is not None:
        p.view.shoe.cards_dealt += 1
    if e.to == "dealer":
        dealer = record.dealer
        dealer.set_cards([*dealer.cards, e.card if e.face_up else None])
        if e.face_up and dealer.upcard is None and len(dealer.cards) <= 2:
            dealer.upcard = e.card
        return
    if e.box is None or e.hand is None or e.card is None:
        raise ProjectionError(f"a card to a box needs a box, a hand and a card: {e}")
    hand = record.hand(e.box, e.hand)
    hand.set_cards([*hand.cards, e.card])


def _insurance_offered(p: StreamProjection, e: ev.InsuranceOffered, at: datetime) -> None:
    record = p.round(e.round)
    for index in e.boxes:
        record.box(index).insurance = InsuranceView(status="offered")
    p.view.phase = "insurance"
    p.view.deadline = utc(e.deadline) if e.deadline else None


def _insurance_taken(p: StreamProjection, e: ev.InsuranceTaken, at: datetime) -> None:
    p.money_moved(e, e.player_id, e.balance_after).in_play += e.amount
    p.round(e.round).box(e.box).insurance = InsuranceView(status="taken", stake=e.amount)


def _insurance_declined(p: StreamProjection, e: ev.InsuranceDeclined, at: datetime) -> None:
    p.round(e.round).box(e.box).insurance = InsuranceView(status="declined")


def _dealer_peeked(p: StreamProjection, e: ev.DealerPeeked, at: datetime) -> None:
    dealer = p.round(e.round).dealer
    dealer.peeked = True
    dealer.blackjack = e.has_blackjack
    p.view.phase = "playing"
    p.view.deadline = None


def _insurance_settled(p: StreamProjection, e: ev.InsuranceSettled, at: datetime) -> None:
    p.money_moved(e, e.player_id, e.balance_after).settle(e.stake, e.payout, e.balance_after)
    p.round(e.round).box(e.box).insurance = InsuranceView(
        status="settled", stake=e.stake, won=e.won, payout=e.payout
    )


def _turn_started(p: StreamProjection, e: ev.TurnStarted, at: datetime) -> None:
    view = p.view
    view.phase = "playing"
    actions = None if e.actions is None else list(e.actions)
    view.active = Turn(box=e.box, hand=e.hand, player_id=e.player_id, actions=actions)
    view.deadline = utc(e.deadline) if e.deadline else None


def _player_stood(p: StreamProjection, e: ev.PlayerStood, at: datetime) -> None:
    p.round(e.round).hand(e.box, e.hand).stood = True


def _hand_doubled(p: StreamProjection, e: ev.HandDoubled, at: datetime) -> None:
    p.money_moved(e, e.player_id, e.balance_after).in_play += e.amount
    hand = p.round(e.round).hand(e.box, e.hand)
    hand.stake += e.amount
    hand.doubled = True


def _hand_split(p: StreamProjection, e: ev.HandSplit, at: datetime) -> None:
    p.money_moved(e, e.player_id, e.balance_after).in_play += e.amount
    box = p.round(e.round).box(e.box)
    hand = box.hands[e.hand] if 0 <= e.hand < len(box.hands) else None
    if hand is None or len(hand.cards) != 2:
        raise ProjectionError(f"box {e.box} hand {e.hand} is not a pair to split")
    first = HandView(stake=hand.stake, split=True)
    first.set_cards(hand.cards[:1])
    second = HandView(stake=e.amount, split=True)
    second.set_cards(hand.cards[1:])
    box.hands = [*box.hands[: e.hand], first, second, *box.hands[e.hand + 1 :]]


def _hand_surrendered(p: StreamProjection, e: ev.HandSurrendered, at: datetime) -> None:
    p.round(e.round).hand(e.box, e.hand).surrendered = True


def _hole_card_revealed(p: StreamProjection, e: ev.DealerHoleCardRevealed, at: datetime) -> None:
    dealer = p.round(e.round).dealer
    # The hole card is the dealer's first or second card (``Rules.hole_card_first``): the one
    # of the two that was dealt face down.
    hole = [i for i, card in enumerate(dealer.cards[:2]) if card is None]
    if len(dealer.cards) < 2 or len(hole) != 1:
        raise ProjectionError("the hole card is revealed but none was dealt face down")
    cards = list(dealer.cards)
    cards[hole[0]] = e.card
    dealer.set_cards(cards)
    dealer.blackjack = is_natural([c for c in dealer.cards[:2] if c is not None])
    view = p.view
    view.phase = "dealer"
    view.active = None
    view.deadline = None


# ---- settlement ---------------------------------------------------------------------------


def _hand_settled(p: StreamProjection, e: ev.HandSettled, at: datetime) -> None:
    p.money_moved(e, e.player_id, e.balance_after).settle(e.stake, e.payout, e.balance_after)
    hand = p.round(e.round).hand(e.box, e.hand)
    hand.outcome = e.outcome
    hand.payout = e.payout


def _round_settled(p: StreamProjection, e: ev.RoundSettled, at: datetime) -> None:
    record = p.round(e.round)
    record.status = "settled"
    record.closed_at = at
    record.dealer.blackjack = e.dealer_blackjack
    record.messages = [BoxMessageView(box=m.box, message=m.message) for m in e.messages]
    day = p.day(at)
    day.rounds += 1
    day.player_rounds += len(e.results)
    day.initial_bets += sum(box.bet for box in record.boxes if box.hands)
    day.wagered += sum(result.wagered for result in e.results)
    day.paid += sum(result.paid for result in e.results)
    for result in e.results:
        player = p.round_player(e.round, result.player_id)
        player.wagered = result.wagered
        player.paid = result.paid
        player.net = result.net
        player.balance_after = result.balance_after
        p.account(result.player_id).rounds += 1
    p.close_round()


_HANDLERS: dict[type[BaseModel], Handler] = {
    ev.TableOpened: _table_opened,
    ev.SeatTaken: _seat_taken,
    ev.SeatChanged: _seat_changed,
    ev.SeatLeft: _seat_left,
    ev.FundsDeposited: _funds_deposited,
    ev.TransferDeclined: _transfer_declined,
    ev.FundsWithdrawn: _funds_withdrawn,
    ev.PlayerDisconnected: _connection,
    ev.PlayerReconnected: _connection,
    ev.TableSuspended: _table_suspended,
    ev.TableResumed: _table_resumed,
    SealedShoeShuffled: _shoe_shuffled,
    ev.ShoeRetired: _shoe_retired,
    ev.RoundOpened: _round_opened,
    ev.BetPlaced: _bet_placed,
    ev.BetRefunded: _bet_refunded,
    ev.DealRequested: _logged_only,
    ev.PlayerPassed: _player_passed,
    ev.InterruptedRoundClosed: _logged_only,
    ev.RoundResumed: _logged_only,
    ev.RoundCancelled: _round_cancelled,
    ev.DealStarted: _deal_started,
    ev.CardDealt: _card_dealt,
    ev.InsuranceOffered: _insurance_offered,
    ev.InsuranceTaken: _insurance_taken,
    ev.InsuranceDeclined: _insurance_declined,
    ev.DealerPeeked: _dealer_peeked,
    ev.InsuranceSettled: _insurance_settled,
    ev.TurnStarted: _turn_started,
    ev.PlayerHit: _logged_only,
    ev.PlayerStood: _player_stood,
    ev.HandDoubled: _hand_doubled,
    ev.HandSplit: _hand_split,
    ev.HandSurrendered: _hand_surrendered,
    ev.PlayerTimedOut: _player_timed_out,
    ev.DealerHoleCardRevealed: _hole_card_revealed,
    ev.HandSettled: _hand_settled,
    ev.RoundSettled: _round_settled,
}


TABLE_EVENTS_PROJECTED = frozenset(_HANDLERS)
"""Every event type of a table stream the projection has a rule for."""
