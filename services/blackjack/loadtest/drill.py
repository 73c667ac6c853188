"""What the fault drills (``blackjack takeover``, ``blackjack outage``) share: fresh topics,
``CommandHandler`` instances in one group in this process, single-player tables played
without pause, and at the end the proof read back from offset 0.

    drill = Drill("outage", bootstrap, partitions=3, tables=12, ...)
    async with drill.topics_in_use(keep=False):     # deleted at the end, whatever happens
        try:
            a, b = drill.handler("a"), drill.handler("b")
            ...start them...
            await drill.play()
            await drill.meanwhile(asyncio.sleep(5))     # a player's failure is raised here
            ...the fault...
            await drill.stop_playing([a, b])            # the handlers' and the players' states
        finally:
            await drill.close()
        proof = await drill.prove(emit)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

from blackjack.bus.settings import PLAINTEXT, KafkaSecurity, KafkaSettings
from blackjack.bus.topics import Topics, ensure_topics
from blackjack.client import BlackjackClient
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.domain.rules import preset
from blackjack.domain.state import TableState
from blackjack.loadtest.config import Emit
from blackjack.loadtest.figures import percentile
from blackjack.loadtest.players import EventFollower, Player, Sent
from blackjack.loadtest.proof import Proof, prove, read_back
from blackjack.loadtest.run import remove_topics
from blackjack.messages.sealing import ShoeSeal
from blackjack.strategy import compute_strategy

T = TypeVar("T")
MOST_ROUNDS = 10_000  # a table's deposit covers this many rounds of splits and doubles
POLL_S = 0.01
"""How finely the drills watch the handlers' partitions and the players' progress (several
of them: no one event to await)."""


class Drill:
    def __init__(
        self,
        name: str,
        bootstrap: str,
        *,
        partitions: int,
        tables: int,
        variant: str,
        timeout_s: float,
        resend_after_s: float | None = None,
        security: KafkaSecurity = PLAINTEXT,
        replication_factor: int = 1,
        min_insync_replicas: int = 1,
    ) -> None:
        """``security``: how every client of the drill connects (the handlers, the players'
        client and events reader, the proof's readers); the replicas: of its topics."""
        self.prefix = f"{name}{uuid.uuid4().hex[:10]}."
        self.settings = KafkaSettings(
            bootstrap=bootstrap,
            topic_prefix=self.prefix,
            partitions=partitions,
            replication_factor=replication_factor,
            min_insync_replicas=min_insync_replicas,
            security=security,
        )
        self.topics = Topics(self.prefix)
        self.shoe_key = ShoeSeal.new_key_hex()
        self.rules = preset(variant)
        compute_strategy(self.rules)  # before any clock starts
        self.tables = tables
        self.timeout_s = timeout_s
        self.resend_after_s = resend_after_s
        self.created: list[CommandHandler] = []
        self.sent: list[Sent] = []
        self.players: list[Player] = []
        self.playing: list[asyncio.Task[None]] = []
        self.states: dict[str, tuple[int, TableState]] = {}
        self.views: dict[str, tuple[int, TableState]] = {}
        self.settled: dict[str, tuple[Counter[str], Counter[str]]] = {}
        """per table, what each player saw wagered and paid in its settled rounds"""
        self._stop = asyncio.Event()
        self._follower = EventFollower(
            bootstrap, self.topics, partitions, ShoeSeal.from_hex(self.shoe_key), security
        )
        self._client = BlackjackClient(
            bootstrap, self.topics, client_id=f"{self.prefix}client", security=security
        )

    @contextlib.asynccontextmanager
    async def topics_in_use(self, *, keep: bool) -> AsyncIterator[None]:
        """The drill's topics, created; deleted when the drill ends unless ``keep``, and
        also when it fails or is interrupted: a failed drill leaves nothing on the cluster."""
        try:
            await ensure_topics(self.settings, self.topics)  # some may exist if it fails
            yield
        finally:
            if not keep:
                await self._remove_topics()

    async def _remove_topics(self) -> None:
        try:
            await remove_topics([self.settings])
        except Exception as error:  # the drill's own outcome is what its caller must see
            print(f"the drill's topics {self.prefix}* were not deleted: {error}", file=sys.stderr)

    def handler(self, name: str) -> CommandHandler:
        """A new instance (not started), stopped by ``close`` whatever happens."""
        handler = CommandHandler(
            HandlerConfig(
                shoe_key_hex=self.shoe_key,
                kafka=self.settings,
                instance_id=f"{name}-{os.getpid()}",
            )
        )
        self.created.append(handler)
        return handler

    async def play(self) -> None:
        """Open and fund every table, then play them all without pause."""
        await self._follower.start()
        await self._client.start()
        self.players = [
            Player(
                i,
                self.rules,
                client=self._client,
                follower=self._follower,
                log=self.sent,
                timeout=self.timeout_s,
                resend_after=self.resend_after_s,
            )
            for i in range(self.tables)
        ]
        for player in self.players:
            await player.set_up(4 * self.rules.min_bet * (MOST_ROUNDS + 1))
        self.playing = [asyncio.create_task(self._play(p)) for p in self.players]

    async def _play(self, player: Player) -> None:
        while not self._stop.is_set() and player.rounds < MOST_ROUNDS:
            await player.play(1, self.rules.min_bet)

    async def meanwhile(self, work: Awaitable[T]) -> T:
        """``work``'s result, unless a player fails first (its error is raised)."""
        return await or_failed(work, self.playing)

    async def stop_playing(self, live: Iterable[CommandHandler]) -> None:
        """Let each player finish its round; raise the first player's failure; note what the
        ``live`` handlers and the players hold."""
        self._stop.set()
        outcomes = await asyncio.gather(*self.playing, return_exceptions=True)
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if failures:
            raise failures[0]
        self.states = {
            stream_id: (sequence, state)
            for one in live
            for stream_id, (sequence, state) in one.streams().items()
            if isinstance(state, TableState)
        }
        self.views = {
            stream_id: (view.sequence, view.state)
            for stream_id, view in self._follower.views.items()
        }
        self.settled = {
            stream_id: (view.wagered, view.paid) for stream_id, view in self._follower.views.items()
        }

    async def close(self) -> None:
        """Stop the players (if still playing), the clients and every handler created, each
        whatever the one before did (the events' follower raises the error it died of, a
        doubled or lost event among them); then the first error, if any."""
        self._stop.set()
        for task in self.playing:
            task.cancel()
        await asyncio.gather(*self.playing, return_exceptions=True)
        await stop_all([self._client.stop, self._follower.stop, *(h.stop for h in self.created)])

    def resent(self) -> Counter[str]:
        resent: Counter[str] = Counter()
        for player in self.players:
            resent.update(player.resent)
        return resent

    async def prove(self, emit: Emit) -> Proof:
        """The proof read back from the topics."""
        back = await read_back(self.settings, self.shoe_key)
        proof = prove(
            self.sent,
            command_records=back.commands,
            results=back.results,
            events=back.events,
            handler_states=self.states,
            views=self.views,
            rounds={p.stream_id: p.rounds for p in self.players},
            resent=self.resent(),
            answers_per_record=back.answers_per_record,
        )
        emit(proof.line())
        return proof

    def figures(self) -> dict[str, Any]:
        """The commands, rounds and command latencies of the run."""
        latencies = [latency for p in self.players for latency in p.latencies]
        return {
            "commands": len(self.sent),
            "rounds": sum(p.rounds for p in self.players),
            "latency_ms": {
                name: round(1000 * percentile(latencies, q), 1)
                for name, q in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0))
            },
        }


async def stop_all(steps: Iterable[Callable[[], Awaitable[object]]]) -> None:
    """Every step, whatever the ones before raised; then the first error."""
    errors: list[BaseException] = []
    for step in steps:
        try:
            await step()
        except Exception as error:
            errors.append(error)
    if errors:
        raise errors[0]


async def or_failed(work: Awaitable[T], playing: list[asyncio.Task[None]]) -> T:
    """``work``'s result, unless a player fails first (its error is raised)."""
    task = asyncio.ensure_future(work)
    waiting: set[asyncio.Future[Any]] = {task, *playing}
    while True:
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        for finished in done:
            waiting.discard(finished)
            error = finished.exception()
            if error is not None:
                task.cancel()
                raise error
