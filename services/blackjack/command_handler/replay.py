"""Rebuilding a partition's streams from Kafka: the newest checkpoint's snapshots, then the
events and the results written after it. The ids of older handlers' signed steps that a
stream keeps (``streams.kept_by_id``) come from the snapshots and the events' causation ids
(events are kept forever), never from the results, which expire.

Reads are ``read_committed`` and stop when the reader's *position* reaches the end offset
taken at the start (the last stable offset). Transaction markers occupy offsets too, so the
offset of the last record + 1 can stay below the end forever; the position does not.

The handler fences the partition's previous owner (by starting the partition's transactional
producer) before calling this, so nothing is in flight and the end offset is final.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Literal

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from pydantic import ValidationError

from blackjack.bus.header_names import header_name_not_utf8
from blackjack.bus.headers import (
    COMMAND_DIGEST_HEADER,
    COMMAND_OFFSET_HEADER,
    COMMANDS_TO_HEADER,
    offset_header,
)
from blackjack.bus.topics import Topics
from blackjack.command_handler.answers import DIGEST_CHARS, remembered
from blackjack.command_handler.clock import may_come_due
from blackjack.command_handler.snapshot_books import SnapshotMarks
from blackjack.command_handler.snapshots import (
    CHECKPOINT_PREFIX,
    Checkpoint,
    CheckpointSigner,
    CheckpointTrust,
    SealedElsewhere,
    SealedSnapshot,
    SnapshotCodec,
    SnapshotError,
    checkpoint_key,
    snapshots_digest,
)
from blackjack.command_handler.spill import SpilledStreams
from blackjack.command_handler.streams import PartitionStore, Stream
from blackjack.domain.platform_money import DEFAULT_RETENTION, RefusalEvent, kept_for
from blackjack.domain.rejections import Rejection
from blackjack.domain.state import TableState
from blackjack.domain.transfers import is_declines_stream
from blackjack.messages.envelope import CommandResult, EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import (
    decode,
    from_wire,
    not_the_service_s,
    written_as_the_service_s,
)


@dataclass(frozen=True)
class RebuildStats:
    partition: int
    checkpoint: bool
    snapshots: int
    events: int
    results: int
    seconds: float
    foreign: tuple[str, ...] = ()
    """records of its events and results the service did not write, stepped over
    (``topic@offset``: ``_answer``, ``not_the_service_s``)"""
    unreadable: tuple[str, ...] = ()
    """records of its snapshots, events or results aiokafka cannot read, stepped over
    (``topic@offset``)"""
    unopened: tuple[str, ...] = ()
    """snapshots that could not be opened, not used (``stream id: why``): their streams were
    made from the events"""
    distrusted: str | None = None
    """why the partition's checkpoint was not used, if it had one (``CheckpointTrust``,
    ``unreadable``, or ``missing``: snapshots without one): it was rebuilt from the start of
    its log instead"""
    unsigned: bool = False
    """rebuilt from an unsigned checkpoint (written by the release before), trusted"""
    older_key: bool = False
    """rebuilt from a checkpoint signed under a key rotation's older key, trusted"""
    resealed: int = 0
    """snapshots an older key sealed, sealed again under the current one (``reseal``)"""


def assign_reader(reader: AIOKafkaConsumer, topics: Topics, partitions: int) -> None:
    """Give the replay reader every partition it may read, paused. One fixed assignment:
    re-assigning per rebuild costs a metadata refresh (about half a second) each time."""
    tps = [
        TopicPartition(topic, p)
        for topic in (topics.snapshots, topics.events, topics.results)
        for p in range(partitions)
    ]
    reader.assign(tps)
    reader.pause(*tps)


