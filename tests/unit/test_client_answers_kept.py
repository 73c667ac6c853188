"""What a ``BlackjackClient`` keeps of the answers to one command id: each copy of a command
is answered again, so a client sending one id in a loop grew every reader's memory by an
answer a copy. No broker: the answers are handed over as the reader hands them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from blackjack.bus.topics import Topics
from blackjack.client import (
    KEEP_ANSWERS_OF_A_COMMAND,
    KEEP_ANSWERS_OF_A_COMMAND_ANYWHERE,
    BlackjackClient,
)
from blackjack.client.answers import Answer, AnswerBook, Kept
from blackjack.messages.envelope import CommandResult
from tests.unit.measure_client_answers import _Record


def _answer(command_id: str, offset: int, stream_id: str = "table-1") -> _Record:
    result = CommandResult(
        command_id=command_id,
        stream_id=stream_id,
        status="accepted",
        first_sequence=5,
        last_sequence=8,
        handled_at=datetime(2026, 12, 5, tzinfo=UTC),
    )
    return _Record(0, offset, stream_id.encode(), result.model_dump_json().encode())


def test_a_command_id_answered_again_and_again_keeps_its_first_answers_only() -> None:
    client: Any = BlackjackClient("127.0.0.1:1", Topics("kept."))  # never started
    client._book.ask("mine")
    for offset in range(10 * KEEP_ANSWERS_OF_A_COMMAND):
        client._keep_record(_answer("copied", 2 * offset))  # someone else's, in a loop
        client._keep_record(_answer("mine", 2 * offset + 1))  # copies of this client's own
    for command_id in ("copied", "mine"):
        kept = client._book.answers(command_id)
        assert len(kept) == KEEP_ANSWERS_OF_A_COMMAND, command_id  # before: 1,000 each
    first = client._book.answers("mine")[0].result()
    assert first.command_id == "mine" and first.first_sequence == 5
    client._keep_record(_answer("another", 10**6))  # other ids are kept as before
    assert len(client._book.answers("another")) == 1


def test_copies_of_a_command_id_at_other_streams_leave_its_own_stream_s_answers_room() -> None:
    """A stream keeps its own command ids: copies under the same id at other streams are
    counted apart, up to ``KEEP_ANSWERS_OF_A_COMMAND_ANYWHERE`` in all."""
    client: Any = BlackjackClient("127.0.0.1:1", Topics("kept."))  # never started
    client._book.ask("mine")
    offset = 0
    for stream in range(20):  # someone else's copies of it, at other streams
        for _ in range(KEEP_ANSWERS_OF_A_COMMAND):
            offset += 1
            client._keep_record(_answer("mine", offset, f"other-{stream}"))
    assert len(client._book.answers("mine")) == KEEP_ANSWERS_OF_A_COMMAND_ANYWHERE
    client2: Any = BlackjackClient("127.0.0.1:1", Topics("kept."))
    client2._book.ask("mine")
    for offset in range(3 * KEEP_ANSWERS_OF_A_COMMAND):
        client2._keep_record(_answer("mine", offset, f"other-{offset % 3}"))
    client2._keep_record(_answer("mine", 10**6, "table-1"))  # its own stream's: kept
    assert [a.stream_id for a in client2._book.answers("mine")].count("table-1") == 1


async def test_the_answer_book_keeps_each_answer_once_and_hands_a_waiter_the_one_it_waits_for() -> (
    None
):
    """The bookkeeping alone (``client.answers.AnswerBook``), no client around it: a waiter
    that skips one answer gets the second, an answer read twice at one position is kept once,
    and another's answers move to this client's own once asked for."""
    book = AnswerBook(sent={"mine"})
    future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
    book.waiters["mine"] = [(1, "table-1", future)]
    first, second = (Kept("table-1", _answer("mine", n).value) for n in (1, 2))
    assert book.keep("mine", first, (0, 0, 1))
    assert not book.keep("mine", first, (0, 0, 1))  # read again (a look-back): kept once
    assert not future.done()  # it skips the first
    assert book.keep("mine", second, (0, 0, 2))
    assert future.result() is second
    book.keep("theirs", Kept("table-2", _answer("theirs", 3, "table-2").value), (0, 0, 3))
    assert list(book.results) == ["mine"] and list(book.others) == ["theirs"]
    book.ask("theirs")
    assert list(book.results) == ["mine", "theirs"] and not book.others
    assert [r.command_id for r in book.results_for("theirs", "table-2")] == ["theirs"]
    assert book.results_for("theirs", "table-1") == []
