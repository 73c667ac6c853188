"""Fixtures and helpers for the projection, query API and audit tests.

Loaded by ``pytest_plugins = ["tests.integration.conftest_projections"]`` from those test
modules. The game generator (``play_tables``) has no I/O and is imported by unit tests too.

Event logs come from the real engine: ``table.apply`` with a seeded shuffler, players picking
random moves among the ones ``legal_actions`` offers (bets, deal, pass, insurance, hit, stand,
double, split, surrender), timers running out, deposits, withdrawals, disconnections, players
leaving and coming back. Each event is wrapped in an ``EventEnvelope`` as the handler would.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from sqlalchemy.engine import make_url

from blackjack.api.routes import query_api
from blackjack.api.tokens import OPEN, ApiTokens
from blackjack.bus.topics import Topics, wait_for_every_broker
from blackjack.command_handler.ids import event_id
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import wallet as wl
from blackjack.domain.legal import legal_actions
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import Rules
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.domain.transfers import buy_in_ref
from blackjack.messages import wire
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projection_worker.worker import build_broker
from blackjack.projections.health import FoldHealth
from blackjack.projections.rebuild import read_topic
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import Position, ProjectionWriter, Record
from blackjack.scenario import build_shoe
from blackjack.simulation.player import SeededShuffler
from blackjack.table import apply
from tests.integration import infra

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
PARTITIONS = 3

# ---- the game generator -------------------------------------------------------------------


@dataclass
class GameLog:
    envelopes: list[EventEnvelope] = field(default_factory=list)
    states: dict[str, TableState] = field(default_factory=dict)
    wallets: dict[str, wl.WalletState] = field(default_factory=dict)

    def of(self, stream_id: str) -> list[EventEnvelope]:
        return [e for e in self.envelopes if e.stream_id == stream_id]

    def count(self, event_type: str) -> int:
        return sum(1 for e in self.envelopes if e.type == event_type)


class _Table:
    """One table played by random but always legal moves."""

    def __init__(self, stream_id: str, variant: str, seed: int, start: datetime = START) -> None:
        self.stream_id = stream_id
        self.random = random.Random(f"{seed}/{stream_id}")
        self.shuffler = SeededShuffler(self.random.randrange(2**32))
        self.state: TableState = INITIAL_STATE
        self.now = start + timedelta(seconds=self.random.randrange(60))
        self.envelopes: list[EventEnvelope] = []
        self.sequences: dict[str, int] = {}
        self.rejection: Rejection | None = None
        self.wallets: dict[str, wl.WalletState] = {}
        self.commands = 0
        self.settled = 0
        self.variant = variant

    def submit(self, command: cmd.Command) -> bool:
        self.commands += 1
        result = apply(self.state, command, self.now, self.shuffler)
        if isinstance(result, Rejection):
            self.rejection = result
            return False
        self.state = result.state
        for event in result.events:
            self._record(self.stream_id, event)
            if isinstance(event, ev.RoundSettled):
                self.settled += 1
            if self.multi_seat and isinstance(event, ev.SeatLeft | ev.FundsWithdrawn):
                amount = event.balance_returned if isinstance(event, ev.SeatLeft) else event.amount
                if amount > 0:
                    cash_out = wl.CashOut(
                        player_id=event.player_id,
                        table_id=self.stream_id,
                        amount=amount,
                        table_sequence=self.sequences[self.stream_id],
                    )
                    self.wallet(cash_out)
        return True

    def _record(self, stream_id: str, event: ev.Event | wl.WalletEvent) -> None:
        sequence = self.sequences.get(stream_id, 0) + 1
        self.sequences[stream_id] = sequence
        self.envelopes.append(
            EventEnvelope(
                event_id=event_id(stream_id, sequence),  # the handler's, which the audit checks
                type=event.type,  # type: ignore[union-attr]
                schema_version=event.version,
                stream_id=stream_id,
                sequence=sequence,
                occurred_at=self.now,
                causation_id=f"{self.stream_id}-cmd-{self.commands}",
                correlation_id=f"{self.stream_id}-session",
                data=event,
            )
        )

    def wallet(self, command: wl.WalletCommand) -> bool:
        """A command to the player's wallet stream, as the handler runs it."""
        self.commands += 1
        stream_id = wl.wallet_stream(command.player_id)
        state = self.wallets.get(stream_id, wl.INITIAL_WALLET)
        decision = wl.decide_wallet(state, command)
        if isinstance(decision, Rejection):
            return False
        for event in decision:
            state = wl.evolve_wallet(state, event)
            self._record(stream_id, event)
        self.wallets[stream_id] = state
        return True

    def fund(self, player_id: str, amount: int) -> None:
        """Money to the player's seat: straight from the platform at a single-player table,
        through the wallet (a buy-in, confirmed or refunded by the table) at a shared one."""
        if not self.multi_seat:
            self.submit(cmd.Deposit(player_id=player_id, amount=amount))
            return
        self.wallet(wl.WalletDeposit(player_id=player_id, amount=amount))
        if not self.wallet(wl.BuyIn(player_id=player_id, table_id=self.stream_id, amount=amount)):
            return
        wallet = wl.wallet_stream(player_id)
        transfer = self.wallets[wallet].transfers
        # As the handler sends it: the table takes the buy-in or declines it, never refuses.
        self.must(
            cmd.Deposit(player_id=player_id, amount=amount, transfer=buy_in_ref(wallet, transfer))
        )
        answer = self.envelopes[-1].data
        if isinstance(answer, ev.TransferDeclined):
            reason = answer.reason_code
            self.wallet(wl.RefundBuyIn(player_id=player_id, transfer=transfer, reason=reason))
        else:
            self.wallet(wl.ConfirmBuyIn(player_id=player_id, transfer=transfer))

    def must(self, command: cmd.Command) -> None:
        if not self.submit(command):
            raise AssertionError(f"{command} refused: {self.rejection}")

    @property
    def multi_seat(self) -> bool:
        return self.state.rules.seats > 1

    def open(self) -> None:
        self.must(cmd.OpenTable(variant=self.variant))
        players = min(self.state.rules.seats, 3)
        for seat in range(players):
            self.sit(f"{self.stream_id}-p{seat}", seat)

    def sit(self, player_id: str, seat: int) -> None:
        self.must(cmd.SitDown(player_id=player_id, seat=seat))
        self.fund(player_id, self.random.randint(20, 80) * self.state.rules.min_bet)

    def step(self) -> None:
        rng = self.random
        state = self.state
        self.now += timedelta(seconds=rng.randint(1, 4))
        if not state.round_open and rng.random() < 0.12:
            self._between_rounds()
            return
        if state.deadline is not None and rng.random() < 0.1:
            self.now = max(self.now, state.deadline + timedelta(seconds=1))
            self.submit(cmd.ExpireTimers())
            return
        moves: list[tuple[float, cmd.Command]] = []
        for player_id, player in state.players.items():
            if not player.connected:
                moves.append((1.0, cmd.Reconnect(player_id=player_id)))
                continue
            moves += self._moves(player_id)
        if not moves:
            for player_id in list(state.players):
                self.fund(player_id, 50 * state.rules.min_bet)
            if state.deadline is not None:
                self.now = max(self.now, state.deadline + timedelta(seconds=1))
                self.submit(cmd.ExpireTimers())
            return
        weights = [w for w, _ in moves]
        _, command = rng.choices(moves, weights=weights)[0]
        self.submit(command)

    def _moves(self, player_id: str) -> list[tuple[float, cmd.Command]]:
        rng = self.random
        state = self.state
        legal = legal_actions(state, player_id, self.now)
        rules = state.rules
        balance = state.players[player_id].balance
        moves: list[tuple[float, cmd.Command]] = []
        has_bet = bool(state.boxes_of(player_id))
        for box in legal.bet_boxes:
            top = min(rules.max_bet, balance, 10 * rules.min_bet)
            amount = rng.randint(rules.min_bet, max(rules.min_bet, top))
            moves.append(
                (0.6 if has_bet else 3.0, cmd.PlaceBet(player_id=player_id, box=box, amount=amount))
            )
        if legal.deal:
            moves.append((3.0, cmd.Deal(player_id=player_id)))
        if legal.clear:
            moves.append((0.15, cmd.ClearBets(player_id=player_id)))
        for box in legal.remove_boxes:  # chips taken back: all of them, or down to the minimum
            spare = state.boxes[box].bet - rules.min_bet
            part = rng.randint(1, spare) if spare > 0 and rng.random() < 0.6 else None
            moves.append((0.2, cmd.RemoveBet(player_id=player_id, box=box, amount=part)))
        if legal.pass_round:
            moves.append((0.3, cmd.Pass(player_id=player_id)))
        for multiplier in legal.rebet:
            moves.append((1.0, cmd.Rebet(player_id=player_id, multiplier=multiplier)))
        for box in legal.insurance_boxes:
            moves.append((1.0, cmd.TakeInsurance(player_id=player_id, box=box)))
        for box in legal.decline_boxes:
            moves.append((1.0, cmd.DeclineInsurance(player_id=player_id, box=box)))
        if legal.turn is not None:
            box, hand = legal.turn.box, legal.turn.hand
            kinds: dict[str, type[cmd.HandCommand]] = {
                "hit": cmd.Hit,
                "stand": cmd.Stand,
                "double": cmd.Double,
                "split": cmd.Split,
                "surrender": cmd.Surrender,
            }
            for action in legal.turn.actions:
                weight = {"split": 3.0, "double": 1.5, "surrender": 0.7}.get(action, 1.0)
                moves.append((weight, kinds[action](player_id=player_id, box=box, hand=hand)))
        return moves

    def _between_rounds(self) -> None:
        rng = self.random
        state = self.state
        players = sorted(state.players)
        if not players:
            self.sit(f"{self.stream_id}-p0", 0)
            return
        player_id = rng.choice(players)
        balance = state.players[player_id].balance
        roll = rng.random()
        if roll < 0.3:
            self.fund(player_id, rng.randint(1, 30) * 100)
        elif roll < 0.55 and balance > 0:
            amount = rng.randint(1, max(1, balance // 4))
            self.submit(cmd.Withdraw(player_id=player_id, amount=amount))
        elif roll < 0.75:
            self.submit(cmd.Disconnect(player_id=player_id))
        elif roll < 0.9:
            seat = state.players[player_id].seat
            if self.submit(cmd.LeaveTable(player_id=player_id)):
                self.sit(player_id, seat)
        else:
            free = [s for s in range(state.rules.seats) if state.player_at(s) is None]
            if free:
                self.submit(cmd.MoveSeat(player_id=player_id, seat=rng.choice(free)))
            wallet = self.wallets.get(wl.wallet_stream(player_id))
            if wallet is not None and wallet.balance > 0:
                amount = rng.randint(1, wallet.balance)
                self.wallet(wl.WalletWithdraw(player_id=player_id, amount=amount))


class _ScriptedShoes:
    def __init__(self, shoes: Sequence[Sequence[str]]) -> None:
        self.shoes = list(shoes)
        self.count = 0

    def __call__(self, rules: Rules) -> cmd.ShuffleShoe:
        first = self.shoes[self.count] if self.count < len(self.shoes) else []
        self.count += 1
        order = build_shoe(rules.decks, list(first))
        return cmd.ShuffleShoe(order=order, salt=f"script-salt-{self.count:08d}")


class Script(_Table):
    """One table played command by command, with the cards of each shoe given first (the
    order of the scenario files: each box then the upcard, each box then the hole card)."""

    def __init__(
        self,
        variant: str,
        shoes: Sequence[Sequence[str]],
        players: dict[str, int] | None = None,
        stream_id: str = "table-1",
        overrides: dict[str, object] | None = None,
    ) -> None:
        super().__init__(stream_id, variant, seed=0)
        self.shuffler = _ScriptedShoes(shoes)  # type: ignore[assignment]
        self.must(cmd.OpenTable(variant=variant, overrides=overrides or {}))
        for seat, (player_id, balance) in enumerate((players or {"alice": 10_000}).items()):
            self.must(cmd.SitDown(player_id=player_id, seat=seat))
            if balance:
                self.fund(player_id, balance)

    def do(self, *commands: cmd.Command) -> list[EventEnvelope]:
        """Apply the commands; the events they caused."""
        start = len(self.envelopes)
        for command in commands:
            self.must(command)
        return self.envelopes[start:]

    def tick(self, seconds: int = 1) -> None:
        self.now += timedelta(seconds=seconds)


def play_tables(
    tables: Sequence[tuple[str, str]],
    rounds: int,
    seed: int = 1,
    max_steps: int = 100_000,
    start: datetime = START,
) -> GameLog:
    """Play ``rounds`` settled rounds at each (stream id, variant) table, from about
    ``start``; the events of all tables interleaved by time, each table's own in order."""
    log = GameLog()
    played = []
    for stream_id, variant in tables:
        table = _Table(stream_id, variant, seed, start)
        table.open()
        steps = 0
        while table.settled < rounds:
            steps += 1
            if steps > max_steps:
                raise AssertionError(f"{stream_id} settled only {table.settled} rounds")
            table.step()
        log.states[stream_id] = table.state
        log.wallets.update(table.wallets)
        played.append(table.envelopes)
    merged = sorted(
        (e for envelopes in played for e in envelopes),
        key=lambda e: (e.occurred_at, e.stream_id, e.sequence),
    )
    log.envelopes = merged
    return log


def placed(envelope: wire.WireEnvelope, sequence: int, **update: object) -> wire.WireEnvelope:
    """``envelope`` at ``sequence`` of its stream (and ``update``), with that place's event id:
    a log rewritten as one who knows how the handler derives ids would write it, so that the
    audit's other checks are what finds it."""
    place = {"sequence": sequence, "event_id": event_id(envelope.stream_id, sequence)}
    return envelope.model_copy(update={**update, **place})


def to_wire(envelopes: Iterable[EventEnvelope], seal: ShoeSeal) -> list[wire.WireEnvelope]:
    return [wire.to_wire(e, seal) for e in envelopes]


# ---- Kafka --------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventsTopic:
    bootstrap: str
    prefix: str

    @property
    def name(self) -> str:
        return Topics(self.prefix).events


async def publish(
    topic: EventsTopic,
    envelopes: Iterable[wire.WireEnvelope],
    *,
    transactional: bool = True,
    abort: bool = False,
) -> dict[tuple[str, int], int]:
    """Produce the events keyed by stream (in one transaction unless ``transactional`` is
    false; aborted if ``abort``); returns, per partition, the offset just past the last record
    written (what a projection's stored position reaches once it has them all)."""
    transactional_id = f"{topic.prefix}producer-{uuid.uuid4().hex[:8]}" if transactional else None
    producer = AIOKafkaProducer(
        bootstrap_servers=topic.bootstrap,
        transactional_id=transactional_id,
        enable_idempotence=True,
        linger_ms=5,
    )
    await producer.start()
    ends: dict[tuple[str, int], int] = {}
    try:
        items = list(envelopes)
        if transactional:
            async with producer.transaction():
                await _send_all(producer, topic, items, ends)
                if abort:
                    raise _Abort
        else:
            await _send_all(producer, topic, items, ends)
    except _Abort:
        pass
    finally:
        await producer.stop()
    return ends


class _Abort(Exception):
    """Raised inside a producer transaction to abort it."""


async def _send_all(
    producer: AIOKafkaProducer,
    topic: EventsTopic,
    items: list[wire.WireEnvelope],
    ends: dict[tuple[str, int], int],
) -> None:
    futures = [
        await producer.send(
            topic.name,
            key=item.stream_id.encode(),
            value=wire.encode(item),
            headers=wire.cloudevents_headers(item, "tests/projections"),
        )
        for item in items
    ]
    for metadata in await asyncio.gather(*futures):
        key = (metadata.topic, metadata.partition)
        ends[key] = max(ends.get(key, 0), metadata.offset + 1)


@pytest.fixture(scope="session")
def projection_bootstrap(bootstrap: str) -> str:
    """The integration conftest's ``bootstrap``: the local broker, or in a module marked
    ``also_on_three_nodes`` the session's three nodes too."""
    return bootstrap


@asynccontextmanager
async def new_events_topic(bootstrap: str) -> AsyncIterator[EventsTopic]:
    """A fresh ``<prefix>blackjack.events`` topic (3 partitions), deleted afterwards."""
    topic = EventsTopic(bootstrap, f"test-{uuid.uuid4().hex[:10]}.")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic.name, PARTITIONS, 1)])
        # on a cluster, a broker asked next may not have taken the new topic yet
        await wait_for_every_broker(admin, {topic.name: PARTITIONS})
        yield topic
        await admin.delete_topics([topic.name])
    finally:
        await admin.close()