async def read_to_end(
    reader: AIOKafkaConsumer,
    tp: TopicPartition,
    start: int,
    end: int,
    deadline: float,
    *,
    skipped: list[int] | None = None,
) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
    """Every committed record of ``tp`` from ``start`` up to ``end`` (an end offset); the
    reader holds ``tp`` in its assignment (``assign_reader``). A record with a header name
    that is not UTF-8 (``bus.header_names``: no handler writes one) is stepped over, its
    offset added to ``skipped``: one on the events or snapshots topic failed every rebuild of
    its partition, for good, and the records after it in its producer's batch were stepped
    over with it."""
    if start >= end:
        return
    reader.pause(*reader.assignment())
    reader.resume(tp)
    reader.seek(tp, start)
    try:
        while await reader.position(tp) < end:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"reading {tp.topic}[{tp.partition}] did not reach offset {end}")
            batch = await reader.getmany(tp, timeout_ms=int(min(remaining, 1.0) * 1000))
            for record in batch.get(tp, ()):
                if record.offset >= end:
                    continue
                if header_name_not_utf8(record.headers):
                    if skipped is not None:
                        skipped.append(record.offset)
                    continue
                yield record
    finally:
        # Paused again once read: a resumed partition at its end keeps a fetch waiting on
        # the broker, and the reader's next request (another partition's read, the end
        # offsets of a partition being taken) queued behind it for up to fetch_max_wait_ms.
        reader.pause(tp)


def written_topics(topics: Topics) -> tuple[str, str, str]:
    """The topics a partition's handler writes its memory to, in ``end_offsets``' order."""
    return topics.events, topics.results, topics.snapshots


async def end_offsets(reader: AIOKafkaConsumer, topics: Topics, partition: int) -> tuple[int, ...]:
    """The end offsets of a partition's events, results and snapshots."""
    tps = [TopicPartition(t, partition) for t in written_topics(topics)]
    ends = await reader.end_offsets(tps)
    return tuple(ends[tp] for tp in tps)


async def rebuild(
    reader: AIOKafkaConsumer,
    topics: Topics,
    partition: int,
    *,
    codec: SnapshotCodec,
    checkpoints: CheckpointSigner,
    seal: ShoeSeal,
    dedup_window: int,
    now: datetime,
    timeout: float,
    unsigned: Literal["accept", "refuse"] = "accept",
    money_retention: timedelta = DEFAULT_RETENTION,
) -> tuple[PartitionStore, RebuildStats]:
    """The partition's streams from its newest checkpoint, if it is to be trusted, else from
    the start of its log (events are kept forever): a checkpoint that fails authentication,
    or whose snapshots are not the ones it was written with, is never used.

    An unsigned checkpoint (the release before wrote it) is trusted when ``unsigned`` is
    ``accept``; its snapshots cannot be checked, so an event that does not follow its
    stream's snapshot (one older than the checkpoint says) discards it too."""
    started = time.monotonic()
    deadline = started + timeout

    async def attempt(distrusted: str | None) -> tuple[PartitionStore, RebuildStats]:
        store = PartitionStore(
            partition, codec=codec, cold=SpilledStreams(), money_retention=money_retention
        )
        try:
            return await _read_partition(
                store,
                reader,
                topics,
                partition,
                codec=codec,
                checkpoints=checkpoints,
                seal=seal,
                dedup_window=dedup_window,
                now=now,
                deadline=deadline,
                unsigned=unsigned,
                distrusted=distrusted,
            )
        except BaseException:
            store.close()
            raise

    # Once with the checkpoint, once more without it if the events show its snapshots older
    # than it says (``_Discarded``).
    try:
        store, stats = await attempt(None)
    except _Discarded as discarded:
        store, stats = await attempt(discarded.reason)
    return store, replace(stats, seconds=time.monotonic() - started)


SNAPSHOTS_BETWEEN_YIELDS = 16
"""How many snapshots a takeover opens before it lets the event loop run. Every stream the
partition ever had has one (an idle table's too), and reading one takes about 2 ms with a
full answer window (3 ms with its window made): 2,000 idle tables held the loop 6 s in one go, with
the consumer's heartbeat (its group session is 10 s: the handler would be put out of the group
in the middle of its takeover), the clock's timers and checkpoints, and the health and metrics
endpoints waiting. 16 is about 32 ms. (The other partitions' commands wait for the takeover
either way: it runs in the task that consumes them.)"""


async def _let_the_loop_run(count: int) -> None:
    """Between snapshots: every ``SNAPSHOTS_BETWEEN_YIELDS``-th, the other tasks' turn."""
    if count % SNAPSHOTS_BETWEEN_YIELDS == 0:
        await asyncio.sleep(0)


