"""The command handler on Kafka: consume, decide, produce, all in one transaction.

One instance consumes ``blackjack.commands`` in the handlers' consumer group
(``read_committed``, no auto-commit). For every command partition it is given it keeps

* a transactional producer whose ``transactional_id`` is fixed per partition
  (``<group>.<commands topic>.<partition>``). aiokafka's ``send_offsets_to_transaction`` takes
  the group id only, not the consumer's generation, so the group cannot fence a stale
  instance: the transactional id does. Starting the producer on assignment fences the last
  owner of the partition and aborts whatever it left open;
* the streams of the partition in memory, rebuilt from the newest snapshot and the events and
  results after it (``replay``) before the first command is taken, kept across a rebalance
  only when that rebalance gives the partition back and nothing was written to it since
  this instance's own last commit there (one given to another instance is let go, its cold
  streams' file with it).

Each batch of a partition's records is one transaction: the events of every command, its
result, the commands it causes on other streams, a snapshot every so often, and the consumed
offsets. When a transaction fails the partition's memory is dropped and rebuilt from Kafka, and
consumption resumes at the committed offset, so nothing is lost or done twice.

A second task, the clock, turns expired timers into commands (``clock``, sent by ``timers``).

This module starts and stops the handler and answers for its health; its parts are the layers
of ``CommandHandler``, each in a module of its own: ``partitions`` (what it holds of each
partition, the gauges), ``takeover`` (assignment, revocation, taking a partition over),
``checkpointing`` (snapshots and checkpoints), ``transactions`` (the consume-transact loop) and
``ticker`` (the clock task).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer

from blackjack.bus.codecs import require_codecs
from blackjack.bus.header_names import read_header_names_not_utf8
from blackjack.bus.reachable import wait_for_brokers
from blackjack.bus.topics import SNAPSHOT_MAX_BYTES, ensure_topics
from blackjack.command_handler.assignment import assignors
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.key_check import check_the_key_against_the_log
from blackjack.command_handler.partitions import _Partition, _Retained, ignore_unread_fences
from blackjack.command_handler.processor import Processor
from blackjack.command_handler.replay import assign_reader
from blackjack.command_handler.signing import COMMANDS_PURPOSE, CommandSigner
from blackjack.command_handler.snapshots import CheckpointSigner, SnapshotCodec
from blackjack.command_handler.streams import StreamState
from blackjack.command_handler.takeover import TAKEOVER_TIMEOUT_S, _Rebalance
from blackjack.command_handler.ticker import Ticker
from blackjack.command_handler.timers import TimerSender
from blackjack.domain.commands import COMMAND_TYPES
from blackjack.domain.wallet import SERVICE_ONLY_WALLET_COMMANDS, WALLET_COMMAND_TYPES
from blackjack.messages.envelope import type_name
from blackjack.observability import metrics
from blackjack.rng import csprng_shuffle
from blackjack.table import Shuffler

MAX_POLL_INTERVAL_MS = int((TAKEOVER_TIMEOUT_S + 60) * 1000)
"""Longest the loop may go without polling before the group drops this instance: one
takeover at most, since the loop polls between two."""

READER_FETCH_WAIT_MS = 20
HEARTBEAT_AT_MOST_MS = 1000


def heartbeat_ms(session_timeout_ms: int) -> int:
    """A member learns of a rebalance at its next heartbeat: when another instance leaves or
    joins, every partition of the group waits up to this long (a quarter of the session
    timeout was 2.5 s by default), so at most a second, and well inside the session."""
    return max(min(session_timeout_ms // 4, HEARTBEAT_AT_MOST_MS), 100)


def utc_now() -> datetime:
    return datetime.now(UTC)


class CommandHandler(Ticker):
    def __init__(
        self,
        config: HandlerConfig,
        *,
        shuffler: Shuffler = csprng_shuffle,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.config = config
        self.topics = config.topics
        self._now = clock
        keys = config.shoe_keys
        self._seal = keys.seal(writes=config.shoe_seal_version)
        self._codec = SnapshotCodec(*keys.opening("blackjack/snapshots/v1"))
        signing, *older = keys.verifying("blackjack/checkpoints/v1")
        self._checkpoints = CheckpointSigner(signing, self.topics.snapshots, older=older)
        self.processor = Processor(
            topics=self.topics,
            partitions=config.kafka.partitions,
            seal=self._seal,
            signer=CommandSigner(*keys.verifying(COMMANDS_PURPOSE)),
            source=config.source,
            shuffler=shuffler,
            dedup_window=config.dedup_window,
            money_ids_max=config.money_ids_max,
            money_sent_at_required=config.money_sent_at == "required",
            round_required=config.command_round == "required",
        )
        self._partitions: dict[int, _Partition] = {}
        self._retained: dict[int, _Retained] = {}
        self._assigned_once = asyncio.Event()
        self._rebalancing = False
        """Between a revocation and the next assignment: the group rebalances (eager:
        every partition revoked), and the handler holds none of them."""
        self._change = asyncio.Event()
        self._stopping = asyncio.Event()
        self._stop_task: asyncio.Future[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._backlog_shown: set[int] = set()
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: AIOKafkaConsumer | None = None
        self.failure: BaseException | None = None
        self.died = asyncio.Event()  # set with ``failure``: the process should end
        self.log = structlog.get_logger("blackjack.command_handler").bind(
            instance=config.instance_id
        )
        self._timers = TimerSender(config, self.log)

    # ---- life cycle -----------------------------------------------------------------

    def export_metrics(self) -> None:
        """The handler's series, there from the start (0 partitions ready until the group
        assigns some): a process waiting for its brokers is seen waiting."""
        declare_metrics()
        metrics.SNAPSHOT_LIMIT_BYTES.set(SNAPSHOT_MAX_BYTES)
        metrics.COMMAND_PARTITIONS.set(self.config.kafka.partitions)
        metrics.SHOE_KEYS.clear()  # (one handler a process, but the tests start several)
        for key_id, role in self.config.shoe_keys.key_ids().items():
            metrics.SHOE_KEYS.labels(key_id, role).set(1)
        self._publish_gauges()

    async def start(self) -> None:
        kafka = self.config.kafka
        ignore_unread_fences(asyncio.get_running_loop())
        require_codecs()  # a batch a producer compressed: read, or no start (bus.codecs)
        read_header_names_not_utf8()  # a command, event or snapshot record with one: read
        self.export_metrics()
        await wait_for_brokers(kafka.bootstrap, kafka.security)  # started before them: waits
        await ensure_topics(kafka, self.topics)
        client = f"{self.config.instance_id}"
        self._reader = AIOKafkaConsumer(
            **kafka.client_options(),
            group_id=None,
            client_id=f"{client}-replay",
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            # It reads up to known ends, never waits for new records: a fetch in flight when
            # it moves to another partition delays that read by at most this (500 by default)
            fetch_max_wait_ms=READER_FETCH_WAIT_MS,
        )
        await self._reader.start()
        assign_reader(self._reader, self.topics, kafka.partitions)
        # before any partition is taken: a key that opens none of the log's shoes would
        # serve the partitions that hold none, and seal shoes no other handler opens
        await check_the_key_against_the_log(
            self._reader, self.topics, kafka.partitions, self._seal, TAKEOVER_TIMEOUT_S
        )
        await self._timers.start()
        self._consumer = AIOKafkaConsumer(
            **kafka.client_options(),
            group_id=self.config.group_id,
            client_id=f"{client}-commands",
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=self.config.session_timeout_ms,
            heartbeat_interval_ms=heartbeat_ms(self.config.session_timeout_ms),
            max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
            partition_assignment_strategy=assignors(),  # sticky: see assignment.py
        )
        await self._consumer.start()
        self._consumer.subscribe([self.topics.commands], listener=_Rebalance(self))
        self._tasks = [
            asyncio.create_task(self._guard(self._consume()), name="commands"),
            asyncio.create_task(self._guard(self._tick()), name="clock"),
        ]
        self.log.info(
            "handler started",
            group=self.config.group_id,
            topics=list(self.topics.all()),
            partitions=kafka.partitions,
            shoe_keys=self.config.shoe_keys.key_ids(),
        )

    async def stop(self, timeout: float = 10.0) -> None:
        """Let the transactions in progress finish (those still running after ``timeout`` are
        aborted), hand the partitions over, close everything. One stop: every call waits for
        it, and a caller cancelled while waiting does not cut it short."""
        if self._stop_task is None:
            self._stopping.set()
            self._stop_task = asyncio.ensure_future(self._stop(timeout))
        await asyncio.shield(self._stop_task)

    async def _stop(self, timeout: float) -> None:
        for task in self._tasks[1:]:
            task.cancel()
        if self._tasks:
            consume = self._tasks[0]
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(consume), timeout)
            consume.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for partition in list(self._partitions.values()):
            async with partition.lock:
                await self._close_producer(partition)
        for number in self._backlog_shown:  # served here no more: no figure left standing
            with contextlib.suppress(KeyError):  # another instance in this process removed it
                metrics.COMMAND_BACKLOG.remove(str(number))
        self._backlog_shown = set()
        closing = [
            client.stop  # the consumer first: it leaves the group, the others take over
            for client in (self._consumer, self._reader)
            if client is not None
        ]
        failures = []
        for close in [*closing, self._timers.stop]:
            try:  # each one, whatever the one before did
                await close()
            except Exception as error:
                failures.append(error)
                self.log.exception("closing failed while stopping")
        self._changed()
        self.log.info("handler stopped")
        if failures:
            raise failures[0]

    async def join(self) -> None:
        """Return when one of the handler's tasks has ended (it failed, or it was stopped)."""
        if self._tasks:
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)

    async def _guard(self, work: Any) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            self.failure = error
            self.log.exception("handler task died")
            self.died.set()
            self._changed()
            raise

    @property
    def ready(self) -> bool:
        """Joined the group, not in a rebalance (holding no partition: before, ready then,
        every one of none was), not stopping (it hands its partitions over), and every
        assigned partition rebuilt and consuming."""
        return (
            self.failure is None
            and self._assigned_once.is_set()
            and not self._rebalancing
            and not self._stopping.is_set()
            and all(p.status == "ready" for p in self._partitions.values())
        )

    @property
    def alive(self) -> bool:
        return self.failure is None and all(not t.done() for t in self._tasks)

    def owned_partitions(self) -> set[int]:
        return {n for n, p in self._partitions.items() if p.status == "ready"}

    def partition_states(self) -> dict[int, str]:
        """Each assigned partition's state: pending, ready, failed or fenced."""
        return {n: p.status for n, p in sorted(self._partitions.items())}

    def streams(self) -> dict[str, tuple[int, StreamState]]:
        """The sequence and state of every stream of the ready partitions, as held in memory
        (states are never changed in place: a caller may keep them)."""
        return {
            stream.stream_id: (stream.sequence, stream.state)
            for partition in self._partitions.values()
            if partition.status == "ready" and partition.store is not None
            for stream in partition.store.all_streams()
        }

    async def wait_ready(self, timeout: float) -> None:
        await self.wait_until(lambda: self.ready, timeout)

    async def wait_until(self, condition: Callable[[], bool], timeout: float) -> None:
        """Wait, without polling, until ``condition`` holds after some change of partitions."""
        async with asyncio.timeout(timeout):
            while True:
                change = self._change
                if self.failure is not None:
                    raise RuntimeError("the handler failed") from self.failure
                if condition():
                    return
                await change.wait()


def declare_metrics() -> None:
    """This process runs a command handler: the series its alerts read exist from now on."""
    table_types = [type_name(kind) for kind in COMMAND_TYPES]
    wallet_types = [type_name(kind) for kind in WALLET_COMMAND_TYPES]
    signed = [type_name(kind) for kind in SERVICE_ONLY_WALLET_COMMANDS]
    metrics.declare_handler([*table_types, *wallet_types], ["Deposit", *signed])
