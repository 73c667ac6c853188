"""``decide(state, command, now) -> events | Rejection``: the rules of the table.

Every event is folded into the state as soon as it is emitted (``Draft.emit``), so each later
step of the same decision looks at the state replay would see; the decision works on one copy
of the state (a draft, see ``evolve``), which it hands back only when it is accepted. Events are
built by the constructors in ``facts`` (generated from the event models), without re-validating
values the decider has just checked. Time is an input: ``now`` stamps deadlines and lets
``ExpireTimers`` act on them, and ``received_at`` (when the service received the command)
says whether a decision on the clock came in time.

The decisions themselves live in ``domain.decisions``, one module per part of the game.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, cast

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import facts
from blackjack.domain.decisions import (
    betting,
    clock,
    funds,
    insurance,
    interruption,
    seats,
    shuffle,
    voiding,
)
from blackjack.domain.decisions.clock import ON_THE_CLOCK, too_late
from blackjack.domain.decisions.draft import Draft, Refused
from blackjack.domain.decisions.funds import is_transfer
from blackjack.domain.decisions.options import options_mask
from blackjack.domain.decisions.play import start_turn
from blackjack.domain.rejections import Rejection
from blackjack.domain.state import TableState

Decision = list[ev.Event] | Rejection


def decide(
    state: TableState, command: cmd.Command, now: datetime, received_at: datetime | None = None
) -> Decision:
    outcome = decide_and_evolve(state, command, now, received_at)
    return outcome if isinstance(outcome, Rejection) else outcome[0]


def decide_and_evolve(
    state: TableState, command: cmd.Command, now: datetime, received_at: datetime | None = None
) -> tuple[list[ev.Event], TableState] | Rejection:
    """The events and the state they fold to, which the decider has computed anyway.

    ``now`` is when the command is decided (events and new deadlines start from it);
    ``received_at``, when given, is when the service received it (the broker's time of the
    command's record). A decision on the clock is in time when it was received or decided
    before the deadline: a click received in time but decided later (a backlog, a takeover)
    is in time, and the player has the benefit of any skew between the two clocks."""
    handler = _DECIDERS.get(type(command))
    if handler is None:
        return Rejection(code="unknown_command", message=f"{type(command).__name__} is unknown")
    if not state.opened and not isinstance(command, cmd.OpenTable) and not is_transfer(command):
        return Rejection(code="table_not_open", message="the table has not been opened")
    if type(command) in _ROUND_COMMANDS:
        stale = other_round(state, cast(Any, command).round)
        if stale is not None:
            return stale
    arrived = now if received_at is None else min(now, received_at)
    if state.deadline is not None and arrived >= state.deadline and state.phase == "betting":
        handler = _AFTER_THE_BETTING_DEADLINE.get(type(command), handler)
    work = Draft(state, now)
    try:
        if type(command) in ON_THE_CLOCK:  # every one a PlayerCommand
            _present(work, cast(cmd.PlayerCommand, command))
        handler(work, command)
    except Refused as refused:
        return refused.rejection
    # Late only once the command is otherwise valid: a move by someone without a seat is
    # refused for that, not for the time.
    if state.deadline is not None and arrived >= state.deadline and type(command) in ON_THE_CLOCK:
        return too_late(state)
    if state.phase == "playing" and type(command) not in _HAND_COMMANDS:
        _announce_changed_actions(work, state)
    return work.events, work.state


def other_round(state: TableState, named: int | None) -> Rejection | None:
    """A command that names a round other than the one it means now (``commands.meant_round``:
    the one open, else the one the next bet opens): refused, before anything else
    (a copy of a bet sent after its answer left the idempotency window must not bet again in a
    later round, whoever the player is now). Not named: decided as before rounds were named."""
    if named is None:
        return None
    meant = cmd.meant_round(state.round, state.round_open)
    if named == meant:
        return None
    now = f"round {state.round} is in play" if state.round_open else f"the next round is {meant}"
    if named < meant:
        return Rejection(code="stale_command", message=f"round {named} is over; {now}")
    return Rejection(code="round_not_in_play", message=f"round {named} has not started; {now}")


def _present(r: Draft, command: cmd.PlayerCommand) -> None:
    """A player who bets or plays is back: a disconnected one is reconnected first (the
    table shows who is there; the presence clock counts any command as presence)."""
    player = r.state.players.get(command.player_id)
    if player is not None and not player.connected:
        r.emit(facts.player_reconnected(player_id=command.player_id))


def _announce_changed_actions(r: Draft, before: TableState) -> None:
    """A command that is not a move can still change what the waiting hand may do (a deposit
    or a withdrawal during the turn makes a double affordable or not): say so, so that the
    last TurnStarted always lists the actions the table accepts. The deadline stays."""
    after = r.state
    if after.phase != "playing" or after.active is None or after.active != before.active:
        return
    box, hand = after.active
    if options_mask(after, box, hand) != options_mask(before, box, hand):
        start_turn(r, box, hand, after.deadline)


_DECIDERS: Final[dict[type[cmd.Command], Callable[[Draft, Any], None]]] = {
    cmd.OpenTable: seats.open_table,
    cmd.SitDown: seats.sit_down,
    cmd.MoveSeat: seats.move_seat,
    cmd.LeaveTable: seats.leave_table,
    cmd.StandUpPlayer: seats.stand_up_player,
    cmd.Deposit: funds.deposit,
    cmd.Withdraw: funds.withdraw,
    cmd.Disconnect: seats.disconnect,
    cmd.Reconnect: seats.reconnect,
    cmd.ShuffleShoe: shuffle.shuffle_shoe,
    cmd.ExpireTimers: clock.expire_timers,
    cmd.CloseInterruptedRound: interruption.close_interrupted_round,
    cmd.VoidRound: voiding.void_round,
    cmd.SuspendTable: seats.suspend_table,
    cmd.ResumeTable: seats.resume_table,
    cmd.PlaceBet: betting.place_bet,
    cmd.ClearBets: betting.clear_bets,
    cmd.RemoveBet: betting.remove_bet,
    cmd.Deal: betting.deal,
    cmd.Rebet: betting.rebet,
    cmd.Pass: betting.pass_round,
    cmd.TakeInsurance: insurance.take_insurance,
    cmd.DeclineInsurance: insurance.decline_insurance,
    # A move: played, or first a decline of the box's insurance where the rules say so.
    cmd.Hit: insurance.hit,
    cmd.Stand: insurance.stand,
    cmd.Double: insurance.double,
    cmd.Split: insurance.split,
    cmd.Surrender: insurance.surrender,
}

# A command that is no decision on the clock, received at or after the betting deadline before
# the service's clock applied it: decided as after that deadline (``seats``), not as before.
_AFTER_THE_BETTING_DEADLINE: Final[dict[type[cmd.Command], Callable[[Draft, Any], None]]] = {
    cmd.LeaveTable: seats.leave_after_the_betting_deadline,
    cmd.Disconnect: seats.disconnect_after_the_betting_deadline,
}


# The moves, by exact type: isinstance of a pydantic class goes through its ABC metaclass
# (about 100 ns a command), and every HandCommand has its entry above.
_HAND_COMMANDS: Final = frozenset(kind for kind in _DECIDERS if issubclass(kind, cmd.HandCommand))
_ROUND_COMMANDS: Final = frozenset(cmd.ROUND_COMMANDS)
