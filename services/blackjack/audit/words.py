"""Telling a replayed round in words: money as its currency writes it, a hand's cards with
their total, and one line per event (``describe``), for ``blackjack replay`` and the players'
game recall."""

from __future__ import annotations

from collections.abc import Sequence

from blackjack.domain import events as ev
from blackjack.domain.hand import total
from blackjack.domain.state import TableState

MINOR_UNITS: dict[str, int] = {
    **dict.fromkeys(("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG"), 0),
    **dict.fromkeys(("RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF"), 0),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
    **dict.fromkeys(("CLF", "UYW"), 4),
}
"""ISO 4217 currencies whose minor unit is not a hundredth (the rest have two decimals)."""


def money(amount: int, currency: str | None = None) -> str:
    """Minor units as the currency writes them: 1050 is 10.50 USD, 1050 JPY, 1.050 KWD."""
    sign = "-" if amount < 0 else ""
    places = MINOR_UNITS.get(currency or "", 2)
    whole, part = divmod(abs(amount), 10**places)
    return f"{sign}{whole}.{part:0{places}d}" if places else f"{sign}{whole}"


def cards_text(cards: Sequence[str]) -> str:
    if not cards:
        return "-"
    best, soft = total(cards)
    return f"{' '.join(cards)} = {'soft ' if soft and best <= 21 else ''}{best}"