@pytest.fixture
async def events_topic(projection_bootstrap: str) -> AsyncIterator[EventsTopic]:
    async with new_events_topic(projection_bootstrap) as topic:
        yield topic


@pytest.fixture(scope="session")
def shoe_seal() -> ShoeSeal:
    return ShoeSeal.from_hex(SHOE_KEY)


SHOE_KEY = ShoeSeal.new_key_hex()


# ---- stores -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    from tests.integration import infra

    url: str = infra.postgres_url()
    return url


async def connect_directly(server_url: str, timeout: float = 60) -> Any:
    """A plain asyncpg connection to the database a SQLAlchemy URL names (no pool, no
    statement timeouts; ``timeout``: asyncpg's for connecting, its default 60 s): what a test
    uses to act on the server beside the store."""
    import asyncpg

    url = make_url(server_url)
    return await asyncpg.connect(
        user=url.username,
        password=url.password,
        host=url.host,
        port=url.port,
        database=url.database,
        timeout=timeout,
    )


async def on_server(server_url: str, statement: str) -> None:
    """Run one statement (CREATE/DROP DATABASE: outside a transaction) on the server."""
    connection = await connect_directly(server_url)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


class StoreFactory:
    """Fresh, migrated stores of one kind (a SQLite file, or a new PostgreSQL database)."""

    def __init__(self, kind: str, tmp: Path, server_url: str | None) -> None:
        self.kind = kind
        self.tmp = tmp
        self.server_url = server_url
        self.databases: list[str] = []
        self.stores: list[ProjectionStore] = []

    async def url(self) -> str:
        name = f"bjp_{uuid.uuid4().hex[:12]}"
        if self.kind == "sqlite":
            return f"sqlite+aiosqlite:///{self.tmp / (name + '.db')}"
        assert self.server_url is not None
        self.databases.append(name)
        await on_server(self.server_url, f'CREATE DATABASE "{name}"')
        url = make_url(self.server_url).set(database=name)
        return url.render_as_string(hide_password=False)

    async def store(self, url: str | None = None) -> ProjectionStore:
        store = ProjectionStore(url or await self.url())
        await store.migrate()
        self.stores.append(store)
        return store

    async def close(self) -> None:
        for store in self.stores:
            await store.close()
        if self.server_url is not None:
            for name in self.databases:
                await on_server(self.server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


STORE_KINDS = ["sqlite", "postgresql"]


def store_factory(request: pytest.FixtureRequest, tmp: Path) -> StoreFactory:
    """Stores of the kind the test is parametrized with (``request.param``)."""
    kind = request.param
    server = request.getfixturevalue("postgres_server_url") if kind == "postgresql" else None
    return StoreFactory(kind, tmp, server)


@pytest.fixture(params=STORE_KINDS)
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    factory = store_factory(request, tmp_path)
    yield factory
    await factory.close()


@asynccontextmanager
async def projection_worker(
    bootstrap: str,
    prefix: str,
    store: ProjectionStore,
    group: str | None = None,
    health: FoldHealth | None = None,
    **settings: Any,
) -> AsyncIterator[ProjectionWriter]:
    """A projection worker in this process, folding ``<prefix>blackjack.events`` into
    ``store``; its writer tells how far it got (``wait_for``), ``health`` what it found;
    ``settings``, more ``ProjectionSettings`` (``watch_every_s``, say)."""
    settings = {"batch": 50, **settings}
    configured = ProjectionSettings(
        db_url=store.url,
        bootstrap=bootstrap,
        topic_prefix=prefix,
        group_id=group or f"{prefix}projections",
        **settings,
    )
    writer = ProjectionWriter(store)
    broker = build_broker(configured, writer, health)
    await broker.start()
    try:
        yield writer
    finally:
        await broker.stop()


async def data_ends(bootstrap: str, topic: str) -> dict[tuple[str, int], int]:
    """Per partition, the offset past the last committed record of the topic now (what a
    projection's position reaches once it has folded everything)."""
    ends: dict[tuple[str, int], int] = {}

    def note(records: list[Record]) -> None:
        for record in records:
            ends[record.position] = max(ends.get(record.position, 0), record.offset + 1)

    await read_topic(bootstrap, topic, note)
    return ends


def event_records(
    envelopes: Iterable[EventEnvelope], seal: ShoeSeal, topic: str = "blackjack.events"
) -> list[Record]:
    """``envelopes`` as records of the events topic's partition 0 from offset 0, written as
    the handler writes them (shoes sealed with ``seal``): what a fold reads."""
    return [
        Record(topic, 0, offset, wire.encode(wire.to_wire(envelope, seal)))
        for offset, envelope in enumerate(envelopes)
    ]


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A projection worker process (``blackjack projections run``) with ``env``
    (``worker_env``), its output appended to ``log``."""
    return subprocess.Popen(
        [sys.executable, "-m", "blackjack.cli", "projections", "run"],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def worker_env(topic: EventsTopic, db_url: str, **extra: str) -> dict[str, str]:
    """The environment of a projection worker subprocess for this topic and store."""
    env = dict(os.environ)
    env.update(
        {
            "BLACKJACK_DB_URL": db_url,
            "BLACKJACK_KAFKA_BOOTSTRAP": topic.bootstrap,
            "BLACKJACK_TOPIC_PREFIX": topic.prefix,
            "BLACKJACK_PROJECTION_GROUP": f"{topic.prefix}projections",
        }
    )
    env.update(extra)
    return env


def expected_balances(log: GameLog) -> dict[tuple[str, str], int]:
    """(stream, player) -> balance at the table, from the engine's own fold of the events."""
    return {
        (stream_id, player_id): player.balance
        for stream_id, state in log.states.items()
        for player_id, player in state.players.items()
    }


def describe(log: GameLog) -> dict[str, Any]:
    kinds = ("RoundSettled", "HandSplit", "HandDoubled", "InsuranceTaken", "HandSurrendered")
    return {"events": len(log.envelopes), **{k: log.count(k) for k in kinds}}


# ---- another process's progress ----------------------------------------------------------


async def wait_until(condition: Any, what: str, timeout: float = 60.0) -> None:
    """Poll another process's progress through the store (nothing to await across it)."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.02)


async def reached(store: ProjectionStore, ends: dict[Position, int]) -> bool:
    """Whether the store's positions have reached ``ends`` (per partition)."""
    positions = await ProjectionWriter(store).stored_positions()
    return all(positions.get(key, 0) >= offset for key, offset in ends.items())


QUERY_API_STARTED_WITHIN_S = 30.0
"""how long ``served_query_api`` waits for uvicorn to listen (``conftest.WAIT_S``)"""


class _QueryApiServer(uvicorn.Server):
    @contextmanager
    def capture_signals(self) -> Iterator[None]:  # the test process's signals stay its own
        yield


@asynccontextmanager
async def served_query_api(store: ProjectionStore, tokens: ApiTokens = OPEN) -> AsyncIterator[str]:
    """The query API over ``store`` on a free local port (uvicorn, in this process)."""
    port = infra.free_port()
    config = uvicorn.Config(
        query_api(store, tokens=tokens),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
    )
    server = _QueryApiServer(config)
    serving = asyncio.create_task(server.serve())
    async with asyncio.timeout(QUERY_API_STARTED_WITHIN_S):
        while not server.started:  # uvicorn has no event to await for it
            await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving
