"""What a handler holds in memory for the partitions it owns: the state of each stream, its
last sequence number and the results of its last commands (the idempotency window).

A signed money step moves money, so a copy of its record must never be applied again, however
late it comes. The deciders refuse such copies by what they carry: a table remembers the last
buy-in number of each wallet, a wallet its pending buy-ins (a confirm or refund) and the last
table event of each table it received a cash-out from. Steps from older handlers carried less:
a buy-in's deposit before deposits named their transfer, a cash-out before cash-outs named
their table event. Only those are told from their copies by command id; their ids are kept
without a window (``Stream.signed``), and no new step adds one.
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import ValidationError

from blackjack.command_handler.snapshot_books import SnapshotMarks, SnapshotSizes
from blackjack.domain import events as ev
from blackjack.domain import platform_money
from blackjack.domain.decisions.clock import restarts_clock, resumption
from blackjack.domain.errors import CorruptLog
from blackjack.domain.evolve import evolve
from blackjack.domain.rejections import RejectionCode
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.domain.wallet import (
    INITIAL_WALLET,
    CashOut,
    CashOutReceived,
    WalletEvent,
    WalletState,
    evolve_wallet,
    is_wallet_stream,
)
from blackjack.messages.envelope import CommandResult, EventEnvelope

StreamState = TableState | WalletState


def kept_by_id(command: object) -> bool:
    """A signed step whose copies only its command id tells apart: a cash-out that names no
    table event (sent by a handler from before ``CashOut.table_sequence``)."""
    return isinstance(command, CashOut) and command.table_sequence is None


def changed_nothing(answer: CommandResult | dict[str, Any]) -> bool:
    """An answer that accepted a command which wrote no event: a ``Reconnect`` from a player
    who is connected (the heartbeat ``blackjack play`` and platforms send), say. Told from the
    answer alone, so a rebuild from the results topic sorts it as the live handler did."""
    if isinstance(answer, dict):
        return answer.get("status") == "accepted" and answer.get("first_sequence") is None
    return answer.status == "accepted" and answer.first_sequence is None


ANSWER_BYTES_KEPT = 1024 * 1024
"""How many bytes of answers (as ``answer_bytes`` counts them) each kind of a window keeps
at most, and a partition's stray answers: its oldest let go beyond, as beyond its count. An
answer keeps its command's correlation id, up to 1,024 characters of any script, each
written as two six-character escapes in JSON: a stranger's 1,000 refused commands with such
ids sealed a table's snapshot at 5.6 MB, over the snapshots topic's 4 MiB, and (before
``Checkpointing._over_the_limit``) stopped its partition for good; held in memory, about 4
KB an answer (4 bytes a character). Answers as the service's clients send them count about
370 bytes: 1,000 are 0.36 MiB, so the bound only ever binds on ids hundreds of characters
long."""

ANSWER_BASE_BYTES = 300
"""What ``answer_bytes`` counts for the rest of an answer (its stream, status, sequences,
time, player, a refusal's code and message): about what its JSON takes."""


def answer_bytes(document: dict[str, Any]) -> int:
    """An answer's bytes as a window counts them: ``ANSWER_BASE_BYTES`` and its command id
    and correlation id, the texts its client chose, as JSON writes them. Only those, and the
    correlation id as the events carry it (the command id where none was sent): every way a
    window is rebuilt (a snapshot, the results topic, the events alone, an answer stored by
    a release before ``player_id``) gives the same count, so the same answers are let go."""
    command_id = document.get("command_id")
    command_id = command_id if isinstance(command_id, str) else ""
    correlation = document.get("correlation_id")
    correlation = correlation if isinstance(correlation, str) and correlation else command_id
    return ANSWER_BASE_BYTES + _json_bytes(command_id) + _json_bytes(correlation)


def _json_bytes(text: str) -> int:
    """About what JSON takes for ``text``: a character outside ASCII a six-character escape
    (two of them outside the BMP)."""
    if text.isascii():
        return len(text)
    return 3 * len(text.encode("utf-16-le"))


def stored_command_id(document: dict[str, Any]) -> str:
    """The command id of an answer as a snapshot stored it; ``ValueError`` without one."""
    command_id = document.get("command_id")
    if not isinstance(command_id, str):
        raise ValueError("a stored answer without its command id")
    return command_id


class _Kept:
    """Answers oldest first, under their keys, with the bytes of each (``answer_bytes``)."""

    def __init__(self) -> None:
        self.answers: OrderedDict[Any, CommandResult | dict[str, Any]] = OrderedDict()
        self._sizes: dict[Any, int] = {}
        self._total = 0

    def put(self, key: Any, document: dict[str, Any]) -> bool:
        """``document`` as the newest under ``key``; whether the key is new."""
        new = self.drop(key) is None
        size = answer_bytes(document)
        self.answers[key] = document
        self._sizes[key] = size
        self._total += size
        return new

    def drop(self, key: Any) -> CommandResult | dict[str, Any] | None:
        answer = self.answers.pop(key, None)
        self._total -= self._sizes.pop(key, 0)
        return answer

    def let_go(self, count: int) -> list[Any]:
        """The oldest let go until at most ``count`` answers and ``ANSWER_BYTES_KEPT`` bytes
        are kept (the newest always is): their keys."""
        gone = []
        while len(self.answers) > count or (
            self._total > ANSWER_BYTES_KEPT and len(self.answers) > 1
        ):
            key = next(iter(self.answers))
            self.drop(key)
            gone.append(key)
        return gone


class AnswerWindow:
    """A stream's remembered answers (command id -> result), oldest first: the idempotency
    window. Answers read back from a snapshot stay the JSON documents they were stored as
    until one is asked for again (a resent command): a table thawed or rebuilt with a full
    window of 1,000 answers spent about 70 % of its 9 ms decoding them into results it
    would almost never read.

    Answers that changed nothing (``changed_nothing``) are kept apart, ``window`` of them:
    a heartbeat every 10 s from each player with a bet out took a place in the window each
    and let go of the answers to bets and moves a platform may still resend (a command the
    stream then decided again). Refusals are kept apart too, ``window`` of them: anyone at a
    shared table, seated or not, could send 1,000 commands refused in about a second and push
    out the answer to another player's bet, whose resend within the same betting time then
    bet again. Each kind lets go of its own oldest only, beyond ``window`` answers or
    ``ANSWER_BYTES_KEPT`` bytes."""

    def __init__(self) -> None:
        self._answers = _Kept()
        self._refusals = _Kept()
        self._no_ops = _Kept()
        self._digests: dict[str, str] = {}
        """The digest of the command each answer answers, where known (``command_digest``:
        not for answers older than it, nor the service's signed steps): a copy is the same
        command, another command under the id is refused."""

    def _kinds(self) -> tuple[_Kept, ...]:
        """Each kind's answers, in the order a snapshot stores them: the refusals before the
        answers that wrote events, since a release before this one reads them all into one
        window, oldest first, and lets its oldest go (after them, the refusals would have
        pushed every one of those out at its next answer)."""
        return self._refusals, self._answers, self._no_ops

    def _kept(self, answer: CommandResult | dict[str, Any]) -> _Kept:
        """Where an answer is kept, told from the answer alone (so a rebuild from the results
        topic sorts it as the live handler did)."""
        if changed_nothing(answer):
            return self._no_ops
        status = answer.get("status") if isinstance(answer, dict) else answer.status
        return self._refusals if status == "rejected" else self._answers

    def get(self, command_id: str) -> CommandResult | None:
        kept = next((k.answers for k in self._kinds() if command_id in k.answers), None)
        answer = None if kept is None else kept.get(command_id)
        if isinstance(answer, dict):
            try:
                answer = CommandResult.model_validate(answer)
            except ValidationError as error:
                # Sealed by a handler, so never a client's doing: the partition fails and is
                # rebuilt (read from the results topic) rather than decide the command again.
                raise CorruptLog(
                    f"the remembered answer to command {command_id} cannot be read: {error}"
                ) from error
            assert kept is not None
            kept[command_id] = answer  # in its place: an existing key keeps its order
        return answer

    def remember(self, result: CommandResult, window: int, digest: str | None = None) -> None:
        """``result`` as the newest answer, to a command of that ``digest`` if known; the
        oldest of its kind let go beyond ``window`` (or ``ANSWER_BYTES_KEPT``).
        Kept as the document a snapshot stores (read back as a result when a resend asks for
        it): a ``CommandResult`` took about 1.2 KB and its document 0.44 KB, and a window is
        1,000 of them a table (a soak measured 1.6 KB an answer, 1.56 MiB a table in use),
        which also spares a checkpoint dumping every answer of every table it snapshots
        again."""
        kept = self._kept(result)
        kept.put(result.command_id, result.model_dump(mode="json"))
        self._digest(result.command_id, digest)
        self._forget(kept.let_go(window))

    def add_stored(self, document: dict[str, Any], digest: str | None = None) -> None:
        """An answer as a snapshot stored it (``CommandResult`` as JSON), as the newest."""
        command_id = stored_command_id(document)
        self._kept(document).put(command_id, document)
        self._digest(command_id, digest)

    def held_to_bytes(self) -> None:
        """Each kind's oldest let go beyond ``ANSWER_BYTES_KEPT``, once a snapshot's answers
        are read: one a release before the bound stored keeps more, and a rebuild from the
        log (its checkpoint not used) would not keep them."""
        for kind in self._kinds():
            self._forget(kind.let_go(sys.maxsize))

    def digest(self, command_id: str) -> str | None:
        """The digest of the command the answer under ``command_id`` answers, if known."""
        return self._digests.get(command_id)

    def stored_digests(self) -> list[str | None]:
        """Each answer's command digest, in the order of ``stored``."""
        return [self._digests.get(command_id) for command_id in self]

    def _digest(self, command_id: str, digest: str | None) -> None:
        if digest is None:
            self._digests.pop(command_id, None)
        else:
            self._digests[command_id] = digest

    def _forget(self, command_ids: list[str]) -> None:
        for command_id in command_ids:
            self._digests.pop(command_id, None)

    def stored(self) -> list[dict[str, Any]]:
        """Every answer as a snapshot stores it, oldest first by kind: the refusals, those
        that wrote events, then those that changed nothing."""
        return [_stored(answer) for kind in self._kinds() for answer in kind.answers.values()]

    def answers(self) -> Iterator[CommandResult]:
        """Every answer, oldest first by kind (as ``stored``)."""
        for command_id in self:
            answer = self.get(command_id)
            assert answer is not None
            yield answer

    def __contains__(self, command_id: object) -> bool:
        return any(command_id in kind.answers for kind in self._kinds())

    def __iter__(self) -> Iterator[str]:
        return iter([command_id for kind in self._kinds() for command_id in kind.answers])

    def __len__(self) -> int:
        return sum(len(kind.answers) for kind in self._kinds())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AnswerWindow):
            return NotImplemented
        return self.stored() == other.stored()  # in order, each naming its command

    __hash__ = None  # type: ignore[assignment]  # mutable


