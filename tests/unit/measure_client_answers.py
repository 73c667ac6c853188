"""What a ``BlackjackClient`` keeps of the answers it reads to other clients' commands
(docs/kafka.md, "It keeps the answers ..."):

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_client_answers [--answers N]

``N`` answers (100,000 by default) to command ids the client neither sent nor was asked for,
as the reader hands them over (``_received``), each about the size of a table's answer with
its sequences and player. Measured with tracemalloc: what the client holds after them. No
broker. Before the client kept the others' answers apart (``KEEP_OTHERS_RESULTS``), it kept
every one, up to 100,000: 172 MiB there; now 18 MiB."""

from __future__ import annotations

import argparse
import tracemalloc
import uuid
from datetime import UTC, datetime

from blackjack.bus.topics import Topics
from blackjack.client import BlackjackClient
from blackjack.messages.envelope import CommandResult


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=100_000)
    count = parser.parse_args().answers
    client = BlackjackClient("127.0.0.1:1", Topics("measure."))  # never started
    texts = [
        CommandResult(
            command_id=str(uuid.uuid4()),
            stream_id=f"table-{n % 500}",
            correlation_id=str(uuid.uuid4()),
            status="accepted",
            first_sequence=n,
            last_sequence=n + 3,
            handled_at=datetime.now(UTC),
            player_id=f"player-{n % 3000}",
        ).model_dump_json()
        for n in range(count)
    ]
    tracemalloc.start()
    for offset, text in enumerate(texts):
        client._received(CommandResult.model_validate_json(text), 0, offset)
    kept, _ = tracemalloc.get_traced_memory()
    print(f"after {count:,} answers to others' commands: {kept / 2**20:.0f} MiB kept")


if __name__ == "__main__":
    main()
