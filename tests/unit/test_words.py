"""``audit.words.describe``: the line ``blackjack replay`` and the players' game recall give
each event, one per kind of event and per variant of its wording, told from a dealt round at
a table in Kuwaiti dinars (three decimals, so that an amount written in another currency's
minor units shows)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from blackjack.audit.words import describe
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.funds import buy_in_deposit
from blackjack.domain.state import TableState
from tests.unit.stacked_table import StackedTable
from tests.unit.test_currencies import IN_DINARS

AT = datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)


def dealt() -> TableState:
    """ann's box 0 holds TH 9H, the dealer shows 7S over the hole card QD."""
    t = StackedTable("atlantic-city-multi", ["TH", "7S", "9H", "QD"], IN_DINARS)
    t.do(
        cmd.SitDown(player_id="ann", seat=0),
        buy_in_deposit("ann", 100_000),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.Deal(player_id="ann"),
    )
    return t.state


def _voided(returned: int, not_recovered: int = 0) -> ev.VoidedWagers:
    return ev.VoidedWagers(
        player_id="ann",
        wagered=1000,
        paid=max(0, 1000 - returned),
        returned=returned,
        not_recovered=not_recovered,
        balance_after=5000,
    )


LINES: list[tuple[ev.Event, str]] = [
    (ev.RoundOpened(round=1), "betting opens"),
    (
        ev.BetPlaced(round=1, player_id="ann", box=0, amount=1000, box_total=1500, balance_after=9),
        "ann bets 1.000 on box 0 (box 1.500, balance 0.009)",
    ),
    (
        ev.BetRefunded(
            round=1,
            player_id="ann",
            box=2,
            amount=500,
            box_total=1000,
            reason="removed",
            balance_after=0,
        ),
        "ann takes back 0.500 of the bet on box 2 (box 1.000, removed)",
    ),
    (
        ev.BetRefunded(
            round=1, player_id="ann", box=2, amount=500, reason="timed_out", balance_after=0
        ),
        "ann's bet of 0.500 on box 2 is returned (timed_out)",
    ),
    (ev.DealRequested(round=1, player_id="ann"), "ann presses Deal"),
    (ev.PlayerPassed(round=1, player_id="ann"), "ann passes"),
    (ev.RoundCancelled(round=1), "the round is cancelled: no bet to deal"),
    (
        ev.InterruptedRoundClosed(round=1, operator="ops-1", idle_since=AT, after_days=7),
        "ops-1 closes the round: it waited on its players since 2026-01-02T03:04:05.678000+00:00 "
        "(the table's rules: 7 days)",
    ),
    (
        ev.RoundResumed(round=1, last_event_at=AT),
        "the service was interrupted after 2026-01-02T03:04:05.678000+00:00 and resumed: "
        "the round goes on as it was",
    ),
    (
        ev.RoundResumed(round=1, last_event_at=None),
        "the service was interrupted and resumed: the round goes on as it was",
    ),
    (ev.DealStarted(round=1, shoe=3, boxes=(0, 2)), "deal from shoe 3 to box(es) 0, 2"),
    (ev.CardDealt(round=1, to="dealer", face_up=False), "dealer: hole card, face down"),
    (ev.CardDealt(round=1, to="dealer", card="AS"), "dealer: AS  ->  7S AS = soft 18"),
    (
        ev.CardDealt(round=1, to="box", box=0, hand=0, card="AS"),
        "box 0 hand 0: AS  ->  TH 9H AS = 20",
    ),
    (ev.InsuranceOffered(round=1, boxes=(0, 1)), "insurance offered on box(es) 0, 1"),
    (
        ev.InsuranceTaken(round=1, player_id="ann", box=0, amount=500, balance_after=0),
        "ann takes insurance on box 0 for 0.500",
    ),
    (ev.InsuranceDeclined(round=1, player_id="ann", box=0), "ann declines insurance on box 0"),
    (ev.DealerPeeked(round=1, has_blackjack=True), "dealer peeks: blackjack"),
    (ev.DealerPeeked(round=1, has_blackjack=False), "dealer peeks: no blackjack"),
    (
        ev.InsuranceSettled(
            round=1, player_id="ann", box=0, stake=500, won=True, payout=1500, balance_after=0
        ),
        "insurance of ann on box 0 wins, pays 1.500",
    ),
    (
        ev.InsuranceSettled(
            round=1, player_id="ann", box=0, stake=500, won=False, payout=0, balance_after=0
        ),
        "insurance of ann on box 0 loses, pays 0.000",
    ),
    (
        ev.TurnStarted(round=1, player_id="ann", box=0, hand=1, actions=("hit", "stand")),
        "turn of ann: box 0 hand 1 (hit, stand)",
    ),
    (
        ev.TurnStarted(round=1, player_id="ann", box=0, hand=1, actions=None),
        "turn of ann: box 0 hand 1",
    ),
    (ev.PlayerHit(round=1, player_id="ann", box=0, hand=1), "ann hits box 0 hand 1"),
    (
        ev.PlayerStood(round=1, player_id="ann", box=0, hand=1, total=19),
        "ann stands on box 0 hand 1 at 19",
    ),
    (
        ev.HandDoubled(round=1, player_id="ann", box=0, hand=1, amount=1000, balance_after=0),
        "ann doubles box 0 hand 1 for 1.000",
    ),
    (
        ev.HandSplit(round=1, player_id="ann", box=0, hand=1, amount=1000, balance_after=0),
        "ann splits box 0 hand 1 for 1.000",
    ),
    (ev.HandSurrendered(round=1, player_id="ann", box=0, hand=1), "ann surrenders box 0 hand 1"),
    (
        ev.PlayerTimedOut(
            round=1, player_id="ann", phase="betting", action="left_out", sits_out=True
        ),
        "ann's time ran out (betting): the server left out; sits out until they bet or pass",
    ),
    (
        ev.PlayerTimedOut(round=1, player_id="ann", phase="insurance", action="declined_insurance"),
        "ann's time ran out (insurance): the server declined insurance",
    ),
    (
        ev.DealerHoleCardRevealed(round=1, card="QD"),
        "dealer turns the hole card: QD  ->  7S QD = 17",
    ),
    (
        ev.HandSettled(
            round=1,
            player_id="ann",
            box=0,
            hand=1,
            outcome="win",
            total=19,
            stake=1000,
            payout=2000,
            balance_after=0,
        ),
        "box 0 hand 1 (ann): win, stake 1.000, pays 2.000",
    ),
    (
        ev.RoundSettled(round=1, dealer_total=17, dealer_blackjack=False, results=()),
        "round settled, dealer 17",
    ),
    (
        ev.RoundSettled(round=1, dealer_total=21, dealer_blackjack=True, results=()),
        "round settled, dealer blackjack",
    ),
    (
        ev.RoundVoided(
            round=1,
            operator="ops-1",
            reason="shuffler jam",
            returns=(_voided(1000), _voided(-500, not_recovered=250)),
            counts_as_round_sat_out=False,
        ),
        "ops-1 voids the round for a malfunction (shuffler jam): every wager back, nothing paid "
        "stands: ann 1.000 back (balance 5.000), "
        "ann 0.500 taken back (balance 5.000), 0.250 not recovered",
    ),
    (
        ev.FundsDeposited(player_id="ann", amount=2500, balance_after=3000),
        "ann pays in 2.500 (balance 3.000)",
    ),
    (
        ev.FundsWithdrawn(player_id="ann", amount=2500, balance_after=500),
        "ann takes out 2.500 (balance 0.500)",
    ),
    (
        ev.TransferDeclined(
            player_id="ann",
            amount=2500,
            transfer="t-1",
            reason_code="balance_limit",
            message="too much",
        ),
        "ann's buy-in of 2.500 is declined (balance_limit)",
    ),
    (ev.PlayerDisconnected(player_id="ann"), "ann disconnects"),
    (ev.PlayerReconnected(player_id="ann"), "ann reconnects"),
    (ev.SeatTaken(player_id="ann", seat=2), "ann sits down at seat 2"),
    (ev.SeatChanged(player_id="ann", from_seat=2, to_seat=4), "ann moves from seat 2 to seat 4"),
    (
        ev.SeatLeft(
            player_id="ann", seat=0, balance_returned=1200, reason="sat_out", rounds_sat_out=1
        ),
        "ann stood up by the server after 1 round sat out, 1.200 paid out",
    ),
    (
        ev.SeatLeft(
            player_id="ann", seat=0, balance_returned=1200, reason="sat_out", rounds_sat_out=3
        ),
        "ann stood up by the server after 3 rounds sat out, 1.200 paid out",
    ),
    (
        ev.SeatLeft(
            player_id="ann",
            seat=0,
            balance_returned=1200,
            reason="operator",
            operator="ops-1",
            operator_reason="abuse",
        ),
        "ops-1 stands ann up (abuse), 1.200 paid out",
    ),
    (
        ev.SeatLeft(player_id="ann", seat=0, balance_returned=1200),
        "ann leaves the table, 1.200 paid out",
    ),
    (
        ev.TableSuspended(operator="ops-1", reason="maintenance"),
        "ops-1 suspends the table (maintenance): no new bet or player",
    ),
    (ev.TableResumed(operator="ops-1"), "ops-1 resumes the table"),
    # The events a round's story does not tell in words: their type's name.
    (ev.ShoeRetired(shoe=1, commitment="c", cards_dealt=4, order=(), salt="s"), "ShoeRetired"),
]


@pytest.mark.parametrize(("event", "line"), LINES, ids=lambda x: getattr(x, "type", None))
def test_each_event_is_told_in_its_own_words(event: ev.Event, line: str) -> None:
    assert describe(dealt(), event) == line
