"""The audit lists the first differences of each table and counts the rest
(``blackjack audit --differences N``): a read model with millions of differences (a rebuild
of the wrong topic) is reported in a bounded report, each table's first ones named by key."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from blackjack.audit.audit import AuditReport
from blackjack.audit.cli import _at_least_one
from blackjack.cli import build_parser
from blackjack.projections.dump import DIFFERENCES_SHOWN, Comparison, Difference, compare_tables


async def _keys(*keys: int) -> AsyncIterator[tuple[tuple[int, ...], str]]:
    for key in keys:
        yield (key,), f'{{"k":{key}}}'


async def test_the_merge_keeps_the_first_n_of_a_table_and_counts_them_all() -> None:
    comparison = Comparison(limit=2)
    await compare_tables("events", _keys(1, 2, 3, 5), _keys(2, 4, 5, 6), comparison)
    await compare_tables("rounds", _keys(1), _keys(), comparison)
    assert [str(d) for d in comparison.shown] == [
        "events [1]: missing row",
        "events [3]: missing row",
        "rounds [1]: missing row",
    ]
    assert comparison.counts == {"events": 4, "rounds": 1}  # 1, 3 missing; 4, 6 unexpected
    assert comparison.not_shown("events") == 2


def test_the_report_says_how_many_were_not_listed() -> None:
    report = AuditReport("blackjack.events")
    report.differences = [
        Difference("events", ("t-1", 1), "missing", {}),
        Difference("events", ("t-1", 2), "unexpected", {}),
        Difference("rounds", ("t-1", 1), "changed", {"record.status": ("settled", "forged")}),
    ]
    report.differences_found = {"events": 1_000_002, "rounds": 1}
    text = report.render()
    assert "Rebuild from offset 0 vs live: 1000003 difference(s)" in text
    assert "  events ['t-1', 1]: missing row\n  events ['t-1', 2]: unexpected row\n" in text
    assert (
        "  ... and 1000000 more difference(s) in events (the first 2 of each table are listed: "
        "--differences N)\n  rounds ['t-1', 1]: record.status: expected \"settled\", found "
        '"forged"\n' in text
    )
    assert "AUDIT FAILED" in text


def test_differences_is_a_whole_number_of_at_least_one() -> None:
    parser = build_parser()
    assert parser.parse_args(["audit"]).differences == DIFFERENCES_SHOWN
    assert parser.parse_args(["audit", "--differences", "7"]).differences == 7
    for bad in ("0", "-3", "many"):
        with pytest.raises(Exception, match="at least 1"):
            _at_least_one(bad)


def test_a_pass_over_a_lagging_store_says_what_it_did_not_audit() -> None:
    """The rebuild stops at the live positions: a worker stuck at a record (a tampered log's
    first sign) left 344 records unread, and the report said AUDIT PASSED over the 3 before
    it (a regulator's tamper review). It still passes, lag being normal, but says so."""
    report = AuditReport("blackjack.events")
    report.positions = {("blackjack.events", 0): 3, ("blackjack.events", 1): 10}
    report.pending = {("blackjack.events", 0): 344, ("blackjack.events", 1): 0}
    assert report.ok and report.complete
    verdict = report.render().splitlines()[-1]
    assert verdict.startswith(
        "AUDIT PASSED up to the live store's positions: 344 record(s) past them (the workers' "
        "lag) were not audited; audit again once the workers have caught up"
    )
    report.pending = {("blackjack.events", 0): 0}
    assert report.render().splitlines()[-1] == "AUDIT PASSED"


def test_a_pass_with_movements_not_answered_yet_says_so() -> None:
    """A cash-out's receipt deleted from a quiet log stayed "in transit" (a tamper review):
    a finding only once the logs hold an event 15 minutes after the payout. The verdict now
    says that what was in transit is not yet judged."""
    report = AuditReport("blackjack.events")
    report.transfers.in_transit = 2
    assert report.ok
    assert report.render().splitlines()[-1] == (
        "AUDIT PASSED, with 2 movement(s) between wallets and tables not answered yet: audit "
        "again once the logs have moved on (one not answered 0:15:00 before their last event "
        "is a finding)"
    )
