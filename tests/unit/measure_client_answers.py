"""What a ``BlackjackClient`` keeps of the answers it reads (docs/kafka.md, "It keeps the
answers ..."):

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_client_answers [--answers N]

``N`` answers (100,000 by default) as the reader hands them over (``_keep_record``, the
records then gone), each about the size of a table's answer with its sequences and player:
first to command ids the client neither sent nor was asked for (the others', of which it
keeps the last ``KEEP_OTHERS_RESULTS``), then to ones it was asked the result of (its own, up
to ``KEEP_RESULTS``). Measured with tracemalloc: what the client holds after them. No broker.

Before the client kept the others' answers apart, it kept every one, up to 100,000: 172 MiB
there; apart, 18 MiB, and its own 100,000 169 MiB, while each answer was held as a
``CommandResult``. Held as the JSON it came as: 9 MiB and 80 MiB."""

from __future__ import annotations

import argparse
import tracemalloc
import uuid
from datetime import UTC, datetime
from typing import Any, NamedTuple

from blackjack.bus.topics import Topics
from blackjack.client import BlackjackClient
from blackjack.messages.envelope import CommandResult


class _Record(NamedTuple):
    """The fields of an aiokafka ``ConsumerRecord`` the reader reads."""

    partition: int
    offset: int
    key: bytes
    value: bytes


def _answers(count: int) -> list[tuple[str, _Record]]:
    answers = []
    for n in range(count):
        result = CommandResult(
            command_id=str(uuid.uuid4()),
            stream_id=f"table-{n % 500}",
            correlation_id=str(uuid.uuid4()),
            status="accepted",
            first_sequence=n,
            last_sequence=n + 3,
            handled_at=datetime.now(UTC),
            player_id=f"player-{n % 3000}",
        )
        value = result.model_dump_json().encode()
        answers.append((result.command_id, _Record(0, n, result.stream_id.encode(), value)))
    return answers


def kept_mib(count: int, own: bool) -> float:
    """MiB the client holds after reading ``count`` answers (``own``: asked for first)."""
    client: Any = BlackjackClient("127.0.0.1:1", Topics("measure."))  # never started
    answers = _answers(count)
    if own:
        for command_id, _ in answers:
            client._book.ask(command_id)
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    for _, record in answers:  # (each record's value counted where the client keeps it)
        client._keep_record(record._replace(value=bytes(bytearray(record.value))))
    kept, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return (kept - before) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=100_000)
    count = parser.parse_args().answers
    print(f"after {count:,} answers to others' commands: {kept_mib(count, False):.0f} MiB kept")
    print(f"after {count:,} answers to its own commands: {kept_mib(count, True):.0f} MiB kept")


if __name__ == "__main__":
    main()
