"""What commands sent to streams that do not exist cost the handler (docs/kafka.md,
"Idempotency"): a buggy or hostile client sending ``SitDown`` to a new table id each time, every
one refused ``table_not_open``; or (``--kind deposit``) a player's wallet sending a ``BuyIn``
to a new table id each time, whose signed ``Deposit`` the table declines (the money goes back
to the wallet: ``RefundBuyIn``).

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_stray_commands \\
        [--junk 0,1000,4000] [--window 1000] [--kind sitdown|deposit]

For each count of junk commands, in a fresh one-partition space on the tests' broker
(``tests/integration/infra.py``: ``KAFKA_PORT`` ...): first in-process, without the broker, the
memory the partition's store holds after them (``tracemalloc``) and the sealed bytes its next
checkpoint writes; then a handler takes them on the broker, checkpoints, and a second one takes
the partition over: the bytes the snapshots topic keeps for good (the newest record of each
key, what compaction leaves), the streams the new owner holds, and how long its rebuild took
(on the broker, about a second of which is waiting at the end of a topic: the in-process
``open_ms``, opening each record a rebuild reads, is the part that grows with them).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import tracemalloc
import uuid
from datetime import UTC, datetime

from prometheus_client import REGISTRY

from blackjack.bus.headers import COMMAND_OFFSET_HEADER, COMMANDS_TO_HEADER, offset_header
from blackjack.bus.topics import delete_topics, ensure_topics
from blackjack.client import BlackjackClient
from blackjack.command_handler.ids import event_id, step_id
from blackjack.command_handler.processor import Processor
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.records import Outgoing
from blackjack.command_handler.snapshots import (
    CHECKPOINT_PREFIX,
    CheckpointSigner,
    SnapshotCodec,
    checkpoint_key,
)
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.domain.wallet import BuyIn, WalletDeposit, WalletState, wallet_stream
from blackjack.loadtest.cli import quiet_logs
from blackjack.messages.envelope import CommandEnvelope
from tests.integration.conftest import KafkaSpace, following, read_topic, running_handler
from tests.integration.infra import kafka_bootstrap
from tests.unit.processor_harness import new_processor

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def junk(number: int) -> CommandEnvelope:
    """A command to a table no one opened, under an id of its own (a client's UUID)."""
    return CommandEnvelope(
        command_id=str(uuid.uuid4()),
        stream_id=f"nowhere-{number}",
        command=cmd.SitDown(player_id=f"p{number}"),
    )


PLAYER = "junk-player"
FUNDS = 1_000_000


def buy_in(number: int) -> tuple[str, BuyIn]:
    """A wallet's buy-in to a table no one opened: the wallet takes it (``BuyInSent``), the
    table declines its deposit and the money goes back."""
    return wallet_stream(PLAYER), BuyIn(player_id=PLAYER, table_id=f"nowhere-{number}", amount=1)


def _inbound(envelope: CommandEnvelope, offset: int) -> Inbound:
    return Inbound(envelope.stream_id.encode(), envelope.model_dump_json().encode(), [], 0, offset)


def _junk_sitdowns(processor: Processor, store: PartitionStore, count: int) -> None:
    inbounds = [_inbound(junk(n), n) for n in range(count)]
    for inbound in inbounds:
        result = processor.handle(store, inbound, T0).result
        assert result.rejection is not None and result.rejection.code == "table_not_open"


def _junk_buy_ins(processor: Processor, store: PartitionStore, count: int) -> None:
    """The wallet's buy-ins, each followed by the steps the handler sends (the table's
    Deposit, the wallet's RefundBuyIn), as the partition reads them."""
    offset = 0

    def handle(inbound: Inbound) -> list[Outgoing]:
        handled = processor.handle(store, inbound, T0)
        return [r for r in handled.outgoing if r.topic == processor.topics.commands]

    def envelope(stream_id: str, command: BuyIn | WalletDeposit) -> CommandEnvelope:
        return CommandEnvelope(command_id=str(uuid.uuid4()), stream_id=stream_id, command=command)

    handle(
        _inbound(envelope(wallet_stream(PLAYER), WalletDeposit(player_id=PLAYER, amount=FUNDS)), 0)
    )
    for number in range(count):
        pending = handle(_inbound(envelope(*buy_in(number)), offset := offset + 1))
        while pending:  # the deposit, then its refund
            record = pending.pop(0)
            offset += 1
            pending += handle(Inbound(record.key, record.value, record.headers, 0, offset))
    wallet = store.get(wallet_stream(PLAYER)).state
    assert isinstance(wallet, WalletState) and wallet.balance == FUNDS and not wallet.pending


def in_process(count: int, window: int, kind: str) -> tuple[float, int, int, float]:
    """Memory held after ``count`` junk commands (bytes), the sealed bytes the next checkpoint
    writes, the streams the store holds, and the seconds a takeover takes to open those
    records."""
    processor = new_processor(dedup_window=window)
    codec = SnapshotCodec(b"s" * 32)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = PartitionStore(0, codec=codec)
    if kind == "deposit":
        _junk_buy_ins(processor, store, count)
    else:
        _junk_sitdowns(processor, store, count)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    records = {stream_id: store.sealed(stream_id) for stream_id in store.dirty}
    # what a takeover does with each record before it reads the log: its share of the
    # checkpoint's digest, and opening it
    checkpoints = CheckpointSigner(b"c" * 32, "measure.snapshots")
    started = time.perf_counter()
    for key, raw in records.items():
        checkpoints.element(key, raw)
        if key == store.strays_key:  # the partition's stray answers
            codec.decode_answers(key, raw)
        else:
            codec.decode(raw)
    opened = time.perf_counter() - started
    return held, sum(map(len, records.values())), store.count(), opened


def rebuild_seconds() -> float:
    return REGISTRY.get_sample_value("blackjack_rebuild_seconds_sum") or 0.0


async def checkpointed(space: KafkaSpace, commands: int) -> None:
    """Until a checkpoint committed on the topic covers the partition's ``commands``."""
    if not commands:
        return
    key = checkpoint_key(0).encode()
    async with following(space, space.topics.snapshots) as consumer, asyncio.timeout(60):
        while True:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    covered = offset_header(record.headers, COMMANDS_TO_HEADER)
                    if record.key == key and covered == commands:
                        return


async def answered_to(space: KafkaSpace) -> int:
    """The commands offset below which every command has its answer on the results topic."""
    offsets = [
        offset_header(record.headers, COMMAND_OFFSET_HEADER)
        for record in await read_topic(space, space.topics.results)
    ]
    return max((o for o in offsets if o is not None), default=-1) + 1


async def send_junk(space: KafkaSpace, client: BlackjackClient, count: int, kind: str) -> int:
    """The junk commands sent and answered (a buy-in's steps too); the commands offset the
    checkpoint that follows covers."""
    if kind != "deposit":
        sent = await client.send_all([(junk(n).stream_id, junk(n).command) for n in range(count)])
        for command_id in sent:
            result = await client.result(command_id, timeout=60)
            assert result.rejection is not None, result
        return count
    wallet = wallet_stream(PLAYER)
    funded = await client.execute(wallet, WalletDeposit(player_id=PLAYER, amount=FUNDS))
    assert funded.status == "accepted", funded
    sent = await client.send_all([buy_in(n) for n in range(count)])
    for command_id in sent:
        result = await client.result(command_id, timeout=60)
        assert result.status == "accepted" and result.first_sequence is not None, result
        deposit = step_id(event_id(wallet, result.first_sequence), "deposit")
        refunded = await client.result(step_id(deposit, "refund"), timeout=60)
        assert refunded.status == "accepted", refunded
    return await answered_to(space)


async def on_the_broker(count: int, window: int, kind: str) -> tuple[int, int, int, float]:
    """Bytes the snapshots topic keeps for good, its records kept, the streams a new owner
    holds, and its rebuild's seconds."""
    space = KafkaSpace(kafka_bootstrap(), f"strays{uuid.uuid4().hex[:8]}.", 1)
    await ensure_topics(space.settings, space.topics)
    config = space.config(dedup_window=window, checkpoint_after_s=0.5)
    try:
        async with running_handler(config) as handler, space.client() as client:
            await checkpointed(space, await send_junk(space, client, count, kind))
        newest: dict[bytes, int] = {}
        for record in await read_topic(space, space.topics.snapshots):
            if not record.key.decode().startswith(CHECKPOINT_PREFIX):
                newest[record.key] = len(record.value)
        before = rebuild_seconds()
        async with running_handler(config) as handler:
            seconds = rebuild_seconds() - before
            streams = sum(
                p.store.count() for p in handler._partitions.values() if p.store is not None
            )
        return sum(newest.values()), len(newest), streams, seconds
    finally:
        await delete_topics(space.settings, space.topics)


async def main(counts: list[int], window: int, kind: str) -> None:
    quiet_logs(sys.stderr)  # the handlers log every command: off the figures' stdout
    what = {
        "sitdown": "SitDown at a table no one opened",
        "deposit": "a wallet's BuyIn to a table no one opened, its Deposit declined",
    }[kind]
    print(f"window {window}; per count of junk commands ({what}):")
    print(
        "junk  memory_kB  B/cmd  checkpoint_B  streams  open_ms | kept_B  kept_records  "
        "streams_after_takeover  rebuild_s"
    )
    for count in counts:
        started = time.monotonic()
        held, sealed, streams, opened = in_process(count, window, kind)
        kept, records, after, seconds = await on_the_broker(count, window, kind)
        per = held / count if count else 0.0
        print(
            f"{count:>5}  {held / 1000:>9.1f}  {per:>5.0f}  {sealed:>12}  {streams:>7}  "
            f"{opened * 1000:>7.1f} | {kept:>6}  {records:>12}  {after:>22}  {seconds:>9.3f}"
            f"   ({time.monotonic() - started:.0f} s)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--junk", default="0,1000,4000", help="counts of junk commands")
    parser.add_argument("--window", type=int, default=1000, help="BLACKJACK_DEDUP_WINDOW")
    parser.add_argument("--kind", choices=("sitdown", "deposit"), default="sitdown")
    args = parser.parse_args()
    asyncio.run(main([int(c) for c in args.junk.split(",")], args.window, args.kind))
