"""The service's clock: timers become commands, so that replay never needs a clock.

Two things happen because time passes, and both enter the log as ordinary commands on
``blackjack.commands`` (keyed by the table, handled like any other, answered on the results
topic), with the handler's clock as the ``now`` of their decision:

* ``ExpireTimers`` once a table's deadline has passed: the 15-second betting and turn clock
  of ``atlantic-city-multi`` (``TableState.deadline``). And at once for a round a rebuild
  resumed at a table of one seat on a clock: its handling writes the ``RoundResumed`` that
  starts the round's clock again (``decisions.clock.restarts_clock``).
* ``Disconnect`` for a player who has a bet or a hand out and has sent nothing for the
  presence timeout, at tables with the disconnection policy (``surrender``): a bet not yet
  dealt is returned, a started hand waits for the player's ``Reconnect``. Any command from a
  player counts as presence; ``Reconnect`` from a connected player changes nothing, so a
  platform may send it as a heartbeat.

Command ids are derived from what triggers them (the deadline, the last time the player was
seen), so a timer that fires twice, or again on another instance after a takeover, is one
command to the idempotent handler. An ``ExpireTimers`` that finds nothing due (handled before
its deadline: sent by anyone who knows the deadline, or by an instance whose clock runs ahead
of the one handling it) changes nothing and is answered but not remembered, so the copy that
comes once the deadline has passed still acts (``is_idle_timer``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime, timedelta

from blackjack.command_handler.streams import PartitionStore, Stream
from blackjack.domain import commands as cmd
from blackjack.domain.state import TableState
from blackjack.messages.envelope import CommandEnvelope, CommandResult


def _digest(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


DISCONNECT_PREFIX = "disconnect-"
EXPIRE_PREFIX = "expire-"


def expire_command_id(stream_id: str, deadline: datetime) -> str:
    """The id of the ``ExpireTimers`` for a table's deadline: the same on every instance."""
    return f"{EXPIRE_PREFIX}{_digest(stream_id, deadline.isoformat())}"


def is_clock_timer_id(command_id: str) -> bool:
    """An id of the clock's ``ExpireTimers`` form: the handler refuses any other command that
    uses one, so an answer under such an id is an ``ExpireTimers``'s or that refusal."""
    return command_id.startswith(EXPIRE_PREFIX)


def is_clock_disconnect_id(command_id: str) -> bool:
    """An id of the clock's ``Disconnect`` form. It derives from what a reader of the results
    topic sees (the stream, the player, the ``handled_at`` of the player's last answer), so
    another command could take it first and have its answer remembered there: the clock's
    own command would then be answered as its duplicate on every tick and the player never
    disconnected. Only a ``Disconnect`` may use one, and only an answer that wrote events
    (someone disconnected) is remembered under it."""
    return command_id.startswith(DISCONNECT_PREFIX)


def is_idle_timer(result: CommandResult) -> bool:
    """An answer to the clock's ``ExpireTimers`` that found nothing due: not remembered, live or
    by a rebuild, since it would answer the real one for that deadline as a duplicate."""
    return (
        is_clock_timer_id(result.command_id)
        and result.status == "accepted"
        and result.first_sequence is None
    )


def disconnect_command_id(stream_id: str, player_id: str, seen: datetime) -> str:
    """The id of the ``Disconnect`` for a player last seen at ``seen``: the same on every
    instance that knows when the player was last seen (and stale once they are seen again)."""
    return f"{DISCONNECT_PREFIX}{_digest(stream_id, player_id, seen.isoformat())}"


def may_come_due(stream: Stream) -> bool:
    """Whether the clock may ever owe the stream a command without another command for it
    first: a table's running deadline, or a connected player with a bet out at a table with
    the disconnection policy. A stream for which this is false may be kept cold."""
    state = stream.state
    if not isinstance(state, TableState) or not state.opened:
        return False
    if state.deadline is not None:
        return True
    return state.rules.refund_bets_on_disconnect and any(
        player.connected and state.boxes_of(player.player_id) for player in state.players.values()
    )


def due_commands(
    store: PartitionStore, now: datetime, presence_timeout: timedelta
) -> Iterator[CommandEnvelope]:
    """The commands the hot streams are due at ``now`` (a cold stream is never due)."""
    for stream in store.streams.values():
        if not may_come_due(stream):
            continue
        state = stream.state
        assert isinstance(state, TableState)
        # A resumed round whose clock restarts is sent its ExpireTimers at once: it writes
        # the marker with the new deadline (``Deciding._decide``), so the round's clock runs
        # from the rebuild, not from the player's next command.
        owed = store.owes_restart(stream)
        if state.deadline is not None and (now >= state.deadline or owed):
            yield CommandEnvelope(
                command_id=expire_command_id(stream.stream_id, state.deadline),
                stream_id=stream.stream_id,
                sent_at=now,
                command=cmd.ExpireTimers(),
            )
        if not state.rules.refund_bets_on_disconnect:
            continue
        for player in state.players.values():
            seen = stream.last_seen.get(player.player_id)
            if not player.connected or seen is None or now - seen < presence_timeout:
                continue
            if not state.boxes_of(player.player_id):
                continue  # nothing at stake: an idle seat is no disconnection
            yield CommandEnvelope(
                command_id=disconnect_command_id(stream.stream_id, player.player_id, seen),
                stream_id=stream.stream_id,
                sent_at=now,
                command=cmd.Disconnect(player_id=player.player_id),
            )
