"""4. The decision: the decider of the stream's kind, on a copy of its state; its events, after
the marker of a round the service interrupted (``RoundResumed``, which may restart the round's
clock first) when there is one, become the records to write. A decider that fails is
answered ``internal_error`` and changes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

import structlog

from blackjack.bus.topics import RECORD_MAX_BYTES
from blackjack.command_handler.records import Outgoing, RecordWriter, record_size
from blackjack.command_handler.streams import Stream
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import platform_money
from blackjack.domain.evolve import evolve
from blackjack.domain.rejections import Rejection
from blackjack.domain.state import TableState
from blackjack.domain.wallet import (
    WalletCommand,
    WalletEvent,
    WalletState,
    decide_wallet,
    evolve_wallet,
)
from blackjack.messages.envelope import CommandEnvelope, EventEnvelope, StreamCommand
from blackjack.table import Shuffler, apply

log = structlog.get_logger("blackjack.command_handler")


def _writes_marker(
    resumed: ev.RoundResumed | None,
    decided: Sequence[ev.Event | WalletEvent],
    command: StreamCommand,
) -> bool:
    """Whether the marker of an interrupted round goes before the decided events: when the
    decision wrote any (a refusal or a heartbeat leaves it owed), and alone for the clock's
    ``ExpireTimers`` when it restarts the round's clock (the clock sends that command at once
    for the marker: ``clock.due_commands``; it has nothing else to do)."""
    if resumed is None:
        return False
    restarts = resumed.deadline is not None and isinstance(command, cmd.ExpireTimers)
    return bool(decided) or restarts


class _Decided(NamedTuple):
    """A decision written down, before the stream takes it."""

    state: TableState | WalletState
    built: list[EventEnvelope]
    records: list[Outgoing]
    refused: Rejection | None
    """a platform money command's refusal, written down as an event that moves no money"""


def _take(stream: Stream, decided: _Decided, now: datetime, money_retention: timedelta) -> None:
    """The stream moves on to the decision: its state, sequence, times and money ids."""
    stream.sequence += len(decided.built)
    stream.state = decided.state
    if decided.built:
        stream.touched_at = now
    if any(platform_money.counts_as_activity(built.data) for built in decided.built):
        stream.active_at = now
    for built in decided.built:  # as a rebuild folds them (``replay``)
        stream.note_money(built, money_retention)


class Deciding(RecordWriter):
    """Decides a command and writes down what was decided (``Processor`` is one)."""

    shuffler: Shuffler

    # ---- 4. the decision --------------------------------------------------------------

    def _decide(
        self,
        envelope: CommandEnvelope,
        stream: Stream,
        now: datetime,
        events: list[EventEnvelope],
        outgoing: list[Outgoing],
        *,
        received_at: datetime | None = None,
        resumed: ev.RoundResumed | None = None,
        money_retention: timedelta,
        keep_refusal: bool = False,
    ) -> Rejection | None:
        """Run the decider; on acceptance append the events and the steps they cause, after
        ``resumed`` (the marker of a round interrupted, ``PartitionStore.resumed``) when the
        decision writes any. The stream's platform money ids follow its events
        (``Stream.note_money``, kept ``money_retention``). With ``keep_refusal`` (a platform
        money command), a refusal is written down as an event that moves no money
        (``platform_money.refusal``) and returned: the stream keeps the command's id, so a
        late copy is never decided again.

        A bug in the decider, or in writing down what it decided, fails the same way on every
        retry, so raising would stop every table of the partition on this command. It is
        answered instead, and nothing changes: the decider works on copies, and the stream
        takes the new state and sequence only once every record is built."""
        try:
            decided = self._decided(
                envelope,
                stream,
                now,
                received_at=received_at,
                resumed=resumed,
                keep_refusal=keep_refusal,
            )
        except OSError:
            raise  # the machine (the CSPRNG): the transaction aborts and is tried again
        except Exception as error:
            log.exception(
                "the decider failed; the command is rejected and nothing changes",
                command_id=envelope.command_id,
                stream_id=stream.stream_id,
                command_type=str(envelope.command.type),
            )
            kind = envelope.command.type
            return Rejection(
                code="internal_error",
                message=f"the server could not decide this {kind} ({type(error).__name__}); "
                "nothing changed, the operator is alerted",
            )
        if isinstance(decided, Rejection):
            return decided
        _take(stream, decided, now, money_retention)
        events.extend(decided.built)
        outgoing.extend(decided.records)
        return decided.refused

    def _decided(
        self,
        envelope: CommandEnvelope,
        stream: Stream,
        now: datetime,
        *,
        received_at: datetime | None,
        resumed: ev.RoundResumed | None,
        keep_refusal: bool,
    ) -> Rejection | _Decided:
        """What ``_decide`` writes, nothing of the stream changed yet; or the refusal."""
        before = stream.state
        if resumed is not None and resumed.deadline is not None:
            # The clock restarts first: the command is decided on the round as resumed (a
            # move after the old deadline is in time, the clock's ExpireTimers finds
            # nothing due), and keeps that state only if the marker is written with it.
            assert isinstance(before, TableState)
            before = evolve(before, resumed)
        decided = self._decision(before, envelope.command, now, received_at)
        refused: Rejection | None = None
        if isinstance(decided, Rejection):
            recorded = (
                platform_money.refusal(before, envelope.command, decided) if keep_refusal else None
            )
            if recorded is None:
                return decided
            refused, decided = decided, recorded
        state, domain_events = decided
        if _writes_marker(resumed, domain_events, envelope.command):
            assert resumed is not None
            domain_events = [resumed, *domain_events]
        elif before is not stream.state:
            state = stream.state  # no marker written: the clock it restarted is not kept
        built, records = self._records_of(envelope, stream, domain_events, now)
        largest = max((record_size(record) for record in records), default=0)
        if largest > RECORD_MAX_BYTES:
            log.error(
                "a record over the topics' size limit; the command is rejected",
                command_id=envelope.command_id,
                stream_id=stream.stream_id,
                record_bytes=largest,
            )
            return Rejection(
                code="internal_error",
                message=f"this {envelope.command.type} would write a record of {largest} "
                f"bytes, over the {RECORD_MAX_BYTES} the topics take; nothing changed",
            )
        return _Decided(state, built, records, refused)

    def _decision(
        self,
        state: TableState | WalletState,
        command: StreamCommand,
        now: datetime,
        received_at: datetime | None = None,
    ) -> tuple[TableState | WalletState, Sequence[ev.Event | WalletEvent]] | Rejection:
        """The decider of the stream's kind: the new state and its events, or the rejection."""
        # ``_read`` already sent every command to a stream of its kind: these refusals are the
        # decider's own guard, and what lets the type checker follow the two kinds apart
        if isinstance(state, WalletState):
            if not isinstance(command, WalletCommand):
                return Rejection(code="unknown_command", message="not a wallet command")
            decision = decide_wallet(state, command)
            if isinstance(decision, Rejection):
                return decision
            for wallet_event in decision:
                state = evolve_wallet(state, wallet_event)
            return state, decision
        if isinstance(command, WalletCommand):
            return Rejection(code="malformed", message="a wallet command goes to a wallet stream")
        applied = apply(state, command, now, self.shuffler, received_at)
        if isinstance(applied, Rejection):
            return applied
        return applied.state, applied.events
