"""What a replay hands out: per stream and per round, the lines told, the settlements derived
again, the shoes checked, the number of checks made and every ``Finding`` (a failed check)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from pydantic import BaseModel

from blackjack.command_handler.ids import event_id
from blackjack.domain import events as ev
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.messages.wire import WireEnvelope


@dataclass(frozen=True)
class Finding:
    stream_id: str
    sequence: int | None
    round: int | None
    message: str

    def __str__(self) -> str:
        where = self.stream_id
        if self.round is not None:
            where += f" round {self.round}"
        if self.sequence is not None:
            where += f" event {self.sequence}"
        return f"{where}: {self.message}"


@dataclass
class Line:
    sequence: int
    at: datetime
    text: str
    problems: list[str] = field(default_factory=list)


@dataclass
class Settlement:
    box: int
    hand: int
    player_id: str
    cards: tuple[str, ...]
    total: int
    stake: int
    recorded: tuple[str, int]
    derived: tuple[str, int]
    voided: bool = False
    """settled before the round was voided: the void took the payout back"""

    @property
    def ok(self) -> bool:
        return self.recorded == self.derived


@dataclass
class RoundReplay:
    stream_id: str
    round: int
    variant: str
    currency: str
    shoe: int | None = None
    status: str = "betting"
    lines: list[Line] = field(default_factory=list)
    settlements: list[Settlement] = field(default_factory=list)
    insurance: list[Settlement] = field(default_factory=list)
    dealer: tuple[str, ...] = ()
    balances: dict[str, list[int]] = field(default_factory=dict)
    """player -> [balance before the round's first wager, balance after its last money event]"""
    moved: dict[str, int] = field(default_factory=dict)
    """player -> money paid in (less taken out) at the table between that wager and the end"""
    results: list[ev.PlayerRoundResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    checks: int = 0
    paid: dict[str, int] = field(default_factory=dict)
    peeked: bool = False
    insurance_asked: bool = False
    """the round's insurance offer (or that none was due) has been checked"""


@dataclass
class ShoeCheck:
    shoe: int
    commitment: str
    source: str  # "revealed", "key", "revealed+key" or "sealed"
    verified: bool


@dataclass
class StreamReplay:
    stream_id: str
    rounds: dict[int, RoundReplay] = field(default_factory=dict)
    """every round replayed, or those its ``TableReplayer`` was told to keep and the last one"""
    rounds_replayed: int = 0
    shoes: dict[int, ShoeCheck] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    state: TableState = field(default_factory=INITIAL_STATE.copy)
    events: int = 0
    checks: int = 0
    stopped: str | None = None
    """why the fold stopped before the last event (a corrupt log, a shoe still sealed)"""
    opened_by_key: bool = False
    """the key opened a shoe of this stream sealed under a key id (``2.``)"""
    under_other_keys: dict[int, str] = field(default_factory=dict)
    """shoes sealed under a key id (``2.``) the key does not hold, read before it opened one
    of this stream's (those after are found as they are read) -> that key id: a finding where
    the key opens shoes of the log (``audit.shoes_under_keys_not_given``)"""
    last_at: datetime | None = None
    """when the last event read was written (``out_of_time``)"""


def misplaced_id(envelope: WireEnvelope) -> str | None:
    """An event's id is derived from its place, its stream and sequence (``ids.event_id``):
    one that is not was not written there by the handler (a copy of another event's id, or
    an event moved from its place), which nothing else in the log would tell."""
    derived = event_id(envelope.stream_id, envelope.sequence)
    if envelope.event_id == derived:
        return None
    return (
        f"event id {envelope.event_id} is not the id of {envelope.stream_id} event "
        f"{envelope.sequence} ({derived})"
    )


CLOCK_SKEW: Final = timedelta(seconds=60)
"""How far an event may be dated before the event before it in its stream: the handler that
takes a partition over may run a little behind the one before it (each reads its host's
clock); further is a clock that far wrong, or an event moved in time."""


def out_of_time(envelope: WireEnvelope, replay: StreamReplay) -> str | None:
    """Dated more than ``CLOCK_SKEW`` before the event read before it (each event is then
    compared with the one before it: one finding at each jump back, naming both times)."""
    before, replay.last_at = replay.last_at, envelope.occurred_at
    if before is None or envelope.occurred_at >= before - CLOCK_SKEW:
        return None
    return (
        f"written at {envelope.occurred_at.isoformat()}, {before - envelope.occurred_at} "
        f"before the event before it ({before.isoformat()}): a clock that far behind, or an "
        "event moved in time"
    )


def placement_problems(envelope: WireEnvelope, replay: StreamReplay) -> list[str]:
    """The two checks of where an event stands in its stream's log, a table's or a wallet's:
    its id against its place (``misplaced_id``), its time against the event before it
    (``out_of_time``)."""
    replay.checks += 2
    found = (misplaced_id(envelope), out_of_time(envelope, replay))
    return [problem for problem in found if problem is not None]


def newer_than_read(event: BaseModel) -> str | None:
    """Why an event of a version newer than this release's model cannot be checked: read as
    the model it knows, what the newer version means is not replayed, only guessed."""
    known = type(event).model_fields["version"].default
    version = getattr(event, "version", known)
    if isinstance(known, int) and isinstance(version, int) and version > known:
        return (
            f"{type(event).__name__} version {version} is newer than this release reads "
            f"(version {known}): audit it with the release that wrote it"
        )
    return None