STRAYS_PREFIX = "#strays/"
"""The key of a partition's stray answers on the snapshots topic (``strays_key``): no stream id
can have it (``#``), and it is not a checkpoint's, so every release counts it among the
partition's snapshots (a release before this one reads it as an idle table's)."""


def strays_key(partition: int) -> str:
    return f"{STRAYS_PREFIX}{partition}"


class StrayAnswers:
    """The remembered answers to commands at streams that do not exist (a ``SitDown`` at a
    table no one opened, refused ``table_not_open``), for the whole partition: ``window`` of
    them (``BLACKJACK_DEDUP_WINDOW``), the oldest let go. Keyed by stream and command id, since
    two such streams may each see a command id of their own.

    Each such command made a stream of its own, kept for good with its window: 1.8 KB in memory,
    a 1 KB sealed snapshot on the compacted topic and a decode in every rebuild of the
    partition, so a client sending a million of them cost a gigabyte of snapshots and more
    than a minute added to each takeover. The stream that one of them names is made (opened, a
    wallet paid into) takes its answers still here into its own window (``take``)."""

    def __init__(self) -> None:
        self._kept = _Kept()
        self._answers = self._kept.answers
        self._per_stream: dict[str, int] = {}

    def get(self, stream_id: str, command_id: str) -> CommandResult | None:
        key = (stream_id, command_id)
        answer = self._answers.get(key)
        if isinstance(answer, dict):
            try:
                answer = CommandResult.model_validate(answer)
            except ValidationError as error:  # sealed by a handler: as ``AnswerWindow.get``
                raise CorruptLog(
                    f"the remembered answer to command {command_id} cannot be read: {error}"
                ) from error
            self._answers[key] = answer
        return answer

    def remember(self, result: CommandResult, window: int) -> None:
        """``result`` as the newest answer; the oldest let go beyond ``window`` (or
        ``ANSWER_BYTES_KEPT``)."""
        self.add_stored(result.model_dump(mode="json"))
        for stream_id, _ in self._kept.let_go(window):
            self._count(stream_id, -1)

    def add_stored(self, document: dict[str, Any]) -> None:
        """An answer as a snapshot stored it (``CommandResult`` as JSON), as the newest."""
        stream_id, command_id = document.get("stream_id"), document.get("command_id")
        if not isinstance(stream_id, str) or not isinstance(command_id, str):
            raise ValueError("a stored stray answer without its stream or command id")
        if self._kept.put((stream_id, command_id), document):
            self._count(stream_id, 1)

    def held_to_bytes(self) -> None:
        """The oldest let go beyond ``ANSWER_BYTES_KEPT`` (``AnswerWindow.held_to_bytes``)."""
        for stream_id, _ in self._kept.let_go(sys.maxsize):
            self._count(stream_id, -1)

    def take(self, stream_id: str) -> list[dict[str, Any]]:
        """The answers kept for ``stream_id``, oldest first, let go of here: the stream now
        exists and keeps them in its own window."""
        if not self._per_stream.pop(stream_id, 0):
            return []
        keys = [key for key in self._answers if key[0] == stream_id]
        taken = [self._kept.drop(key) for key in keys]
        return [_stored(answer) for answer in taken if answer is not None]

    def stored(self) -> list[dict[str, Any]]:
        """Every answer as a snapshot stores it, oldest first."""
        return [_stored(answer) for answer in self._answers.values()]

    def _count(self, stream_id: str, change: int) -> None:
        left = self._per_stream.get(stream_id, 0) + change
        if left:
            self._per_stream[stream_id] = left
        else:
            self._per_stream.pop(stream_id, None)

    def __contains__(self, key: object) -> bool:
        return key in self._answers

    def __len__(self) -> int:
        return len(self._answers)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StrayAnswers):
            return NotImplemented
        return self.stored() == other.stored()

    __hash__ = None  # type: ignore[assignment]  # mutable


