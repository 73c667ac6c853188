"""A client's sendings and what became of their answers (``client.sendings``), no broker: the
handler answers a partition's commands in their order, so an answer read after a gap tells
which sendings before it lost theirs."""

from __future__ import annotations

from datetime import UTC, datetime

from blackjack.client.errors import AnswerLost
from blackjack.client.sendings import Sendings

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def test_a_sending_before_a_gap_is_lost_once_a_later_command_of_its_partition_is_answered() -> None:
    sendings = Sendings()
    sendings.new_run()
    first = sendings.note("first", "table-1", NOW)
    sendings.placed("first", first, 0, 10)
    second = sendings.note("second", "table-1", NOW)
    sendings.placed("second", second, 0, 11)
    sendings.gap(0)  # the reader found answers deleted unread there
    third = sendings.note("third", "table-1", NOW)  # sent after the gap: not told lost by it
    sendings.placed("third", third, 0, 12)
    assert sendings.answered_through(0, 11) == ["first"]
    assert (first.state, second.state, third.state) == ("lost", "answered", "open")
    lost = sendings.lost("first", "table-1")
    assert isinstance(lost, AnswerLost) and lost.command_offset == 10
    assert sendings.lost("first", "table-2") is None  # (another stream's wait)
    assert sendings.lost("third", "table-1") is None
    assert sendings.answered_through(1, 11) == []  # another partition: no gap there


def test_an_answer_read_before_the_broker_s_ack_marks_its_sending_answered() -> None:
    sendings = Sendings()
    sendings.new_run()
    sending = sendings.note("early", "table-1", NOW)
    assert sendings.answered_through(0, 7) == []  # read before the ack came
    sendings.placed("early", sending, 0, 7)
    assert sending.state == "answered"
    sendings.gap(0)
    assert sendings.answered_through(0, 8) == []  # nothing open before it to tell lost


def test_a_sending_of_an_earlier_run_is_left_to_a_look_back() -> None:
    sendings = Sendings()
    sendings.new_run()
    before = sendings.note("x", "table-1", NOW)
    assert sendings.sent_this_run("x", "table-1")
    sendings.new_run()  # stopped and started again before the broker's ack
    sendings.placed("x", before, 0, 3)
    assert before.offset is None  # this run's reader did not see it sent
    assert not sendings.sent_this_run("x", None)


def test_a_results_topic_made_again_leaves_gaps_in_its_own_partitions_only() -> None:
    """A gap found in a partition the topic made again no longer has tells nothing of the new
    topic's (review: the package's first cut kept it, and a partition added back later told a
    sending lost that the handler may still answer there)."""
    sendings = Sendings()
    sendings.new_run()
    sending = sendings.note("x", "table-1", NOW)
    sendings.placed("x", sending, 1, 3)
    sendings.gap(1)  # answers deleted unread in partition 1
    sendings.only_gaps_in([0])  # made again with partition 0 only
    assert sendings.answered_through(1, 4) == []  # (partition 1 added back, read from its start)
    assert sending.state == "open"
