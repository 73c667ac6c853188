"""The async client for casino platforms and tests: send a command, await its result.

    async with BlackjackClient("127.0.0.1:9092") as client:
        result = await client.execute("table-1", OpenTable(variant="mini-h17"))
        assert result.status == "accepted"

``BlackjackClient.from_env()`` connects as the service is configured: its brokers, topic
prefix and TLS/SASL settings (``BLACKJACK_KAFKA_*``, ``BLACKJACK_TOPIC_PREFIX``).

The client writes commands keyed by their stream id (the partitioner puts them where the
handler that owns the stream reads) and follows ``blackjack.command-results`` from its end as
of ``start()`` (pinned before any command goes out: a send from another task during the start
waits for it), ``read_committed``, matching results to commands by command id. The answer to
a command sent before the start (by this client before a ``stop()``: it can be started again;
or, given ``stream_id`` and ``sent_at``, by a platform's process before it restarted) is
looked back for on the stream's partition by ``result()``. A command sent
again with the same id gets the original result again, so a client that timed out can simply
resend, as long as the stream has not handled ``BLACKJACK_DEDUP_WINDOW`` (1,000) other
commands since: past that the id is forgotten and the resend is a new command, except a
money command's (``WalletDeposit``, ``WalletWithdraw``, ``Deposit``, ``Withdraw``), refused
``already_applied`` for ``BLACKJACK_MONEY_RETENTION_S`` (7 days) and ``transfer_expired``
after, by its ``sent_at`` (``domain.platform_money``): resend it with the first sending's
``sent_at`` (``send(..., command_id=, sent_at=)``), or a resend later than the retention is a
new command, taken again.

A command that acts in a round (a bet, an insurance decision, a move) is sent naming the round
it is meant for (``round``), so that a copy of it sent later, after its id has left the window,
is refused ``stale_command`` instead of acting in a later round: the client fills it in from
the last round it knows of the stream (``rounds``: learned from every event it reads with
``events()``, from the table's first on, or told with ``learn_round``), unless the command
names one already. A client that knows nothing of a stream sends the command as it is (it
acts in the round in play); one that knows an older round than the table's is refused
``stale_command`` (read the table's events, then send again): never a bet in a round not
meant.

Failure modes (docs/kafka.md, "The client's failure modes"): a passing fetch error is retried
after a backoff, a fatal one fails every wait at once (``health``, ``on_health``); a send
waits at most ``send_timeout_s`` (``SendTimedOut``); ``stop()`` ends the waits with
``ClientStopped``, and ``start()`` starts it again (``ClientAlreadyStarted`` while it runs);
another event loop gets ``WrongEventLoop``. No answer is lost in silence: one the client cannot
read raises ``UnreadableResult``; a reading position out of range (records deleted unread, the
topic recreated) moves to the earliest answer still there, logged and counted
(``blackjack_client_*``); a results topic made again (its topic id changed, ``bus.topic_ids``)
is read from its beginning, in the partitions it has; a partition added to the results topic is
read from its beginning; a wait whose answer the reader knows deleted unread raises
``AnswerLost`` at once (resend under the same command id).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from asyncio import FIRST_COMPLETED
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, TypeVar

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    KafkaError,
    OutOfOrderSequenceNumber,
    ProducerClosed,
    UnknownTopicOrPartitionError,
)
from pydantic import BaseModel, ValidationError

from blackjack.bus.clients import ScopedConsumer, ScopedProducer, stop_to_its_end
from blackjack.bus.codecs import require_codecs
from blackjack.bus.header_names import header_name_not_utf8
from blackjack.bus.headers import command_headers
from blackjack.bus.producers import started, stopped
from blackjack.bus.settings import PLAINTEXT, KafkaSecurity, KafkaSettings
from blackjack.bus.topics import Topics, partition_for
from blackjack.client.answers import (
    Answer,
    AnswerBook,
    Kept,
    Unreadable,
    answer_of,
    ids_in,
    of_stream,
)
from blackjack.client.errors import (
    AnswerLost,
    ClientAlreadyStarted,
    ClientStopped,
    SendTimedOut,
    TopicNotFound,
    WrongEventLoop,
)
from blackjack.client.events import collect_events
from blackjack.client.health import ReaderHealth, ReaderState, read_error_is_fatal
from blackjack.client.metrics import UNREADABLE_RESULTS
from blackjack.client.reader import RESULTS_LOOKBACK_MS, ResultsReader
from blackjack.client.sendings import Sending, Sendings
from blackjack.domain import events as ev
from blackjack.domain.commands import TableCommand, naming_round
from blackjack.domain.wallet import AnyWalletCommand
from blackjack.error_text import error_text
from blackjack.messages.envelope import (
    UNPARSED_ID_REFUSAL,
    CommandEnvelope,
    CommandResult,
    unparsed_id,
)
from blackjack.messages.wire import WireEnvelope

_T = TypeVar("_T")


def _naming(
    error: SendTimedOut | ClientStopped, commands: Sequence[tuple[str, str, datetime | None]]
) -> SendTimedOut | ClientStopped:
    """A new error of ``error``'s kind and words naming ``commands`` (never ``error`` itself:
    one a failed start left is raised to every sender waiting on it, and naming it named one
    caller's command in the others' errors: a review)."""
    return type(error)(*error.args).naming(commands)


_STOPPED_SENDING = (
    "the client was stopped while the command was being sent: it may or may not have been "
    "written; resend it on a started client under the same command_id and sent_at (answered "
    "once)"
)

PRODUCER_BATCH_BYTES = 16_384
"""The commands producer's ``max_batch_size`` per partition by default: aiokafka's own. A
client's commands are a few hundred bytes each; docs/load.md measured larger batches."""
RESULTS_METADATA_MAX_AGE_MS = 30_000
"""How often the results reader refreshes the results topic's metadata (aiokafka's
``metadata_max_age_ms``, 5 minutes by default): a partition the operator adds is read, from its
beginning, within this much and a fetch, without a restart."""

