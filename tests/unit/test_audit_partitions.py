"""The audit's check that each stream's events lie on its own partition (the handler reads its
stream's partition only; the store folds an event wherever it lies)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import insert

from blackjack.audit.audit import AuditReport, events_off_their_partition
from blackjack.audit.replayed import StreamReplay
from blackjack.bus.topics import partition_for
from blackjack.projections import schema
from blackjack.projections.store import ProjectionStore

PARTITIONS = 3


def _row(stream_id: str, sequence: int, partition: int) -> dict[str, object]:
    return {
        "stream_id": stream_id,
        "sequence": sequence,
        "event_id": f"{stream_id}-{sequence}",
        "type": "FundsDeposited",
        "round": None,
        "occurred_at": datetime(2026, 5, 1, tzinfo=UTC),
        "topic": "blackjack.events",
        "kafka_partition": partition,
        "kafka_offset": sequence,
        "envelope": "{}",
    }


async def test_events_read_from_another_partition_than_their_stream_s_are_findings(
    tmp_path: Path,
) -> None:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'scratch.db'}")
    await store.migrate()
    home = partition_for("table-1", PARTITIONS)
    elsewhere = (home + 1) % PARTITIONS
    wallet_home = partition_for("wallet:ann", PARTITIONS)
    rows = [_row("table-1", n, home) for n in (1, 2, 3)]
    rows += [_row("table-1", n, elsewhere) for n in (4, 5)]
    rows += [_row("wallet:ann", 1, wallet_home), _row("junk-1", 1, 9)]
    try:
        async with store.engine.begin() as connection:
            await connection.execute(insert(schema.events), rows)
        report = AuditReport("blackjack.events", replays=[StreamReplay("table-1")])
        async with store.reading() as connection:
            await events_off_their_partition(report, connection, PARTITIONS)
    finally:
        await store.close()
    found = {replay.stream_id: [str(f) for f in replay.findings] for replay in report.replays}
    assert found["table-1"] == [
        f"table-1 event 4: 2 event(s) from sequence 4 read from partition {elsewhere}, not the "
        f"stream's partition {home}: not written by the handler"
    ]
    # a stream with no replay of its own gets one to hold its finding; the wallet has none
    junk_home = partition_for("junk-1", PARTITIONS)
    assert found["junk-1"] == [
        f"junk-1 event 1: 1 event(s) from sequence 1 read from partition 9, not the "
        f"stream's partition {junk_home}: not written by the handler"
    ]
    assert "wallet:ann" not in found
