"""CloudEvents Kafka binding headers (binary mode) of the commands and command results the
service and its clients write; the events' headers come from ``blackjack.messages.wire``."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from blackjack.messages.envelope import CommandEnvelope, CommandResult
from blackjack.messages.wire import SPEC_VERSION


def command_headers(
    envelope: CommandEnvelope, source: str, cause: str | None
) -> list[tuple[str, bytes]]:
    """CloudEvents binary-mode headers of a command the service sends."""
    headers = {
        "ce_specversion": SPEC_VERSION,
        "ce_id": envelope.command_id,
        "ce_source": source,
        "ce_type": f"blackjack.command.{envelope.command.type}",
        "ce_time": (envelope.sent_at.isoformat() if envelope.sent_at else ""),
        "ce_subject": envelope.stream_id,
        "content-type": "application/json",
    }
    if envelope.correlation_id:
        headers["ce_correlationid"] = envelope.correlation_id
    if cause:
        headers["ce_causationid"] = cause
    return [(name, value.encode()) for name, value in headers.items() if value]


def result_id(body: bytes) -> str:
    """A command result's CloudEvents id, from its body: CloudEvents asks source and id to name
    one event, and a command id names one command in its stream only (two tables' answers
    under one id, an id's acceptance and the refusal of another command under it, a refusal not
    kept and the acceptance of its resend once there was room, all shared ``result/<command
    id>`` before). The original answer written again to a copy of its command is the same body,
    so the same id: a duplicate, as CloudEvents allows."""
    return f"result/{hashlib.sha256(body).hexdigest()[:32]}"


def result_headers(result: CommandResult, body: bytes, source: str) -> list[tuple[str, bytes]]:
    """CloudEvents binary-mode headers of a command result whose record value is ``body``."""
    headers = {
        "ce_specversion": SPEC_VERSION,
        "ce_id": result_id(body),
        "ce_source": source,
        "ce_type": "blackjack.CommandResult.v1",
        "ce_time": result.handled_at.isoformat(),
        "ce_subject": result.stream_id,
        "ce_causationid": result.command_id,
        "content-type": "application/json",
    }
    if result.correlation_id:
        headers["ce_correlationid"] = result.correlation_id
    return [(name, value.encode()) for name, value in headers.items()]


COMMAND_OFFSET_HEADER = "bj_command_offset"
"""On a command result: the offset of the command it answers, in the commands partition."""
COMMANDS_TO_HEADER = "bj_commands_to"
"""On a checkpoint: the commands partition's offset every command below was answered by."""
COMMAND_DIGEST_HEADER = "bj_command_digest"
"""On a command result the window keeps: the digest of the command it answers
(``command_handler.answers.command_digest``), so that a rebuild from the results topic tells
a copy from another command under its id as the live handler did."""


def offset_header(headers: Sequence[tuple[str, bytes | None]] | None, name: str) -> int | None:
    """The offset a header of the service carries, if the record has it (records written
    before it do not)."""
    for key, value in headers or ():
        if key == name and value is not None and value.isdigit():
            return int(value)
    return None