log = structlog.get_logger("blackjack.client")


def _json_text(text: str) -> bytes:
    """``text`` as it stands inside a JSON string the service writes (escapes included)."""
    return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")


class BlackjackClient:
    def __init__(
        self,
        bootstrap: str,
        topics: Topics | None = None,
        *,
        source: str = "/blackjack/client",
        client_id: str = "blackjack-client",
        security: KafkaSecurity = PLAINTEXT,
        max_batch_size: int = PRODUCER_BATCH_BYTES,
        linger_ms: int = 0,
        send_timeout_s: float = 30.0,
        on_health: Callable[[ReaderHealth], None] | None = None,
    ) -> None:
        """``max_batch_size`` and ``linger_ms``: the commands producer's (aiokafka's
        meaning). ``send_timeout_s``: how long a ``send`` waits for the broker's ack
        (``SendTimedOut`` after it; aiokafka's own waits for good while a single broker is
        away). ``on_health``: called, in the client's event loop,
        with each change of the results reader's ``ReaderHealth``."""
        self.bootstrap = bootstrap
        self.security = security
        self.max_batch_size = max_batch_size
        self.linger_ms = linger_ms
        self.send_timeout_s = send_timeout_s
        self.on_health = on_health
        self.topics = topics or Topics()
        self.source = source
        self.client_id = client_id
        self._producer: AIOKafkaProducer | None = None
        self._reading: asyncio.Task[None] | None = None
        """The results reader's task of this run (``ResultsReader.read``)."""
        self._sendings = Sendings()
        """This client's sendings, and what became of their answers."""
        self._book = AnswerBook(self._sendings.sent)
        """The answers kept, and the callers waiting for them."""
        self._results_reader = ResultsReader(
            self.topics,
            client_id,
            self._sendings,
            keep=self._keep_record,
            answered=self._answered_through,
            health=self._set_health,
        )
        """The results topic as this client reads it (its consumer, positions, topic id)."""
        self._ready: asyncio.Future[None] | None = None
        self._starting: asyncio.Future[None] | None = None
        self._closing = False
        self._stopping: asyncio.Task[None] | None = None
        """The last ``stop()``'s work, to its end (``bus.clients.stop_to_its_end``)."""
        self._look_backs: set[asyncio.Task[None]] = set()
        """The look-backs running (``_looking_back``), a given-up one until it has stopped."""
        self._renewing = asyncio.Lock()
        self.rounds: dict[str, tuple[int, bool]] = {}
        """Per table stream, its last round as this client last saw it and whether that
        round is open: what ``send`` names in a command that acts in a round."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False
        self._producer_stopped: asyncio.Event | None = None
        """Set once a ``stop()`` has stopped the producer: a send not written by then never
        will be (``_bounded``)."""
        self._learned_to: dict[str, tuple[int, datetime]] = {}
        """Per stream, the sequence and time of the last event ``learn_round`` read"""
        self._health = ReaderHealth("not-started", since=time.monotonic())

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ, **options: Any) -> BlackjackClient:
        """A client of the service the environment describes, as the service reads it: its
        brokers (``BLACKJACK_KAFKA_BOOTSTRAP``), topic prefix and security settings."""
        settings = KafkaSettings.from_env(env)
        return cls(
            settings.bootstrap,
            Topics(settings.topic_prefix),
            security=settings.security,
            **options,
        )

    async def __aenter__(self) -> BlackjackClient:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def health(self) -> ReaderHealth:
        """The results reader's state now (``ReaderHealth``)."""
        return self._health

    def _set_health(self, state: ReaderState, error: str | None = None, failures: int = 0) -> None:
        before = self._health
        since = before.since if state == before.state else time.monotonic()
        self._health = ReaderHealth(state, error, failures, since)
        if (state, error) != (before.state, before.error) and self.on_health is not None:
            try:
                self.on_health(self._health)
            except Exception:  # the platform's callback: its failure is not the reader's
                log.exception("the on_health callback failed", state=state)

    def _check_loop(self) -> None:
        """``ClientStopped`` once stopped; ``WrongEventLoop`` from a loop the client was not
        started in."""
        if self._stopped:
            raise ClientStopped("the client is stopped")
        if self._loop is not None and asyncio.get_running_loop() is not self._loop:
            raise WrongEventLoop(
                "BlackjackClient used from another event loop than the one it was started in: "
                "start a client per event loop"
            )

    def _forget_a_closed_loop(self) -> None:
        """A client whose event loop closed without its ``stop()`` (an ``asyncio.run`` that
        ended) is stopped: its producer, consumer and reader went with that loop, and nothing
        of theirs can be awaited from another. Before, such a client could be neither started
        (``ClientAlreadyStarted``) nor stopped (``WrongEventLoop``) again."""
        if self._loop is None or not self._loop.is_closed():
            return
        log.warning("the client's event loop closed without stop(): the client is stopped")
        self._set_health("stopped")  # (its waiters were cancelled with the loop's tasks)
        self._stopped, self._closing, self._loop = True, False, None
        self._stopping = self._starting = None

    async def start(self) -> None:
        """Connect: a new producer and results reader, reading the results topic from its end
        as of now. A stopped client may be started again (in any event loop): what it knew is
        kept (``rounds``, the answers received), and the answer to a command it sent before
        is looked back for by ``result`` (``RESULTS_LOOKBACK_MS``). A send or ``result``
        from another task meanwhile waits for the start to end."""
        self._forget_a_closed_loop()
        if self._closing:
            raise ClientStopped("stop() has not finished: await it, then start the client")
        if self._loop is not None and not self._stopped:
            raise ClientAlreadyStarted("the client is started already: stop() it first")
        loop = asyncio.get_running_loop()
        self._loop, self._stopped = loop, False
        self._sendings.new_run()
        self._book.new_run()
        self._renewing = asyncio.Lock()
        self._producer_stopped = asyncio.Event()
        self._producer = self._reading = None
        self._results_reader.consumer = None
        ready = self._ready = loop.create_future()
        # a task of its own, which a stop() from another task cancels: aiokafka's clients
        # closed under a start wait for good (a closed producer's metadata never comes)
        starting = self._starting = asyncio.ensure_future(self._start())
        try:
            await starting
        except BaseException as error:  # leave nothing connected behind; it may be started again
            stopped_meanwhile = self._stopped
            ready.set_exception(ClientStopped("the client's start failed"))
            ready.exception()  # (told to the sends waiting, if any: not logged unretrieved)
            await self._stop_ended()  # a stop() from another task's (its end would undo this)
            self._stopped, self._loop = False, loop  # (this stop closes all the start made)
            await self.stop()
            self._stopped = False
            if stopped_meanwhile and isinstance(error, asyncio.CancelledError):
                raise ClientStopped("the client was stopped while it started") from None
            raise
        self._reading = asyncio.create_task(
            self._results_reader.read(), name="blackjack-client-results"
        )
        self._reading.add_done_callback(self._reader_ended)
        self._set_health("reading")
        ready.set_result(None)

    async def _started(self) -> None:
        """Return once the client is started: at once, or at the end of a start in progress
        (whose results reader is then pinned: the answer of a command sent now cannot be
        written before where it reads). ``ClientStopped`` if it is not started, or its start
        failed."""
        self._check_loop()
        ready = self._ready
        if ready is None or self._loop is None:
            raise ClientStopped("start() the client first")
        if not ready.done():
            await asyncio.shield(ready)  # (a waiter cancelled leaves the start alone)
        elif ready.exception() is not None:
            raise ClientStopped("the client's start failed: start() it again")
        self._check_loop()

    def _new_producer(self) -> AIOKafkaProducer:
        return ScopedProducer(
            bootstrap_servers=self.bootstrap,
            **self.security.client_options(),
            client_id=self.client_id,
            enable_idempotence=True,
            acks="all",
            max_batch_size=self.max_batch_size,
            linger_ms=self.linger_ms,
        )

    def _new_consumer(self, role: str, **options: Any) -> AIOKafkaConsumer:
        """A consumer of this client's (client id ``<client_id>-<role>``): committed records
        only, positions of its own (no group, nothing committed)."""
        return ScopedConsumer(
            bootstrap_servers=self.bootstrap,
            **self.security.client_options(),
            group_id=None,
            client_id=f"{self.client_id}-{role}",
            isolation_level="read_committed",
            enable_auto_commit=False,
            **options,
        )

    async def _renew_producer(self, broken: AIOKafkaProducer | None, error: Exception) -> None:
        """Replace a producer ``OutOfOrderSequenceNumber`` left unusable (``bus.producers``):
        once per broken producer, however many sends failed on it at once; a start that fails
        leaves the broken one in place, replaced at the next send."""
        async with self._renewing:
            if self._producer is not broken:
                return  # replaced already, by another send that failed on it
            self._producer = await started(self._new_producer())
            log.warning("producer replaced", error=error_text(error))
            await stopped(broken)

    async def _start(self) -> None:
        require_codecs()  # a result batch a producer compressed: read (bus.codecs)
        # The client's own producer and consumer carry the service's fixes to aiokafka, the
        # platform's aiokafka clients in this process none (bus.clients): a record with a
        # header name that is not UTF-8 is read (stepped over below; aiokafka raised at it,
        # and no result after it reached this client), a failed metadata update is retried
        # after a backoff (a stopped broker: a core busy), a start cut short closes what it
        # opened.
        self._producer = self._new_producer()
        await self._producer.start()
        consumer = self._new_consumer(
            "results",
            # a position out of range is the reader's to move, said and counted
            # (ResultsReader._reset_out_of_range): aiokafka's "latest" jumped to the end, over
            # the answers between, silently
            auto_offset_reset="none",
            metadata_max_age_ms=RESULTS_METADATA_MAX_AGE_MS,  # partitions added (reader)
        )
        self._results_reader.consumer = consumer  # (a start that fails stops it: _stop_all)
        await consumer.start()
        with self._naming_topic(self.topics.results):
            await self._results_reader.begin(self._producer)

    @contextmanager
    def _naming_topic(self, topic: str) -> Iterator[None]:
        """aiokafka's ``UnknownTopicOrPartitionError`` for ``topic`` (after its 40 s wait for
        the metadata) as ``TopicNotFound``, naming the topic and the brokers: it names
        neither (a wrong topic prefix read as a broker's failure)."""
        try:
            yield
        except UnknownTopicOrPartitionError as error:
            if isinstance(error, TopicNotFound):
                raise
            raise TopicNotFound(topic, self.bootstrap) from error

    def _reader_failure(self) -> BaseException | None:
        """Why the results reader stopped, if it failed (a batch it could not decompress:
        ``bus.codecs.CodecMissing``): no result can come any more."""
        reader = self._reading
        if reader is None or not reader.done() or reader.cancelled():
            return None
        return reader.exception()

    def _reader_ended(self, reader: asyncio.Task[None]) -> None:
        """Every waiting ``result`` gets the reader's failure at once, not its timeout."""
        failure = self._reader_failure()
        if failure is None:
            return
        log.error("the results reader failed", error=error_text(failure))
        self._set_health("failed", error_text(failure))
        self._book.fail_waiters(failure)

    async def stop(self) -> None:
        """Stop the client: once (a second call, from any task, waits for the first's end, or
        returns at once); a ``result`` still waiting gets ``ClientStopped``, as does every
        call after. The stop goes to its end whatever comes: a caller cancelled meanwhile
        gets the cancel at once, and the reader, the look-backs, the producer and the
        consumer still stop, on their own (the client can be started again once they have:
        a second ``stop()`` waits for that)."""
        self._forget_a_closed_loop()
        if self._loop is not None and asyncio.get_running_loop() is not self._loop:
            raise WrongEventLoop("stop() a client in the event loop it was started in")
        if self._stopped:
            await self._stop_ended()
            return
        self._stopped = self._closing = True
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()  # (its start() closes what it made, and says ClientStopped)
        stopping = self._stopping = asyncio.ensure_future(self._stop())
        await stop_to_its_end(stopping)

    async def _stop_ended(self) -> None:
        """Returns once the last ``stop()``'s work has ended (at once if none runs); a
        cancel of the caller's leaves that work alone."""
        if self._stopping is not None and not self._stopping.done():
            await asyncio.wait({self._stopping})

    async def _stop(self) -> None:
        try:
            await self._stop_all()
        finally:
            self._closing = False
            self._loop = None  # (started again, in any event loop)

    async def _stop_all(self) -> None:
        if self._health.state != "failed":
            self._set_health("stopped")
        self._book.fail_waiters(
            ClientStopped("the client was stopped while the result was awaited")
        )
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.wait({self._reading})  # (a failure was told when it came)
        if self._look_backs:  # (each given up by its caller, told ClientStopped above)
            await asyncio.wait(set(self._look_backs))
        failures = []
        for client in (self._producer, self._results_reader.consumer):
            if client is not None:
                try:  # each one, whatever the one before did (its connections, its tasks)
                    await client.stop()
                except Exception as error:
                    failures.append(error)
        if self._producer_stopped is not None:
            self._producer_stopped.set()
        if failures:
            raise failures[0]

    # ---- rounds -----------------------------------------------------------------------

    def learn_round(self, stream_id: str, events: Sequence[WireEnvelope]) -> None:
        """What ``events`` (the stream's, in order) say of its round: the last one's number,
        open until it is settled, cancelled or voided. Events from the stream's first on, or
        from its ``TableOpened`` on (a table opened after refusals written at its id: a money
        command sent before the table), without a round's say there was none yet. Events at or
        below the last one read of the stream say nothing new: an older command's (its answer
        to a resend, ``events()`` of two results finishing out of order) rolled ``rounds`` back
        to a round since settled, and the next bet was refused ``stale_command`` (a review)."""
        known = self._learned_to.get(stream_id)
        # from the first event, written after the last known: the log begun again (the topic
        # made anew), which is to be believed
        if (
            known is not None
            and events
            and events[0].sequence == 1
            and (events[0].occurred_at > known[1])
        ):
            known = None
        learned = 0 if known is None else known[0]
        events = [envelope for envelope in events if envelope.sequence > learned]
        if not events:
            return
        self._learned_to[stream_id] = (events[-1].sequence, events[-1].occurred_at)
        if events[0].sequence == 1:
            self.rounds[stream_id] = (0, False)
        for envelope in events:
            event = envelope.data
            if isinstance(event, ev.TableOpened):  # one a table: no round before it
                self.rounds.setdefault(stream_id, (0, False))  # (read late: older than known)
            elif isinstance(event, _ROUND_CLOSED):
                self.rounds[stream_id] = (event.round, False)
            elif isinstance(event, ev.RoundEvent):
                self.rounds[stream_id] = (event.round, True)

    def _naming_round(self, stream_id: str, command: _Sent) -> _Sent:
        known = self.rounds.get(stream_id)
        return command if known is None else naming_round(command, *known)

    # ---- sending ----------------------------------------------------------------------

    async def send(
        self,
        stream_id: str,
        command: TableCommand | AnyWalletCommand,
        *,
        command_id: str | None = None,
        correlation_id: str | None = None,
        sent_at: datetime | None = None,
    ) -> str:
        """Send a command; returns its command id (a new UUID unless given: an empty one is
        refused, ``ValidationError``, never replaced, or a resend of it would be a new
        command). A resend gives the first sending's ``command_id`` and ``sent_at`` (default:
        now), by which a money command's copy is told once its id is let go
        (``domain.platform_money``)."""
        envelope = CommandEnvelope(
            command_id=str(uuid.uuid4()) if command_id is None else command_id,
            stream_id=stream_id,
            correlation_id=correlation_id,
            sent_at=sent_at or datetime.now(UTC),
            command=self._naming_round(stream_id, command),
        )
        try:
            await self.send_envelope(envelope)
        except (SendTimedOut, ClientStopped) as error:
            raise _naming(error, [(envelope.command_id, stream_id, envelope.sent_at)]) from error
        return envelope.command_id

    async def send_all(self, commands: Sequence[tuple[str, BaseModel]]) -> list[str]:
        """Send many (stream id, command) pairs pipelined, in order; returns their ids."""
        await self._started()
        envelopes = [
            CommandEnvelope(
                command_id=str(uuid.uuid4()),
                stream_id=stream_id,
                sent_at=datetime.now(UTC),
                command=self._naming_round(stream_id, command),
            )
            for stream_id, command in commands
        ]
        sendings = [self._sending(envelope) for envelope in envelopes]
        producer = self._producer
        assert producer is not None
        try:
            try:
                written = await self._bounded(self._send_pipelined(producer, envelopes))
            except OutOfOrderSequenceNumber as error:  # sent again under the same ids: safe
                await self._renew_producer(producer, error)
                assert self._producer is not None
                written = await self._bounded(self._send_pipelined(self._producer, envelopes))
        except (SendTimedOut, ClientStopped) as error:  # what to resend, under which ids
            named = [(e.command_id, e.stream_id, e.sent_at) for e in envelopes]
            raise _naming(error, named) from error
        for envelope, sending, metadata in zip(envelopes, sendings, written, strict=True):
            self._placed(envelope.command_id, sending, metadata)
        return [envelope.command_id for envelope in envelopes]

    async def _bounded(self, sending: Coroutine[Any, Any, _T]) -> _T:
        """``sending``, or ``SendTimedOut`` after ``send_timeout_s``; ``ClientStopped`` once
        a ``stop()`` has stopped the producer under it (it flushes what it was given: a send
        not written by then never will be; aiokafka's sends on a closed producer raised
        ``ProducerClosed``, or waited out the whole timeout for metadata that never comes)."""
        task = asyncio.ensure_future(sending)
        stopped = self._producer_stopped  # (this run's: a start after a stop makes another)
        if await self._ended_unless_stopped(task, self.send_timeout_s):
            try:
                return task.result()
            except ProducerClosed:
                if not self._stopped:  # a producer renewed under it (``_renew_producer``)
                    raise
                raise ClientStopped(_STOPPED_SENDING) from None
        if stopped is not None and stopped.is_set():
            raise ClientStopped(_STOPPED_SENDING)
        raise SendTimedOut(
            f"the broker did not take the command within {self.send_timeout_s} s; "
            "resend it under the same command_id and sent_at"
        )

    async def _ended_unless_stopped(self, task: asyncio.Future[Any], timeout: float | None) -> bool:
        """Wait for ``task`` until it ends (True), or a ``stop()`` stops the producer, or
        ``timeout`` passes (False: ``task`` is cancelled, as it is if the caller is)."""
        stopped = self._producer_stopped
        waits: set[asyncio.Future[Any]] = {task}
        if stopped is not None:
            waits.add(asyncio.ensure_future(stopped.wait()))
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=FIRST_COMPLETED)
        finally:
            for waiting in waits:  # the task too, unless done (a caller cancelled: as wait_for)
                if not waiting.done():
                    waiting.cancel()
        return task.done() and not task.cancelled()

    async def _send_pipelined(
        self, producer: AIOKafkaProducer, envelopes: Sequence[CommandEnvelope]
    ) -> list[Any]:
        pending = [
            await producer.send(
                self.topics.commands,
                envelope.model_dump_json().encode(),
                key=envelope.stream_id.encode(),
                headers=command_headers(envelope, self.source, None),
            )
            for envelope in envelopes
        ]
        return list(await asyncio.gather(*pending))

    def _sending(self, envelope: CommandEnvelope) -> Sending:
        """Note a sending of ``envelope``: its answer is this run's reader's, or, after a
        restart, looked back for from its ``sent_at``; its answers kept are this client's own."""
        sending = self._sendings.note(
            envelope.command_id, envelope.stream_id, envelope.sent_at or datetime.now(UTC)
        )
        self._book.own(envelope.command_id)
        return sending

    def _placed(self, command_id: str, sending: Sending, metadata: Any) -> None:
        """Where the broker wrote a sending (``RecordMetadata``)."""
        self._sendings.placed(command_id, sending, int(metadata.partition), int(metadata.offset))

    async def send_envelope(self, envelope: CommandEnvelope) -> None:
        if unparsed_id(envelope.command_id):  # the handler's answer would come under another id
            raise ValueError(f"command id {envelope.command_id}: {UNPARSED_ID_REFUSAL}")
        await self._started()
        sending = self._sending(envelope)
        metadata = await self._send_record(
            envelope.stream_id.encode(),
            envelope.model_dump_json().encode(),
            command_headers(envelope, self.source, None),
        )
        self._placed(envelope.command_id, sending, metadata)

    async def send_raw(
        self, key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]] = ()
    ) -> int:
        """Write any bytes to the commands topic (for tests of bad input); returns the offset.
        A producer left unusable is replaced and the record sent once more (a command sent
        again under its id is answered once)."""
        return int((await self._send_record(key, value, headers)).offset)

    async def _send_record(
        self, key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]]
    ) -> Any:
        """``send_raw``'s record written: its ``RecordMetadata``."""
        await self._started()
        producer = self._producer
        assert producer is not None
        try:
            metadata = await self._bounded(
                producer.send_and_wait(self.topics.commands, value, key=key, headers=list(headers))
            )
        except OutOfOrderSequenceNumber as error:
            await self._renew_producer(producer, error)
            assert self._producer is not None
            metadata = await self._bounded(
                self._producer.send_and_wait(
                    self.topics.commands, value, key=key, headers=list(headers)
                )
            )
        return metadata

    # ---- results ----------------------------------------------------------------------

    async def result(
        self,
        command_id: str,
        timeout: float = 10.0,
        *,
        skip: int = 0,
        stream_id: str | None = None,
        sent_at: datetime | None = None,
    ) -> CommandResult:
        """The result of a command: the first one received, or the first after ``skip``
        earlier ones (a command sent again is answered again). A command id is the
        idempotency key of one stream: the same id sent to two streams is two commands, each
        answered, so ``stream_id`` (when given) takes only that stream's answers.

        The answer to a command this client did not send in this run (sent by it before a
        ``stop()``, or, given its ``stream_id`` and ``sent_at``, by anyone: a platform's
        process that restarted between its send and its read) is looked for on the stream's
        partition of the results topic, from ``RESULTS_LOOKBACK_MS`` before its ``sent_at`` to
        where this run's reader has read; every answer after that is the reader's, and kept
        from this call on. Within ``timeout``.

        An answer this client cannot read as a ``CommandResult`` but whose command id it can
        (a newer service's status or rejection code) raises ``UnreadableResult`` at once,
        rather than the wait running out; ``skip`` counts it as an answer.

        An answer to a command this client sent in this run that it knows deleted unread
        (``AnswerLost``: retention or ``delete_records`` took it before the reader read it)
        raises ``AnswerLost`` at once: resend the command under the same id."""
        received = of_stream(self._book.answers(command_id), stream_id)
        if len(received) > skip:
            return answer_of(received[skip])
        lost = self._lost_answer(command_id, skip, stream_id)
        if lost is not None:
            raise lost
        self._check_loop()
        failure = self._reader_failure()
        if failure is not None:
            raise failure
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        waiter = (skip, stream_id, future)
        self._book.waiters.setdefault(command_id, []).append(waiter)
        self._book.ask(command_id)
        try:
            async with asyncio.timeout(timeout):
                await self._started()
                wanted = self._to_look_back(command_id, stream_id, sent_at)
                if wanted:
                    await self._looking_back(command_id, wanted, future)
                return answer_of(await future)
        finally:
            waiters = self._book.waiters.get(command_id, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._book.waiters.pop(command_id, None)

    async def _looking_back(
        self,
        command_id: str,
        wanted: list[tuple[str, datetime | None]],
        future: asyncio.Future[Answer],
    ) -> None:
        """The look-backs of ``wanted`` (``_look_back``), until they end or the reader gives
        ``future`` its answer: one read from a long run's start may take longer than the
        reader (before, an answer the reader had kept waited for the look-back, and timed out
        with it)."""

        async def look_back() -> None:
            for stream, since in wanted:
                await self._look_back(command_id, stream, since)

        looking = asyncio.ensure_future(look_back())
        self._look_backs.add(looking)
        looking.add_done_callback(self._look_back_ended)
        try:
            either: set[asyncio.Future[Any]] = {looking, future}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not looking.done():
                # given up, it ends on its own (its consumer's stop to its end): the answer
                # in hand is not held up by it, nor a cancel of this call's own taken for its
                looking.cancel()
        if not looking.done() or looking.cancelled():
            return
        error = looking.exception()
        if error is not None and not future.done():
            raise error  # a fatal read error

    def _look_back_ended(self, looking: asyncio.Task[None]) -> None:
        self._look_backs.discard(looking)
        if not looking.cancelled():
            looking.exception()  # (retrieved: a given-up one's error is no one's to tell)

    def results_for(self, command_id: str, stream_id: str | None = None) -> list[CommandResult]:
        """Every result received so far for a command id (one, unless it was re-sent or
        sent to several streams), or only those of ``stream_id``: of a command this client
        sent or asked the ``result`` of, or of another's among the last
        ``KEEP_OTHERS_RESULTS`` others'. An answer that could not be read is not among them
        (``result`` raises ``UnreadableResult`` for it)."""
        return self._book.results_for(command_id, stream_id)

    def _to_look_back(
        self, command_id: str, stream_id: str | None, sent_at: datetime | None
    ) -> list[tuple[str, datetime | None]]:
        """The (stream, sent_at) of the sendings of ``command_id`` whose answer may be before
        where this run's reader has read, not kept: each sent in an earlier run, or the one
        named (unless sent in this run), not looked back for yet in this run. Named without
        its ``sent_at`` and not sent by this client (another's command: a handler's signed
        step, another process's), its sent_at is None: looked for since this run's start."""
        if self._sendings.sent_this_run(command_id, stream_id):
            return []  # sent since this start: its answer is the reader's
        sendings = self._sendings.sent.get(command_id, [])
        mine: list[tuple[str, datetime | None]] = [
            (s.stream_id, s.sent_at) for s in sendings if stream_id in (None, s.stream_id)
        ]
        wanted: list[tuple[str, datetime | None]]
        if stream_id is not None and sent_at is not None:
            wanted = [(stream_id, sent_at)]
        elif stream_id is not None and not mine:
            wanted = [(stream_id, None)]
        else:
            wanted = mine
        looked_back = self._book.asked.get(command_id, set())
        return [(s, at) for s, at in wanted if (s, at) not in looked_back]

    async def _look_back(self, command_id: str, stream_id: str, since: datetime | None) -> None:
        """Read the stream's partition of the results topic from ``RESULTS_LOOKBACK_MS``
        before ``since`` (None: from where this run's reader started) up to where it has
        read, keeping the answers of ``command_id`` at ``stream_id``: the reader keeps those
        after (``_wanted``: the caller waits). A broker's passing error is logged and the
        wait goes on (a later ``result`` looks again)."""
        partition = partition_for(stream_id, len(self._results_reader.pinned))
        tp = TopicPartition(self.topics.results, partition)
        consumer = self._new_consumer(
            "look-back",
            # where it seeks deleted since (retention behind a long run's start): from the
            # earliest record still there (aiokafka's "latest" jumped over them all)
            auto_offset_reset="earliest",
        )
        reading = (self._results_reader.generation, self._results_reader.topic_id)
        try:
            await consumer.start()
            found = await self._read_back(consumer, tp, command_id, stream_id, since)
            if found and self._results_reader.topic_id is not None:
                # read from the topic the reader reads, or a new one made meanwhile (whose
                # offsets are not those of the answers kept): the reader reads that one. Asked
                # of the broker the records came from: its metadata is no older than its log
                # (another broker's may lag, and miss a topic made again)
                state = await self._results_reader.topic_state(consumer, consumer.leader_of(tp))
                if (self._results_reader.generation, self._results_reader.topic_id) != reading or (
                    state is not None
                    and state.topic_id not in (None, self._results_reader.topic_id)
                ):
                    log.warning(
                        "the results topic was made again while a look-back read it: what it "
                        "found is left to the reader",
                        command_id=command_id,
                        stream_id=stream_id,
                    )
                    return
            for record in found:
                self._read_back_one(record, command_id, stream_id)
            # (before the stop: an answer found here gives the look-back up as it stops)
            self._book.asked.setdefault(command_id, set()).add((stream_id, since))
        except KafkaError as error:
            if read_error_is_fatal(error):
                raise
            log.warning(
                "looking back for a result failed; its wait goes on",
                command_id=command_id,
                stream_id=stream_id,
                error=error_text(error),
            )
            return
        finally:
            await consumer.stop()  # (to its end: ``ScopedConsumer``)

    async def _read_back(
        self,
        consumer: AIOKafkaConsumer,
        tp: TopicPartition,
        command_id: str,
        stream_id: str,
        since: datetime | None,
    ) -> list[Any]:
        """The records of the stream's partition from ``since`` (None: where the reader
        started) up to where it has read that may answer ``command_id`` at ``stream_id``."""
        found: list[Any] = []
        consumer.assign([tp])
        # (a log truncated under the reader ends before where it read: not waited for)
        end = min(
            self._results_reader.read_to[tp.partition], (await consumer.end_offsets([tp]))[tp]
        )
        if since is None:
            begin: int | None = self._results_reader.pinned[tp.partition]
        else:
            ms = int(since.timestamp() * 1000) - RESULTS_LOOKBACK_MS
            start = (await consumer.offsets_for_times({tp: ms})).get(tp)
            begin = None if start is None else start.offset
        if begin is None or begin >= end:
            return found  # nothing answered since before it was sent, up to where it has read
        consumer.seek(tp, begin)
        key = stream_id.encode()
        named = _json_text(command_id)
        while await consumer.position(tp) < end:
            batch = await consumer.getmany(tp, timeout_ms=500)
            for record in batch.get(tp, []):
                if record.offset >= end:
                    return found  # the reader's
                if header_name_not_utf8(record.headers):
                    continue  # none of the service's
                if record.key != key and named not in (record.value or b""):
                    # another stream's answer: a malformed one is under the key its message
                    # came with, which may not be its stream's, and names its command id
                    continue
                found.append(record)
        return found

    def _read_back_one(self, record: Any, command_id: str, stream_id: str) -> None:
        """Keep ``record`` if it answers ``command_id`` at ``stream_id``: read, or kept as
        unreadable when it names them but cannot be read (``UnreadableResult``)."""
        try:
            result = CommandResult.model_validate_json(record.value or b"")
        except ValidationError as error:
            ids = ids_in(record.value)
            key_text = (record.key or b"").decode("utf-8", "replace")
            if ids is not None and ids[0] == command_id and (ids[1] or key_text) == stream_id:
                self._unreadable(record, error, ids)
            return
        if result.command_id == command_id and result.stream_id == stream_id:
            self._received(result, record)

    async def execute(
        self,
        stream_id: str,
        command: TableCommand | AnyWalletCommand,
        *,
        command_id: str | None = None,
        correlation_id: str | None = None,
        timeout: float = 10.0,
        sent_at: datetime | None = None,
    ) -> CommandResult:
        """Send a command and await the answer to this sending of it (``send``). A
        ``SendTimedOut`` or ``ClientStopped`` after the command was made names it
        (``command_id``, ``stream_id``, ``sent_at``): it may have been applied, so resend it
        under those, never under a new id (a review: 50 deposits applied, each told only "the
        client is stopped", with an id ``execute`` had made)."""
        command_id = str(uuid.uuid4()) if command_id is None else command_id
        sent_at = sent_at or datetime.now(UTC)
        named = [(command_id, stream_id, sent_at)]
        # (its answers counted here kept until it waits)
        self._book.executing[command_id] = self._book.executing.get(command_id, 0) + 1
        try:
            earlier = len(of_stream(self._book.answers(command_id), stream_id))  # unreadable too
            await self.send(
                stream_id,
                command,
                command_id=command_id,
                correlation_id=correlation_id,
                sent_at=sent_at,
            )
            try:
                return await self.result(command_id, timeout, skip=earlier, stream_id=stream_id)
            except ClientStopped:
                raise ClientStopped(
                    f"the client was stopped while the answer to {command_id} at {stream_id} "
                    "was awaited: the command was sent and may have been applied; resend it "
                    f"on a started client under the same command_id and sent_at "
                    f"({sent_at.isoformat()}), which is answered once"
                ).naming(named) from None
        except (SendTimedOut, ClientStopped) as error:
            if error.commands == tuple(named):  # (named by ``send``)
                raise
            raise _naming(error, named) from error
        finally:
            self._book.executing[command_id] -= 1
            if not self._book.executing[command_id]:
                del self._book.executing[command_id]

    async def events(self, result: CommandResult, timeout: float = 10.0) -> list[WireEnvelope]:
        """The events an accepted command wrote (``first_sequence`` to ``last_sequence`` of
        its stream), in their public form: what a client shows after its own command, the
        last ``TurnStarted`` naming the buttons. Read ``read_committed`` from the stream's
        partition of ``blackjack.events``, from a minute before the result was handled, and
        waited for until they can be read (``TimeoutError`` after ``timeout``)."""
        first, last = result.first_sequence, result.last_sequence
        if first is None or last is None:
            return []
        await self._started()
        reading = asyncio.ensure_future(self._read_events(result, first, last, timeout))
        if not await self._ended_unless_stopped(reading, None):
            # its consumer stopped before this says so (a diff review: cancelled and left,
            # the consumer's stop ran on unawaited, its sockets open after the loop ended)
            await asyncio.wait({reading})
            raise ClientStopped("the client was stopped while the events were read")
        events = reading.result()
        self.learn_round(result.stream_id, events)
        return events

    async def _read_events(
        self, result: CommandResult, first: int, last: int, timeout: float
    ) -> list[WireEnvelope]:
        assert self._producer is not None
        with self._naming_topic(self.topics.events):
            partitions = await self._producer.partitions_for(self.topics.events)
        tp = TopicPartition(self.topics.events, partition_for(result.stream_id, len(partitions)))
        consumer = self._new_consumer("events")
        try:  # a start that fails or is cancelled too: its client and task closed
            async with asyncio.timeout(timeout):  # its start too: a broker away
                await consumer.start()
                return await collect_events(consumer, tp, result, first, last)
        finally:
            await consumer.stop()

    def _keep_record(self, record: Any) -> None:
        try:
            result = CommandResult.model_validate_json(record.value or b"")
        except ValidationError as error:
            # a newer service (a rejection code this client does not know): the others still
            # get their results, this one's waiter gets an UnreadableResult (before: it timed
            # out)
            self._unreadable(record, error, ids_in(record.value))
        else:
            self._received(result, record)

    def _answered_through(self, partition: int, command_offset: int) -> None:
        """The handler answered the command at ``command_offset`` of the commands topic's
        ``partition``: the waits for the answers this tells lost (``Sendings``) fail with
        ``AnswerLost`` at once."""
        for command_id in self._sendings.answered_through(partition, command_offset):
            for skip, stream_id, future in self._book.waiters.get(command_id, []):
                failure = self._lost_answer(command_id, skip, stream_id)
                if failure is not None and not future.done():
                    future.set_exception(failure)

    def _lost_answer(self, command_id: str, skip: int, stream_id: str | None) -> AnswerLost | None:
        """``AnswerLost`` for a wait that can get no more answers than it has (``skip`` or
        fewer) because a sending of this run was answered into records deleted unread, and no
        other is still open; else None."""
        if len(of_stream(self._book.answers(command_id), stream_id)) > skip:
            return None
        return self._sendings.lost(command_id, stream_id)

    def _unreadable(
        self, record: Any, error: ValidationError, ids: tuple[str, str | None] | None
    ) -> None:
        """A record of the results topic no ``CommandResult`` could be read from: logged and
        counted; kept as its command's answer when it names one (``ids``), whose ``result``
        raises ``UnreadableResult``."""
        described = str(error)[:300]
        if ids is None:
            UNREADABLE_RESULTS.labels(self.client_id, "nameless").inc()
            log.error(
                "a record of the results topic is no command result and names no command "
                "id: no caller can be told",
                partition=record.partition,
                offset=record.offset,
                error=described,
            )
            return
        command_id, named_stream = ids
        stream_id = named_stream or (record.key or b"").decode("utf-8", "replace")
        kept = Unreadable(command_id, stream_id, record.partition, record.offset, described)
        if self._book.keep(
            command_id, kept, (self._results_reader.generation, record.partition, record.offset)
        ):
            UNREADABLE_RESULTS.labels(self.client_id, "named").inc()
            log.warning(
                "a command result this client cannot read",
                raised="UnreadableResult",  # to its result()
                command_id=command_id,
                stream_id=stream_id,
                partition=record.partition,
                offset=record.offset,
                error=described,
            )

    def _received(self, result: CommandResult, record: Any) -> None:
        """Keep a result read from ``record`` (once), as its JSON, and hand it to whoever
        waits for it."""
        kept = Kept(result.stream_id, record.value)
        self._book.keep(
            result.command_id,
            kept,
            (self._results_reader.generation, record.partition, record.offset),
        )


_Sent = TypeVar("_Sent", bound=BaseModel)
_ROUND_CLOSED = (ev.RoundSettled, ev.RoundCancelled, ev.RoundVoided)
