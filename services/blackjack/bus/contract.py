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

from blackjack.bus.settings import DEFAULT_BOOTSTRAP
from blackjack.bus.topics import Topics
from blackjack.command_handler.snapshots import Checkpoint, SealedSnapshot
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from blackjack.messages.wire import WireEnvelope

TITLE = "Blackjack game server"
DESCRIPTION = """\
Casino platforms send commands for a stream (a table, or a player's wallet `wallet:<player>`)
to the commands topic and receive one result per command on the results topic. The command
handler consumes the commands (consumer group `blackjack-command-handler`, read_committed) and
writes, in one Kafka transaction per batch, the events, the result and the consumed offset.

Every record is keyed by its stream id; every record carries the CloudEvents Kafka binding
headers (binary mode): `ce_specversion`, `ce_id`, `ce_source`, `ce_type`, `ce_time`,
`ce_subject` (the stream id), and `ce_correlationid` / `ce_causationid` where they apply.
"""

COMMANDS = """\
Commands, keyed by stream id; JSON of `CommandEnvelope`. Platforms send every player and
platform command here; the transactional command handler consumes them (read_committed, in the
consumer group `blackjack-command-handler`). A command id is remembered per stream: a resend
gets the original result."""

SERVICE_COMMANDS = """\
What the service itself sends to the commands topic: its clock sends `ExpireTimers` and
`Disconnect`, and the steps of a buy-in (`Deposit` to the table, `ConfirmBuyIn` / `RefundBuyIn`
to the wallet) and `CashOut` are sent by the handler inside the transaction that causes them,
signed in the `bj_signature` header (`bj_transfer` names the buy-in). A platform never sends
these signed steps: unsigned, they are rejected."""

EVENTS = """\
Events, keyed by stream id; JSON of the event envelope (`sequence` 1, 2, 3... per stream,
`causation_id` = the command id). `ShoeShuffled` carries the shoe's commitment in clear and its
order sealed (AES-256-GCM); `ShoeRetired` reveals it. Never deleted: the source of truth."""

RESULTS = """\
One result per command (accepted, or rejected with a typed reason code and a message), keyed
by stream id, written in the same transaction as the command's events. A message that is not
a command envelope gets `malformed` (or `unknown_command`) with `command_id` taken from the
message, or `unparsed-<partition>-<offset>` when it has none."""

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
    broker = KafkaBroker(bootstrap)
    declare_channels(broker, topics)
    return broker


class _Document(AsyncAPI):
    """FastStream's document, with each message's correlation id where this service carries
    it: the CloudEvents ``ce_correlationid`` header (FastStream's generator names its own
    ``correlation_id`` header, which no record here has). Snapshots carry none."""

    def to_specification(self) -> Specification:
        document = super().to_specification()
        components = getattr(document, "components", None)
        for name, message in (getattr(components, "messages", None) or {}).items():
            message.correlationId = (
                None
                if name.startswith("snapshots:")
                else CorrelationId(
                    location="$message.header#/ce_correlationid",
                    description="the correlation id of the command the record comes from",
                )
            )
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
