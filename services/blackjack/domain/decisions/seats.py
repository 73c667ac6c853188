"""The table itself: opening it, suspending and resuming it, taking, changing and leaving
seats, disconnecting and reconnecting."""

from __future__ import annotations

from blackjack.domain import commands as cmd
from blackjack.domain import facts
from blackjack.domain.decisions.betting import (
    close_if_no_bet_left,
    deal_when_all_decided,
    refund_bets,
)
from blackjack.domain.decisions.checks import check_not_suspended, seated, under_minimum
from blackjack.domain.decisions.clock import deadline_text
from blackjack.domain.decisions.draft import Draft, refuse
from blackjack.domain.rules import PRESETS
from blackjack.domain.state import TableState
from blackjack.domain.table_rules import RulesRefused, table_rules
from blackjack.domain.wallet import MAX_STREAM_ID, WALLET_STREAM_PREFIX, has_wallet_stream


def open_table(r: Draft, c: cmd.OpenTable) -> None:
    if r.state.opened:
        raise refuse("table_already_open", "the table is already open")
    base = PRESETS.get(c.variant)
    if base is None:
        known = ", ".join(sorted(PRESETS))
        raise refuse("unknown_variant", f"no variant {c.variant!r}; known: {known}")
    try:
        rules = table_rules(c.variant, base, c.overrides)
    except RulesRefused as refusal:
        raise refuse("invalid_rules", str(refusal)) from None
    r.emit(facts.table_opened(rules=rules))


def suspend_table(r: Draft, c: cmd.SuspendTable) -> None:
    """The game is disabled from now on for new wagers and new players; a round under way
    completes under the rules (its bets are dealt, its hands played and settled), since the
    money it holds is settled by the cards, never kept or returned half-played."""
    if r.state.suspended:
        raise refuse("already_suspended", "the table is already suspended")
    r.emit(facts.table_suspended(operator=c.operator, reason=c.reason))


def resume_table(r: Draft, c: cmd.ResumeTable) -> None:
    if not r.state.suspended:
        raise refuse("not_suspended", "the table is not suspended")
    r.emit(facts.table_resumed(operator=c.operator))


def _check_free_seat(state: TableState, seat: int) -> None:
    if not 0 <= seat < state.rules.seats:
        raise refuse("seat_out_of_range", f"seats are 0-{state.rules.seats - 1}")
    if state.player_at(seat) is not None:
        raise refuse("seat_taken", f"seat {seat} is taken")


def sit_down(r: Draft, c: cmd.SitDown) -> None:
    if c.player_id in r.state.players:
        raise refuse("already_seated", f"{c.player_id} is already seated")
    check_not_suspended(r.state, "no new players")
    _check_free_seat(r.state, c.seat)
    if r.state.rules.funded_by_wallet and not has_wallet_stream(c.player_id):
        raise refuse(
            "no_wallet",
            f"money comes to this table from wallet:<player id>, and {c.player_id[:40]!r} "
            f"names none (letters, digits and . _ : @ - only, at most "
            f"{MAX_STREAM_ID - len(WALLET_STREAM_PREFIX)} characters)",
        )
    r.emit(facts.seat_taken(player_id=c.player_id, seat=c.seat))


def move_seat(r: Draft, c: cmd.MoveSeat) -> None:
    player = seated(r.state, c.player_id)
    if c.seat == player.seat:
        raise refuse("already_seated", f"{c.player_id} is at seat {c.seat} already")
    _check_free_seat(r.state, c.seat)
    # The multi-player page: "You may change your position on the table by clicking on the
    # desired spot between hands": not while any hand is played, nor with a bet of one's own out.
    if r.state.boxes_of(c.player_id) or r.state.hands_in_play:
        raise refuse("round_in_progress", "change seats between rounds, with no bet out")
    r.emit(facts.seat_changed(player_id=c.player_id, from_seat=player.seat, to_seat=c.seat))


def leave_table(r: Draft, c: cmd.LeaveTable) -> None:
    state = r.state
    ready = seated(state, c.player_id).ready
    clocked = state.deadline is not None  # (a table opened before the clock was required
    # has none: its player would wait on the others for good, the whole balance held)
    if state.phase == "betting" and ready and clocked and state.boxes_of(c.player_id):
        # Deal pressed at a shared table waiting for the others, at most until the betting
        # deadline: the bet is in the round, as a disconnection leaves it (page 003) and as
        # RemoveBet and Pass are refused now (before, leaving took it back: a way round both)
        raise refuse(
            "round_in_progress",
            "you pressed Deal: your bets are dealt with the others'; leave once the round is "
            "settled",
        )
    _stand_up(r, c.player_id, "a hand in play must be finished first")


