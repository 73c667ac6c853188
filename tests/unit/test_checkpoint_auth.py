"""Checkpoints are authenticated: a rebuild never starts where a checkpoint it cannot trust
says (one forged, copied from another partition or prefix, or whose snapshots are not the ones
it was written with); it reads the partition's whole log instead, so nothing is skipped or
read twice. A checkpoint of the release before (unsigned) is trusted only while it may have
written it. Without Kafka (``CommittedLog``); tests/integration/test_handler_snapshots.py
forges one on the real broker."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Literal, cast

import pytest
import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from blackjack.command_handler.checkpointing import Checkpointing
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.partitions import _Partition
from blackjack.command_handler.processor import Handled
from blackjack.command_handler.records import Outgoing
from blackjack.command_handler.replay import RebuildStats, rebuild
from blackjack.command_handler.service import CommandHandler
from blackjack.command_handler.snapshots import (
    CHECKPOINT_AUTH_HEADER,
    SIGNED_CHECKPOINTS_MARK,
    Checkpoint,
    CheckpointSigner,
    SnapshotCodec,
    SnapshotError,
    checkpoint_key,
)
from blackjack.command_handler.streams import PartitionStore
from blackjack.configuration import ConfigurationError
from blackjack.domain import commands as cmd
from blackjack.domain.evolve import fold
from blackjack.domain.state import TableState
from blackjack.messages.envelope import CommandResult
from blackjack.messages.sealing import ShoeSeal
from tests.unit.processor_harness import TOPICS
from tests.unit.test_handler_windows import T0
from tests.unit.test_round_resumed import LATER, SOLO, Table, seated

CODEC = SnapshotCodec(b"s" * 32)
SIGNER = CheckpointSigner(b"c" * 32, TOPICS.snapshots)


@dataclass(frozen=True)
class _Sent:
    offset: int = 0


class _Producer:
    """What ``Checkpointing._checkpoint`` sends, kept to be committed to the log."""

    def __init__(self) -> None:
        self.records: list[Outgoing] = []

    async def send(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes,
        partition: int,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> asyncio.Future[_Sent]:
        self.records.append(Outgoing(topic, key, value, list(headers or []), partition))
        sent: asyncio.Future[_Sent] = asyncio.get_running_loop().create_future()
        sent.set_result(_Sent())
        return sent


async def write_checkpoint(
    table: Table, signer: CheckpointSigner = SIGNER, codec: SnapshotCodec = CODEC
) -> list[Outgoing]:
    """A checkpoint as the handler writes one (its own code), committed to the table's log."""
    writer = Checkpointing.__new__(Checkpointing)
    writer.topics, writer._checkpoints, writer._now = TOPICS, signer, lambda: T0
    writer.log, writer._partitions = structlog.get_logger(), {}
    store = table.store
    store.codec = codec
    ends = await table.log.end_offsets(
        [TopicPartition(t, 0) for t in (TOPICS.events, TOPICS.results)]
    )
    store.events_next, store.results_next = ends.values()
    producer = _Producer()
    partition = _Partition(0, TopicPartition(TOPICS.commands, 0))
    await writer._checkpoint(partition, store, cast(AIOKafkaProducer, producer), [])
    commit(table, producer.records)
    return producer.records


def commit(table: Table, records: list[Outgoing]) -> None:
    done = CommandResult(command_id="-", stream_id=SOLO, status="accepted", handled_at=T0)
    table.log.commit(Handled(result=done, command_type="-", outgoing=records))


def checkpoint_record(records: list[Outgoing]) -> Outgoing:
    [record] = [r for r in records if r.key == checkpoint_key(0).encode()]
    return record


async def take_over(
    table: Table,
    unsigned: Literal["accept", "refuse"] = "accept",
    codec: SnapshotCodec = CODEC,
    signer: CheckpointSigner = SIGNER,
) -> tuple[PartitionStore, RebuildStats]:
    store, stats = await rebuild(
        cast(AIOKafkaConsumer, table.log),
        TOPICS,
        0,
        codec=codec,
        checkpoints=signer,
        seal=table.processor.seal,
        dedup_window=100,
        now=LATER,
        timeout=5.0,
        unsigned=unsigned,
    )
    table.store = store
    return store, stats


def state_of(store: PartitionStore) -> Any:
    return store.get(SOLO).state


def folded(table: Table) -> TableState:
    return fold([e.data for e in table.events if e.stream_id == SOLO])  # type: ignore[misc]


