"""The client's results reader: follows ``blackjack.command-results`` from where a run starts,
hands every record on to be kept (``keep``) and every answered command offset to its sendings
(``answered``), and keeps its place through what the topic goes through: records deleted
before it read them, the topic deleted and made again (told by its topic id), partitions added
or gone, a broker's passing errors (retried after a backoff, said in ``ReaderHealth``).

It owns no consumer's settings: the client makes the consumer (its security, its client id)
and hands it over at each start (``begin``). Its positions outlive a stop: a client started
again knows the topic it read, and whether it was made again meanwhile."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, OffsetOutOfRangeError

from blackjack.bus.clients import ScopedConsumer
from blackjack.bus.header_names import header_name_not_utf8
from blackjack.bus.headers import COMMAND_OFFSET_HEADER, offset_header
from blackjack.bus.topic_ids import TopicIdsUnsupported, TopicState
from blackjack.bus.topics import Topics
from blackjack.client.answers import KEEP_RESULTS
from blackjack.client.health import ReaderState, read_error_is_fatal
from blackjack.client.metrics import RESULTS_DELETED_UNREAD, RESULTS_RESETS
from blackjack.client.sendings import Sendings
from blackjack.error_text import error_text
from blackjack.observability.logging import Throttled

log = structlog.get_logger("blackjack.client")

RESULTS_LOOKBACK_MS = 60_000
"""How far before a command's ``sent_at`` its answer is looked for on the results topic
(``result`` of a command sent before this start): the margin for the sender's clock against
the handler's, which stamps the answer (``CreateTime``)."""

READ_RETRY_FIRST_S = 0.1
READ_RETRY_MAX_S = 5.0
"""The results reader's pause after a fetch that failed with a broker's passing error: the
first, doubled at each failure in a row, never more than the last (a broker away is not
asked in a busy loop; one back is read again within 5 s)."""
READ_RETRY_LOG_EVERY_S = 30.0

RESULTS_TOPIC_CHECK_S = 1.0
"""How often the results reader asks the brokers for the results topic's id
(``bus.topic_ids``). A topic deleted and made again under the reader has another id: it is read
from its beginning (a new topic longer than the reader's positions raises no error; before, the
reader read it on from those positions, over the answers before them), so an answer of the new
topic before those positions comes within about this long. The records read since the last
check are remembered until the next: those of them the new topic holds are not kept twice.
A fetch waits for records no longer than until the next check is due
(``RESULTS_FETCH_WAIT_MS`` at most), so the checks come every second whether records come or
not: before, the check came only after a fetch that found nothing had waited its whole second.
The new topic's first answers then wait for the fetch in flight at the old position (the
broker holds it up to aiokafka's ``fetch_max_wait_ms``, 0.5 s, and answers a connection's
requests in turn). Measured with ``tests/integration/measure_recreated_results.py --held``
(30 trials, deleted at a random time): median 0.51 s, at most 1.01 s; before, median 1.01 s,
at most 1.51 s."""

RESULTS_FETCH_WAIT_MS = 1000
"""How long one fetch of the results reader waits for records when none come (at most)."""


