"""Folding a round's events into its read model: betting, the deal, insurance, the play and
the settlement, into the table's view, the players' accounts, the round's record and each
player's line in it, and the game cycles closed into their UTC day (``GameDay``).
``ROUND_HANDLERS`` maps each such event type to its rule (``projector.StreamProjection``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel

from blackjack.domain import events as ev
from blackjack.domain.hand import is_natural
from blackjack.projections.fold_table import _back_in
from blackjack.projections.ids import utc
from blackjack.projections.views import (
    BoxMessageView,
    BoxView,
    HandView,
    InsuranceView,
    ProjectionError,
    RoundPlayer,
    RoundRecord,
    Turn,
)

if TYPE_CHECKING:
    from blackjack.projections.projector import Handler, StreamProjection


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
    _staked(p, e, e.player_id, e.amount, e.balance_after)
    _back_in(account)
    record = p.round(e.round)
    boxes = [b for b in record.boxes if b.box != e.box]
    boxes.append(BoxView(box=e.box, player_id=e.player_id, bet=e.box_total))
    record.boxes = sorted(boxes, key=lambda b: b.box)


def _staked(
    p: StreamProjection, e: ev.RoundEvent, player_id: str, amount: int, balance_after: int
) -> None:
    """A stake placed (``amount`` > 0: a bet, insurance, a split or a double) or a bet taken
    back: into play. The player's line in the round reads it from the round's record
    (``StreamProjection._recount``)."""
    p.money_moved(e, player_id, balance_after).in_play += amount


def _bet_refunded(p: StreamProjection, e: ev.BetRefunded, at: datetime) -> None:
    _staked(p, e, e.player_id, -e.amount, e.balance_after)
    record = p.round(e.round)
    boxes = [b for b in record.boxes if b.box != e.box]
    if e.box_total:  # RemoveBet took back part of the bet: the rest stays on the box
        boxes.append(BoxView(box=e.box, player_id=e.player_id, bet=e.box_total))
    record.boxes = sorted(boxes, key=lambda b: b.box)


def _logged_only(p: StreamProjection, e: ev.RoundEvent, at: datetime) -> None:
    """DealRequested, PlayerHit, InterruptedRoundClosed: the round's log has them."""


def _round_resumed(p: StreamProjection, e: ev.RoundResumed, at: datetime) -> None:
    """The round's log has it; at a table of one seat on a clock, the clock starts again (in
    the betting, the round's betting clock too: a deal after the old deadline is in time)."""
    if e.deadline is None:
        return
    p.view.deadline = utc(e.deadline)
    if p.view.phase == "betting":
        p.round(e.round).betting_deadline = utc(e.deadline)


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
    _staked(p, e, e.player_id, e.amount, e.balance_after)
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
    _staked(p, e, e.player_id, e.amount, e.balance_after)
    hand = p.round(e.round).hand(e.box, e.hand)
    hand.stake += e.amount
    hand.doubled = True


def _hand_split(p: StreamProjection, e: ev.HandSplit, at: datetime) -> None:
    _staked(p, e, e.player_id, e.amount, e.balance_after)
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


def _round_voided(p: StreamProjection, e: ev.RoundVoided, at: datetime) -> None:
    """Every wager of the round back and nothing it paid standing: what a settlement before
    the void counted in an account (a blackjack paid at once, an insurance settled at the
    peek) leaves its lifetime sums, the stakes still in play leave ``in_play``, and the
    player's line reads wagered and paid back (its net is what the void could not take back,
    which the account counts as won). The round counts in no game sum but ``voided``, and in
    no account's rounds."""
    record = p.round(e.round)
    record.status = "voided"
    record.closed_at = at
    p.day(at).voided += 1
    record.mark_voided()
    for returned in e.returns:
        account = p.money_moved(e, returned.player_id, returned.balance_after)
        settled_stakes = 0
        for box in record.boxes:
            if box.player_id != returned.player_id:
                continue
            settled = [(hand.stake, hand.payout) for hand in box.hands if hand.payout is not None]
            insurance = box.insurance
            if insurance is not None and insurance.status == "settled":
                settled.append((insurance.stake, insurance.payout or 0))
            for stake, payout in settled:
                account.unsettle(stake, payout)
                settled_stakes += stake
        account.in_play -= returned.wagered - settled_stakes
        # A payment the balance could not give back stays with the player: money the house
        # lost, as a win, or the account's deposits - withdrawals = balance + in play +
        # losses - wins would be off by it (the audit's conservation check).
        account.won += returned.not_recovered
        player = p.round_player(e.round, returned.player_id)
        player.wagered = returned.wagered
        player.paid = returned.paid + returned.returned
        player.net = player.paid - player.wagered
    # A voided round is no round sat out (as ``evolve`` takes back what its deal counted).
    if not e.counts_as_round_sat_out and _sat_out_counted(p, record):
        for account in p.accounts.values():
            count = account.rounds_sat_out
            if account.seated and account.sitting_out and count:
                p.account(account.player_id).rounds_sat_out = count - 1
    p.close_round()


def _sat_out_counted(p: StreamProjection, record: RoundRecord) -> bool:
    """Whether the round's deal counted one more round sat out (``_deal_started``): where the
    rules free such seats, if the table was not suspended at the deal, read back from now
    through the suspensions and resumptions the round's log holds since."""
    if p.seat_release() is None:
        return False
    suspended = p.view.suspended is not None
    for entry in reversed(record.log):
        if entry.event == "DealStarted":
            return not suspended
        if entry.event == "TableSuspended":
            suspended = False
        elif entry.event == "TableResumed":
            suspended = True
    return False  # voided before the deal: nothing counted


ROUND_HANDLERS: dict[type[BaseModel], Handler] = {
    ev.RoundOpened: _round_opened,
    ev.BetPlaced: _bet_placed,
    ev.BetRefunded: _bet_refunded,
    ev.DealRequested: _logged_only,
    ev.PlayerPassed: _player_passed,
    ev.InterruptedRoundClosed: _logged_only,
    ev.RoundResumed: _round_resumed,
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
