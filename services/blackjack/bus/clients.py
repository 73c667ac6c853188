"""aiokafka's producer and consumer with the service's fixes to aiokafka on their own instances.

``BlackjackClient`` runs in a casino platform's process, beside the platform's own aiokafka
producers and consumers, which must behave exactly as aiokafka ships them. So its clients are
these: each fix is put on the instance (its ``AIOKafkaClient``, its fetcher), never on
aiokafka's classes or modules.

- the metadata update, after one that failed, waits ``retry_backoff_ms`` (``bus.metadata_backoff``);
- a bootstrap cut short closes the connection it opened (``bus.cut_short``), and a producer
  whose start is cancelled is stopped;
- a consumer reads a record whose header name is not UTF-8 (``bus.header_names``): its
  fetcher's record reader is wrapped as aiokafka's ``start`` makes it, before its first fetch;
- a consumer can ask a topic's id (``topic_state``, ``bus.topic_ids``: aiokafka keeps none),
  on its client's connections;
- a stop goes to its end when its caller is cancelled meanwhile (on its own).

Each checks the aiokafka it wraps first (``bus.aiokafka_internals``): one that changed raises
``AiokafkaChanged`` from the constructor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from blackjack.bus.aiokafka_internals import (
    require_bootstrap,
    require_fetch_reader,
    require_metadata_update,
    require_topic_ids,
)
from blackjack.bus.cut_short import close_client_cut_short
from blackjack.bus.header_names import read_header_names_not_utf8_by
from blackjack.bus.metadata_backoff import back_off_client
from blackjack.bus.topic_ids import TopicState, topic_state
from blackjack.error_text import error_text

log = structlog.get_logger("blackjack.bus")

_STOPS_LET_GO: set[asyncio.Task[None]] = set()
"""The producers' and consumers' stops going on after their callers were cancelled (held
here: the event loop holds its tasks weakly)."""


def _let_go_stop_ended(stopping: asyncio.Task[None]) -> None:
    _STOPS_LET_GO.discard(stopping)
    if not stopping.cancelled() and (error := stopping.exception()) is not None:
        log.warning(
            "a Kafka client's stop, left to end on its own, failed",
            error=error_text(error),
        )


def require_client_fixes() -> None:
    """What the fixes of every client rely on in aiokafka (``AiokafkaChanged`` if not)."""
    require_metadata_update()
    require_bootstrap()


async def stop_to_its_end(stopping: Awaitable[None]) -> None:
    """Run a client's ``stopping`` (a coroutine, or a task of it) to its end whatever comes:
    its caller cancelled meanwhile gets the cancel at once, and the stop goes on on its own
    (``_STOPS_LET_GO``; its error logged)."""
    task = asyncio.ensure_future(stopping)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.done():
            task.result()  # (its own error first)
        else:
            _STOPS_LET_GO.add(task)
            task.add_done_callback(_let_go_stop_ended)
        raise


class ScopedProducer(AIOKafkaProducer):  # type: ignore[misc]
    """aiokafka's producer; its client backs off a failed metadata update and closes what a
    bootstrap cut short opened; a start that is cancelled stops it; its stop goes to its end
    when its caller is cancelled meanwhile."""

    def __init__(self, **options: Any) -> None:
        require_client_fixes()  # before aiokafka's client is made: nothing to close
        super().__init__(**options)
        back_off_client(self.client)
        close_client_cut_short(self.client)

    async def start(self) -> None:
        try:
            await super().start()
        except asyncio.CancelledError:  # its caller gives it up (another error: may retry)
            await self.stop()
            raise

    async def stop(self) -> None:
        """aiokafka's stop (it sends what is pending, ends the transaction manager's and the
        sender's tasks, closes the connections), to its end whatever comes
        (``stop_to_its_end``)."""
        await stop_to_its_end(super().stop())


class ScopedConsumer(AIOKafkaConsumer):  # type: ignore[misc]
    """aiokafka's consumer; its client as ``ScopedProducer``'s, and its fetcher reads a record
    whose header name is not UTF-8."""

    def __init__(self, *topics: str, **options: Any) -> None:
        require_client_fixes()
        require_fetch_reader()
        require_topic_ids()
        super().__init__(*topics, **options)
        back_off_client(self._client)
        close_client_cut_short(self._client)

    async def topic_state(self, topic: str, node_id: int | None = None) -> TopicState | None:
        """``topic``'s id and partitions as a broker (``node_id``, else any) has them now,
        asked on this consumer's connections (``bus.topic_ids``): None if it does not exist;
        ``TopicIdsUnsupported`` from a broker older than Kafka 2.8."""
        return await topic_state(self._client, topic, node_id)

    def leader_of(self, tp: Any) -> int | None:
        """The broker this consumer fetches ``tp`` from, as its metadata has it (None: none
        known)."""
        leader = self._client.cluster.leader_for_partition(tp)
        return None if leader is None or leader < 0 else int(leader)

    def leaders_of(self, tps: Iterable[Any]) -> list[int]:
        """The brokers this consumer fetches ``tps`` from (those known), each once, in order."""
        return sorted({n for n in map(self.leader_of, tps) if n is not None})

    async def stop(self) -> None:
        """aiokafka's stop, to its end whatever comes (``stop_to_its_end``). (Cut short, it
        left the fetcher, the coordinator and the connections running: a client's look-back,
        given up by the reader's answer as it stopped, left them in a platform's process for
        good.)"""
        await stop_to_its_end(self._stop_after_its_tasks_began())

    async def _stop_after_its_tasks_began(self) -> None:
        # a consumer without a group starts a task its stop cancels and awaits: cancelled
        # before it first ran, it ends cancelled, and aiokafka's stop raised CancelledError
        # there (a consumer stopped with nothing awaited since its start)
        await asyncio.sleep(0)
        await super().stop()

    @property
    def _fetcher(self) -> Any:
        return self.__dict__.get("_scoped_fetcher")

    @_fetcher.setter
    def _fetcher(self, made: Any) -> None:
        # aiokafka's ``start`` makes the fetcher (whose task has not run yet) and sets it here
        if made is not None:
            read_header_names_not_utf8_by(made)
        self.__dict__["_scoped_fetcher"] = made
