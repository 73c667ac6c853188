"""Following one table's public events, folded into the view a reconnecting client gets.

A table's history, whoever wrote it (the player's commands, the service's clock, another
player at a shared table), is folded in order by the read model's own fold: first the events
the read model already holds, from the query API (``play.read_model``), then the table's
partition of ``blackjack.events``, ``read_committed``, from the read model's position in it.
Without a query API (or one that cannot say, or one whose read model was folded from another
log: a position past a partition's end) the partition is read from its beginning, every
table hashed to it included, and ``joined`` says so. ``until(sequence)`` waits until the
events of a command are in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

from aiokafka import TopicPartition

from blackjack.bus.clients import ScopedConsumer
from blackjack.bus.header_names import header_name_not_utf8
from blackjack.bus.settings import PLAINTEXT, KafkaSecurity
from blackjack.bus.topics import Topics, partition_for
from blackjack.domain.wallet import wallet_stream
from blackjack.messages.wire import WireEnvelope, decode
from blackjack.play.read_model import NoHistory, ReadModelApi, read_model_history
from blackjack.projections.other_log import Position, confirmed_past_the_end
from blackjack.projections.projector import StreamProjection
from blackjack.projections.rebuild import topic_partitions
from blackjack.projections.views import ProjectionError
from blackjack.projections.wallets import WalletProjection


class TableFollower:
    def __init__(
        self,
        bootstrap: str,
        stream_id: str,
        topics: Topics | None = None,
        *,
        security: KafkaSecurity = PLAINTEXT,
        client_id: str = "blackjack-play",
        read_model: ReadModelApi | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.stream_id = stream_id
        self.read_model = read_model
        self.joined = ""
        """How the history was read: from the read model, or why from the partition's start."""
        self.from_start = True
        """The partition is read from its start: no read model gave the stream's history."""
        self.records_read = 0
        """Records of the partition fetched (every table's), since ``start``."""
        self.topics = topics or Topics()
        self.security = security
        self.client_id = client_id
        self.table = StreamProjection.new(stream_id)
        self.failure: BaseException | None = None
        self._key = stream_id.encode()
        self._changed = asyncio.Condition()
        self._consumer: ScopedConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._tp: TopicPartition | None = None
        self._history_end = 0
        self._read_to = 0
        self._folded: dict[int, WireEnvelope] = {}

    async def start(self) -> None:
        # whose fetcher reads a record with a header name that is not UTF-8 (stepped over in
        # ``_follow``): aiokafka's own raised out of ``getmany``, and ``play`` and ``send``
        # died with a traceback at every table of that partition (an operations review)
        self._consumer = ScopedConsumer(
            bootstrap_servers=self.bootstrap,
            **self.security.client_options(),
            group_id=None,
            client_id=self.client_id,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        partitions = await topic_partitions(self.bootstrap, self.topics.events, self.security)
        tp = TopicPartition(self.topics.events, partition_for(self.stream_id, len(partitions)))
        await self._consumer.start()
        self._consumer.assign([tp])
        start = await self._read_model_start(tp, partitions)
        if start is None:
            await self._consumer.seek_to_beginning(tp)
        else:
            self._consumer.seek(tp, start)
        self._tp = tp
        self.from_start = start is None
        self._read_to = 0 if start is None else start  # caught up at once when nothing is new
        self._history_end = (await self._consumer.end_offsets([tp]))[tp]
        if start is None:
            first = (await self._consumer.beginning_offsets([tp]))[tp]
            self.joined += (
                f"; reading partition {tp.partition} of {tp.topic} from its start "
                f"({self._history_end - first:,} records, every table hashed to it)"
            )
        self._task = asyncio.create_task(self._follow(), name="follow-table")

    async def _read_model_start(
        self, tp: TopicPartition, partitions: Sequence[TopicPartition]
    ) -> int | None:
        """Fold what the read model holds of the stream; the offset to read the rest from, or
        None (``joined`` says why) to read the partition from its start.

        A read model whose position in any partition of the topic lies past that partition's
        end was folded from another or a longer log (``projections.other_log``; its workers
        refuse it, its ``/readyz`` answers 503 ``store_of_another_log``): none of what it
        holds is this log's, its position in the stream's own partition included, even when
        the new log has grown past it there. Before, only that one position was checked, and
        a read model of a log made anew under the same name gave the other log's events of the
        table, then this log's from the other log's offset."""
        if self.read_model is None:
            self.joined = "no query API given (--api, BLACKJACK_API_URL)"
            return None
        try:
            history = await read_model_history(
                self.read_model, self.stream_id, tp.topic, tp.partition
            )
        except NoHistory as error:
            self.joined = str(error)
            return None
        consumer = self._consumer
        assert consumer is not None

        async def read_ends() -> dict[Position, int]:  # read after the positions: ends only grow
            ends = await consumer.end_offsets(list(partitions))
            return {(found.topic, found.partition): end for found, end in ends.items()}

        past = await confirmed_past_the_end(history.positions, read_ends)
        if past:
            self.joined = (
                f"the read model at {self.read_model.url} was folded from another or a longer "
                f"log: its positions lie past the end of {tp.topic}'s partitions ("
                + "; ".join(found.describe() for found in past)
                + "), so none of it is this log's"
            )
            return None
        for envelope in history.envelopes:
            self._fold(envelope)
        self.joined = (
            f"{len(history.envelopes):,} events from the read model at {self.read_model.url}, "
            f"then partition {tp.partition} of {tp.topic} from offset {history.next_offset:,}"
        )
        return history.next_offset

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()

    async def __aenter__(self) -> TableFollower:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def sequence(self) -> int:
        """The last event of the table folded in."""
        return self.table.view.last_sequence

    def _apply(self, envelope: WireEnvelope) -> None:
        self.table.apply(envelope)

    def folded_since(self, sequence: int) -> list[WireEnvelope]:
        """The events folded in after ``sequence``, in order."""
        return [
            self._folded[n] for n in range(sequence + 1, self.sequence + 1) if n in self._folded
        ]

    async def wait_until(self, condition: Callable[[], bool], timeout: float) -> None:
        """Return once ``condition`` holds of what is folded in (checked after every fetch);
        ``TimeoutError`` after ``timeout``, the follower's own failure if it failed."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: self.failed or condition())
        if self.failure is not None:
            raise self.failure

    async def until(self, sequence: int, timeout: float = 10.0) -> None:
        """Return once the table's events up to ``sequence`` are folded in."""
        await self.wait_until(lambda: self.sequence >= sequence, timeout)

    async def caught_up(self, timeout: float = 30.0) -> None:
        """Return once the table's history, as it was at ``start``, is folded in."""
        await self.wait_until(lambda: self._read_to >= self._history_end, timeout)

    async def changed(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the next event (the clock's, another player's)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait()
                return True
        return False

    def _fold(self, envelope: WireEnvelope) -> None:
        """The next event folded in; the very event folded in at its place, met again at a
        later offset, passed over, as the read model's writer does (``check_next`` failed
        on it: the table could not be played from this client again)."""
        if 0 < envelope.sequence <= self.sequence:
            if self._folded.get(envelope.sequence) == envelope:
                return
            folded = self._folded.get(envelope.sequence)
            raise ProjectionError(
                f"{self.stream_id} event {envelope.sequence} is {envelope.event_id}, but "
                f"{folded.event_id if folded else 'another'} was folded in at that place"
            )
        self._apply(envelope)
        self._folded[envelope.sequence] = envelope

    async def _follow(self) -> None:
        assert self._consumer is not None and self._tp is not None
        try:
            while True:
                batches = await self._consumer.getmany(timeout_ms=1000)
                for records in batches.values():
                    self.records_read += len(records)
                    for record in records:
                        # (one whose header name is not UTF-8 is no handler's: not believed)
                        if record.key == self._key and not header_name_not_utf8(record.headers):
                            self._fold(decode(record.value or b""))
                # past the records read, and past transaction markers
                self._read_to = await self._consumer.position(self._tp)
                async with self._changed:
                    self._changed.notify_all()
        except Exception as error:  # an event this version cannot fold: said, not hidden
            self.failure = error
            async with self._changed:
                self._changed.notify_all()
            raise


class WalletFollower(TableFollower):
    """The player's wallet stream (``wallet:<player>``), folded by the read model's wallet
    fold: the money a shared table's player has between tables, buy-ins on their way."""

    def __init__(
        self,
        bootstrap: str,
        player_id: str,
        topics: Topics | None = None,
        *,
        security: KafkaSecurity = PLAINTEXT,
        client_id: str = "blackjack-play",
        read_model: ReadModelApi | None = None,
    ) -> None:
        stream_id = wallet_stream(player_id)
        self.wallet = WalletProjection.new(stream_id)  # before the read model's events
        super().__init__(
            bootstrap,
            stream_id,
            topics,
            security=security,
            client_id=client_id,
            read_model=read_model,
        )

    @property
    def sequence(self) -> int:
        return self.wallet.view.last_sequence

    def _apply(self, envelope: WireEnvelope) -> None:
        self.wallet.apply(envelope)
