"""Telling a replayed round in words: money as its currency writes it, a hand's cards with
their total, and one line per event (``describe``), for ``blackjack replay`` and the players'
game recall."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from blackjack.domain import events as ev
from blackjack.domain.currencies import money
from blackjack.domain.hand import total
from blackjack.domain.state import TableState


def cards_text(cards: Sequence[str]) -> str:
    if not cards:
        return "-"
    best, soft = total(cards)
    return f"{' '.join(cards)} = {'soft ' if soft and best <= 21 else ''}{best}"


def describe(state: TableState, event: ev.Event) -> str:
    """One line for a round's event, told from the state just before it; an event the
    story does not tell (a shuffle, the table opened) by its type's name."""
    line = _LINES.get(type(event))
    if line is None:
        return type(event).__name__
    return line(state, event, state.rules.currency)


# Each kind of event's line: ``(state before it, event, currency) -> line``, looked up by the
# event's type in ``_LINES`` (no event type has subclasses).


# ---- betting and the round's course --------------------------------------------------------


def _round_opened(state: TableState, e: ev.RoundOpened, cur: str) -> str:
    return "betting opens"


def _bet_placed(state: TableState, e: ev.BetPlaced, cur: str) -> str:
    box = f"box {money(e.box_total, cur)}, balance {money(e.balance_after, cur)}"
    return f"{e.player_id} bets {money(e.amount, cur)} on box {e.box} ({box})"


def _bet_refunded(state: TableState, e: ev.BetRefunded, cur: str) -> str:
    p, b, a, why = e.player_id, e.box, e.amount, e.reason
    if e.box_total:  # some of the bet stays on the box
        rest = f"box {money(e.box_total, cur)}, {why}"
        return f"{p} takes back {money(a, cur)} of the bet on box {b} ({rest})"
    return f"{p}'s bet of {money(a, cur)} on box {b} is returned ({why})"


def _deal_requested(state: TableState, e: ev.DealRequested, cur: str) -> str:
    return f"{e.player_id} presses Deal"


def _player_passed(state: TableState, e: ev.PlayerPassed, cur: str) -> str:
    return f"{e.player_id} passes"


def _round_cancelled(state: TableState, e: ev.RoundCancelled, cur: str) -> str:
    return "the round is cancelled: no bet to deal"


def _interrupted_round_closed(state: TableState, e: ev.InterruptedRoundClosed, cur: str) -> str:
    waited = f"it waited on its players since {e.idle_since.isoformat(timespec='microseconds')}"
    return f"{e.operator} closes the round: {waited} (the table's rules: {e.after_days} days)"


def _round_resumed(state: TableState, e: ev.RoundResumed, cur: str) -> str:
    since = e.last_event_at
    stopped = "" if since is None else f" after {since.isoformat(timespec='microseconds')}"
    said = f"the service was interrupted{stopped} and resumed: the round goes on as it was"
    if e.deadline is None:
        return said
    return f"{said}, its clock started again (to {e.deadline.isoformat(timespec='microseconds')})"


# ---- the deal and insurance ----------------------------------------------------------------


def _deal_started(state: TableState, e: ev.DealStarted, cur: str) -> str:
    return f"deal from shoe {e.shoe} to box(es) {', '.join(map(str, e.boxes))}"


def _card_dealt(state: TableState, e: ev.CardDealt, cur: str) -> str:
    """The card with the total it makes (the hole card unseen)."""
    if e.to == "dealer":
        if not e.face_up:
            return "dealer: hole card, face down"
        return f"dealer: {e.card}  ->  {cards_text([*state.dealer_shown, e.card or '??'])}"
    b, h = e.box, e.hand
    assert b is not None and h is not None
    hand = state.boxes[b].hands[h].cards
    return f"box {b} hand {h}: {e.card}  ->  {cards_text([*hand, e.card or '??'])}"


