"""What a table's idempotency window costs in memory: 1,000 answers a table in use
(``BLACKJACK_DEDUP_WINDOW``), so the bytes of one answer times a thousand times the tables in
use is most of a handler's memory (docs/operations.md, "What grows")."""

from __future__ import annotations

import gc
import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta

from blackjack.command_handler.streams import AnswerWindow
from blackjack.domain.rejections import Rejection
from blackjack.messages.envelope import CommandResult

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
WINDOW = 1000


def _result(number: int) -> CommandResult:
    """An answer as the load test's tables get them: uuid ids, a player, every tenth refused."""
    command_id = str(uuid.UUID(int=number))
    handled_at = T0 + timedelta(seconds=number)
    if number % 10 == 0:
        rejection = Rejection(code="not_your_turn", message="not your turn")
        return CommandResult(
            command_id=command_id,
            stream_id="load-0001",
            correlation_id=command_id,
            status="rejected",
            rejection=rejection,
            handled_at=handled_at,
            player_id="player-0001",
        )
    return CommandResult(
        command_id=command_id,
        stream_id="load-0001",
        correlation_id=command_id,
        status="accepted",
        first_sequence=4 * number + 1,
        last_sequence=4 * number + 4,
        handled_at=handled_at,
        player_id="player-0001",
    )


def test_a_full_window_keeps_an_answer_in_under_800_bytes() -> None:
    """A remembered ``CommandResult`` object took about 1.2 KB, 1.6 KB with its place in the
    window: 1.56 MiB a table in use, where the docs said 100 KiB (a soak measured it)."""
    window = AnswerWindow()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for number in range(2 * WINDOW):  # full, and some of it let go again
            window.remember(_result(number), WINDOW)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(window) == WINDOW + 200  # the accepted ones' window full, the refusals apart
    per_answer = used / len(window)
    assert per_answer < 800, per_answer


def test_an_answer_remembered_compactly_is_given_back_as_it_was() -> None:
    window = AnswerWindow()
    results = [_result(number) for number in range(30)]
    for result in results:
        window.remember(result, 20)
    accepted = [r for r in results if r.status == "accepted"]
    kept = [r for r in results if r.status == "rejected"] + accepted[-20:]  # (each kind apart)
    assert [r.command_id for r in window.answers()] == [r.command_id for r in kept]
    for result in kept:
        assert window.get(result.command_id) == result
        assert window.get(result.command_id) == result  # asked twice: the same
    assert window.get(accepted[0].command_id) is None
    assert window.stored() == [r.model_dump(mode="json") for r in kept]


def test_a_snapshot_stores_the_refusals_before_the_answers_that_wrote_events() -> None:
    """The release before keeps one window, oldest first, and reads a snapshot's answers into
    it in their order: stored after the accepted answers, the refusals would have been its
    newest, and its next answer would have let every accepted one go (a bet's resend then
    decided again). Stored first, they are the first let go."""
    window = AnswerWindow()
    results = [_result(number) for number in range(1, 31)]  # 27 accepted, 3 refused
    for result in results:
        window.remember(result, 20)
    one_window = [answer["command_id"] for answer in window.stored()]  # as that release reads it
    one_window.append("its next answer")
    newest_20 = one_window[-20:]  # what its window of 20 keeps then
    accepted = [r.command_id for r in results if r.status == "accepted"]
    assert newest_20 == [*accepted[-19:], "its next answer"]