def _stored(answer: CommandResult | dict[str, Any]) -> dict[str, Any]:
    return answer if isinstance(answer, dict) else answer.model_dump(mode="json")


def _round_in_play(state: StreamState) -> bool:
    return isinstance(state, TableState) and state.round_in_play


def initial_state(stream_id: str) -> StreamState:
    return INITIAL_WALLET if is_wallet_stream(stream_id) else INITIAL_STATE


@dataclass
class Stream:
    stream_id: str
    state: StreamState
    sequence: int = 0
    results: AnswerWindow = field(default_factory=AnswerWindow)
    last_seen: dict[str, datetime] = field(default_factory=dict)
    """When each player last sent a command: carried in the snapshot and brought up to date
    from the results after it (``CommandResult.player_id``), so the presence clock of a
    disconnection-policy table survives a restart or a takeover."""
    signed: set[str] = field(default_factory=set)
    """Ids of the signed steps from older handlers this stream accepted (see the module's
    doc), with no window: carried in the snapshot and rebuilt from the events' causation
    ids."""
    signed_incomplete: bool = False
    """Opened from a snapshot written before ``signed`` was kept: the rebuild completes it
    from the stream's events before the checkpoint."""
    money: dict[str, datetime] = field(default_factory=dict)
    """The platform money commands this stream accepted in the last retention
    (``domain.platform_money``): command id -> the time of its event, oldest first. Carried in
    the snapshot and brought up to date by every event after it (``note_money``)."""
    money_refused: dict[str, RejectionCode] = field(default_factory=dict)
    """Those of ``money`` the stream refused (a ``WalletCommandRefused`` or
    ``MoneyCommandRefused``), with the code: a late copy gets that refusal again."""
    money_players: dict[str, str] = field(default_factory=dict)
    """At a table several players share, whose each of ``money`` is (its event's player): a
    player's own ``Withdraw``s take their share of the ids at most
    (``platform_money.player_share``). Carried in the snapshot (one from a release before
    this one names none: counted from the next event on)."""
    money_terms: dict[str, str] = field(default_factory=dict)
    """The terms of each of ``money`` (``platform_money.money_terms``, from its event): another
    command sent under a kept id is refused, not answered as its copy. Carried in the snapshot
    (one from a release before this one has none: its ids are told by the id alone)."""
    money_incomplete: bool = False
    """Opened from a snapshot written before ``money`` was kept: the rebuild completes it from
    the stream's events before the checkpoint, as ``signed``."""
    touched_at: datetime | None = None
    """When the stream's last event was written: how long a round has waited on its players
    (``CloseInterruptedRound``). Carried in the snapshot and brought up to date by the events
    after it."""
    active_at: datetime | None = None
    """When the stream's last event of play was written: its last event but a refusal of a
    platform money command (``MoneyCommandRefused``, ``WalletCommandRefused``) and a
    ``RoundResumed`` marker (``platform_money.counts_as_activity``). An interrupted round's
    wait counts from it (``CloseInterruptedRound``): a platform whose commands are refused,
    each under a new id, does not keep the round from ever becoming closable. Carried in the
    snapshot (one from before it counts from ``touched_at``) and brought up to date by the
    events after it."""
    used_at: float = field(default_factory=time.monotonic, compare=False)
    """``time.monotonic()`` of the last command or replayed record for it (not carried):
    how long it has been idle, for ``PartitionStore.freeze_idle``."""

    def fold(self, envelope: EventEnvelope) -> None:
        """Apply one of the stream's events; its sequence must follow the last one."""
        if envelope.sequence != self.sequence + 1:
            raise CorruptLog(f"{self.stream_id}: event {envelope.sequence} follows {self.sequence}")
        event = envelope.data
        if isinstance(self.state, WalletState):
            if not isinstance(event, WalletEvent):
                raise CorruptLog(f"{self.stream_id}: {envelope.type} in a wallet stream")
            self.state = evolve_wallet(self.state, event)
        else:
            if isinstance(event, WalletEvent):
                raise CorruptLog(f"{self.stream_id}: {envelope.type} in a table stream")
            self.state = evolve(self.state, event)
        self.sequence = envelope.sequence
        self.touched_at = envelope.occurred_at
        if platform_money.counts_as_activity(event):
            self.active_at = envelope.occurred_at

    def saw(self, player_id: str, when: datetime) -> None:
        """``player_id`` sent a command at ``when`` (live, or read back on replay). Only seated
        players are remembered, so commands naming strangers cannot grow the stream's memory
        or its snapshot; the latest time wins, as two handlers' clocks may disagree after a
        takeover."""
        state = self.state
        if not isinstance(state, TableState) or player_id not in state.players:
            self.last_seen.pop(player_id, None)
            return
        seen = self.last_seen.get(player_id)
        if seen is None or when > seen:
            self.last_seen[player_id] = when

    def note_signed(self, envelope: EventEnvelope) -> None:
        """On replay, after folding ``envelope``: remember its cause if the event is one only a
        signed step from an older handler causes, whose copies its content cannot refuse: a
        version 1 ``CashOutReceived`` (no table event named), or a deposit at a multi-seat
        table without a transfer (a buy-in's deposit from before deposits named their
        transfer; the platform's own deposit is refused at such a table)."""
        event = envelope.data
        state = self.state
        legacy = (isinstance(event, CashOutReceived) and event.table_sequence is None) or (
            isinstance(event, ev.FundsDeposited)
            and event.transfer is None
            and isinstance(state, TableState)
            and state.rules.funded_by_wallet
        )
        if envelope.causation_id and legacy:
            self.signed.add(envelope.causation_id)

    def note_money(self, envelope: EventEnvelope, retention: timedelta) -> None:
        """After one of the stream's events (live or replayed, the same rule): remember its
        cause if the event is a platform money command's (accepted, or refused with its
        code), and let go of the ids accepted
        longer than the retention before it (``domain.platform_money``)."""
        at, cause, event = envelope.occurred_at, envelope.causation_id, envelope.data
        money, refused, players = self.money, self.money_refused, self.money_players
        refusal = isinstance(event, platform_money.RefusalEvent)
        if cause and (refusal or platform_money.is_platform_money_event(event, self.state)):
            code = event.reason_code if isinstance(event, platform_money.RefusalEvent) else None
            platform_money.remember(
                money,
                cause,
                at,
                retention,
                refused,
                code,
                players=players,
                player=self._whose(event),
                terms=self.money_terms,
                term=platform_money.event_terms(event, self.state),
            )
        else:
            platform_money.forget_before(money, at, retention, refused, players, self.money_terms)

    def _whose(self, event: object) -> str | None:
        """The player a money event's id is kept for (``money_players``): at a table several
        players share only, where it counts."""
        state = self.state
        if isinstance(state, TableState) and state.rules.funded_by_wallet:
            player = getattr(event, "player_id", None)
            return player if isinstance(player, str) else None
        return None

    def remember(self, result: CommandResult, window: int, digest: str | None = None) -> None:
        self.results.remember(result, window, digest)