def bet(table: Table, amount: int) -> None:
    assert table.do(cmd.PlaceBet(player_id="ann", box=0, amount=amount)).result.status == "accepted"


async def test_a_checkpoint_the_handler_signed_is_trusted() -> None:
    table = seated()
    bet(table, 500)
    records = await write_checkpoint(table)
    assert dict(checkpoint_record(records).headers)[CHECKPOINT_AUTH_HEADER].startswith(b"1.")
    store, stats = await take_over(table)
    assert stats.checkpoint and stats.distrusted is None and not stats.unsigned
    assert not store.checkpoint_due and state_of(store) == folded(table)


async def test_a_forged_checkpoint_that_skips_a_bet_is_not_trusted() -> None:
    """A record on the checkpoint key whose offsets skip the events after the real checkpoint
    (the signature of the real one copied onto it): the bet after it would be forgotten, and
    the money with it; the partition is rebuilt from the start of its log instead."""
    table = seated()
    real = checkpoint_record(await write_checkpoint(table))
    bet(table, 500)  # after the checkpoint: read from the events
    ends = await table.log.end_offsets([TopicPartition(TOPICS.events, 0)])
    genuine = Checkpoint.model_validate_json(real.value)
    forged = genuine.model_copy(update={"events_from": max(ends.values())})
    commit(table, [Outgoing(real.topic, real.key, forged.encode(), real.headers, 0)])
    store, stats = await take_over(table)
    assert stats.distrusted == "forged" and not stats.checkpoint
    assert state_of(store) == folded(table)
    assert state_of(store).boxes[0].bet == 500
    # written again at once (the clock's next tick), signed, and trusted by the next takeover
    assert store.checkpoint_due
    await write_checkpoint(table)
    store, stats = await take_over(table)
    assert stats.checkpoint and stats.distrusted is None and state_of(store) == folded(table)


async def test_a_checkpoint_copied_from_another_prefix_is_not_trusted() -> None:
    """Signed with the same key for another deployment's topics (another prefix): its offsets
    mean nothing here."""
    table = seated()
    bet(table, 500)
    await write_checkpoint(table, CheckpointSigner(b"c" * 32, "other." + TOPICS.snapshots))
    store, stats = await take_over(table)
    assert stats.distrusted == "forged" and state_of(store) == folded(table)


async def test_a_checkpoint_copied_from_another_partition_is_not_trusted() -> None:
    table = seated()
    bet(table, 500)
    records = await write_checkpoint(table)
    real = checkpoint_record(records)
    # partition 1's checkpoint (with partition 1's signature) put on partition 0's key
    elsewhere = Checkpoint.model_validate_json(real.value).model_copy(update={"partition": 1})
    value = elsewhere.encode()
    commands_to = dict(real.headers)["bj_commands_to"]
    digest = int(dict(real.headers)[CHECKPOINT_AUTH_HEADER].split(b".")[1], 16)
    headers = [
        ("bj_commands_to", commands_to),
        (CHECKPOINT_AUTH_HEADER, SIGNER.header(1, value, commands_to, digest)),
    ]
    commit(table, [Outgoing(real.topic, real.key, value, headers, 0)])
    store, stats = await take_over(table)
    assert stats.distrusted == "forged" and state_of(store) == folded(table)


async def test_a_second_commands_to_header_on_a_signed_checkpoint_is_not_trusted() -> None:
    """The real checkpoint's headers copied with another ``bj_commands_to`` before them: the
    authentication checked the last one (``dict``), the rebuild used the first, so "signed"
    said nothing of where its commands were answered to (one past the group's committed
    offset keeps the partition out of service, ``AnsweredElsewhere``)."""
    table = seated()
    bet(table, 500)
    real = checkpoint_record(await write_checkpoint(table))
    headers = [("bj_commands_to", b"999999"), *real.headers]
    commit(table, [Outgoing(real.topic, real.key, real.value, headers, 0)])
    store, stats = await take_over(table)
    assert stats.distrusted == "forged" and not stats.checkpoint
    assert store.answered_to < 999999 and state_of(store) == folded(table)