def _insurance_offered(state: TableState, e: ev.InsuranceOffered, cur: str) -> str:
    return f"insurance offered on box(es) {', '.join(map(str, e.boxes))}"


def _insurance_taken(state: TableState, e: ev.InsuranceTaken, cur: str) -> str:
    return f"{e.player_id} takes insurance on box {e.box} for {money(e.amount, cur)}"


def _insurance_declined(state: TableState, e: ev.InsuranceDeclined, cur: str) -> str:
    return f"{e.player_id} declines insurance on box {e.box}"


def _dealer_peeked(state: TableState, e: ev.DealerPeeked, cur: str) -> str:
    return f"dealer peeks: {'blackjack' if e.has_blackjack else 'no blackjack'}"


def _insurance_settled(state: TableState, e: ev.InsuranceSettled, cur: str) -> str:
    won = "wins" if e.won else "loses"
    return f"insurance of {e.player_id} on box {e.box} {won}, pays {money(e.payout, cur)}"


# ---- the play --------------------------------------------------------------------------------


def _turn_started(state: TableState, e: ev.TurnStarted, cur: str) -> str:
    offered = "" if e.actions is None else f" ({', '.join(e.actions)})"
    return f"turn of {e.player_id}: box {e.box} hand {e.hand}{offered}"


def _player_hit(state: TableState, e: ev.PlayerHit, cur: str) -> str:
    return f"{e.player_id} hits box {e.box} hand {e.hand}"


def _player_stood(state: TableState, e: ev.PlayerStood, cur: str) -> str:
    return f"{e.player_id} stands on box {e.box} hand {e.hand} at {e.total}"


def _hand_doubled(state: TableState, e: ev.HandDoubled, cur: str) -> str:
    return f"{e.player_id} doubles box {e.box} hand {e.hand} for {money(e.amount, cur)}"


def _hand_split(state: TableState, e: ev.HandSplit, cur: str) -> str:
    return f"{e.player_id} splits box {e.box} hand {e.hand} for {money(e.amount, cur)}"


def _hand_surrendered(state: TableState, e: ev.HandSurrendered, cur: str) -> str:
    return f"{e.player_id} surrenders box {e.box} hand {e.hand}"


def _player_timed_out(state: TableState, e: ev.PlayerTimedOut, cur: str) -> str:
    later = "; sits out until they bet or pass" if e.sits_out else ""
    action = e.action.replace("_", " ")
    return f"{e.player_id}'s time ran out ({e.phase}): the server {action}{later}"


# ---- the settlement --------------------------------------------------------------------------


def _hole_card_revealed(state: TableState, e: ev.DealerHoleCardRevealed, cur: str) -> str:
    return f"dealer turns the hole card: {e.card}  ->  {cards_text(state.dealer)}"


def _hand_settled(state: TableState, e: ev.HandSettled, cur: str) -> str:
    paid = f"stake {money(e.stake, cur)}, pays {money(e.payout, cur)}"
    return f"box {e.box} hand {e.hand} ({e.player_id}): {e.outcome}, {paid}"


def _round_settled(state: TableState, e: ev.RoundSettled, cur: str) -> str:
    return f"round settled, dealer {'blackjack' if e.dealer_blackjack else e.dealer_total}"


def _round_voided(state: TableState, e: ev.RoundVoided, cur: str) -> str:
    back = ", ".join(_voided_wagers(r, cur) for r in e.returns)
    return (
        f"{e.operator} voids the round for a malfunction ({e.reason}): every wager back, "
        f"nothing paid stands: {back}"
    )


def _voided_wagers(r: ev.VoidedWagers, currency: str) -> str:
    """One player's part of a void: what came back (or was taken back), the balance after."""
    told = f"{r.player_id} {_voided_amount(r.returned, currency)} "
    told += f"(balance {money(r.balance_after, currency)})"
    if r.not_recovered:
        told += f", {money(r.not_recovered, currency)} not recovered"
    return told


