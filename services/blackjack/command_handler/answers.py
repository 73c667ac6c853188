"""The exactly-once bookkeeping of a stream's answers: which answers its idempotency window
keeps (the one rule for the live handler and a rebuild from the results topic, ``replay``),
and which message is a copy of a command already answered, given the original answer."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

from blackjack.command_handler.clock import is_clock_disconnect_id, is_clock_timer_id, is_idle_timer
from blackjack.command_handler.ids import is_step_id
from blackjack.command_handler.reading import Unparsed
from blackjack.command_handler.streams import PartitionStore, Stream
from blackjack.domain import commands as cmd
from blackjack.domain.rejections import Rejection, RejectionCode
from blackjack.messages.envelope import CommandEnvelope, CommandResult, StreamCommand

COPY_REFUSALS: frozenset[RejectionCode] = frozenset(
    {"transfer_already_handled", "unknown_transfer"}
)
"""How the deciders refuse a copy of a signed money step."""


def refused(
    envelope: CommandEnvelope,
    message: str,
    now: datetime,
    code: RejectionCode = "unauthorized",
) -> CommandResult:
    """A refusal decided before the decider sees the command (``unauthorized`` unless said)."""
    return CommandResult(
        command_id=envelope.command_id,
        stream_id=envelope.stream_id,
        correlation_id=envelope.correlation_id,
        status="rejected",
        rejection=Rejection(code=code, message=message),
        handled_at=now,
    )


DIGEST_CHARS = 16
"""Hex digits of a command's digest (64 bits: it tells a copy from another command sent under
the same id by mistake; a client that forges a match only gets its own first answer back)."""


NOT_DIGESTED = frozenset({"round"})
"""Fields a copy may carry otherwise: the round a bet or move names, which ``BlackjackClient``
fills in from what it knows when it sends (a platform process restarted since sends none, one
that has seen the round end names the next); the decider compares it, the copy is still the
command answered (a review: the client's own resends were refused)."""


def command_digest(command: StreamCommand) -> str:
    """What tells a copy of a command from another command under its id: the SHA-256 of the
    command as canonical JSON (keys sorted), its type and every field but those at their
    defaults (so a release that adds an option with a default still reads a copy sent to the
    release before as the same command) and those a copy may carry otherwise
    (``NOT_DIGESTED``)."""
    document = command.model_dump(mode="json", exclude_defaults=True, exclude=set(NOT_DIGESTED))
    document["type"] = command.type
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def another_command(stream: Stream | None, command_id: str, digest: str | None) -> bool:
    """Whether a command under a handled id differs from the command first answered under it
    (a payment API's idempotency key reused with other parameters): known only where the
    stream remembers the first one's digest (not for answers older than digests, at a stream
    that does not exist, or for the service's signed steps, ``digest`` None)."""
    if stream is None or digest is None:
        return False
    first = stream.results.digest(command_id)
    return first is not None and first != digest


def another_player_s(original: CommandResult, command: StreamCommand, signed: bool) -> bool:
    """Whether a command sent under a handled id is another player's than the one the id was
    first used by (a copy is the same player's: it is given the original result). Only the
    answers that name their player tell it (``CommandResult.player_id``: a player's own table
    command; not on answers written before it, nor on the service's own steps)."""
    if original.player_id is None or signed or isinstance(command, cmd.Disconnect):
        return False
    return isinstance(command, cmd.PlayerCommand) and command.player_id != original.player_id


def handled_before(store: PartitionStore, parsed: Unparsed) -> CommandResult | None:
    """The answer a stream gave under the id of a message now refused ``malformed``: a copy
    of a command an older release handled, which the commands refuse since (a player id with
    a control character, a key named twice), sent again by a client that had no answer (an
    upgrade's takeover). It gets the original answer, as any copy does, not a second one
    saying the opposite; nothing is decided or remembered. Only where the message names its
    stream as its key does, on this partition, a stream this partition holds (a malformed
    message adds none) or has answers for (``StrayAnswers``), the same player as the answer
    names, and not an id reserved for the service's own commands."""
    if parsed.rejection.code != "malformed" or not parsed.stream_read:
        return None
    command_id, stream_id = parsed.command_id, parsed.stream_id
    if is_step_id(command_id) or is_clock_timer_id(command_id):
        return None
    if is_clock_disconnect_id(command_id):
        return None
    _, original = store.answered(stream_id, command_id)
    if original is None or (
        original.player_id is not None and original.player_id != parsed.player_id
    ):
        return None
    return original


NOT_REMEMBERED = frozenset({"malformed", "unknown_command"})
"""Answers to messages that never reached a stream: a corrected resend is handled afresh."""


def remembered(result: CommandResult) -> bool:
    """Whether a stream's idempotency window keeps this answer: the one rule for the live
    handler and for a rebuild from the results topic, whose windows must be equal (else a
    copy of a command is decided again after a takeover). Not kept: answers to messages that
    never reached a stream, to a command that took an id reserved for the service's own (a
    step's, the clock's) or a signed step's copy, a platform money command its stream had no
    room to keep (``money_ids_full``), the clock's ``ExpireTimers`` that found
    nothing due, and any answer under the clock's ``Disconnect`` id that disconnected no one."""
    if is_idle_timer(result):
        return False
    if is_clock_disconnect_id(result.command_id) and result.first_sequence is None:
        return False  # only a disconnection keeps the clock's id (``is_clock_disconnect_id``)
    if result.rejection is None:
        return True
    code, command_id = result.rejection.code, result.command_id
    if code in NOT_REMEMBERED or code == "money_ids_full":
        return False  # (``money_ids_full``: a resend once there is room is decided)
    return not (
        code == "unauthorized" and (is_step_id(command_id) or is_clock_timer_id(command_id))
    )
