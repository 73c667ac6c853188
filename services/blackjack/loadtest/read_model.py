"""A projection worker beside a drill: the read model (wallets, accounts, game history)
folded live through the fault, then compared with one rebuilt from offset 0, as ``blackjack
audit`` compares them, and its money checked to add up. A worker that folded an event twice
or lost one across the fault would differ from the rebuild."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faststream.kafka import KafkaBroker

from blackjack.audit.conservation import conservation
from blackjack.bus.settings import PLAINTEXT, KafkaSecurity
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projection_worker.worker import build_broker
from blackjack.projections.dump import dump
from blackjack.projections.rebuild import read_topic, rebuild
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import Position, ProjectionWriter, Record


class LiveReadModel:
    def __init__(
        self,
        bootstrap: str,
        topic_prefix: str,
        directory: Path,
        security: KafkaSecurity = PLAINTEXT,
    ) -> None:
        """``security``: how the worker and the rebuild's reader connect (the drill's)."""
        self.directory = directory
        self.store = ProjectionStore(f"sqlite+aiosqlite:///{directory / 'live.db'}")
        self.writer = ProjectionWriter(self.store)
        self.settings = ProjectionSettings(
            db_url=self.store.url,
            bootstrap=bootstrap,
            topic_prefix=topic_prefix,
            group_id=f"{topic_prefix}projections",
            batch=100,
            security=security,
        )
        self._broker: KafkaBroker | None = None

    async def start(self) -> None:
        await self.store.migrate()
        self._broker = build_broker(self.settings, self.writer)
        await self._broker.start()

    async def check(self, timeout: float) -> dict[str, Any]:
        """Once the worker has folded every event written so far: the live read model
        against a rebuild from offset 0, and its money."""
        topic = self.settings.events_topic
        written: dict[Position, int] = {}
        events = 0

        def note(records: list[Record]) -> None:
            nonlocal events
            events += len(records)
            for record in records:
                written[record.position] = max(written.get(record.position, 0), record.offset + 1)

        security = self.settings.security
        await read_topic(self.settings.bootstrap, topic, note, security=security)
        await self.writer.wait_for(written, timeout)
        scratch = ProjectionStore(f"sqlite+aiosqlite:///{self.directory / 'rebuilt.db'}")
        try:
            await scratch.migrate()
            await rebuild(
                ProjectionWriter(scratch), self.settings.bootstrap, topic, security=security
            )
            async with scratch.reading() as connection:
                rebuilt = (await dump(connection)).text()
        finally:
            await scratch.close()
        async with self.store.reading() as connection:
            live = (await dump(connection)).text()
            violations, totals = await conservation(connection)
        equal = live == rebuilt
        conserved = not violations and all(total.balanced for total in totals)
        return {
            "kind": "read_model",
            "ok": equal and conserved,
            "events": events,
            "equal_to_rebuild": equal,
            "money_conserved": conserved,
            "violations": violations[:20],
        }

    async def stop(self) -> None:
        if self._broker is not None:
            await self._broker.stop()
        await self.store.close()