class StreamCodec(Protocol):
    """How a stream is written as a sealed snapshot and read back (``snapshots``), and a
    partition's stray answers (``StrayAnswers``) under their key."""

    def encode(self, stream: Stream) -> bytes: ...

    def decode(self, raw: bytes) -> Stream: ...

    def encode_answers(self, key: str, answers: list[dict[str, Any]]) -> bytes: ...

    def decode_answers(self, key: str, raw: bytes) -> list[dict[str, Any]]: ...


@dataclass
class PartitionStore:
    """The streams of one partition, and how far the handler has read and written it.

    A handler keeps every stream its partitions ever had: most are idle tables and wallets,
    whose memory is mostly their answers (the idempotency window, about 0.7 KB each in
    memory, 1.6 KB before ``AnswerWindow`` kept them as documents). A stream idle for a
    while, that no timer can wake, is kept *cold*: as the sealed snapshot of its state
    (compressed), and thawed by the next command for it (``get``). A soak test measured
    100 KiB per table kept hot (65 answers), growing without end, and a clock that scanned
    them all four times a second; a later one 1.56 MiB hot and 52 KiB cold with a full
    window of 1,000 (663 KiB and 49 KiB now: docs/operations.md, "What grows",
    ``python -m tests.unit.measure_table_memory``), which a live handler now keeps on local
    disk (``SpilledStreams``)."""

    partition: int
    streams: dict[str, Stream] = field(default_factory=dict)
    """The hot streams."""
    cold: MutableMapping[str, bytes] = field(default_factory=dict)
    """The cold streams, each as its sealed snapshot (a live handler's on disk:
    ``SpilledStreams``)."""
    codec: StreamCodec | None = None
    """Freezes and thaws streams; without one, every stream stays hot."""
    dirty: set[str] = field(default_factory=set)
    """Streams changed since the last checkpoint; the next one snapshots them."""
    since_checkpoint: int = 0
    events_next: int = 0
    """An offset of the events partition that every folded event lies below."""
    results_next: int = 0
    answered_to: int = 0
    """The commands partition's offset below which the log shows every command answered (the
    offsets results and checkpoints carry): the group's committed offset is never behind it,
    unless another group answers this partition's commands."""
    snapshot_bytes: SnapshotSizes = field(default_factory=SnapshotSizes)
    """The size of each stream's newest snapshot, sealed (its topic has a size limit)."""
    snapshot_marks: SnapshotMarks = field(default_factory=SnapshotMarks)
    """Each stream's newest snapshot record's share of the digest a checkpoint is signed with
    (``CheckpointSigner.element``), and their sum."""
    checkpoint_due: bool = False
    """Rebuilt without a checkpoint this release signed: the next one is written at once, so
    the next takeover need not trust an unsigned one or read the whole log again."""
    strays: StrayAnswers = field(default_factory=StrayAnswers)
    """The answers to commands at streams that do not exist: no stream is made for them."""
    money_retention: timedelta = platform_money.DEFAULT_RETENTION
    """How long the platform may retry a money command (``BLACKJACK_MONEY_RETENTION_S``): its
    streams keep the ids of those they accepted that long (``Stream.money``)."""
    resuming: set[str] = field(default_factory=set, compare=False)
    """The table streams rebuilt from the log (``replay.rebuild``: a takeover, a restart, a
    transaction that did not commit) that have written no event since: the first command to
    write events to one whose round is in play writes ``RoundResumed`` before them. Kept here,
    not in the snapshot: a rebuild finds them again in the log (no marker since), so a second
    crash or an aborted transaction before that command leaves one marker to write, never
    two."""

    def holds(self, stream_id: str) -> bool:
        """Whether the stream exists: it has written an event (or was held by a release that
        made a stream for every command), hot or cold."""
        return stream_id in self.streams or stream_id in self.cold

    def answered(
        self, stream_id: str, command_id: str
    ) -> tuple[Stream | None, CommandResult | None]:
        """The stream, if it exists (thawed and marked used, as ``get``), and the answer given
        to ``command_id`` at it, if one is remembered: the stream's own window, else, for a
        stream that does not exist, the partition's answers kept for it (``StrayAnswers``).
        The one place both are asked: a command (``Processor.handle``) and a copy of one the
        commands now refuse (``answers.handled_before``)."""
        if self.holds(stream_id):
            stream = self.get(stream_id)
            return stream, stream.results.get(command_id)
        return None, self.strays.get(stream_id, command_id)

    @property
    def strays_key(self) -> str:
        return strays_key(self.partition)

    def made(self, stream: Stream) -> None:
        """``stream``, which did not exist, wrote its first events: it is held from now on,
        with the answers the partition kept for it (``StrayAnswers``) as its oldest."""
        taken = self.strays.take(stream.stream_id)
        for document in taken:
            if document["command_id"] not in stream.results:
                stream.results.add_stored(document)
        if taken:
            self.dirty.add(self.strays_key)
        self.streams[stream.stream_id] = stream

    def remember_stray(self, result: CommandResult, window: int) -> None:
        """The answer to a command at a stream that does not exist, and wrote no event."""
        self.strays.remember(result, window)
        self.dirty.add(self.strays_key)

    def get(self, stream_id: str) -> Stream:
        """The stream, thawed if it was cold, new if it never had anything; marked used."""
        stream = self.streams.get(stream_id)
        if stream is None:
            raw = self.cold.get(stream_id)
            if raw is None:
                stream = Stream(stream_id, initial_state(stream_id))
            else:
                assert self.codec is not None
                # let go of once read: a snapshot that does not read stays the stream's
                stream = self.codec.decode(raw)
                del self.cold[stream_id]
            self.streams[stream_id] = stream
        stream.used_at = time.monotonic()
        return stream

    def mark_resuming(self) -> None:
        """Every table stream held now was rebuilt from the log: each with a round in play
        owes its ``RoundResumed`` (a cold one is told when it thaws, see ``resumed``)."""
        hot = (s.stream_id for s in self.streams.values() if _round_in_play(s.state))
        cold = (stream_id for stream_id in self.cold if not is_wallet_stream(stream_id))
        self.resuming = {*hot, *cold}

    def resumed(self, stream: Stream, now: datetime) -> ev.RoundResumed | None:
        """The marker ``stream``'s next events start with, written at ``now``, if it was
        rebuilt from the log and its round is still in play; taken (written with those events)
        by ``went_on``."""
        state = stream.state
        if stream.stream_id not in self.resuming or not isinstance(state, TableState):
            return None
        if not state.round_in_play:
            return None
        return resumption(state, now, stream.touched_at)

    def owes_restart(self, stream: Stream) -> bool:
        """Whether ``stream`` owes the marker that starts its round's clock again: the clock
        sends its ``ExpireTimers`` at once, which writes it (``Deciding._decide``)."""
        state = stream.state
        return (
            stream.stream_id in self.resuming
            and isinstance(state, TableState)
            and restarts_clock(state)
        )

    def went_on(self, stream: Stream) -> None:
        """``stream`` wrote events: it owes no marker any more (its round went on, or it had
        none in play)."""
        self.resuming.discard(stream.stream_id)

    def count(self) -> int:
        return len(self.streams) + len(self.cold)

    def close(self) -> None:
        """Let go of the cold streams' file now (``SpilledStreams``), not when collected:
        the store is no longer used."""
        close = getattr(self.cold, "close", None)
        if close is not None:
            close()

    def all_streams(self) -> Iterator[Stream]:
        """Every stream, the cold ones read from their snapshots (and left cold)."""
        yield from self.streams.values()
        if self.cold:
            assert self.codec is not None
            yield from (self.codec.decode(raw) for raw in self.cold.values())

    def sealed(self, stream_id: str) -> bytes:
        """The stream's sealed snapshot: a cold stream's is the one it is kept as; under
        ``strays_key``, the partition's stray answers."""
        raw = self.cold.get(stream_id)
        if raw is not None:
            return raw
        assert self.codec is not None
        if stream_id == self.strays_key:
            return self.codec.encode_answers(stream_id, self.strays.stored())
        return self.codec.encode(self.streams[stream_id])

    def idle(
        self, idle_s: float, may_come_due: Callable[[Stream], bool], now: float | None = None
    ) -> list[str]:
        """The hot streams unused for ``idle_s`` seconds that no timer can wake
        (``may_come_due`` false: the clock never looks at cold streams)."""
        now = time.monotonic() if now is None else now
        return [
            stream.stream_id
            for stream in self.streams.values()
            if now - stream.used_at >= idle_s and not may_come_due(stream)
        ]

    def freeze(
        self,
        stream_id: str,
        idle_s: float,
        may_come_due: Callable[[Stream], bool],
        now: float | None = None,
    ) -> bool:
        """Make the stream cold if it is still hot, idle and no timer can wake it."""
        stream = self.streams.get(stream_id)
        now = time.monotonic() if now is None else now
        if stream is None or now - stream.used_at < idle_s or may_come_due(stream):
            return False
        assert self.codec is not None
        self.cold[stream_id] = self.codec.encode(stream)
        del self.streams[stream_id]
        return True

    def freeze_idle(self, idle_s: float, may_come_due: Callable[[Stream], bool]) -> int:
        """Make cold every idle stream no timer can wake, at once; how many."""
        if self.codec is None:
            return 0
        return sum(self.freeze(s, idle_s, may_come_due) for s in self.idle(idle_s, may_come_due))
