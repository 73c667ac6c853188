"""The service's channels as FastStream declares them, and the AsyncAPI document made from them.

The command handler itself runs on aiokafka (FastStream has no Kafka transactions); these
declarations, on a broker that is never started, are the contract of its four topics for the
AsyncAPI document that FastStream generates (served at ``/docs/asyncapi``, committed as
``schemas/asyncapi.json``, checked for drift by a test). Write it with
``blackjack asyncapi --write``.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

from faststream.kafka import KafkaBroker
from faststream.specification import AsyncAPI
from faststream.specification.asyncapi.v2_6_0.schema.message import CorrelationId
from faststream.specification.base import Specification

from blackjack.bus.settings import DEFAULT_BOOTSTRAP, bootstrap_servers
from blackjack.bus.topics import Topics
from blackjack.command_handler.reading import ANSWER_KEY_MAX_BYTES
from blackjack.command_handler.snapshots import Checkpoint, SealedSnapshot
from blackjack.domain.transfers import DECLINES_PREFIX
from blackjack.domain.wallet import STREAM_ID_PATTERN
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from blackjack.messages.schemas import (
    int64_integers,
    no_final_line_feed,
    require_the_type,
    required_tags,
    standard_keywords,
    stored_versions_valid,
)
from blackjack.messages.wire import WireEnvelope

TITLE = "Blackjack game server"
DESCRIPTION = """\
Casino platforms send commands for a stream (a table, or a player's wallet `wallet:<player>`)
to the commands topic and receive one result per command on the results topic. The command
handler consumes the commands (consumer group `blackjack-command-handler`, read_committed) and
writes, in one Kafka transaction per batch, the events, the result and the consumed offset.

Every record is keyed by its stream id; every command, event and result the service writes
carries the CloudEvents Kafka binding headers (binary mode): `ce_specversion`, `ce_id`,
`ce_source`, `ce_type`, `ce_time`, `ce_subject` (the stream id), `ce_sequence` on events, and
`ce_correlationid` / `ce_causationid` where they apply (each message's `headers`). The
snapshots topic is the handlers' own and carries none.

A producer may compress its batches with any of Kafka's codecs (gzip, snappy, lz4, zstd): the
service reads all four. The service writes gzip batches (`BLACKJACK_KAFKA_COMPRESSION`), which
every Kafka client reads without an extra library.
"""

COMMANDS = """\
Commands, keyed by stream id; JSON of `CommandEnvelope`. Platforms send every player and
platform command here; the transactional command handler consumes them (read_committed, in the
consumer group `blackjack-command-handler`). A command id is remembered per stream: a resend
gets the original result while it is among the stream's last 1,000 answers
(`BLACKJACK_DEDUP_WINDOW`). A platform money command (`WalletDeposit`, `WalletWithdraw`,
`Deposit`, `Withdraw`) resent later is refused `already_applied` for as long as the stream
keeps its id (`BLACKJACK_MONEY_RETENTION_S`, 7 days; another kind, player or amount under
it, or another currency or buy-in table under an accepted one's, is refused `malformed`), and
one whose `sent_at` is older than that is refused `transfer_expired`: send `sent_at` (kept by a
resend) to be covered past the window."""

SERVICE_COMMANDS = """\
What the service itself sends to the commands topic: its clock sends `ExpireTimers` and
`Disconnect`, and the steps of a buy-in (`Deposit` to the table, `ConfirmBuyIn` / `RefundBuyIn`
to the wallet) and `CashOut` are sent by the handler inside the transaction that causes them,
signed in the `bj_signature` header (`bj_transfer` names the buy-in on its `Deposit`, and the
table event that paid the money out on a `CashOut`). A platform never sends
these signed steps: unsigned, they are rejected."""

EVENTS = """\
Events, keyed by stream id; JSON of the event envelope (`sequence` 1, 2, 3... per stream,
`causation_id` = the command id). `ShoeShuffled` carries the shoe's commitment in clear and its
order sealed (AES-256-GCM); `ShoeRetired` reveals it. Never deleted: the source of truth.
Read it with isolation.level=read_committed (Java's and librdkafka's consumers default to
read_uncommitted): a handler killed or fenced mid-transaction leaves records that are then
aborted, and the same stream and sequence are written again, with other content where the
decision drew a new shoe."""

RESULTS = """\
One result per command (accepted, or rejected with a typed reason code and a message), keyed
by stream id, written in the same transaction as the command's events. A message that is not
a command envelope gets `malformed` (or `unknown_command`) with `command_id` taken from the
message, or `unparsed-<partition>-<offset>` when it has none. Read it with
isolation.level=read_committed, like the events (not the read_uncommitted default of Java's
and librdkafka's consumers): an aborted transaction's result is answered again."""

SNAPSHOTS = """\
Compacted. Per stream (key: stream id) its newest snapshot, sealed with a key derived from the
shoe key; per partition (key `#checkpoint/<partition>`) the offsets of the events and results
to replay after the snapshots. Written by the handler every `BLACKJACK_SNAPSHOT_EVERY`
commands, inside the transaction of the commands it covers."""


def declare_channels(broker: KafkaBroker, topics: Topics) -> None:
    """Declare the topics on ``broker`` with their message schemas: the commands the service
    receives, and what it sends. Only ever on a broker that is never started (see
    ``documentation_broker``): the commands are consumed by the transactional handler."""
    broker.subscriber(topics.commands, title="commands", description=COMMANDS)(
        _consumed_by_the_command_handler
    )
    broker.publisher(
        topics.commands,
        title="service-commands",
        description=SERVICE_COMMANDS,
        schema=CommandEnvelope,
    )
    broker.publisher(topics.events, title="events", description=EVENTS, schema=WireEnvelope)
    broker.publisher(
        topics.results, title="command-results", description=RESULTS, schema=CommandResult
    )
    broker.publisher(
        topics.snapshots,
        title="snapshots",
        description=SNAPSHOTS,
        schema=SealedSnapshot | Checkpoint,
    )


async def _consumed_by_the_command_handler(envelope: CommandEnvelope) -> None:
    """The receive side of the contract, for the document only: ``command_handler.processor``
    consumes the topic with aiokafka, inside Kafka transactions."""
    raise RuntimeError("the commands topic is consumed by the transactional command handler")


def documentation_broker(topics: Topics, bootstrap: str = DEFAULT_BOOTSTRAP) -> KafkaBroker:
    """A broker that only carries the declarations the AsyncAPI document is made from: it is
    never started, so its commands subscriber never consumes anything."""
    broker = KafkaBroker(bootstrap_servers(bootstrap))
    declare_channels(broker, topics)
    return broker


def _text(description: str, pattern: str | None = None) -> dict[str, Any]:
    schema = {"type": "string", "description": description}
    return schema if pattern is None else {**schema, "pattern": pattern}


_CLOUDEVENTS = {
    "ce_specversion": _text("CloudEvents version", "^1\\.0$"),
    "ce_id": _text("the record's id"),
    "ce_source": _text("BLACKJACK_SOURCE, /blackjack/command-handler by default"),
    "ce_type": _text(
        "blackjack.<EventType>.v<version>, blackjack.CommandResult.v1 or "
        "blackjack.command.<CommandType>"
    ),
    # the format, not only the words, so that a validator or a code generator checks it
    "ce_time": {
        **_text("RFC 3339: when the command was handled (a command: when sent)"),
        "format": "date-time",
    },
    "ce_subject": _text("the stream id"),
    "ce_causationid": _text("the command (or for a money step, the event) that caused it"),
    "ce_correlationid": _text("the correlation id of the command the record comes from"),
    "content-type": _text("application/json"),
}
_ALWAYS = ["ce_specversion", "ce_id", "ce_source", "ce_type", "ce_subject", "content-type"]
_OFFSET = "^[0-9]+$"


def _headers(required: list[str], **extra: dict[str, Any]) -> dict[str, Any]:
    properties = {**_CLOUDEVENTS, **extra}
    return {"type": "object", "properties": properties, "required": required}


HEADERS: dict[str, dict[str, Any]] = {
    "commands": {
        **_headers([]),
        "description": "a platform may send the CloudEvents headers, for its own routing; the "
        "handler reads none of them: the body is the command (its correlation_id, not "
        "ce_correlationid; its type, not ce_type; its stream_id, not ce_subject)",
    },
    "service-commands": _headers(
        _ALWAYS,
        bj_signature=_text("HMAC-SHA256 of key, value and bj_transfer (hex)"),
        bj_transfer=_text(
            "a buy-in's Deposit: the wallet's transfer number (BuyInSent.transfer); a CashOut: "
            "the sequence of the table event that paid it out (SeatLeft or FundsWithdrawn, "
            "read into CashOut.table_sequence)",
            _OFFSET,
        ),
    ),
    "events": _headers(
        [*_ALWAYS, "ce_time", "ce_sequence", "ce_causationid", "ce_correlationid"],
        ce_sequence=_text("the event's sequence in its stream", _OFFSET),
    ),
    "command-results": _headers(
        [*_ALWAYS, "ce_time", "ce_causationid"],
        ce_id=_text(
            "result/ and the first 32 hex digits of the SHA-256 of the record's value (a copy "
            "of a command is answered with the original body, so the same id)",
            "^result/[0-9a-f]{32}$",
        ),
        bj_command_offset=_text("the offset of the command it answers", _OFFSET),
        bj_command_digest=_text(
            "on an answer its stream keeps: the digest of the command it answers, which tells "
            "a copy from another command under its id (none on an answer to a message that "
            "could not be read)",
            "^[0-9a-f]{16}$",
        ),
    ),
    # internal to the handlers: no CloudEvents headers
    "snapshots": {
        "type": "object",
        "properties": {
            "bj_commands_to": _text("a checkpoint: every command below was answered", _OFFSET),
            "bj_checkpoint_auth": _text(
                "a checkpoint: 1.<digest of the partition's snapshots>.<HMAC-SHA256 under a "
                "key derived from the shoe key, over the topic, key, value, bj_commands_to and "
                "digest> (absent from checkpoints of older handlers)",
                r"^1\.[0-9a-f]{64}\.[0-9a-f]{64}$",
            ),
        },
    },
}
"""Each channel's record headers (Kafka header values are bytes: UTF-8 text here)."""

_STREAM_KEY = {
    "type": "string",
    "pattern": STREAM_ID_PATTERN,
    "maxLength": 128,
    "description": "the stream id: a table, or wallet:<player>",
}
_COMMAND_KEY = {
    **_STREAM_KEY,
    "description": "the stream id: a table, or wallet:<player>. The record's partition must be "
    "the one the Java client's default partitioner gives the key (murmur2 of the UTF-8 key, "
    "positive, modulo the partitions): another is answered malformed on the partition it came "
    "in on. librdkafka: partitioner=murmur2_random; kafkajs: its DefaultPartitioner",
}
_DECLINES_KEY = rf"{DECLINES_PREFIX}[0-9]+(?:\.[0-9]+)?"
"""``#declined/<partition>`` or ``#declined/<partition>.<n>`` (``ids.declines_stream``): the
stream of a partition's buy-ins declined at ids no table was opened under. No command names
it, so only the events channel carries it."""
KEYS: dict[str, dict[str, Any]] = {
    "commands": _COMMAND_KEY,
    "service-commands": _STREAM_KEY,
    "events": {
        **_STREAM_KEY,
        "pattern": f"^(?:{STREAM_ID_PATTERN.strip('^$')}|{_DECLINES_KEY})$",
        "description": "the stream id: a table, wallet:<player>, or #declined/<partition> "
        "(optionally .<n>): the stream of the partition's buy-ins declined at ids no table "
        "was opened under, whose TransferDeclined events answer them",
    },
    "command-results": {
        **_STREAM_KEY,
        "description": "the command's stream id; an unreadable command is answered under the "
        "key it came with (empty if it had none), up to 512 bytes; a longer key is replaced by "
        "the stream id the message names (else the key), cut to 128 characters and '...'",
        "pattern": ".*",
        "maxLength": ANSWER_KEY_MAX_BYTES,
    },
    "snapshots": {
        "type": "string",
        "description": "a stream id (its snapshot), or #checkpoint/<partition>",
    },
}
"""Each channel's record key."""
for _part in (*HEADERS.values(), *KEYS.values()):
    no_final_line_feed(_part)  # as every schema of the contract (``messages.schemas``)


_IN_THE_BODY = "$message.payload#/correlation_id"
_CORRELATION = {
    # a command's header is not read; a result's is absent when the id is null
    channel: CorrelationId(location=where, description=description)
    for channel, where, description in [
        ("commands", _IN_THE_BODY, "the sender's correlation id (ce_correlationid is not read)"),
        ("service-commands", _IN_THE_BODY, "the correlation id of the command the step comes from"),
        ("command-results", _IN_THE_BODY, "the command's correlation id as sent (null if none)"),
        (
            "events",
            "$message.header#/ce_correlationid",
            "the command's correlation id, or its command id when it had none",
        ),
    ]
}
"""Where each channel's records carry the correlation id (the snapshots carry none)."""


class _Document(AsyncAPI):
    """FastStream's document, with what its generator leaves out of each message: the
    correlation id where this service carries it (``_CORRELATION``; FastStream names its own
    ``correlation_id`` header, which no record here has), the headers, the Kafka key,
    ``type`` required in every command and event schema, every integer's ``format: int64``,
    no field required that a stored older version of an event lacks, and only keywords a
    strict validator compiles (``messages.schemas.standard_keywords``)."""

    def add_broker(self, broker: Any, /) -> _Document:
        """Its documentation broker only (``documentation_broker``, given first): the app
        adds its own (``AsgiFastStream``), whose servers are this deployment's brokers, to a
        document served to anyone (``/docs/asyncapi``); the channels are all declared on the
        documentation broker."""
        if not self.brokers:
            self.brokers.append(broker)
        return self

    def to_specification(self) -> Specification:
        document = super().to_specification()
        components = getattr(document, "components", None)
        for name, message in (getattr(components, "messages", None) or {}).items():
            channel = name.split(":")[0]
            message.correlationId = _CORRELATION.get(channel)
            message.headers = HEADERS[channel]
            message.bindings = {"kafka": {"key": KEYS[channel], "bindingVersion": "0.4.0"}}
        for schema in (getattr(components, "schemas", None) or {}).values():
            if isinstance(schema, dict):
                require_the_type(schema)
                int64_integers(schema)
                stored_versions_valid(schema)
                standard_keywords(schema)
                no_final_line_feed(schema)
        schemas = getattr(components, "schemas", None) or {}
        required_tags(schemas, lambda ref: schemas[ref.rsplit("/", 1)[1]])
        return document


def specification(broker: KafkaBroker) -> AsyncAPI:
    return _Document(
        broker,
        title=TITLE,
        version=version("blackjack-server"),
        description=DESCRIPTION,
    )


def asyncapi_document(
    topics: Topics | None = None, bootstrap: str = DEFAULT_BOOTSTRAP
) -> dict[str, Any]:
    """The AsyncAPI document of the channels (the committed one uses the defaults)."""
    broker = documentation_broker(topics or Topics(), bootstrap)
    document: dict[str, Any] = specification(broker).to_specification().to_jsonable()
    return document


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def write(path: Path) -> None:
    path.write_text(render(asyncapi_document()))


def drifted(path: Path) -> bool:
    return not path.is_file() or path.read_text() != render(asyncapi_document())
