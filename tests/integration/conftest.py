"""Fixtures for the command handler tests on the real broker.

Every test session works in topics of its own: each ``KafkaSpace`` has a unique topic prefix
(and so its own consumer group and transactional ids), so concurrent sessions on one broker
never see each other's messages. The spaces' topics are deleted at the end of the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from blackjack.bus.settings import KafkaSettings
from blackjack.bus.topic_ids import TopicState, topic_state
from blackjack.bus.topics import Topics, delete_topics, ensure_topics, partition_for
from blackjack.client import BlackjackClient
from blackjack.command_handler.answers import remembered
from blackjack.command_handler.clock import is_idle_timer
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.ids import is_step_id
from blackjack.command_handler.service import CommandHandler
from blackjack.command_handler.signing import SIGNATURE_HEADER, TRANSFER_HEADER
from blackjack.command_handler.transactions import receipt_time
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import platform_money
from blackjack.domain.decisions.clock import resumption
from blackjack.domain.evolve import evolve
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import Rules
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.domain.transfers import is_declines_stream, transfer_ref
from blackjack.domain.wallet import (
    INITIAL_WALLET,
    AnyWalletCommand,
    CashOut,
    WalletCommand,
    WalletEvent,
    decide_wallet,
    evolve_wallet,
    is_wallet_stream,
)
from blackjack.messages.envelope import CommandEnvelope, CommandResult, EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import decode, from_wire
from blackjack.rng import csprng_shuffle
from blackjack.scenario import build_shoe
from blackjack.table import Applied, apply
from tests.integration.infra import (
    PrivateBroker,
    PrivateCluster,
    kafka_bootstrap,
    kafka_test_replicas,
)

# before any test module imports it: its helpers' asserts explain their failures too
pytest.register_assert_rewrite("tests.integration.conftest_projections")

WAIT_S = 30.0


@dataclass
class KafkaSpace:
    """A private set of the service's topics on the shared test broker."""

    bootstrap: str
    prefix: str
    partitions: int
    shoe_key: str = field(default_factory=ShoeSeal.new_key_hex)

    @property
    def settings(self) -> KafkaSettings:
        replicas, in_sync = kafka_test_replicas(self.bootstrap)
        return KafkaSettings(
            bootstrap=self.bootstrap,
            topic_prefix=self.prefix,
            partitions=self.partitions,
            replication_factor=replicas,
            min_insync_replicas=in_sync,
        )

    @property
    def topics(self) -> Topics:
        return Topics(self.prefix)

    def config(self, **overrides: Any) -> HandlerConfig:
        base = HandlerConfig(
            shoe_key_hex=self.shoe_key,
            kafka=self.settings,
            session_timeout_ms=6000,
            timer_tick_s=0.1,
            instance_id=f"test-{uuid.uuid4().hex[:6]}",
        )
        return replace(base, **overrides)

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a handler process working in this space."""
        return {
            "BLACKJACK_KAFKA_BOOTSTRAP": self.bootstrap,
            "BLACKJACK_TOPIC_PREFIX": self.prefix,
            "BLACKJACK_PARTITIONS": str(self.partitions),
            "BLACKJACK_SHOE_KEY": self.shoe_key,
            "BLACKJACK_SESSION_TIMEOUT_MS": "6000",
            "BLACKJACK_TIMER_TICK_MS": "100",
            "BLACKJACK_REPLICATION_FACTOR": str(self.settings.replication_factor),
            "BLACKJACK_MIN_INSYNC_REPLICAS": str(self.settings.min_insync_replicas),
            **extra,
        }

    def seal(self) -> ShoeSeal:
        return ShoeSeal.from_hex(self.shoe_key)

    def client(self) -> BlackjackClient:
        return BlackjackClient(self.bootstrap, self.topics, client_id=f"{self.prefix}client")


ONE_NODE, THREE_NODES = "one-node", "three-nodes"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module marked ``also_on_three_nodes`` runs each test that talks to the broker twice:
    on the local broker, and on three nodes with every test topic on 3 replicas, 2 in sync, as
    production runs them. One broker hides what a cluster's brokers do apart: each takes a
    topic just made in its own time, a partition's leader is not the broker asked first, a
    record is committed once the followers have it."""
    marked = metafunc.definition.get_closest_marker("also_on_three_nodes") is not None
    if marked and "bootstrap" in metafunc.fixturenames:
        metafunc.parametrize("bootstrap", [ONE_NODE, THREE_NODES], indirect=True)