class _Discarded(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _open_strays(store: PartitionStore, codec: SnapshotCodec) -> None:
    """The partition's stray answers (``StrayAnswers``), out of the snapshots read (a trusted
    checkpoint's; none otherwise): they are no stream's."""
    raw = store.cold.pop(store.strays_key, None)
    if raw is None:
        return
    for document in codec.decode_answers(store.strays_key, raw):
        store.strays.add_stored(document)
    store.strays.held_to_bytes()
    store.snapshot_bytes[store.strays_key] = len(raw)


def _made_by(
    store: PartitionStore,
    events: _Events,
    answered: set[tuple[str, str]],
    eventless: set[str],
) -> set[str]:
    """The streams made after the checkpoint by a command whose answer is among those read:
    before that answer, each did not exist. Not one the checkpoint's snapshots hold, nor,
    read from the whole log, one whose snapshot on the topic has no event (``eventless``): a
    release before this one made a stream for a command at a stream that did not exist, which
    has no event until its first. (One whose first event's answer the results topic no longer
    holds existed before every answer it holds.)"""
    return {
        stream_id
        for stream_id, command_id in events.first_commands.items()
        if (stream_id, command_id) in answered
        and stream_id not in store.snapshot_bytes
        and stream_id not in eventless
    }


def _eventless(snapshots: Mapping[str, bytes], strays_key: str) -> set[str]:
    """The streams whose snapshot folded no event (sequence 0, in the record's clear part):
    only a release before this one wrote such a snapshot, of a stream it made for a command
    at a stream that did not exist (``StrayAnswers``'s record aside). Read so where the
    checkpoint is not used: the stream existed before its first event, as that checkpoint
    would say."""
    eventless: set[str] = set()
    for stream_id, raw in snapshots.items():
        try:
            sequence = SealedSnapshot.model_validate_json(raw).sequence
        except ValidationError:
            continue  # not one to open anyway (the whole log makes the stream)
        if sequence == 0 and stream_id != strays_key:
            eventless.add(stream_id)
    return eventless


def _stray(store: PartitionStore, result: CommandResult, made: set[str], window: int) -> bool:
    """Whether ``result`` answered a command at a stream that did not exist then and wrote no
    event: kept with the partition's stray answers, as the live handler kept it. The answer
    that made a stream hands the stream the ones kept for it, as live (``PartitionStore.made``)."""
    stream_id = result.stream_id
    if stream_id in made:
        if result.first_sequence is None:
            if (stream_id, result.command_id) not in store.strays:  # not an answer given again
                store.remember_stray(result, window)
            return True
        made.discard(stream_id)
        store.made(store.get(stream_id))
        return False
    if store.holds(stream_id) or stream_id in store.snapshot_marks:
        return False  # (a snapshot not used is a stream made again from the log, below)
    if (stream_id, result.command_id) not in store.strays:
        store.remember_stray(result, window)
    return True


async def _read_partition(
    store: PartitionStore,
    reader: AIOKafkaConsumer,
    topics: Topics,
    partition: int,
    *,
    codec: SnapshotCodec,
    checkpoints: CheckpointSigner,
    seal: ShoeSeal,
    dedup_window: int,
    now: datetime,
    deadline: float,
    unsigned: Literal["accept", "refuse"],
    distrusted: str | None,
) -> tuple[PartitionStore, RebuildStats]:
    """One attempt at the partition's streams, into ``store``: its steps are
    ``_PartitionRead``'s; ``distrusted`` says why its checkpoint is not to be used, if the
    attempt before found out (``_Discarded``)."""
    read = _PartitionRead(
        store, reader, topics, partition, codec=codec, seal=seal, deadline=deadline
    )
    ends = await reader.end_offsets([read.snapshots_tp, read.events_tp, read.results_tp])

    # 1. The newest checkpoint and the newest snapshot of each stream, and whether the
    # checkpoint is to be trusted; the streams of the snapshots it names, if it is.
    found = await read.snapshots(ends[read.snapshots_tp])
    marks = {
        stream_id: checkpoints.element(stream_id, raw) for stream_id, raw in store.cold.items()
    }
    start = _starting_point(
        found, marks, store.cold, checkpoints, partition, unsigned=unsigned, distrusted=distrusted
    )
    if start.checkpoint is None:
        await read.drop_snapshots(start.distrusted)
    # A checkpoint this release signs is written once the partition is ready: the next
    # takeover need not read the whole log again, nor trust an unsigned checkpoint, nor need
    # a key the rotation is letting go of (its snapshots are sealed again: ``reseal``; a
    # checkpoint signed under the current key was written with every snapshot under it, an
    # unsigned one by the release before, which may have held another: a review's drill).
    resealed = await read.reseal() if start.trust in ("older_key", "unsigned") else 0
    store.checkpoint_due = start.distrusted is not None or start.trust in ("unsigned", "older_key")
    # What the topic holds, used or not: the digest the next checkpoint signs.
    store.snapshot_marks = SnapshotMarks(marks)
    _open_strays(store, codec)
    snapshots = await read.open_snapshots(now)
    if start.commands_to is not None:
        store.answered_to = start.commands_to
    # 1b. Snapshots written before they carried the signed step ids kept by id.
    await read.complete_older_snapshots(start.events_from)

    # 2. The events after it: the states, and the commands they prove were accepted.
    events = await read.events(
        start.events_from, ends[read.events_tp], start.checkpoint, dedup_window
    )
    # 3. The results after it: every answer as it was given, rejections included.
    answers = await read.results(start.results_from, ends[read.results_tp])
    read.remember(events, answers, dedup_window)
    store.since_checkpoint = len(answers)
    if start.checkpoint is not None and store.dirty:
        # Streams the log after the checkpoint changed: written again at once (the clock's
        # next tick), so the next takeover reads less, and a snapshot too large for the topic
        # (no checkpoint was written: ``_over_the_limit``) is found again now, its gauge and
        # alert with it, not up to an hour later (the gauge read from the topic says less).
        # A partition that never had a checkpoint keeps to BLACKJACK_SNAPSHOT_EVERY and the
        # hour, as before.
        store.checkpoint_due = True
    if start.checkpoint is None:
        read.write_again(marks)

    # Every round in play here was interrupted: its next events start with ``RoundResumed``.
    store.mark_resuming()
    read.seen_since(now)
    return store, RebuildStats(
        partition=partition,
        checkpoint=start.checkpoint is not None,
        snapshots=snapshots,
        events=events.folded,
        results=len(answers),
        seconds=0.0,  # set by ``rebuild``
        foreign=tuple(read.foreign),
        unreadable=read.unreadable(),
        unopened=tuple(read.unopened),
        distrusted=start.distrusted,
        unsigned=start.checkpoint is not None and start.trust == "unsigned",
        older_key=start.checkpoint is not None and start.trust == "older_key",
        resealed=resealed,
    )


@dataclass(frozen=True)
class _Start:
    """Where a rebuild starts: the checkpoint, if it is to be trusted, else the start of the
    partition's log."""

    checkpoint: Checkpoint | None
    trust: CheckpointTrust | None
    """what the checkpoint's authentication said, if it was checked"""
    distrusted: str | None
    """why the partition's checkpoint is not used, if it has one (``RebuildStats``)"""
    commands_to: int | None = None
    """the trusted checkpoint's ``bj_commands_to``: the commands answered before it"""

    @property
    def events_from(self) -> int:
        return self.checkpoint.events_from if self.checkpoint else 0

    @property
    def results_from(self) -> int:
        return self.checkpoint.results_from if self.checkpoint else 0


def _starting_point(
    found: ConsumerRecord[bytes, bytes] | None,
    marks: dict[str, int],
    snapshots: Mapping[str, bytes],
    checkpoints: CheckpointSigner,
    partition: int,
    *,
    unsigned: Literal["accept", "refuse"],
    distrusted: str | None,
) -> _Start:
    """The checkpoint record ``found`` judged: used if its authentication holds for the
    snapshots read (``marks``, their shares of the digest; ``snapshots``, the records) and it
    is readable and of this partition."""
    if found is None:
        # Snapshots are written with a checkpoint: with some and none, it was removed.
        return _Start(None, None, "missing" if marks else distrusted)
    if distrusted is not None:
        return _Start(None, None, distrusted)
    value = found.value or b""
    trust = checkpoints.verify(
        partition, value, found.headers, snapshots_digest(marks.values()), snapshots
    )
    checkpoint: Checkpoint | None = None
    try:
        checkpoint = Checkpoint.decode(value)
    except SnapshotError:
        if trust == "signed":
            raise  # written by a handler of this deployment, and unreadable: a bug
    why = _why_distrusted(checkpoint, trust, partition, unsigned)
    if why is not None:
        return _Start(None, trust, why)
    return _Start(checkpoint, trust, None, offset_header(found.headers, COMMANDS_TO_HEADER))


def _why_distrusted(
    checkpoint: Checkpoint | None,
    trust: CheckpointTrust,
    partition: int,
    unsigned: Literal["accept", "refuse"],
) -> str | None:
    """Why a checkpoint (``None``: unreadable) is not to be used, if it is not."""
    if checkpoint is not None and checkpoint.partition != partition:
        return "forged"  # an unsigned one copied from another partition
    if trust in ("forged", "snapshots") or (trust == "unsigned" and unsigned == "refuse"):
        return trust
    if checkpoint is None:
        return "unreadable"
    return None


@dataclass
class _Events:
    """What the events after the checkpoint gave: the commands they prove were accepted (by
    stream and command id, as their answers were), and how many were folded.

    Only a stream's newest ``window`` accepted commands are kept where its snapshot left it
    no answer (``trimmed``; every stream read from the whole log, no checkpoint to trust): an
    older one is outside the window a rebuild leaves (``_PartitionRead.remember``), whether
    its answer is still on the results topic or not, so memory no longer grows with the
    partition's history. Not where the snapshot's window holds answers: remembered first,
    every one of them pushes the snapshot's older answers out, and an answer read later to a
    command id among them (decided again once let go of) is then remembered as the newest.
    The command that made each stream (its first event's) is kept apart: it tells the
    streams made after the checkpoint (``_made_by``)."""

    window: int
    accepted: dict[str, OrderedDict[str, CommandResult]] = field(default_factory=dict)
    refused: dict[str, OrderedDict[str, CommandResult]] = field(default_factory=dict)
    """The platform money commands refused and written down (``MoneyCommandRefused``,
    ``WalletCommandRefused``): a window of their own, as the live one keeps refusals apart
    (``streams.AnswerWindow``)."""
    first_commands: dict[str, str] = field(default_factory=dict)
    folded: int = 0

    def accept(self, envelope: EventEnvelope, trimmed: bool = True) -> None:
        """The event's command (its causation), accepted; its answer spans its events. Not a
        decline of the partition's stream of buy-ins sent to tables that did not exist: its
        command was another stream's, answered ``table_not_open`` there (a stray answer)."""
        if not envelope.causation_id or is_declines_stream(envelope.stream_id):
            return
        stream_id, command_id = envelope.stream_id, envelope.causation_id
        accepted = self.accepted.setdefault(stream_id, OrderedDict())
        refused = self.refused.setdefault(stream_id, OrderedDict())
        first = accepted.pop(command_id, None) or refused.pop(command_id, None)
        event = envelope.data
        # A platform money command refused (``platform_money.refusal``): answered rejected
        # with its code and message, its events numbered, as the live handler answered it.
        refusal = (
            Rejection(code=event.reason_code, message=event.message)
            if isinstance(event, RefusalEvent)
            else None
        )
        rejection = refusal if refusal is not None else (first.rejection if first else None)
        # (a command's events are written together: the newest of its kind, put back)
        kept = accepted if rejection is None else refused
        kept[command_id] = CommandResult(
            command_id=command_id,
            stream_id=stream_id,
            correlation_id=envelope.correlation_id,
            status="accepted" if rejection is None else "rejected",
            rejection=rejection,
            first_sequence=first.first_sequence if first else envelope.sequence,
            last_sequence=envelope.sequence,
            handled_at=envelope.occurred_at,
        )
        if envelope.sequence == 1:
            self.first_commands[stream_id] = command_id
        while trimmed and len(kept) > self.window:
            kept.popitem(last=False)


def _digest_header(headers: Sequence[tuple[str, bytes | None]] | None) -> str | None:
    """The command digest an answer's record carries (``COMMAND_DIGEST_HEADER``), if any."""
    for name, value in headers or ():
        if name == COMMAND_DIGEST_HEADER and value is not None:
            text = value.decode("ascii", errors="replace")
            return text if len(text) == DIGEST_CHARS and text.isalnum() else None
    return None


def _answer(record: ConsumerRecord[bytes, bytes]) -> CommandResult | None:
    """The answer a record of the results topic holds; ``None`` for one the service did not
    write (no ``ce_type`` header, which every answer it writes carries, and no command result:
    junk that ACLs should have kept out, no command's answer, so stepping over it loses none,
    as on the events topic). Before, such a record failed every takeover of its partition, for
    good. One with the header that this release cannot read is still raised: a newer
    release's answer (docs/kafka.md, upgrades: no rolling back past a new rejection code)."""
    try:
        return CommandResult.model_validate_json(record.value or b"{}")
    except ValidationError:
        if written_as_the_service_s(record.headers):
            raise
        return None


def _money_forgotten(stream: Stream, store: PartitionStore, now: datetime) -> bool:
    """Whether every platform money id ``stream`` could hold is older than the retention:
    its last event is (no check counts one, ``platform_money.check``), so a snapshot that
    did not keep them needs no completing from the events."""
    touched = stream.touched_at
    return touched is not None and touched + kept_for(store.money_retention) < now


class _PartitionRead:
    """The steps of ``_read_partition``, each reading one topic of the partition (up to the
    end offset taken at its start) into ``store``."""

    def __init__(
        self,
        store: PartitionStore,
        reader: AIOKafkaConsumer,
        topics: Topics,
        partition: int,
        *,
        codec: SnapshotCodec,
        seal: ShoeSeal,
        deadline: float,
    ) -> None:
        self.store, self.reader, self.partition = store, reader, partition
        self.codec, self.seal, self.deadline = codec, seal, deadline
        self.snapshots_tp, self.events_tp, self.results_tp = (
            TopicPartition(topic, partition)
            for topic in (topics.snapshots, topics.events, topics.results)
        )
        self.skipped: dict[str, list[int]] = {
            tp.topic: [] for tp in (self.snapshots_tp, self.events_tp, self.results_tp)
        }
        """the offsets of the records of each topic aiokafka cannot read, stepped over"""
        self.foreign: list[str] = []
        """the records of the events and results topics the service did not write, stepped
        over (``topic@offset``)"""
        self.unopened: list[str] = []
        """the snapshots not used that could not be opened (``stream id: why``): their
        streams are made from the events (``_check_the_key``)"""
        self.digests: list[str | None] = []
        """the command digest each answer read carries (``COMMAND_DIGEST_HEADER``), in the
        order of ``results``' answers: the window remembers each with its answer (by record,
        not by id: an id let go of and used again answers another command)"""
        self.eventless: set[str] = set()
        """read from the whole log: the streams the release before made with no event
        (``_eventless``)"""

    def _read(
        self, tp: TopicPartition, start: int, end: int, *, counted: bool = True
    ) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
        """The records of ``tp`` from ``start`` to ``end``; those that cannot be read stepped
        over, and ``counted`` in ``skipped``."""
        skipped = self.skipped[tp.topic] if counted else None
        return read_to_end(self.reader, tp, start, end, self.deadline, skipped=skipped)

    def unreadable(self) -> tuple[str, ...]:
        """The records stepped over (``topic@offset``), as ``RebuildStats`` lists them."""
        return tuple(f"{topic}@{offset}" for topic, at in self.skipped.items() for offset in at)

    async def snapshots(self, end: int) -> ConsumerRecord[bytes, bytes] | None:
        """The newest snapshot of each stream, gathered where the cold streams are kept (on
        disk: every stream the partition ever had is there); the partition's newest checkpoint
        record, if it has one (not removed)."""
        found: ConsumerRecord[bytes, bytes] | None = None
        snapshots = self.store.cold
        async for record in self._read(self.snapshots_tp, 0, end):
            key = (record.key or b"").decode()
            if key == checkpoint_key(self.partition):
                found = record if record.value is not None else None
            elif key.startswith(CHECKPOINT_PREFIX):
                continue  # another partition's
            elif record.value is None:
                snapshots.pop(key, None)
            else:
                snapshots[key] = record.value
        return found

    async def drop_snapshots(self, distrusted: str | None) -> None:
        """No checkpoint to start from: the events from the start make every stream."""
        if distrusted is not None:
            await self._check_the_key(distrusted)
        self.eventless = _eventless(self.store.cold, self.store.strays_key)
        self.store.cold.clear()

    async def _check_the_key(self, distrusted: str) -> None:
        """A handler holding another key than the one the partition was written with finds
        every checkpoint "forged" and no snapshot it can open: that keeps the partition out
        of service, as before (it would sign money steps no other handler accepts). The key is
        this partition's if the checkpoint's authentication held (``snapshots``: only the
        snapshots differ) or any snapshot opens: then one it cannot open (a byte changed, a
        record half written, one no handler wrote) is stepped over and named (``unopened``),
        as a record of the events or results topics is: its stream is made from the events.
        Before, any one such record kept the partition out of service for good."""
        cold = self.store.cold
        opened = distrusted == "snapshots"
        sealed_elsewhere: SealedElsewhere | None = None
        for count, stream_id in enumerate(list(cold), 1):  # one at a time from the disk
            try:
                self.codec.decode(cold[stream_id])
                opened = True
            except SealedElsewhere as error:
                sealed_elsewhere = sealed_elsewhere or error
                self.unopened.append(f"{stream_id[:200]}: no key of this handler opens it")
            except SnapshotError:  # not a sealed snapshot at all: no key's doing
                self.unopened.append(f"{stream_id[:200]}: not a sealed snapshot")
            await _let_the_loop_run(count)
        if sealed_elsewhere is not None and not opened:
            raise sealed_elsewhere

    async def reseal(self) -> int:
        """The snapshots kept that a key rotation's older key sealed, sealed again under the
        current one (``SnapshotCodec.resealed``) and marked to be written with the next
        checkpoint, so that none of the partition's needs the older key after it. How many."""
        cold, count_resealed = self.store.cold, 0
        for count, stream_id in enumerate(list(cold), 1):
            await _let_the_loop_run(count)
            resealed = self.codec.resealed(cold[stream_id])
            if resealed is not None:
                cold[stream_id] = resealed
                self.store.dirty.add(stream_id)
                count_resealed += 1
        return count_resealed

    async def open_snapshots(self, now: datetime) -> int:
        """The streams of the snapshots kept, hot if they cannot wait (a timer may come due,
        their signed step ids are incomplete), the others left cold, as the live handler keeps
        an idle stream: the events and results after the checkpoint thaw the streams they
        concern. How many snapshots there are."""
        store, snapshots = self.store, self.store.cold
        read = len(snapshots)  # before the hot ones leave (the cold ones stay where they were read)
        for count, stream_id in enumerate(list(snapshots), 1):
            await _let_the_loop_run(count)
            raw = snapshots[stream_id]
            sealed_for, may_not_wait = self.codec.may_not_wait(raw)
            if sealed_for != stream_id:  # sealed for another stream: no writer does that
                raise SnapshotError(f"the snapshot of {sealed_for} is keyed {stream_id}")
            store.snapshot_bytes[stream_id] = len(raw)
            if not may_not_wait:
                continue  # most of them: idle tables and wallets, left as they were read
            stream = self.codec.decode(raw)
            if stream.money_incomplete and _money_forgotten(stream, store, now):
                stream.money_incomplete = False  # its last event is older than the retention
            if stream.signed_incomplete or stream.money_incomplete or may_come_due(stream):
                store.streams[stream_id] = stream
                del snapshots[stream_id]
        return read

    async def complete_older_snapshots(self, events_from: int) -> None:
        """Snapshots written before they carried the signed step ids kept by id: those come
        from the events before the checkpoint (kept forever), read for their causation ids
        only."""
        store = self.store
        legacy = {
            s.stream_id: s
            for s in store.streams.values()
            if s.signed_incomplete or s.money_incomplete
        }
        if not legacy:
            return
        # (a record there that cannot be read is stepped over unlisted, as it always was)
        async for record in self._read(self.events_tp, 0, events_from, counted=False):
            if not_the_service_s(record.value, record.headers):
                continue
            envelope = from_wire(decode(record.value or b"{}"), self.seal)
            old = legacy.get(envelope.stream_id)
            if old is not None and envelope.sequence <= old.sequence:
                if old.signed_incomplete:
                    old.note_signed(envelope)
                if old.money_incomplete:
                    old.note_money(envelope, store.money_retention)
        for old in legacy.values():
            old.signed_incomplete = old.money_incomplete = False
            store.dirty.add(old.stream_id)

    async def events(
        self, start: int, end: int, checkpoint: Checkpoint | None, window: int
    ) -> _Events:
        """The events from ``start`` folded into their streams (those already in a stream's
        snapshot skipped); each stream's newest ``window`` commands they prove accepted."""
        store, events = self.store, _Events(window)
        async for record in self._read(self.events_tp, start, end):
            if not_the_service_s(record.value, record.headers):
                # junk: no event of any stream
                self.foreign.append(f"{self.events_tp.topic}@{record.offset}")
                continue
            envelope = from_wire(decode(record.value or b"{}"), self.seal)
            stream = store.get(envelope.stream_id)
            if envelope.sequence <= stream.sequence:
                continue  # already in the stream's snapshot
            if checkpoint is not None and envelope.sequence != stream.sequence + 1:
                # The stream's snapshot is older than the checkpoint says (or missing): only an
                # unsigned checkpoint gets here (a signed one's digest names its snapshots).
                raise _Discarded("snapshots")
            stream.fold(envelope)
            stream.note_signed(envelope)
            stream.note_money(envelope, store.money_retention)
            store.dirty.add(stream.stream_id)
            events.folded += 1
            events.accept(envelope, trimmed=not stream.results)
        store.events_next = max(end, start)
        return events

    async def results(self, start: int, end: int) -> list[CommandResult]:
        """The answers from ``start`` that a stream's window remembers, in the order they were
        given, which is the order the live window remembered them in; the commands they
        answer, answered (``answered_to``)."""
        store = self.store
        answers: list[CommandResult] = []
        async for record in self._read(self.results_tp, start, end):
            result = _answer(record)
            if result is None:
                self.foreign.append(f"{self.results_tp.topic}@{record.offset}")
                continue
            command_offset = offset_header(record.headers, COMMAND_OFFSET_HEADER)
            if command_offset is not None:
                store.answered_to = max(store.answered_to, command_offset + 1)
            if remembered(result):
                answers.append(result)
                self.digests.append(_digest_header(record.headers))
        store.results_next = max(end, start)
        return answers

    def remember(self, events: _Events, answers: list[CommandResult], dedup_window: int) -> None:
        """Each stream's window of answers, as the live handler left it."""
        store = self.store
        answered = {(result.stream_id, result.command_id) for result in answers}
        # Accepted commands whose answers the results topic no longer holds (past its
        # retention) are older than every answer it still holds: remembered first, in the order
        # of their events. Only those: an answer the window has already let go of must not come
        # back as the newest and push out the newest ones.
        # (of each kind apart: a stream's window keeps each kind's order)
        for stream_id, kept in (*events.accepted.items(), *events.refused.items()):
            stream = store.get(stream_id)
            for command_id, result in kept.items():
                if (stream_id, command_id) not in answered and command_id not in stream.results:
                    stream.remember(result, dedup_window)  # (its command's digest unknown)
        made = _made_by(store, events, answered, self.eventless)
        for result, digest in zip(answers, self.digests, strict=True):
            if _stray(store, result, made, dedup_window):
                continue
            stream = store.get(result.stream_id)
            if result.command_id not in stream.results:  # a duplicate's answer, given again
                stream.remember(result, dedup_window, digest)
            if result.player_id is not None:
                stream.saw(result.player_id, result.handled_at)
            store.dirty.add(stream.stream_id)

    def write_again(self, marks: dict[str, int]) -> None:
        """Every snapshot on the topic, unused, is written again from the log, so that none the
        next checkpoint signs came from a checkpoint not trusted."""
        for stream_id in marks:
            if stream_id != self.store.strays_key:
                self.store.get(stream_id)
            self.store.dirty.add(stream_id)

    def seen_since(self, now: datetime) -> None:
        """Presence comes from the snapshot and the results since, for the players seated now;
        one the retained log says nothing of (their results expired) gets a fresh grace period.
        (A cold stream has no player with a bet out whom the clock could disconnect; a player
        who bets after it thaws is seen by that command.)"""
        for stream in self.store.streams.values():
            if isinstance(stream.state, TableState):
                seen = stream.last_seen
                stream.last_seen = {
                    player: seen.get(player, now) for player in stream.state.players
                }
