"""1. The message: a record of ``blackjack.commands`` read into its envelope, or why it is
refused (``malformed``, ``unknown_command``), with those of its ids an answer may quote."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog
from pydantic import ValidationError

from blackjack.bus.topics import partition_for
from blackjack.domain.commands import COMMAND_TYPES
from blackjack.domain.rejections import Rejection, RejectionCode, in_one_line
from blackjack.domain.wallet import (
    WALLET_COMMAND_TYPES,
    WalletCommand,
    is_wallet_stream,
    wallet_stream,
)
from blackjack.messages import strict_json
from blackjack.messages.envelope import (
    CORRELATION_ID_MAX_CHARS,
    UNPARSED_ID_REFUSAL,
    CommandEnvelope,
    type_name,
    unparsed_id,
)

log = structlog.get_logger("blackjack.command_handler")

KNOWN_COMMANDS = frozenset(type_name(t) for t in (*COMMAND_TYPES, *WALLET_COMMAND_TYPES))


@dataclass(frozen=True)
class Inbound:
    """A record of ``blackjack.commands`` as the consumer got it."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]  # Kafka allows a header without a value
    partition: int
    offset: int
    received_at: datetime | None = None
    """When the broker appended it (a LogAppendTime topic); None when the platform's producer
    set the record's time (CreateTime): then the handler's clock says whether it is late."""
    unreadable: bool = False
    """A header name of it is not UTF-8 (``bus.header_names``): none of the service's
    records has one, and what its sender meant is not read (answered ``malformed`` under
    ``unparsed-<partition>-<offset>``)."""


def _integer(digits: str) -> int | str:
    """A JSON integer; past Python's limit on digits, its digits as text, which the command's
    ``StrictInt`` refuses: the answer is then filed under the command's own id."""
    try:
        return int(digits)
    except ValueError:
        return digits


def _named_once(value: bytes) -> dict[str, object] | None:
    """The envelope of a message refused as not strict JSON (some object naming a key twice,
    or JSON in UTF-16 or UTF-32 or after a byte-order mark, which ``json`` reads), without
    the keys named twice: what its answer may quote (its ids, as for any malformed message),
    so that its sender finds the answer under its own id, and a copy of a command its stream
    decided (one an earlier release read, UTF-8 after a byte-order mark) gets that answer."""
    try:
        text = value.decode(json.detect_encoding(value))  # (quoted, never decided)
        doc, twice = strict_json.with_keys_named_twice(text, parse_int=_integer)
    except (ValueError, RecursionError):  # past the first key named twice, not JSON either
        return None
    if not isinstance(doc, dict):
        return None
    return {name: item for name, item in doc.items() if name not in twice}


@dataclass(frozen=True)
class Unparsed:
    command_id: str
    stream_id: str
    rejection: Rejection
    command_type: str
    correlation_id: str | None = None
    player_id: str | None = None
    """the ``player_id`` the message's command named, when it is a string"""
    stream_read: bool = False
    """the stream id is the message's own, its Kafka key, and belongs to this partition: a
    copy of a command that stream handled may be looked for there"""


ID_MAX_CHARS = 128
"""The longest valid command or stream id. One quoted back from a message that could not be
read is cut to it, so that the answer stays small whatever the message held."""


def _own_id(value: object) -> str | None:
    """The message's command id, when an answer may be filed under it."""
    if isinstance(value, str) and 0 < len(value) <= ID_MAX_CHARS and not unparsed_id(value):
        return value
    return None


ANSWER_KEY_MAX_BYTES = 4 * ID_MAX_CHARS
"""The longest key an unreadable message is answered under as it came (so its sender, who chose
it, finds the answer); past it, the answer's key is the quoted stream id (or key)."""


def _utf8(value: object) -> str | None:
    """``value`` if it is a string an answer can carry (encodable as UTF-8), else None."""
    if not isinstance(value, str):
        return None
    try:
        value.encode()
    except UnicodeEncodeError:
        return None
    return value


def _quoted(text: str) -> str:
    return text if len(text) <= ID_MAX_CHARS else f"{text[:ID_MAX_CHARS]}..."


def parse(inbound: Inbound, partitions: int) -> CommandEnvelope | Unparsed:
    """The envelope, or why the message is refused. Reading a message changes nothing, so
    whatever a record holds that breaks reading it is that record's fault: it is answered
    ``malformed`` rather than raised, which would abort the transaction and stop the
    partition on the same record at every retry."""
    try:
        return _read(inbound, partitions)
    except Exception as error:
        # ``_read`` answers every bad input it knows; anything raised here is either a
        # record nobody foresaw or a bug in the reader: keep the trace for the operator.
        log.exception(
            "a command record could not be read; answered malformed",
            kafka_partition=inbound.partition,
            kafka_offset=inbound.offset,
        )
        return Unparsed(
            command_id=f"unparsed-{inbound.partition}-{inbound.offset}",
            stream_id=_quoted((inbound.key or b"").decode("utf-8", "replace")),
            rejection=Rejection(
                code="malformed",
                message=f"the message cannot be read ({type(error).__name__})",
            ),
            command_type="-",
        )


