"""The clock of a table: what happens at a deadline, which decisions it bounds, and how it
starts again when the service resumes a round."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import facts
from blackjack.domain.decisions.betting import close_betting, refund_box
from blackjack.domain.decisions.checks import check_shoe, under_minimum
from blackjack.domain.decisions.draft import Draft
from blackjack.domain.decisions.insurance import peek_then_play
from blackjack.domain.decisions.play import next_turn, stand_hand
from blackjack.domain.rejections import Rejection, RejectionCode
from blackjack.domain.state import Player, TableState

# The decisions a phase's clock (the 15 s of a shared table) bounds. From its deadline on they
# are refused, even before the service's clock has sent the ExpireTimers that applies it: a
# late bet, insurance or move must not win a race against the timeout.
ON_THE_CLOCK: Final = frozenset(
    {
        cmd.PlaceBet,
        cmd.ClearBets,
        cmd.RemoveBet,
        cmd.Rebet,
        cmd.Deal,
        cmd.Pass,
        cmd.TakeInsurance,
        cmd.DeclineInsurance,
        cmd.Hit,
        cmd.Stand,
        cmd.Double,
        cmd.Split,
        cmd.Surrender,
    }
)


_LATE: Final[dict[str, tuple[RejectionCode, str]]] = {
    "betting": ("not_betting_time", "the time to bet or pass ran out at"),
    "insurance": ("insurance_not_offered", "the time to decide on insurance ran out at"),
    "playing": ("not_your_turn", "the time for this decision ran out at"),
}


def too_late(state: TableState) -> Rejection:
    assert state.deadline is not None
    code, message = _LATE.get(state.phase, _LATE["playing"])
    return Rejection(code=code, message=f"{message} {deadline_text(state.deadline)}")


def deadline_text(deadline: datetime) -> str:
    """A deadline as a player reads it in a refusal: ``16:50:34 UTC`` (the events keep it to
    the microsecond)."""
    aware = deadline if deadline.tzinfo is not None else deadline.replace(tzinfo=UTC)
    return f"{aware.astimezone(UTC):%H:%M:%S} UTC"


def restarts_clock(state: TableState) -> bool:
    """Whether a round resumed here has its clock started again: a round in play at a table
    of one seat whose clock runs. Its player could not act while the service was away, and a
    single-player round resumes as it was (GLI-19), not stood by a clock that ran on without
    it. At a shared table the deadline stands: the others wait on it, and the server completes
    the hand at it, recording what it decided for the player."""
    return (
        state.round_in_play
        and state.deadline is not None
        and state.rules.turn_seconds is not None
        and state.rules.seats == 1
    )


def resumption(state: TableState, now: datetime, last_event_at: datetime | None) -> ev.RoundResumed:
    """The marker of the round the service interrupted, written at ``now`` (the shell writes
    it, ``command_handler.streams``): with the restarted clock's deadline, a whole turn from
    ``now``, where ``restarts_clock``."""
    seconds = state.rules.turn_seconds
    deadline = None
    if seconds is not None and restarts_clock(state):
        deadline = now + timedelta(seconds=seconds)
    return ev.RoundResumed(round=state.round, last_event_at=last_event_at, deadline=deadline)


def expire_timers(r: Draft, c: cmd.ExpireTimers) -> None:
    state = r.state
    if state.deadline is None or r.now < state.deadline:
        return
    if state.phase == "betting":
        check_shoe(state)
        # The multi-player page: "If you do not bet or pass within 15 seconds ... you will be
        # automatically excluded from that particular hand." A player who did bet is dealt in;
        # a stack still under the table minimum is not a bet yet, and goes back. One who sat
        # down after the round's clock started had less than the 15 s: left out of this hand
        # ("if you join a table in the middle of a hand, you must wait until the round is
        # over"), but not sitting out, so no round sat out counts against their seat. Nor does
        # anyone where no hand is dealt (no bet left: the round is cancelled): there was no
        # hand to be left out of, and a player who bet and took it back left the whole table
        # sitting out, the next rounds dealt without waiting for them (a review).
        dealt = any(_dealt_in(r.state, p) for p in state.players.values())
        for player in list(state.players.values()):
            if player.ready or player.passed:
                continue
            pid = player.player_id
            short = under_minimum(r.state, pid)
            dealt_in = _dealt_in(r.state, player)
            r.emit(
                facts.player_timed_out(
                    round=state.round,
                    player_id=pid,
                    phase="betting",
                    action="dealt_in" if dealt_in else "left_out",
                    sits_out=dealt and not dealt_in and player.joined_round != state.round,
                )
            )
            for index in short:
                refund_box(r, pid, index, "timed_out")
            if dealt_in:
                r.emit(facts.deal_requested(round=state.round, player_id=pid))
        close_betting(r)
    elif state.phase == "insurance":
        decline_insurance_for_players(r)
    elif state.phase == "playing" and state.active is not None:
        stand_for_player(r)


def _dealt_in(state: TableState, player: Player) -> bool:
    """Whether the betting deadline deals the player's boxes: they pressed Deal, or they bet
    at least the minimum on a box and pressed neither Deal nor Pass (the clock deals them in)."""
    boxes = state.boxes_of(player.player_id)
    if player.ready:
        return bool(boxes)
    return not player.passed and len(boxes) > len(under_minimum(state, player.player_id))


def decline_insurance_for_players(r: Draft) -> None:
    """The server declines every insurance still offered, records it for each player, and
    the round goes on to the peek."""
    for index, box in enumerate(r.state.boxes):
        if box.insurance != "offered" or box.player_id is None:
            continue
        r.emit(
            facts.player_timed_out(
                round=r.state.round,
                player_id=box.player_id,
                phase="insurance",
                action="declined_insurance",
                box=index,
            )
        )
        r.emit(facts.insurance_declined(round=r.state.round, player_id=box.player_id, box=index))
    peek_then_play(r)


def stand_for_player(r: Draft) -> None:
    """The server stands the hand whose turn it is, records it for its player, and the turn
    moves on (the dealer plays after the last hand)."""
    state = r.state
    assert state.active is not None
    box_index, hand_index = state.active
    box = state.boxes[box_index]
    assert box.player_id is not None
    r.emit(
        facts.player_timed_out(
            round=state.round,
            player_id=box.player_id,
            phase="playing",
            action="stood",
            box=box_index,
            hand=hand_index,
        )
    )
    stand_hand(r, box.player_id, box_index, hand_index, box.hands[hand_index])
    next_turn(r)
