"""What a stream whose snapshot passes the snapshots' size limit does to its partition, with
and without the bound on kept platform money ids (docs/kafka.md, "Idempotency").

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_money_ids_limit \\
        [--deposits 5000] [--limit-kib 64] [--bound 2500]

Filling a real 4 MiB snapshot takes about 120,000 commands at one stream; the limit is scaled
down instead: the partition's producer is given ``--limit-kib`` + 64 KiB as its largest request
(``SNAPSHOT_MAX_BYTES`` patched in ``command_handler.takeover``, as the 4 MiB is the producer's
request size there). On the tests' broker (``tests/integration/infra.py``: ``KAFKA_PORT``
...), a one-partition space, one wallet, window 20, a checkpoint every 500 commands: the
platform sends ``--deposits`` ``WalletDeposit``s of 1 under uuid ids, all at once, twice: with
no bound worth the name (``BLACKJACK_MONEY_IDS_MAX`` 10^9, the release before's behaviour)
and with ``--bound``. Printed for each: how many commands were answered once the answers
stopped coming (waiting 20 s past the last), the transactions aborted, the wallet's balance
from its events, and the answers' codes.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections import Counter
from datetime import UTC, datetime

from aiokafka import AIOKafkaProducer
from prometheus_client import REGISTRY

from blackjack.bus.topics import ensure_topics
from blackjack.command_handler import takeover
from blackjack.domain.wallet import WalletDeposit, wallet_stream
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from tests.integration.conftest import KafkaSpace, read_topic, running_handler, stream_events
from tests.integration.infra import kafka_bootstrap

QUIET_S = 20.0


def aborted() -> float:
    return REGISTRY.get_sample_value("blackjack_transactions_total", {"outcome": "aborted"}) or 0.0


async def answers(space: KafkaSpace) -> list[CommandResult]:
    return [
        CommandResult.model_validate_json(r.value)
        for r in await read_topic(space, space.topics.results)
    ]


async def run(deposits: int, bound: int) -> None:
    space = KafkaSpace(kafka_bootstrap(), f"moneyids{uuid.uuid4().hex[:8]}.", 1)
    await ensure_topics(space.settings, space.topics)
    wallet = wallet_stream("big")
    config = space.config(dedup_window=20, snapshot_every=500, money_ids_max=bound)
    before = aborted()
    async with running_handler(config):
        producer = AIOKafkaProducer(bootstrap_servers=space.bootstrap, linger_ms=50)
        await producer.start()
        try:
            for _ in range(deposits):
                envelope = CommandEnvelope(
                    command_id=str(uuid.uuid4()),
                    stream_id=wallet,
                    sent_at=datetime.now(UTC),
                    command=WalletDeposit(player_id="big", amount=1),
                )
                await producer.send(
                    space.topics.commands, envelope.model_dump_json().encode(), key=wallet.encode()
                )
            await producer.flush()
        finally:
            await producer.stop()
        seen, last_change = -1, time.monotonic()
        while time.monotonic() - last_change < QUIET_S:
            got = len(await answers(space))
            if got != seen:
                seen, last_change = got, time.monotonic()
            if got >= deposits:
                break
            await asyncio.sleep(2)
        results = await answers(space)
        codes = Counter(r.rejection.code if r.rejection else "accepted" for r in results)
        events = await stream_events(space, wallet)
        balance = events[-1].data.balance_after if events else 0  # type: ignore[union-attr]
        print(
            f"money_ids_max {bound:,}: {len(results):,} of {deposits:,} answered, "
            f"{aborted() - before:.0f} transactions aborted, balance {balance:,}, codes "
            f"{dict(codes)}",
            flush=True,
        )


async def main(deposits: int, limit_kib: int, bound: int) -> None:
    vars(takeover)["SNAPSHOT_MAX_BYTES"] = limit_kib * 1024  # the producer's request size
    await run(deposits, 10**9)
    await run(deposits, bound)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deposits", type=int, default=5000)
    parser.add_argument("--limit-kib", type=int, default=64)
    parser.add_argument("--bound", type=int, default=2500)
    args = parser.parse_args()
    asyncio.run(main(args.deposits, args.limit_kib, args.bound))
