"""Envelopes: what travels on the topics around a command, an event, or a command's result."""

from __future__ import annotations

import functools
import re
from datetime import datetime
from typing import Annotated, Literal, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from blackjack.domain.commands import TableCommand
from blackjack.domain.events import TableEvent
from blackjack.domain.rejections import Rejection
from blackjack.domain.wallet import (
    MAX_STREAM_ID,
    STREAM_ID_PATTERN,
    AnyWalletCommand,
    AnyWalletEvent,
)

Id = Field(min_length=1, max_length=MAX_STREAM_ID, pattern=STREAM_ID_PATTERN)
RFC_3339_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)
"""RFC 3339's date-time, as the schema's ``pattern`` too: validators' ``format: date-time``
differ (Ajv's ajv-formats takes a space for the T and offsets like +0000 or +01, which
``sent_at`` refuses; jsonschema checks no format unless told), a pattern is the same in
every one (an integrator review, Node.js)."""
RFC_3339 = re.compile(RFC_3339_PATTERN)

StreamCommand = Annotated[TableCommand | AnyWalletCommand, Field(discriminator="type")]
"""A command for a table stream or for a player's wallet stream (``wallet:<player id>``)."""

StreamEvent = Annotated[TableEvent | AnyWalletEvent, Field(discriminator="type")]


CORRELATION_ID_MAX_CHARS = 1024
"""The longest correlation id a command may carry (copied onto its events and result)."""


UNPARSED_ID = re.compile(r"unparsed-[0-9]+-[0-9]+")
"""The id an answer gives a message that names no valid one of its own,
``unparsed-<partition>-<offset>``: its sender finds its answer by it. A command may not take
one (the handler refuses it ``malformed``, answered under its own offset's; a client refuses
to send it, as its answer would never come under its id): accepted under it, it put a second
answer under the id of the unreadable record at that offset, whose sender read "accepted"."""

UNPARSED_ID_REFUSAL = (
    "command ids unparsed-<partition>-<offset> name the answers to unreadable records"
)


def unparsed_id(command_id: str) -> bool:
    """Whether ``command_id`` is of the form no command may take (``UNPARSED_ID``)."""
    return UNPARSED_ID.fullmatch(command_id) is not None


class CommandEnvelope(BaseModel):
    """A command for one stream (a table; a single-player table is the player's own)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    command_id: str = Id
    stream_id: str = Id
    # bounded: every event and result of the command carries it, in its body and a header
    correlation_id: str | None = Field(
        None,
        max_length=CORRELATION_ID_MAX_CHARS,
        description="the sender's id that ties this command to others (a session, a request). "
        "Only this field is read: a ce_correlationid header on a command is not. Its events "
        "carry it (the command id when it has none); its result carries it as sent",
    )
    sent_at: AwareDatetime | None = Field(
        None,
        description="when the sender issued it: RFC 3339, with its offset. A copy sent again "
        "carries the first one's. For the platform's money commands (WalletDeposit, "
        "WalletWithdraw, Deposit, Withdraw) it tells a late copy: one issued longer ago than "
        "the retention (7 days) is refused transfer_expired, and one more than 5 minutes "
        "ahead of the service's clock malformed; without it the command counts as issued when "
        "it arrived (a copy sent later than the retention after that is not told from a new "
        "command). A wallet's BuyIn is refused transfer_expired alike, but one more than 5 "
        "minutes ahead (a player's device clock) counts as issued when it arrived, never "
        "malformed. Informational for the other commands",
        json_schema_extra={"pattern": RFC_3339_PATTERN},
    )
    command: StreamCommand

    @field_validator("sent_at", mode="before")
    @classmethod
    def _a_date_time_text(cls, value: object) -> object:
        """The schema's RFC 3339 date-time, not pydantic's lax readings (a number, or digits,
        as Unix time; a time without seconds or with a space)."""
        if isinstance(value, str) and not RFC_3339.fullmatch(value):
            raise ValueError("an RFC 3339 date-time, such as 2026-05-01T12:00:00Z")
        if isinstance(value, int | float):
            raise ValueError("an RFC 3339 date-time text, not a number")
        return value


@functools.cache  # a model's fields never change: looked up once per model, not per event
def type_name(kind: type[BaseModel]) -> str:
    """The name a command or event model goes by on the wire: its ``type`` field's one value."""
    return str(kind.model_fields["type"].default)


class EventMeta(BaseModel):
    """Everything about an event but the event itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    event_id: str
    type: str
    schema_version: int
    stream_id: str
    sequence: int = Field(ge=1, description="1, 2, 3... within the stream, without gaps")
    occurred_at: datetime
    causation_id: str | None = Field(None, description="the command that caused the event")
    correlation_id: str | None = Field(
        None, description="the command's correlation_id, or its command id when it had none"
    )


def check_names_its_event(meta: EventMeta, event: BaseModel) -> None:
    """An envelope's ``type`` and ``schema_version`` repeat its event's (for routing without
    reading the body): a reader acting on one and recording the other must never see them
    differ."""
    named = (meta.type, meta.schema_version)
    carried = (getattr(event, "type", None), getattr(event, "version", None))
    if named != carried:
        raise ValueError(
            f"the envelope names {named[0]} v{named[1]}, its event is {carried[0]} v{carried[1]}"
        )


class EventEnvelope(EventMeta):
    """An event in the clear, as the decider and replay see it (shoe order included)."""

    data: StreamEvent

    @model_validator(mode="after")
    def _names_its_event(self) -> Self:
        check_names_its_event(self, self.data)
        return self


class CommandResult(BaseModel):
    """The answer to one command, on ``blackjack.command-results``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    command_id: str
    stream_id: str
    correlation_id: str | None = Field(
        None,
        description="the command's correlation_id as sent: null when it had none (its events "
        "then carry the command id). Match a result to its command by command_id",
    )
    status: Literal["accepted", "rejected"]
    rejection: Rejection | None = None
    first_sequence: int | None = Field(
        None,
        description="sequence of its first event, if any. A refusal the stream records (a "
        "platform money command's MoneyCommandRefused) has one too: status, not this, says "
        "whether the command was accepted",
    )
    last_sequence: int | None = None
    handled_at: datetime
    player_id: str | None = Field(
        None,
        description="the player who sent the command; set when it counts as their presence "
        "(not for the service's own commands), so a restarted handler knows when each "
        "player was last seen",
    )