async def test_an_older_snapshot_put_back_after_the_checkpoint_is_not_trusted() -> None:
    """Each snapshot is sealed on its own, so an older one of the same stream opens as well as
    the newest: put back on the topic after a checkpoint, it would lose every event between
    the two (none follows here to show a gap). The checkpoint's digest names its snapshots."""
    table = seated()
    first = await write_checkpoint(table)
    bet(table, 500)
    await write_checkpoint(table)
    [old_snapshot] = [r for r in first if r.key == SOLO.encode()]
    commit(table, [old_snapshot])
    store, stats = await take_over(table)
    assert stats.distrusted == "snapshots" and not stats.checkpoint
    assert state_of(store) == folded(table) and state_of(store).boxes[0].bet == 500


async def test_a_missing_snapshot_is_not_trusted() -> None:
    table = seated()
    bet(table, 500)
    await write_checkpoint(table)
    commit(table, [Outgoing(TOPICS.snapshots, SOLO.encode(), None, [], 0)])  # type: ignore[arg-type]
    store, stats = await take_over(table)
    assert stats.distrusted == "snapshots" and state_of(store) == folded(table)


async def test_an_unreadable_checkpoint_is_not_trusted() -> None:
    """Junk on the checkpoint key made every rebuild of the partition fail (out of service
    until someone removed it); it is read from the start of its log instead."""
    table = seated()
    bet(table, 500)
    await write_checkpoint(table)
    commit(table, [Outgoing(TOPICS.snapshots, checkpoint_key(0).encode(), b"junk", [], 0)])
    store, stats = await take_over(table)
    assert stats.distrusted == "unreadable" and state_of(store) == folded(table)


async def test_a_removed_checkpoint_is_noticed() -> None:
    """A tombstone on the checkpoint key: the partition is read from its log's start, as
    before, but that is no longer silent (snapshots are only ever written with one)."""
    table = seated()
    bet(table, 500)
    await write_checkpoint(table)
    commit(table, [Outgoing(TOPICS.snapshots, checkpoint_key(0).encode(), None, [], 0)])  # type: ignore[arg-type]
    store, stats = await take_over(table)
    assert stats.distrusted == "missing" and store.checkpoint_due
    assert state_of(store) == folded(table)


async def unsigned_checkpoint(table: Table, codec: SnapshotCodec = CODEC) -> None:
    """A checkpoint as the release before wrote it: the same value, no authentication."""
    records = await write_checkpoint(table, SIGNER, codec)
    unsigned = [
        Outgoing(
            r.topic, r.key, r.value, [h for h in r.headers if h[0] != CHECKPOINT_AUTH_HEADER], 0
        )
        for r in records
    ]
    commit(table, unsigned)


async def test_a_checkpoint_of_the_release_before_is_trusted_during_the_upgrade() -> None:
    table = seated()
    bet(table, 500)
    await unsigned_checkpoint(table)
    table.do(cmd.Deal(player_id="ann"), LATER)
    store, stats = await take_over(table, "accept")
    assert stats.checkpoint and stats.unsigned and stats.distrusted is None
    assert store.checkpoint_due  # so that the next takeover reads a signed one
    assert state_of(store) == folded(table)


async def test_a_checkpoint_of_the_release_before_is_refused_once_the_upgrade_is_done() -> None:
    table = seated()
    bet(table, 500)
    await unsigned_checkpoint(table)
    store, stats = await take_over(table, "refuse")
    assert stats.distrusted == "unsigned" and not stats.checkpoint
    assert state_of(store) == folded(table)


async def test_an_unsigned_checkpoint_whose_snapshot_is_older_than_it_says_is_dropped() -> None:
    """Unsigned, its snapshots cannot be checked against it; an event that does not follow its
    stream's snapshot shows one older than it says: rebuilt from the log's start, instead of
    refusing the partition (``CorruptLog``) or folding on from the wrong state."""
    table = seated()
    first = await write_checkpoint(table)
    bet(table, 500)
    await unsigned_checkpoint(table)
    [old_snapshot] = [r for r in first if r.key == SOLO.encode()]
    commit(table, [old_snapshot])
    table.do(cmd.Deal(player_id="ann"), LATER)
    store, stats = await take_over(table, "accept")
    assert stats.distrusted == "snapshots" and state_of(store) == folded(table)