def _refusal(
    inbound: Inbound,
    partitions: int,
    code: RejectionCode,
    message: str,
    *,
    doc: object = None,
    kind: str = "-",
) -> Unparsed:
    """The answer to a record refused, filed under the ids it names where they can be
    quoted (``doc``: what of it was read as JSON), else under ``unparsed-<partition>-<offset>``."""
    key_text = (inbound.key or b"").decode("utf-8", "replace")
    command_id = stream_id = correlation_id = player_id = None
    if isinstance(doc, dict):
        # JSON may hold lone surrogates ("\\ud800"), which no answer can carry in
        # UTF-8: quoting one raised, and the partition stopped on the record
        command_id = _utf8(doc.get("command_id"))
        stream_id = _utf8(doc.get("stream_id"))
        # copied onto the answer as onto any other (docs/kafka.md), when it is one
        correlation_id = _utf8(doc.get("correlation_id"))
        body = doc.get("command")
        if isinstance(body, dict):
            player_id = _utf8(body.get("player_id"))
    stream_read = (
        isinstance(stream_id, str)
        and 0 < len(stream_id) <= ID_MAX_CHARS
        and stream_id == key_text
        and partition_for(stream_id, partitions) == inbound.partition
    )
    return Unparsed(
        command_id=_own_id(command_id) or f"unparsed-{inbound.partition}-{inbound.offset}",
        stream_id=_quoted(stream_id if isinstance(stream_id, str) else key_text),
        rejection=Rejection(code=code, message=message),
        command_type=kind,
        correlation_id=correlation_id
        if isinstance(correlation_id, str) and len(correlation_id) <= CORRELATION_ID_MAX_CHARS
        else None,
        player_id=player_id,
        stream_read=stream_read,
    )


def _read(inbound: Inbound, partitions: int) -> CommandEnvelope | Unparsed:
    def refuse(code: RejectionCode, message: str, doc: object = None, kind: str = "-") -> Unparsed:
        return _refusal(inbound, partitions, code, message, doc=doc, kind=kind)

    if inbound.unreadable:
        log.error(
            "a command record cannot be read (a header name that is not UTF-8); answered malformed",
            kafka_partition=inbound.partition,
            kafka_offset=inbound.offset,
        )
        return refuse("malformed", "the record cannot be read: a header name that is not UTF-8")
    if not inbound.value:
        return refuse("malformed", "an empty message")
    try:
        doc = strict_json.loads(inbound.value, parse_int=_integer)
    except strict_json.KeyNamedTwice as error:
        return refuse("malformed", f"ambiguous JSON: {error}", _named_once(inbound.value))
    except ValueError as error:  # not UTF-8 (strict_json.utf8), a number past int's digits
        return refuse("malformed", f"not JSON: {error}", _named_once(inbound.value))
    except RecursionError:
        return refuse("malformed", "JSON nested too deeply")
    if not isinstance(doc, dict):
        return refuse("malformed", "a command envelope is a JSON object")
    body = doc.get("command")
    kind = body.get("type") if isinstance(body, dict) else None
    if isinstance(kind, str) and kind not in KNOWN_COMMANDS:
        return refuse("unknown_command", f"no command type {kind!r}", doc, "unknown")
    try:
        envelope = CommandEnvelope.model_validate(doc)
    except ValidationError as error:
        # the metrics' command_type label: a known type, never what a sender made up
        known = kind if isinstance(kind, str) and kind in KNOWN_COMMANDS else "-"
        return refuse("malformed", in_one_line(error, "envelope"), doc, known)
    misplaced = _misplaced(envelope, inbound, partitions)
    if misplaced is not None:
        code, message = misplaced
        return refuse(code, message, doc, str(envelope.command.type))
    return envelope


def _misplaced(
    envelope: CommandEnvelope, inbound: Inbound, partitions: int
) -> tuple[RejectionCode, str] | None:
    """Why a well-formed envelope is not this record's to act on: an id of the service's
    unreadable records, a key, partition or stream (table or wallet) it does not belong to."""
    stream_id = envelope.stream_id
    kind = str(envelope.command.type)
    if _own_id(envelope.command_id) is None:
        return "malformed", UNPARSED_ID_REFUSAL
    if (inbound.key or b"").decode("utf-8", "replace") != stream_id:
        return "malformed", "the Kafka key must be the stream id"
    home = partition_for(stream_id, partitions)
    if home != inbound.partition:
        return (
            "malformed",
            f"stream {stream_id} belongs to partition {home}, not {inbound.partition}",
        )
    command = envelope.command
    if is_wallet_stream(stream_id):
        if not isinstance(command, WalletCommand):
            return "unknown_command", f"{kind} is not a wallet command"
        if stream_id != wallet_stream(command.player_id):
            return (
                "malformed",
                f"{kind} for {command.player_id} goes to {wallet_stream(command.player_id)}",
            )
    elif isinstance(command, WalletCommand):
        return (
            "malformed",
            f"{kind} goes to the player's wallet stream {wallet_stream(command.player_id)}",
        )
    return None