def leave_after_the_betting_deadline(r: Draft, c: cmd.LeaveTable) -> None:
    """A leave received at or after the betting deadline, before the service's clock applied
    it: the deadline decided first. Bets on the layout are the deadline's to deal (or to
    return, under the minimum), so they stay (before, the leave took them back when it beat
    the clock to the handler, and was refused when it came after: a race, not a rule); a
    player with none, or only stacks under the minimum (the deadline's to return), leaves."""
    state = r.state
    if len(under_minimum(state, c.player_id)) < len(state.boxes_of(c.player_id)):
        deadline = deadline_text(state.deadline) if state.deadline else "its deadline"
        raise refuse(
            "round_in_progress",
            f"the time to bet ran out at {deadline}: your bets are dealt with the round; leave "
            "once it is settled",
        )
    _stand_up(r, c.player_id, "a hand in play must be finished first")


def stand_up_player(r: Draft, c: cmd.StandUpPlayer) -> None:
    player_id = _as_seated(r.state, c.player_id)
    _stand_up(
        r,
        player_id,
        f"{c.player_id[:40]} has a hand in play: stand them up once the round is settled",
        operator=c.operator,
        why=c.reason,
    )


def _as_seated(state: TableState, player_id: str) -> str:
    """The seated id the operator names, as the log holds it or as the read model shows it: a
    NUL an older release took in an id is stored there as U+FFFD (``NUL_STORED_AS``) and the
    query API refuses the NUL itself, so the id an operator reads named no seat, and a player
    who never came back kept their money at the table. Only a seat already held is found so:
    no new id enters the log."""
    if player_id in state.players or cmd.NUL_STORED_AS not in player_id:
        return player_id
    shown_so = [p for p in state.players if p.replace("\x00", cmd.NUL_STORED_AS) == player_id]
    if len(shown_so) > 1:
        raise refuse(
            "not_seated",
            f"{player_id[:40]} reads as {len(shown_so)} seated players: name one as the log does",
        )
    return shown_so[0] if shown_so else player_id


def _stand_up(
    r: Draft, player_id: str, in_play: str, operator: str | None = None, why: str | None = None
) -> None:
    """The player leaves (or is stood up by ``operator``): bets not dealt come back, the
    money at the table is paid out, and a round waiting only for them is dealt."""
    player = seated(r.state, player_id)
    if any(r.state.boxes[i].hands for i in r.state.boxes_of(player_id)):
        raise refuse("round_in_progress", in_play)
    refund_bets(r, player_id, "left" if operator is None else "stood_up")
    balance = r.state.players[player_id].balance
    r.emit(
        facts.seat_left(
            player_id=player_id,
            seat=player.seat,
            balance_returned=balance,
            reason="left" if operator is None else "operator",
            operator=operator,
            operator_reason=why,
        )
    )
    close_if_no_bet_left(r)
    deal_when_all_decided(r)


def disconnect_after_the_betting_deadline(r: Draft, c: cmd.Disconnect) -> None:
    """A disconnection received at or after the betting deadline, before the service's clock
    applied it: noted, the bets left to the deadline (dealt, or returned under the minimum).
    Page 003 returns a bet only if the connection ends "before pressing 'Deal'", and at a
    shared table the deadline deals (before, a disconnection that beat the clock to the
    handler took the bet back, and the recall then said the clock left the player out)."""
    if seated(r.state, c.player_id).connected:
        r.emit(facts.player_disconnected(player_id=c.player_id))


def disconnect(r: Draft, c: cmd.Disconnect) -> None:
    player = seated(r.state, c.player_id)
    if not player.connected:
        return
    r.emit(facts.player_disconnected(player_id=c.player_id))
    # The surrender page: "If the connection is terminated after placing a bet but before
    # pressing 'Deal' button the bet will be returned." A started hand waits for reconnection;
    # so does a bet whose Deal was pressed at a shared table still waiting for the others.
    if r.state.rules.refund_bets_on_disconnect and r.state.phase == "betting" and not player.ready:
        refund_bets(r, c.player_id, "disconnected")
        close_if_no_bet_left(r)
        deal_when_all_decided(r)  # the others, all decided, are dealt at once


def reconnect(r: Draft, c: cmd.Reconnect) -> None:
    if not seated(r.state, c.player_id).connected:
        r.emit(facts.player_reconnected(player_id=c.player_id))