def describe(state: TableState, event: ev.Event) -> str:
    """One line for a round's event, told from the state just before it."""
    cur = state.rules.currency
    match event:
        case ev.RoundOpened():
            return "betting opens"
        case ev.BetPlaced(player_id=p, box=b, amount=a, box_total=t, balance_after=after):
            box = f"box {money(t, cur)}, balance {money(after, cur)}"
            return f"{p} bets {money(a, cur)} on box {b} ({box})"
        case ev.BetRefunded(player_id=p, box=b, amount=a, box_total=left, reason=why):
            if left:
                rest = f"box {money(left, cur)}, {why}"
                return f"{p} takes back {money(a, cur)} of the bet on box {b} ({rest})"
            return f"{p}'s bet of {money(a, cur)} on box {b} is returned ({why})"
        case ev.DealRequested(player_id=p):
            return f"{p} presses Deal"
        case ev.PlayerPassed(player_id=p):
            return f"{p} passes"
        case ev.RoundCancelled():
            return "the round is cancelled: no bet to deal"
        case ev.InterruptedRoundClosed(operator=who, idle_since=since, after_days=days):
            waited = f"it waited on its players since {since.isoformat(timespec='seconds')}"
            return f"{who} closes the round: {waited} (the table's rules: {days} days)"
        case ev.RoundResumed(last_event_at=since):
            stopped = "" if since is None else f" after {since.isoformat(timespec='seconds')}"
            return f"the service was interrupted{stopped} and resumed: the round goes on as it was"
        case ev.DealStarted(shoe=shoe, boxes=boxes):
            return f"deal from shoe {shoe} to box(es) {', '.join(map(str, boxes))}"
        case ev.CardDealt(to="dealer", face_up=False):
            return "dealer: hole card, face down"
        case ev.CardDealt(to="dealer", card=card):
            return f"dealer: {card}  ->  {cards_text([*state.dealer_shown, card or '??'])}"
        case ev.CardDealt(box=b, hand=h, card=card):
            assert b is not None and h is not None
            hand = state.boxes[b].hands[h].cards
            return f"box {b} hand {h}: {card}  ->  {cards_text([*hand, card or '??'])}"
        case ev.InsuranceOffered(boxes=boxes):
            return f"insurance offered on box(es) {', '.join(map(str, boxes))}"
        case ev.InsuranceTaken(player_id=p, box=b, amount=a):
            return f"{p} takes insurance on box {b} for {money(a, cur)}"
        case ev.InsuranceDeclined(player_id=p, box=b):
            return f"{p} declines insurance on box {b}"
        case ev.DealerPeeked(has_blackjack=bj):
            return f"dealer peeks: {'blackjack' if bj else 'no blackjack'}"
        case ev.InsuranceSettled(player_id=p, box=b, won=won, payout=pay):
            return (
                f"insurance of {p} on box {b} {'wins' if won else 'loses'}, pays {money(pay, cur)}"
            )
        case ev.TurnStarted(player_id=p, box=b, hand=h, actions=actions):
            offered = "" if actions is None else f" ({', '.join(actions)})"
            return f"turn of {p}: box {b} hand {h}{offered}"
        case ev.PlayerHit(player_id=p, box=b, hand=h):
            return f"{p} hits box {b} hand {h}"
        case ev.PlayerStood(player_id=p, box=b, hand=h, total=t):
            return f"{p} stands on box {b} hand {h} at {t}"
        case ev.HandDoubled(player_id=p, box=b, hand=h, amount=a):
            return f"{p} doubles box {b} hand {h} for {money(a, cur)}"
        case ev.HandSplit(player_id=p, box=b, hand=h, amount=a):
            return f"{p} splits box {b} hand {h} for {money(a, cur)}"
        case ev.HandSurrendered(player_id=p, box=b, hand=h):
            return f"{p} surrenders box {b} hand {h}"
        case ev.PlayerTimedOut(player_id=p, phase=phase, action=action, sits_out=out):
            later = "; sits out until they bet or pass" if out else ""
            return f"{p}'s time ran out ({phase}): the server {action.replace('_', ' ')}{later}"
        case ev.DealerHoleCardRevealed(card=card):
            return f"dealer turns the hole card: {card}  ->  {cards_text(state.dealer)}"
        case ev.HandSettled(player_id=p, box=b, hand=h, outcome=o, stake=s, payout=pay):
            return f"box {b} hand {h} ({p}): {o}, stake {money(s, cur)}, pays {money(pay, cur)}"
        case ev.RoundSettled(dealer_total=t, dealer_blackjack=bj):
            return f"round settled, dealer {'blackjack' if bj else t}"
        case ev.RoundVoided(operator=who, reason=why, returns=returns):
            back = ", ".join(
                f"{r.player_id} {_voided_amount(r.returned, cur)} "
                f"(balance {money(r.balance_after, cur)})"
                + (f", {money(r.not_recovered, cur)} not recovered" if r.not_recovered else "")
                for r in returns
            )
            return (
                f"{who} voids the round for a malfunction ({why}): every wager back, "
                f"nothing paid stands: {back}"
            )
        case ev.FundsDeposited(player_id=p, amount=a, balance_after=after):
            return f"{p} pays in {money(a, cur)} (balance {money(after, cur)})"
        case ev.FundsWithdrawn(player_id=p, amount=a, balance_after=after):
            return f"{p} takes out {money(a, cur)} (balance {money(after, cur)})"
        case ev.TransferDeclined(player_id=p, amount=a, reason_code=why):
            return f"{p}'s buy-in of {money(a, cur)} is declined ({why})"
        case ev.PlayerDisconnected(player_id=p):
            return f"{p} disconnects"
        case ev.PlayerReconnected(player_id=p):
            return f"{p} reconnects"
        case ev.SeatTaken(player_id=p, seat=seat):
            return f"{p} sits down at seat {seat}"
        case ev.SeatChanged(player_id=p, from_seat=old, to_seat=new):
            return f"{p} moves from seat {old} to seat {new}"
        case ev.SeatLeft(player_id=p, balance_returned=back, reason="sat_out", rounds_sat_out=n):
            rounds = "1 round" if n == 1 else f"{n} rounds"
            return f"{p} stood up by the server after {rounds} sat out, {money(back, cur)} paid out"
        case ev.SeatLeft(
            player_id=p, balance_returned=back, reason="operator", operator=who, operator_reason=why
        ):
            return f"{who} stands {p} up ({why}), {money(back, cur)} paid out"
        case ev.SeatLeft(player_id=p, balance_returned=back):
            return f"{p} leaves the table, {money(back, cur)} paid out"
        case ev.TableSuspended(operator=who, reason=why):
            return f"{who} suspends the table ({why}): no new bet or player"
        case ev.TableResumed(operator=who):
            return f"{who} resumes the table"
    return type(event).__name__


def _voided_amount(returned: int, currency: str) -> str:
    """What a void gave a player back, or (less than it had paid them) took back."""
    if returned < 0:
        return f"{money(-returned, currency)} taken back"
    return f"{money(returned, currency)} back"
