"""Closing an interrupted round: the operator's right after the days the table's rules name.

A single-player round waits for its player for as long as it takes (an interrupted game is
restored exactly on reconnection). Page 003 adds: "After a 30 days period we reserve the right
to manage all interrupted games at our sole discretion". The server then finishes the round
under the rules, as the clock of a shared table finishes a player's turn, and records each
decision it takes in the players' place (``PlayerTimedOut``): bets not dealt go back,
insurance is declined, every hand left is stood, the dealer plays and the round settles. The
money a round holds is never kept or guessed: it is settled by the cards.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from blackjack.domain import commands as cmd
from blackjack.domain import facts
from blackjack.domain.decisions.betting import refund_box
from blackjack.domain.decisions.clock import decline_insurance_for_players, stand_for_player
from blackjack.domain.decisions.draft import Draft, refuse


def close_interrupted_round(r: Draft, c: cmd.CloseInterruptedRound) -> None:
    state = r.state
    days = state.rules.interrupted_round_days
    if days is None:
        raise refuse(
            "closing_not_allowed",
            "this table's rules let no one close an interrupted round (interrupted_round_days)",
        )
    if not state.round_open:
        raise refuse("round_not_interrupted", "no round is open at this table")
    if c.idle_since is None:
        raise refuse("round_not_interrupted", "the time of the table's last event is not known")
    waited = r.now - c.idle_since
    if waited < timedelta(days=days):
        raise refuse(
            "round_not_interrupted",
            f"round {state.round} has waited {_days(waited)} since its last event "
            f"({c.idle_since.isoformat()}); the table's rules let it be closed after {days} "
            f"days, from {_at(c.idle_since + timedelta(days=days))}",
        )
    r.emit(
        facts.interrupted_round_closed(
            round=state.round, operator=c.operator, idle_since=c.idle_since, after_days=days
        )
    )
    if state.phase == "betting":
        _return_bets(r)
    elif state.phase == "insurance":
        decline_insurance_for_players(r)
    # The dealer's play and the settlement follow the last hand stood (``next_turn``).
    while r.state.phase == "playing" and r.state.active is not None:
        stand_for_player(r)
    assert not r.state.round_open, f"round {r.state.round} still open in {r.state.phase}"


def _return_bets(r: Draft) -> None:
    """Nothing was dealt: every bet goes back and the round ends without a deal (page 003: a
    bet placed before 'Deal' is returned)."""
    state = r.state
    for player_id in list(state.players):
        indexes = [i for i, box in enumerate(state.boxes) if box.player_id == player_id]
        if not indexes:
            continue
        r.emit(
            facts.player_timed_out(
                round=state.round, player_id=player_id, phase="betting", action="left_out"
            )
        )
        for index in indexes:
            refund_box(r, player_id, index, "cancelled")
    r.emit(facts.round_cancelled(round=r.state.round))


def _days(waited: timedelta) -> str:
    return f"{waited.days} days {waited.seconds // 3600} hours"


def _at(moment: datetime) -> str:
    """To the microsecond, as the interrupted rounds' list says it: a message cut to the second
    named a moment at which the close was still refused."""
    return moment.isoformat()