class ResultsReader:
    """The results topic as this client reads it: the consumer of the run, the topic's id and
    partitions, and per partition where the run started (``pinned``), how far it has read
    (``read_to``) and the time of the last record read there (``last_read_ms``)."""

    def __init__(
        self,
        topics: Topics,
        client_id: str,
        sendings: Sendings,
        *,
        keep: Callable[[Any], None],
        answered: Callable[[int, int], None],
        health: Callable[[ReaderState, str | None, int], None],
    ) -> None:
        """``keep(record)``: a record read, to keep as its command's answer.
        ``answered(partition, command_offset)``: the command a record answers (its
        ``bj_command_offset``). ``health(state, error, failures)``: a change of the reader's
        state."""
        self._topics = topics
        self._client_id = client_id
        self._sendings = sendings
        self._keep = keep
        self._answered = answered
        self._health = health
        self.consumer: AIOKafkaConsumer | None = None
        self.generation = 0
        """The results topics read so far, counted: one deleted and made again is another (its
        offsets start again)."""
        self.topic_id: uuid.UUID | None = None
        """The id of the results topic the reader reads (None: the broker gives none)."""
        self.topic_checked = 0.0
        self.topic_ids_unsupported = False
        self.topic_partitions: frozenset[int] = frozenset()
        """The results topic's partitions at the last check of its id (none: not known)."""
        self._unchecked: dict[tuple[int, int], tuple[int | None, int, int]] = {}
        """The records the reader kept since the last check of the topic's id, by (partition,
        offset): their (timestamp, hash of key, hash of value). Made again, the new topic is
        read from its beginning, and those of them it holds (the same record at the same
        place) are not kept twice (``_suspect``)."""
        self._suspect: dict[tuple[int, int], tuple[int | None, int, int]] = {}
        """The records read before a check found the topic made again: those the new topic
        holds at the same place are not kept a second time."""
        self.pinned: dict[int, int] = {}
        """Per partition of the results topic, where this run's reader started (the
        partitions it reads)."""
        self.last_read_ms: dict[int, int] = {}
        """Per partition of the results topic, the timestamp of the last record this run's
        reader read there (or of its start): where it reads on from if the partition ends
        before its position (recreated, truncated)."""
        self.read_to: dict[int, int] = {}
        """Per partition of the results topic, the offset after the last record this run's
        reader has taken (``_take``): a look-back reads up to it, and the reader keeps the
        answers wanted from there on."""
        self._retries_logged = Throttled(READ_RETRY_LOG_EVERY_S)

    async def begin(self, producer: AIOKafkaProducer) -> None:
        """A run's start with the ``consumer`` the client handed over (started): the topic's id
        taken before any position, then every partition (``producer``'s metadata) pinned at
        its end, before any send: no result of a later command can be missed."""
        consumer = self.consumer
        assert consumer is not None
        # the topic's id before any position is taken: every record fetched is checked
        # against it (_topic_recreated)
        state = await self.topic_state(consumer)
        partitions = await producer.partitions_for(self._topics.results)
        tps = [TopicPartition(self._topics.results, p) for p in sorted(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        self.pinned = {tp.partition: await consumer.position(tp) for tp in tps}
        self.read_to = dict(self.pinned)
        if state is None and not self.topic_ids_unsupported:
            # the broker asked may not have the topic yet: on a cluster each broker applies a
            # topic just created in its own time (before: the reader never learnt the id, and
            # never saw the topic made again). The partitions' leaders have it now: each
            # answered for its log above, and takes the metadata no later than the log.
            state = await self._leaders_topic_state(consumer, tps)
        known, self.topic_id = self.topic_id, None if state is None else state.topic_id
        self.topic_partitions = frozenset() if state is None else state.partitions
        if known is not None and self.topic_id not in (None, known):
            self.generation += 1  # made again since the last run: its offsets start again
        self.topic_checked = time.monotonic()
        now_ms = int(time.time() * 1000)
        self.last_read_ms = dict.fromkeys(self.pinned, now_ms)

    async def read(self) -> None:
        """Follow the results topic for good: a fetch that fails with a broker's passing
        error is tried again after a backoff (``READ_RETRY_*``, ``health`` says
        ``retrying``); a fatal one (``read_error_is_fatal``) ends the reader, and every wait
        fails at once with it (the client's ``_reader_ended``)."""
        failures = 0
        while True:
            try:
                await self._read_once()
            except KafkaError as error:
                if read_error_is_fatal(error):
                    raise
                failures += 1
                self._fetch_failed(error, failures)
                await asyncio.sleep(min(READ_RETRY_FIRST_S * 2 ** (failures - 1), READ_RETRY_MAX_S))
                continue
            if failures:
                log.info("the results reader reads again", failures=failures)
                failures = 0
                self._health("reading", None, 0)

    async def _read_once(self) -> None:
        """One fetch of the results, kept; the topic's id checked every
        ``RESULTS_TOPIC_CHECK_S`` (a topic made again is read from its beginning); a position
        out of range moved (said and counted); the partitions added to the topic since the
        last fetch assigned, those removed left."""
        consumer = self.consumer
        assert consumer is not None
        try:
            batches = await consumer.getmany(timeout_ms=self._fetch_wait_ms())
        except OffsetOutOfRangeError as error:
            positions = error.args[0] if error.args else None
            if not isinstance(positions, dict):
                raise  # (not aiokafka's fetcher's: retried after a backoff)
            if not await self._topic_recreated(consumer, out_of_range=positions):
                await self._reset_out_of_range(consumer, positions)
            return
        self._take(batches)
        if self._fetch_wait_ms() == 0:  # the check of the topic's id is due
            await self._topic_recreated(consumer)
        await self._follow_partitions(consumer)

    def _fetch_wait_ms(self) -> int:
        """How long the reader's next fetch may wait for records: ``RESULTS_FETCH_WAIT_MS``,
        no longer than until the next check of the topic's id is due (0: due now), so that
        the checks come every ``RESULTS_TOPIC_CHECK_S`` whether records come or not."""
        if self.topic_id is None:
            return RESULTS_FETCH_WAIT_MS  # (no id to check: a broker without topic ids)
        due = self.topic_checked + RESULTS_TOPIC_CHECK_S - time.monotonic()
        return max(0, min(RESULTS_FETCH_WAIT_MS, math.ceil(due * 1000)))

    async def _topic_recreated(
        self, consumer: AIOKafkaConsumer, out_of_range: Iterable[TopicPartition] = ()
    ) -> bool:
        """Whether the results topic was deleted and made again since the reader last checked
        its id; if so, the new one is read from its beginning. The records kept before a check
        that finds the id the reader knows came from that topic (ids are never used again):
        forgotten (``_unchecked``); otherwise they may be the new topic's, read again from its
        beginning but not kept twice (``_suspect``)."""
        if self.topic_id is None:
            return False  # (a broker without topic ids)
        assert isinstance(consumer, ScopedConsumer)
        # asked of the brokers the records came from, and those that said a position is out
        # of range (each answers from its own copy of the metadata, which may lag another's;
        # its copy is updated no later than its logs). Not any broker: on a cluster one that
        # has not applied the new topic yet says nothing new, and the reader, out of range in
        # the new topic, moved on in it as in the old (``past_end``), over its first answers.
        topic = self._topics.results
        read = {partition for partition, _ in self._unchecked}
        read.update(tp.partition for tp in out_of_range)
        leaders = consumer.leaders_of(TopicPartition(topic, p) for p in read)
        nodes: list[int | None] = [*leaders] or [None]
        states = [await self.topic_state(consumer, node_id) for node_id in nodes]
        self.topic_checked = time.monotonic()
        for state in states:
            if state is not None and state.topic_id not in (None, self.topic_id):
                await self._read_recreated(consumer, state)
                return True
        self._unchecked = {}
        for state in states:  # the same, or deleted and not made again yet: nothing new
            if state is not None:
                self.topic_partitions = state.partitions
        return False

    async def _read_recreated(self, consumer: AIOKafkaConsumer, state: TopicState) -> None:
        """Read the results topic made again from its beginning, in every partition it has
        (those it no longer has left), its answers kept apart from the old topic's (another
        generation: its offsets start again). Every answer to a command sent before may have
        been in the old topic unread: a gap (``Sendings.gap``) in every partition."""
        topic = self._topics.results
        partitions = sorted(state.partitions)
        gone = sorted(set(self.pinned) - state.partitions)
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        was, self.topic_id = self.topic_id, state.topic_id
        self.topic_partitions = state.partitions
        self.generation += 1
        self._suspect, self._unchecked = self._unchecked, {}
        # a look-back reads no further than where the reader reads from
        self.pinned = {tp.partition: await consumer.position(tp) for tp in tps}
        self.read_to = dict(self.pinned)
        now_ms = int(time.time() * 1000)
        self.last_read_ms = dict.fromkeys(self.pinned, now_ms)
        self._sendings.only_gaps_in(self.pinned)
        RESULTS_RESETS.labels(self._client_id, "recreated").inc()
        if gone:
            RESULTS_RESETS.labels(self._client_id, "partition_removed").inc(len(gone))
        log.error(
            "the results topic was deleted and made again under the reader (its topic id "
            "changed); it reads the new one from its beginning (answers the old one held "
            "unread are lost: their result() raises AnswerLost once a later one is read)",
            cause="recreated",
            topic=topic,
            topic_id_was=str(was),
            topic_id=str(state.topic_id),
            partitions=partitions,
            partitions_gone=gone,
            records_read_since_the_last_check=len(self._suspect),
        )

    async def _reset_out_of_range(
        self, consumer: AIOKafkaConsumer, positions: Mapping[TopicPartition, int]
    ) -> None:
        """Move the reader's position in each partition where it is out of range: past
        records deleted before it read them (retention, ``delete_records``), on from the
        earliest still there, the offsets skipped counted; past the partition's end (the topic
        recreated, its log truncated), on from ``RESULTS_LOOKBACK_MS`` before the last record
        it read there. Never to the end, over answers a caller may wait for (aiokafka's
        ``latest`` did, silently)."""
        tps = list(positions)
        first = await consumer.beginning_offsets(tps)
        end = await consumer.end_offsets(tps)
        for tp, was in positions.items():
            deleted = max(0, first[tp] - was)
            if deleted:
                cause, to = "deleted", first[tp]
                RESULTS_DELETED_UNREAD.labels(self._client_id).inc(deleted)
                # an answer to a command sent before now may have been among them
                self._sendings.gap(tp.partition)
            else:
                cause = "past_end"
                since = self.last_read_ms.get(tp.partition, 0) - RESULTS_LOOKBACK_MS
                found = (await consumer.offsets_for_times({tp: max(0, since)})).get(tp)
                to = end[tp] if found is None else max(first[tp], found.offset)
            consumer.seek(tp, to)
            # a look-back reads up to where the reader read from
            self.pinned[tp.partition] = min(self.pinned.get(tp.partition, to), to)
            self.read_to[tp.partition] = min(self.read_to.get(tp.partition, to), to)
            RESULTS_RESETS.labels(self._client_id, cause).inc()
            log.error(
                "the results reader's position was out of range; it reads on from another "
                "offset (answers deleted unread are lost: their result() times out)",
                cause=cause,
                partition=tp.partition,
                position=was,
                earliest=first[tp],
                end=end[tp],
                reads_from=to,
                deleted_unread=deleted,
            )

    async def _follow_partitions(self, consumer: AIOKafkaConsumer) -> None:
        """Assign the results topic's partitions added since the start (the operator raised
        its partition count; its metadata refreshed every ``RESULTS_METADATA_MAX_AGE_MS``),
        read from their beginning: every answer written there is the reader's. Partitions
        the topic no longer has (made again with fewer, on a broker whose topic ids did not
        tell it) are no longer read: said and counted (before: fetched again for good). The
        partitions known: those of the last check of the topic's id (fresher than the
        consumer's metadata, which may still show a topic made again as it was), else the
        consumer's."""
        known = (
            self.topic_partitions or consumer.partitions_for_topic(self._topics.results) or set()
        )
        assigned = {tp.partition: tp for tp in consumer.assignment()}
        added = sorted(set(known) - set(assigned))
        gone = sorted(set(assigned) - set(known)) if known else []
        if not added and not gone:
            return
        # aiokafka's assign() replaces the assignment: the partitions read so far go on
        # from where the reader stands (what was fetched but not returned is fetched again)
        held = {tp: await consumer.position(tp) for p, tp in assigned.items() if p not in gone}
        for partition in gone:
            self.pinned.pop(partition, None)
            self.read_to.pop(partition, None)
            self.last_read_ms.pop(partition, None)
        if gone:
            RESULTS_RESETS.labels(self._client_id, "partition_removed").inc(len(gone))
            log.error(
                "partitions of the results topic no longer exist; no longer read",
                cause="partition_removed",
                partitions=gone,
                topic=self._topics.results,
            )
        new = [TopicPartition(self._topics.results, p) for p in added]
        consumer.assign([*held, *new])
        for tp, offset in held.items():
            consumer.seek(tp, offset)
        if not new:
            return
        await consumer.seek_to_beginning(*new)
        now_ms = int(time.time() * 1000)
        for tp in new:
            self.pinned[tp.partition] = self.read_to[tp.partition] = await consumer.position(tp)
            self.last_read_ms[tp.partition] = now_ms
        log.warning(
            "partitions added to the results topic; read from their beginning",
            partitions=added,
            topic=self._topics.results,
        )

    def _fetch_failed(self, error: KafkaError, failures: int) -> None:
        described = error_text(error)
        self._health("retrying", described, failures)
        left_out = self._retries_logged.due()
        if left_out is not None:
            log.warning(
                "fetching results failed; retried after a backoff",
                error=described,
                retriable=bool(error.retriable),
                failures_in_a_row=failures,
                lines_left_out=left_out,
            )

    def _take(self, batches: Mapping[TopicPartition, Sequence[Any]]) -> None:
        """Keep the results of a fetch (a record no reader can read stepped over)."""
        for records in batches.values():
            for record in records:
                read_to = self.read_to.get(record.partition, 0)
                self.read_to[record.partition] = max(read_to, record.offset + 1)
                if header_name_not_utf8(record.headers):
                    # none of the service's results has one: nothing of it is believed
                    log.error(
                        "a record no reader can read stepped over (a header name that is "
                        "not UTF-8; who may write to the results topic?)",
                        record=f"{record.topic}@{record.offset}",
                        partition=record.partition,
                        offset=record.offset,
                    )
                    continue
                if record.timestamp is not None:
                    last = self.last_read_ms.get(record.partition, 0)
                    self.last_read_ms[record.partition] = max(last, record.timestamp)
                place = (record.partition, record.offset)
                seen = (record.timestamp, hash(record.key), hash(record.value))
                if self._suspect.pop(place, None) != seen:  # (else kept already: read from
                    self._keep(record)  # this topic before its id was checked)
                if self.topic_id is not None:
                    self._unchecked[place] = seen
                    if len(self._unchecked) > KEEP_RESULTS:  # (checks failing for long)
                        del self._unchecked[next(iter(self._unchecked))]
                answers = offset_header(record.headers, COMMAND_OFFSET_HEADER)
                if answers is not None:
                    self._answered(record.partition, answers)

    async def _leaders_topic_state(
        self, consumer: AIOKafkaConsumer, tps: Iterable[TopicPartition]
    ) -> TopicState | None:
        """The results topic as the leaders of ``tps`` have it: the first that knows it."""
        assert isinstance(consumer, ScopedConsumer)
        for node_id in consumer.leaders_of(tps):
            state = await self.topic_state(consumer, node_id)
            if state is not None:
                return state
        return None

    async def topic_state(
        self, consumer: AIOKafkaConsumer, node_id: int | None = None
    ) -> TopicState | None:
        """The results topic's id and partitions now, as ``node_id`` (else any broker) has
        them (None: it does not exist, or the broker gives no topic ids, said once)."""
        assert isinstance(consumer, ScopedConsumer)
        try:
            return await consumer.topic_state(self._topics.results, node_id)
        except TopicIdsUnsupported as error:
            self.topic_ids_unsupported = True
            if self.topic_id is not None or self.topic_checked == 0.0:
                log.warning(
                    "the broker gives no topic ids (Kafka before 2.8): a results topic "
                    "deleted and made again under the reader is noticed only where a position "
                    "is out of range",
                    error=str(error),
                )
            self.topic_checked = time.monotonic()
            return None