# ---- money, seats and the table --------------------------------------------------------------


def _funds_deposited(state: TableState, e: ev.FundsDeposited, cur: str) -> str:
    return f"{e.player_id} pays in {money(e.amount, cur)} (balance {money(e.balance_after, cur)})"


def _funds_withdrawn(state: TableState, e: ev.FundsWithdrawn, cur: str) -> str:
    after = money(e.balance_after, cur)
    return f"{e.player_id} takes out {money(e.amount, cur)} (balance {after})"


def _transfer_declined(state: TableState, e: ev.TransferDeclined, cur: str) -> str:
    return f"{e.player_id}'s buy-in of {money(e.amount, cur)} is declined ({e.reason_code})"


def _money_command_refused(state: TableState, e: ev.MoneyCommandRefused, cur: str) -> str:
    what = "deposit" if e.command == "Deposit" else "withdrawal"
    return f"{e.player_id}'s {what} of {money(e.amount, cur)} is refused ({e.reason_code})"


def _player_disconnected(state: TableState, e: ev.PlayerDisconnected, cur: str) -> str:
    return f"{e.player_id} disconnects"


def _player_reconnected(state: TableState, e: ev.PlayerReconnected, cur: str) -> str:
    return f"{e.player_id} reconnects"


def _seat_taken(state: TableState, e: ev.SeatTaken, cur: str) -> str:
    return f"{e.player_id} sits down at seat {e.seat}"


def _seat_changed(state: TableState, e: ev.SeatChanged, cur: str) -> str:
    return f"{e.player_id} moves from seat {e.from_seat} to seat {e.to_seat}"


def _seat_left(state: TableState, e: ev.SeatLeft, cur: str) -> str:
    """Who stood the player up, if anyone did: the server (rounds sat out) or an operator."""
    p, back = e.player_id, money(e.balance_returned, cur)
    if e.reason == "sat_out":
        n = e.rounds_sat_out
        rounds = "1 round" if n == 1 else f"{n} rounds"
        return f"{p} stood up by the server after {rounds} sat out, {back} paid out"
    if e.reason == "operator":
        return f"{e.operator} stands {p} up ({e.operator_reason}), {back} paid out"
    return f"{p} leaves the table, {back} paid out"


def _table_suspended(state: TableState, e: ev.TableSuspended, cur: str) -> str:
    return f"{e.operator} suspends the table ({e.reason}): no new bet or player"


def _table_resumed(state: TableState, e: ev.TableResumed, cur: str) -> str:
    return f"{e.operator} resumes the table"


_LINES: dict[type[ev.Event], Callable[[TableState, Any, str], str]] = {
    ev.RoundOpened: _round_opened,
    ev.BetPlaced: _bet_placed,
    ev.BetRefunded: _bet_refunded,
    ev.DealRequested: _deal_requested,
    ev.PlayerPassed: _player_passed,
    ev.RoundCancelled: _round_cancelled,
    ev.InterruptedRoundClosed: _interrupted_round_closed,
    ev.RoundResumed: _round_resumed,
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
    ev.RoundVoided: _round_voided,
    ev.FundsDeposited: _funds_deposited,
    ev.FundsWithdrawn: _funds_withdrawn,
    ev.TransferDeclined: _transfer_declined,
    ev.MoneyCommandRefused: _money_command_refused,
    ev.PlayerDisconnected: _player_disconnected,
    ev.PlayerReconnected: _player_reconnected,
    ev.SeatTaken: _seat_taken,
    ev.SeatChanged: _seat_changed,
    ev.SeatLeft: _seat_left,
    ev.TableSuspended: _table_suspended,
    ev.TableResumed: _table_resumed,
}


def _voided_amount(returned: int, currency: str) -> str:
    """What a void gave a player back, or (less than it had paid them) took back."""
    if returned < 0:
        return f"{money(-returned, currency)} taken back"
    return f"{money(returned, currency)} back"