async def test_a_handler_with_another_key_keeps_the_partition_out_of_service() -> None:
    """Its checkpoints all fail authentication, but it must not rebuild from the log and
    serve the partition: it cannot open the snapshots either (nor sign what the others
    accept). Pins what the release before did ("sealed under another key")."""
    table = seated()
    bet(table, 500)
    await write_checkpoint(table)
    # a record no handler wrote beside them changes nothing: no snapshot opens
    commit(table, [Outgoing(TOPICS.snapshots, b"junk-key", b"hello", [], 0)])
    stranger = SnapshotCodec(b"x" * 32), CheckpointSigner(b"y" * 32, TOPICS.snapshots)
    with pytest.raises(SnapshotError, match="cannot open") as refused:
        await take_over(table, "accept", *stranger)
    # the operator is told where to look: the key (a fault drill's handler whose key file's
    # mount was missing made itself a new key and held its partitions failed, unexplained)
    assert "sealed under another shoe key" in str(refused.value)
    assert "BLACKJACK_SHOE_KEY_FILE" in str(refused.value)


def _flipped(value: bytes) -> bytes:
    """A sealed snapshot with one byte of its sealed part changed (still a sealed snapshot)."""
    record = json.loads(value)
    sealed = base64.b64decode(record["sealed"])
    record["sealed"] = base64.b64encode(sealed[:-1] + bytes([sealed[-1] ^ 1])).decode()
    return json.dumps(record).encode()


@pytest.mark.parametrize(
    ("key", "spoiled", "why"),
    [
        (SOLO, lambda value: value[: len(value) // 2], "not a sealed snapshot"),
        (SOLO, _flipped, "no key of this handler opens it"),
        ("junk-key", lambda value: b"hello", "not a sealed snapshot"),
    ],
)
async def test_a_snapshot_that_cannot_be_opened_is_stepped_over_where_the_key_is_right(
    key: str, spoiled: Callable[[bytes], bytes], why: str
) -> None:
    """A snapshot record half written, with a byte changed, or one no handler wrote, on the
    snapshots topic after a signed checkpoint: the checkpoint's authentication holds (the key
    is this partition's), its snapshots differ. Before, the rebuild tried to open every
    snapshot and the first it could not kept the partition out of service for good (every
    retry failed the same): every table and wallet of the partition stopped."""
    table = seated()
    bet(table, 500)
    records = await write_checkpoint(table)
    [snapshot] = [r for r in records if r.key == SOLO.encode()]
    table.do(cmd.Deal(player_id="ann"), LATER)
    commit(table, [Outgoing(TOPICS.snapshots, key.encode(), spoiled(snapshot.value), [], 0)])
    store, stats = await take_over(table)
    assert stats.distrusted == "snapshots" and not stats.checkpoint
    assert stats.unopened == (f"{key}: {why}",)
    assert state_of(store) == folded(table)


def test_unsigned_checkpoints_are_accepted_or_refused_by_configuration() -> None:
    key = {"BLACKJACK_SHOE_KEY": "ab" * 32}
    assert HandlerConfig.from_env(key).unsigned_checkpoints == "accept"
    refuse = {**key, "BLACKJACK_UNSIGNED_CHECKPOINTS": "Refuse"}
    assert HandlerConfig.from_env(refuse).unsigned_checkpoints == "refuse"
    with pytest.raises(ConfigurationError, match="accept or refuse"):
        HandlerConfig.from_env({**key, "BLACKJACK_UNSIGNED_CHECKPOINTS": "yes"})


@pytest.mark.parametrize(
    ("committed", "trusted"),
    [
        (OffsetAndMetadata(7, ""), "accept"),  # the release before committed last
        (OffsetAndMetadata(7, SIGNED_CHECKPOINTS_MARK), "refuse"),
        (None, "refuse"),  # deleted, expired or never committed
    ],
)
async def test_an_unsigned_checkpoint_is_trusted_only_where_the_release_before_committed(
    committed: OffsetAndMetadata | None, trusted: str
) -> None:
    """A group whose committed offsets are gone (deleted, or expired after
    ``offsets.retention.minutes``) trusted an unsigned checkpoint, forged by whoever can write
    the snapshots topic: its absence read as "the release before may have written it"."""
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    tp = TopicPartition(TOPICS.commands, 0)

    async def fetch_committed_offsets(tps: Any) -> dict[Any, OffsetAndMetadata]:
        return {} if committed is None else {tp: committed}

    handler._consumer = cast(
        AIOKafkaConsumer,
        SimpleNamespace(
            _coordinator=SimpleNamespace(fetch_committed_offsets=fetch_committed_offsets)
        ),
    )
    assert await handler._unsigned_checkpoints(_Partition(0, tp)) == trusted