@pytest.fixture(scope="session")
def bootstrap(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The test broker's address, or (``THREE_NODES``) the session's three nodes', which run
    while their tests do: pytest runs the tests of a session-scoped parameter together."""
    if getattr(request, "param", ONE_NODE) == ONE_NODE:
        yield kafka_bootstrap()
        return
    cluster = PrivateCluster(tmp_path_factory.mktemp("three-nodes"))
    try:
        cluster.up()
        yield cluster.bootstrap
    finally:
        cluster.reset()


@pytest.fixture(scope="session")
async def kafka_space(bootstrap: str) -> AsyncIterator[Callable[..., Any]]:
    """A factory of fresh spaces: ``await kafka_space(partitions=3)``."""
    made: list[KafkaSpace] = []

    async def make(partitions: int = 3) -> KafkaSpace:
        space = KafkaSpace(bootstrap, f"t{uuid.uuid4().hex[:10]}.", partitions)
        await ensure_topics(space.settings, space.topics)
        made.append(space)
        return space

    yield make
    for space in made:
        with contextlib.suppress(Exception):
            await delete_topics(space.settings, space.topics)


# ---- one space, shuffler, handler and client per test module ------------------------------
# A module sets ``PARTITIONS`` (default 3) and ``HANDLER`` (``HandlerConfig`` overrides) to
# shape them.


@pytest.fixture(scope="module")
async def space(kafka_space: Any, request: pytest.FixtureRequest) -> KafkaSpace:
    made: KafkaSpace = await kafka_space(partitions=getattr(request.module, "PARTITIONS", 3))
    return made


@pytest.fixture(scope="module")
def shuffler() -> QueuedShuffler:
    return QueuedShuffler()


@pytest.fixture(scope="module")
async def handler(
    space: KafkaSpace, shuffler: QueuedShuffler, request: pytest.FixtureRequest
) -> AsyncIterator[CommandHandler]:
    config = space.config(**getattr(request.module, "HANDLER", {}))
    async with running_handler(config, shuffler=shuffler) as running:
        yield running


@pytest.fixture
async def client(space: KafkaSpace, handler: CommandHandler) -> AsyncIterator[BlackjackClient]:
    async with space.client() as connected:
        yield connected


@contextlib.asynccontextmanager
async def running_handler(config: HandlerConfig, **kwargs: Any) -> AsyncIterator[CommandHandler]:
    handler = CommandHandler(config, **kwargs)
    await handler.start()
    try:
        await handler.wait_ready(WAIT_S)
        yield handler
    finally:
        await handler.stop()


async def accept(client: BlackjackClient, stream: str, *commands: Any) -> list[CommandResult]:
    """Send commands one after the other; each must be accepted."""
    results = []
    for command in commands:
        result = await client.execute(stream, command)
        assert result.status == "accepted", (stream, command, result.rejection)
        results.append(result)
    return results


async def accept_together(
    client: BlackjackClient, stream: str, *commands: Any
) -> list[CommandResult]:
    """Send commands pipelined, in order, in one go; each must be accepted. The broker
    receives them within milliseconds of each other, so a clock the first one starts (a 1 s
    turn, a presence timeout) cannot run out before the last one is received, however long the
    handler takes to answer each (a decision on the clock counts the command's receipt)."""
    ids = await client.send_all([(stream, command) for command in commands])
    results = await asyncio.gather(
        *(client.result(i, timeout=WAIT_S, stream_id=stream) for i in ids)
    )
    for command, result in zip(commands, results, strict=True):
        assert result.status == "accepted", (stream, command, result.rejection)
    return results


# ---- reading what the handler wrote -------------------------------------------------------


async def read_topic(space: KafkaSpace, topic: str, isolation: str = "read_committed") -> list[Any]:
    """Every committed record of a topic (or every record, aborted ones too, with
    ``read_uncommitted``), from the start to its end offsets as of now."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=space.bootstrap,
        group_id=None,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(space.partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        records: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        for tp in tps:
            while await consumer.position(tp) < ends[tp]:
                assert time.monotonic() < deadline, f"{topic} not read to its end"
                batch = await consumer.getmany(tp, timeout_ms=500)
                records += [r for r in batch.get(tp, ()) if r.offset < ends[tp]]
        return records
    finally:
        await consumer.stop()


def table_command(envelope: CommandEnvelope) -> cmd.TableCommand:
    assert not isinstance(envelope.command, WalletCommand), envelope.command
    return envelope.command


def wallet_command(envelope: CommandEnvelope) -> AnyWalletCommand:
    assert isinstance(envelope.command, WalletCommand), envelope.command
    return envelope.command


def table_events(envelopes: Iterable[EventEnvelope]) -> list[ev.Event]:
    """The events of table streams (a wallet's event among them fails the test)."""
    events: list[ev.Event] = []
    for envelope in envelopes:
        assert isinstance(envelope.data, ev.Event), envelope.type
        events.append(envelope.data)
    return events


def wallet_events(envelopes: Iterable[EventEnvelope]) -> list[WalletEvent]:
    events: list[WalletEvent] = []
    for envelope in envelopes:
        assert isinstance(envelope.data, WalletEvent), envelope.type
        events.append(envelope.data)
    return events


async def stream_events(space: KafkaSpace, stream_id: str | None = None) -> list[EventEnvelope]:
    """The events (unsealed with the space's key), of one stream or all, in stream order, as
    of every answer on the results topic: the events of each command answered are in. (A
    transaction commits an answer and its events at once, but Kafka writes its commit markers
    partition by partition, on a cluster each by its leader: an events partition may show
    them a moment after the answer's, and a test that read the events as soon as it had the
    answer saw the table before the command.)"""
    answered = answered_sequences(await read_topic(space, space.topics.results), stream_id)
    seal = space.seal()

    async def to_the_end() -> list[EventEnvelope]:
        records = await read_topic(space, space.topics.events)
        return [from_wire(decode(record.value), seal) for record in records]

    envelopes = await to_the_end()
    if not holds_every_answered(envelopes, answered):
        await wait_for_events(space, stream_id, lambda seen: holds_every_answered(seen, answered))
        envelopes = await to_the_end()  # (the wait ends where they are, not at the end)
    if stream_id is not None:
        envelopes = [e for e in envelopes if e.stream_id == stream_id]
    return envelopes


async def await_answered_events(space: KafkaSpace) -> None:
    """Until the events topic shows the events of every command answered so far: what a
    test reads to the end of it then (a projection's fold) holds them (``stream_events``)."""
    await stream_events(space)


def answered_sequences(records: Iterable[Any], stream_id: str | None) -> dict[str, int]:
    """The last sequence the answers on the results topic (``records``) gave each stream (of
    ``stream_id``'s alone, if given). (A test's unreadable answer names no events.)"""
    answered: dict[str, int] = {}
    for record in records:
        try:
            result = CommandResult.model_validate_json(record.value)
        except ValidationError:
            continue
        if result.last_sequence is not None and stream_id in (None, result.stream_id):
            answered[result.stream_id] = max(
                answered.get(result.stream_id, result.last_sequence), result.last_sequence
            )
    return answered


def holds_every_answered(envelopes: Iterable[EventEnvelope], answered: dict[str, int]) -> bool:
    last: dict[str, int] = {}
    for envelope in envelopes:
        last[envelope.stream_id] = max(last.get(envelope.stream_id, -1), envelope.sequence)
    return all(last.get(stream, -1) >= sequence for stream, sequence in answered.items())


async def all_results(space: KafkaSpace) -> list[CommandResult]:
    return [
        CommandResult.model_validate_json(record.value)
        for record in await read_topic(space, space.topics.results)
    ]


async def stream_results(
    space: KafkaSpace, stream_id: str, causes: set[str]
) -> dict[str, list[CommandResult]]:
    """The answers to the stream's commands on the results topic, by command id, each of
    ``causes`` (the command ids that caused the events read) answered among them: the mirror
    of ``stream_events`` (an event read, the answer its transaction wrote may show a moment
    after, on its own partition: a test that waited for a handler's own step's event and then
    read the answers missed the step's)."""

    async def to_the_end() -> dict[str, list[CommandResult]]:
        results: dict[str, list[CommandResult]] = {}
        for result in await all_results(space):
            if result.stream_id == stream_id:
                results.setdefault(result.command_id, []).append(result)
        return results

    results = await to_the_end()
    unanswered = causes - results.keys()

    def all_answered(records: list[Any]) -> bool:
        for record in records:
            result = CommandResult.model_validate_json(record.value)
            if result.stream_id == stream_id:
                unanswered.discard(result.command_id)
        return not unanswered

    if unanswered:
        await follow_until(space, space.topics.results, all_answered)
        results = await to_the_end()  # (the wait ends where they are, not at the end)
    return results


async def wait_for_events(
    space: KafkaSpace,
    stream_id: str | None,
    done: Callable[[list[EventEnvelope]], bool],
    timeout: float = WAIT_S,
) -> list[EventEnvelope]:
    """Follow the stream's events (every stream's: None) until ``done`` holds for them
    (bounded)."""
    seal = space.seal()
    seen: list[EventEnvelope] = []

    def take(records: list[Any]) -> bool:
        for record in records:
            envelope = from_wire(decode(record.value), seal)
            if stream_id in (None, envelope.stream_id):
                seen.append(envelope)
        return done(seen)

    if not done(seen):
        await follow_until(space, space.topics.events, take, timeout)
    return seen


async def follow_until(
    space: KafkaSpace, topic: str, enough: Callable[[list[Any]], bool], timeout: float = WAIT_S
) -> None:
    """Follow the topic's committed records from its start, handing ``enough`` each batch
    read, until it says they are enough (bounded)."""
    async with following(space, topic) as consumer, asyncio.timeout(timeout):
        while True:
            batch = await consumer.getmany(timeout_ms=500)
            if enough([record for records in batch.values() for record in records]):
                return


@contextlib.asynccontextmanager
async def following(space: KafkaSpace, topic: str) -> AsyncIterator[AIOKafkaConsumer]:
    """A consumer of the topic's committed records from the start, stopped on leaving."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=space.bootstrap,
        group_id=None,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.stop()


async def every_broker_s(looking: AIOKafkaConsumer, topic: str) -> dict[int, TopicState | None]:
    """``topic`` as each broker (by node id) has it now: on a cluster each applies the
    controller's metadata in its own time, and a client asks any of them (a producer that asked
    one that had not applied a partition added refused to write to it: 'Unrecognized
    partition')."""
    nodes = sorted(broker.nodeId for broker in looking._client.cluster.brokers())
    return {node: await topic_state(looking._client, topic, node) for node in nodes}


def types_of(envelopes: Iterable[EventEnvelope]) -> list[str]:
    return [e.type for e in envelopes]


# ---- the shoe ---------------------------------------------------------------------------


class QueuedShuffler:
    """Hands out queued shoes (named first cards, then a fresh shoe's order), then falls back
    to the CSPRNG; the handler draws through it like through ``csprng_shuffle``."""

    def __init__(self) -> None:
        self._queue: list[list[str | int]] = []
        self.drawn = 0

    def queue(self, *first_cards: list[str | int]) -> None:
        self._queue.extend(first_cards)

    def __call__(self, rules: Rules) -> cmd.ShuffleShoe:
        self.drawn += 1
        if not self._queue:
            return csprng_shuffle(rules)
        order = build_shoe(rules.decks, self._queue.pop(0))
        return cmd.ShuffleShoe(order=order, salt=f"test-salt-{uuid.uuid4().hex}")


# ---- checking a stream against the pure engine --------------------------------------------

SHELL_CODES = {"malformed", "unknown_command", "unauthorized"}


@dataclass
class StreamCheck:
    commands: int
    events: list[EventEnvelope]
    state: Any
    resumed: int = 0
    """``RoundResumed`` markers the handlers wrote (each first among its command's events,
    inside a round in play)"""


async def verify_declines(space: KafkaSpace, stream_id: str) -> StreamCheck:
    """A partition's stream of buy-ins declined at tables that did not exist
    (``ids.declines_stream``): its events, in sequence, are exactly what the pure engine
    decides for the buy-in deposits that caused them, in the order the handler read them, on
    a table never opened (whose state keeps the last number declined per wallet); each deposit
    sent to an id of its partition that held no stream, answered there ``table_not_open``
    with no sequence, once, and its copies (same id) after it the same or refused as copies."""
    events = await stream_events(space, stream_id)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1)), "gap or duplicate"
    causes = [e.causation_id or "" for e in events]
    assert len(set(causes)) == len(causes), "a deposit declined twice"
    partition = partition_for(stream_id, space.partitions)
    commands = await commands_where(
        space, lambda key: partition_for(key.decode(), space.partitions) == partition
    )
    results: dict[str, list[CommandResult]] = {}
    for result in await all_results(space):
        results.setdefault(result.command_id, []).append(result)
    state: Any = INITIAL_STATE
    declined = iter(events)
    seen: set[str] = set()
    for envelope, received_at in commands:
        cid = envelope.command_id
        if cid not in causes or cid in seen:
            continue
        seen.add(cid)
        [answer, *copies] = [r for r in results.get(cid, []) if r.stream_id == envelope.stream_id]
        assert answer.status == "rejected" and answer.rejection is not None, answer
        assert answer.rejection.code == "table_not_open" and answer.first_sequence is None
        for copy in copies:
            assert copy == answer or (
                copy.rejection is not None and copy.rejection.code == "transfer_already_handled"
            ), copy
        applied = apply(
            state, table_command(envelope), answer.handled_at, csprng_shuffle, received_at
        )
        assert isinstance(applied, Applied), applied
        event = next(declined)
        assert applied.events == [event.data] and event.causation_id == cid, cid
        state = applied.state
    assert seen == set(causes), f"events with no command: {sorted(set(causes) - seen)}"
    return StreamCheck(commands=len(seen), events=events, state=state)


def without_marker(actual: list[Any], state: Any) -> list[Any]:
    """A command's events without the ``RoundResumed`` a handler that rebuilt the table put
    first (the shell's, not the engine's): it must sit inside the round in play before it."""
    if not actual or not isinstance(actual[0], ev.RoundResumed):
        return actual
    marker = actual[0]
    assert isinstance(state, TableState) and state.round_in_play, "a marker out of a round"
    assert marker.round == state.round, f"marker of round {marker.round} in round {state.round}"
    assert not any(isinstance(e, ev.RoundResumed) for e in actual[1:]), "two markers"
    return actual[1:]


async def command_log(space: KafkaSpace, stream_id: str) -> list[CommandEnvelope]:
    """The commands of a stream that parse as envelopes, in the order the handler read them."""
    return [envelope for envelope, _ in await command_records(space, stream_id)]


async def command_records(
    space: KafkaSpace, stream_id: str
) -> list[tuple[CommandEnvelope, datetime | None]]:
    """The commands of a stream that parse as envelopes, in the order the handler read them,
    each with the broker's time of receipt the handler judged a late decision by. A buy-in's
    ``Deposit`` gets its transfer, and a ``CashOut`` its table event, from the
    ``bj_transfer`` header, as the handler gives them to the deciders."""
    key = stream_id.encode()
    return await commands_where(space, lambda record_key: record_key == key)


async def commands_where(
    space: KafkaSpace, keyed: Callable[[bytes], bool]
) -> list[tuple[CommandEnvelope, datetime | None]]:
    """``command_records`` of the records whose key ``keyed`` takes."""
    envelopes = []
    for record in await read_topic(space, space.topics.commands):
        if not keyed(record.key):
            continue
        with contextlib.suppress(ValueError):
            envelope = CommandEnvelope.model_validate_json(record.value)
            headers = dict(record.headers or ())
            if is_step_id(envelope.command_id) and SIGNATURE_HEADER not in headers:
                continue  # refused unread, and its id left free for the service's own step
            number = headers.get(TRANSFER_HEADER, b"")
            command = envelope.command
            if isinstance(command, cmd.Deposit) and number.isdigit():
                command = command.model_copy(
                    update={"transfer": transfer_ref(command.player_id, int(number))}
                )
                envelope = envelope.model_copy(update={"command": command})
            if isinstance(command, CashOut):  # the table event it pays out, if it names one
                sequence = int(number) if number.isdigit() else None
                command = command.model_copy(update={"table_sequence": sequence})
                envelope = envelope.model_copy(update={"command": command})
            envelopes.append((envelope, receipt_time(record)))
    return envelopes


async def verify_stream(
    space: KafkaSpace, stream_id: str, *, resent: Iterable[str] = ()
) -> StreamCheck:
    """Replay the stream's commands through the pure engine, with the recorded clock (when
    each was handled, and received) and the recorded shoes, and demand exactly the events the
    handler wrote: none lost, none twice, none extra, in sequence 1, 2, 3..., each caused by
    its command. Every command has one result to each time it was sent, all the same (``resent``
    ids, sent twice on purpose, have it twice)."""
    if is_declines_stream(stream_id):
        return await verify_declines(space, stream_id)
    commands = await command_records(space, stream_id)
    events = await stream_events(space, stream_id)
    results = await stream_results(
        space, stream_id, {e.causation_id for e in events if e.causation_id}
    )
    assert [e.sequence for e in events] == list(range(1, len(events) + 1)), "gap or duplicate"
    assert len({e.event_id for e in events}) == len(events)
    shoes = [e.data for e in events if isinstance(e.data, ev.ShoeShuffled)]

    def replayed_shoe(rules: Rules) -> cmd.ShuffleShoe:
        shoe = shoes.pop(0)
        return cmd.ShuffleShoe(order=shoe.order, salt=shoe.salt)

    wallet = is_wallet_stream(stream_id)
    state: Any = INITIAL_WALLET if wallet else INITIAL_STATE
    by_cause: dict[str, list[EventEnvelope]] = {}
    for recorded in events:
        by_cause.setdefault(recorded.causation_id or "", []).append(recorded)
    seen: set[str] = set()
    resent = set(resent)
    touched_at: datetime | None = None  # when the stream's last event was written
    copies: dict[str, int] = {}
    sendings = Counter(envelope.command_id for envelope, _ in commands)
    resumed = 0
    for envelope, received_at in commands:
        cid = envelope.command_id
        nth = copies[cid] = copies.get(cid, -1) + 1
        answers = results.get(cid, [])
        if nth < len(answers) and is_idle_timer(answers[nth]):
            # An ExpireTimers handled before its deadline: nothing done, nothing remembered,
            # so the next copy of its id is decided afresh. The engine must agree.
            handled_at = answers[nth].handled_at
            idle = apply(state, table_command(envelope), handled_at, replayed_shoe, received_at)
            assert isinstance(idle, Applied) and idle.events == [], cid
            continue
        if cid in seen:
            continue
        seen.add(cid)
        # An answer to each sending, none lost, none twice (the clock's commands of a handler
        # woken from a freeze are sent again under their ids, copies answered as such, before
        # it learns that its partitions were taken: a pause drill). A sending that does not
        # read as a command is answered too (``malformed``, not remembered), uncounted here.
        sent = max(sendings[cid], 2 if cid in resent else 1)
        assert len(answers) >= sendings[cid], f"{cid}: a sending of {sent} not answered"
        answers = [a for a in answers if not is_idle_timer(a)]
        assert answers, f"command {cid} ({envelope.command.type}) has no result"
        # Answers to messages refused before reaching the stream, or to one that used an id
        # reserved for the service, are not remembered: the id stays free.
        answers = [a for a in answers if remembered(a)]
        if not answers:
            assert cid not in by_cause
            continue
        assert len(answers) <= sent, f"{cid}: {len(answers)} results to {sent} sending(s)"
        assert cid not in resent or len(answers) == 2, f"{cid}: {len(answers)} results"
        assert all(a == answers[0] for a in answers)
        result = answers[0]
        caused = [e.data for e in by_cause.pop(cid, [])]
        actual = without_marker(caused, state)
        resumed += len(caused) - len(actual)
        if len(actual) < len(caused):
            # the marker restarts a single-seat round's clock, a whole turn from its command's
            # handling: the command is decided on the round as resumed
            marker = caused[0]
            assert isinstance(marker, ev.RoundResumed)
            assert marker == resumption(state, result.handled_at, marker.last_event_at), cid
            state = evolve(state, marker)
        if result.status == "rejected":
            # A platform money command's refusal is written down: one event that moves nothing
            assert result.rejection is not None
            assert all(platform_money.is_refusal_event(e) for e in actual) and len(actual) < 2
            if result.rejection.code in SHELL_CODES:
                assert not actual, cid
                continue
        if wallet:
            decision = decide_wallet(state, wallet_command(envelope))
            expected: list[WalletEvent] | list[ev.Event]
            expected = [] if isinstance(decision, Rejection) else decision
            rejection = decision if isinstance(decision, Rejection) else None
            for event in expected:
                state = evolve_wallet(state, event)
        else:
            command = table_command(envelope)
            if isinstance(command, cmd.CloseInterruptedRound):  # the handler fills it in
                command = command.model_copy(update={"idle_since": touched_at})
            applied = apply(state, command, result.handled_at, replayed_shoe, received_at)
            if isinstance(applied, Rejection):
                rejection, expected = applied, []
            else:
                rejection, expected = None, applied.events
                state = applied.state
        if result.status == "rejected" and actual:
            assert rejection is not None, cid
            written = platform_money.refusal(state, envelope.command, rejection)
            assert written is not None, f"{cid}: a refusal written down that is not kept"
            state = written[0]
            assert actual == written[1], f"{cid} ({envelope.command.type}): refusal differs"
            touched_at = result.handled_at
        if expected:
            touched_at = result.handled_at
        if result.status == "rejected":
            assert rejection is not None and result.rejection is not None, cid
            assert rejection.code == result.rejection.code, cid
        else:
            assert rejection is None, f"{cid}: the engine rejects what the handler accepted"
            assert actual == expected, f"{cid} ({envelope.command.type}): events differ"
    assert not by_cause, f"events with no command: {sorted(by_cause)}"
    return StreamCheck(commands=len(seen), events=events, state=state, resumed=resumed)


@pytest.fixture
def private_cluster(tmp_path: Path) -> Iterator[PrivateCluster]:
    """Three Kafka nodes of the test's own, which it may kill and start one by one."""
    cluster = PrivateCluster(tmp_path / "cluster")
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.reset()


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[PrivateBroker]:
    """A broker of the test's own, which it may stop and start (an outage drill)."""
    broker = PrivateBroker(tmp_path / "kafka")
    broker.up()
    try:
        yield broker
    finally:
        broker.down()
