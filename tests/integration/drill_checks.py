"""What an outage drill's lines must show, on one broker or on a cluster: every command
answered once, the same each time it was sent; every table's log folded to what the handlers
and the players hold, money conserved; the read model folded through the fault equal to one
rebuilt from offset 0."""

from __future__ import annotations

from typing import Any


def line_of(lines: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [one] = [line for line in lines if line["kind"] == kind]
    return one


def assert_nothing_lost_nor_done_twice(
    lines: list[dict[str, Any]], summary: dict[str, Any], tables: int
) -> None:
    proof = line_of(lines, "proof")
    assert proof["ok"], proof
    assert proof["missing_results"] == proof["duplicated_results"] == 0
    assert proof["commands_sent"] == summary["commands"]
    assert proof["copies_in_topic"] <= summary["commands_resent"]
    assert proof["copies_nobody_sent"] == proof["copies_unanswered"] == 0
    assert proof["tables_fold_equal"] == proof["tables_money_conserved"] == tables
    folded = line_of(lines, "read_model")
    assert folded["equal_to_rebuild"] and folded["money_conserved"], folded
    assert folded["events"] == proof["events"]
    assert summary["ok"] and summary["rounds"] > 0
