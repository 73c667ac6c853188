"""Page 003 (surrender): "Upon Surrender you receive half of your initial bet back and the game
round is over." and "If you Surrender, half the initial bet is paid to you and the game ends."
(``surrender_paid_at_once``).

A surrendered hand is settled when it is surrendered: its ``HandSettled`` (half back) follows
the ``HandSurrendered`` at once, the round goes on for the player's other boxes with the half
on the balance (it pays for a double or a split there), and the round's settlement counts the
hand without paying it again, as for a blackjack paid at once. Elsewhere (and at a surrender
table opened with the term off) the half waits for the round's settlement, as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from blackjack.audit.recall import render, replay_round
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.evolve import fold
from blackjack.domain.rules import PRESETS, Rules, fingerprint
from blackjack.domain.state import TableState
from blackjack.messages import wire
from blackjack.messages.wire import to_wire
from blackjack.projections.projector import StreamProjection
from tests.integration.conftest_projections import Script
from tests.unit.stacked_table import StackedTable
from tests.unit.test_replay_engine import SEAL, messages, tamper, wires
from tests.unit.test_rules_corners import Ledger, bet, deal, double, stand

EVENT: TypeAdapter[ev.TableEvent] = TypeAdapter(ev.AnyEvent)

# Box 0: T 6 (16), box 1: 6 5 (11), box 2: T 9 (19) against the dealer's T up, 7 in the hole
# (checked: no blackjack, 17); box 1's double draws a T (21).
THREE_BOXES = ["T", "6", "T", "T", "6", "5", "9", "7", "T"]


def surrender(box: int = 0, pid: str = "p") -> cmd.Surrender:
    return cmd.Surrender(player_id=pid, box=box)


def three_boxes(**overrides: object) -> Ledger:
    """25.00 on the balance, all of it bet (10.00, 5.00, 10.00): nothing left to double with
    until box 0's half comes back. ``Ledger`` checks after every command that money is only
    moved (balances plus what is on the table)."""
    t = Ledger("surrender", THREE_BOXES, players=(("p", 0, 2500),), overrides=overrides)
    t.do(bet(1000, 0), bet(500, 1), bet(1000, 2), deal())
    assert t.balance() == 0 and t.state.phase == "playing"
    return t


def kinds(events: list[ev.Event]) -> list[str]:
    return [type(e).__name__ for e in events]


# ---- the decider ------------------------------------------------------------------------


def test_the_half_back_pays_for_a_double_on_another_box() -> None:
    t = three_boxes()
    events = t.do(surrender(0))
    assert kinds(events) == ["HandSurrendered", "HandSettled", "TurnStarted"]
    assert t.balance() == 500  # at once, while boxes 1 and 2 are still to play
    assert t.settled() == [(0, 0, "surrender", 1000, 500)]
    assert t.state.boxes[0].hands[0].settled
    assert t.buttons() == ["hit", "stand", "double", "surrender"]
    t.do(double(1))
    assert t.balance() == 0
    t.do(stand(2))
    # dealer T 7 = 17: box 1's 21 and box 2's 19 win; box 0 is not paid again
    assert t.settled() == [
        (0, 0, "surrender", 1000, 500),
        (1, 0, "win", 1000, 2000),
        (2, 0, "win", 1000, 2000),
    ]
    [settled] = [e for e in t.events if isinstance(e, ev.RoundSettled)]
    [result] = settled.results
    assert (result.wagered, result.paid, result.net) == (3000, 4500, 1500)
    assert result.balance_after == t.balance() == 4000 == 2500 + 1500


def test_without_the_term_the_half_waits_for_the_round_and_the_double_is_refused() -> None:
    """The behaviour before (and of a surrender table opened with the term off): the half
    stays in play, so box 1 cannot double on an empty balance."""
    t = three_boxes(surrender_paid_at_once=False)
    assert kinds(t.do(surrender(0))) == ["HandSurrendered", "TurnStarted"]
    assert t.balance() == 0 and t.settled() == []
    assert t.buttons() == ["hit", "stand", "surrender"]
    t.refused(double(1), "insufficient_funds")
    t.do(stand(1), stand(2))
    # dealer 17: box 1's 11 loses, box 2's 19 wins; the half comes with the round
    assert t.settled() == [
        (0, 0, "surrender", 1000, 500),
        (1, 0, "lose", 500, 0),
        (2, 0, "win", 1000, 2000),
    ]
    assert t.balance() == 2500


def test_a_lone_surrender_is_paid_before_the_hole_card_is_turned() -> None:
    t = Ledger("surrender", ["T", "T", "6", "7"])
    t.do(bet(1001), deal())
    events = t.do(surrender(0))
    round_end = kinds(events).index("RoundSettled") + 1  # a fresh shoe follows
    assert kinds(events)[:round_end] == [
        "HandSurrendered",
        "HandSettled",
        "DealerHoleCardRevealed",
        "RoundSettled",
    ]
    assert t.settled() == [(0, 0, "surrender", 1001, 500)]  # the odd cent stays
    [settled] = [e for e in events if isinstance(e, ev.RoundSettled)]
    [result] = settled.results
    assert (result.wagered, result.paid, result.balance_after) == (1001, 500, 10_000 - 501)
    assert t.balance() == 10_000 - 501


@pytest.mark.parametrize("variant", ["mini-h17", "surrender"])
def test_only_page_003_pays_a_surrender_at_once(variant: str) -> None:
    """mini-h17 (page 000) has surrender too, paid with the round ("the player will lose half
    the bet"): its events are as before."""
    t = Ledger(variant, ["T", "T", "6", "7"])
    t.do(bet(1000), deal())
    order = kinds(t.do(surrender(0)))
    paid_first = order.index("HandSettled") < order.index("DealerHoleCardRevealed")
    assert paid_first is (variant == "surrender")
    assert {name for name, rules in PRESETS.items() if rules.surrender_paid_at_once} == {
        "surrender"
    }


def test_a_void_takes_the_half_paid_at_once_back_with_the_round() -> None:
    """surrender with the operator's term: the void returns the wagers less the half it paid
    at once, and the balance is as before the round (``decisions/voiding.py``)."""
    t = StackedTable("surrender", THREE_BOXES, {"void_on_malfunction": True})
    t.do(cmd.SitDown(player_id="p", seat=0), cmd.Deposit(player_id="p", amount=2500))
    t.do(bet(1000, 0), bet(500, 1), bet(1000, 2), deal(), surrender(0))
    assert t.state.players["p"].balance == 500
    t.do(cmd.VoidRound(round=1, operator="ops-1", reason="the shoe reader jammed"))
    [voided] = [e for e in t.events if isinstance(e, ev.RoundVoided)]
    [back] = voided.returns
    assert (back.wagered, back.paid, back.returned, back.not_recovered) == (2500, 500, 2000, 0)
    assert t.state.players["p"].balance == 2500  # as before the round


# ---- rules documents: the presets' unchanged, an earlier release's tables -------------------


@pytest.mark.parametrize(("name", "term"), [("surrender", True), ("mini-h17", False), ("x", False)])
def test_a_document_without_the_term_reads_with_its_presets(name: str, term: bool) -> None:
    """The page's sentence was there from the start: a surrender table an earlier release
    opened (its rules without the option) plays on with it, as an event and as a snapshot;
    the presets' documents do not name it (their fingerprints are unchanged,
    ``test_void_round`` pins them)."""
    rules = PRESETS["surrender"].model_dump(mode="json")
    assert "surrender_paid_at_once" not in rules
    rules["name"] = name
    opened = EVENT.validate_python(
        wire.upcast({"type": "TableOpened", "version": 2, "rules": rules})
    )
    assert isinstance(opened, ev.TableOpened)
    assert opened.rules.surrender_paid_at_once is term
    snapshot = fold([opened]).to_doc()
    assert "surrender_paid_at_once" not in snapshot["rules"]
    assert TableState.from_doc(snapshot).rules.surrender_paid_at_once is term


def test_a_term_other_than_the_presets_is_written_and_kept() -> None:
    for variant, term in (("surrender", False), ("mini-h17", True)):
        rules = PRESETS[variant].with_overrides({"surrender_paid_at_once": term})
        doc = rules.model_dump(mode="json")
        assert doc["surrender_paid_at_once"] is term
        assert Rules.model_validate(doc) == rules and rules.with_overrides({}) == rules
        assert fingerprint(rules) != fingerprint(PRESETS[variant])


def test_a_round_an_earlier_release_left_with_a_surrender_unpaid_pays_it_once() -> None:
    """A snapshot taken mid-round by the release before (box 0 surrendered, its half still in
    play, the rules document without the term) read by this release: the round goes on with
    the term, and its settlement pays box 0's half, once."""
    t = three_boxes(surrender_paid_at_once=False)
    t.do(surrender(0))
    doc = t.state.to_doc()
    del doc["rules"]["surrender_paid_at_once"]  # as the earlier release wrote it
    t.state = TableState.from_doc(doc)
    assert t.state.rules.surrender_paid_at_once and not t.state.boxes[0].hands[0].settled
    t.do(stand(1), stand(2))
    assert t.settled() == [
        (0, 0, "surrender", 1000, 500),
        (1, 0, "lose", 500, 0),
        (2, 0, "win", 1000, 2000),
    ]
    assert t.balance() == 2500


# ---- the readers: the audit, the recall, the read model ---------------------------------


def three_box_script(**overrides: Any) -> Script:
    """``THREE_BOXES`` at a surrender table: ann surrenders box 0 and doubles box 1 with the
    half (with the term; stands it without), stands box 2."""
    cards = [c + "S" for c in THREE_BOXES]
    script = Script("surrender", [cards], {"ann": 2500}, overrides=overrides)
    script.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="ann", box=1, amount=500),
        cmd.PlaceBet(player_id="ann", box=2, amount=1000),
        cmd.Deal(player_id="ann"),
        cmd.Surrender(player_id="ann", box=0),
    )
    move = cmd.Double if overrides.get("surrender_paid_at_once", True) else cmd.Stand
    script.do(move(player_id="ann", box=1), cmd.Stand(player_id="ann", box=2))
    return script


def test_the_audit_passes_a_surrender_paid_at_once_where_the_rules_say_so() -> None:
    log = wires(three_box_script())
    assert messages(log) == []

    def settle_with_the_round(e: ev.TableOpened) -> dict[str, Any]:
        return {"rules": e.rules.model_copy(update={"surrender_paid_at_once": False})}

    found = messages(tamper(log, ev.TableOpened, settle_with_the_round))
    assert (
        "box 0 hand 0 paid before the dealer's hand is known: recorded ('surrender', False), "
        "the rules give ('surrender', True)"
    ) in found


def test_the_audit_passes_an_earlier_releases_surrender_paid_with_the_round() -> None:
    """A log the release before wrote at a surrender table (the half paid with the round, the
    rules document without the term, so read with it): nothing to find."""
    log = wires(three_box_script(surrender_paid_at_once=False))

    def as_written_then(e: ev.TableOpened) -> dict[str, Any]:
        return {"rules": e.rules.model_copy(update={"surrender_paid_at_once": True})}

    assert messages(tamper(log, ev.TableOpened, as_written_then)) == []


def test_the_recall_tells_the_half_paid_once_before_the_next_box_plays() -> None:
    text = render(replay_round(wires(three_box_script()), 1, SEAL, "table-1"))
    lines = text.splitlines()
    paid = [i for i, line in enumerate(lines) if "surrender, stake 10.00, pays 5.00" in line]
    turn = next(i for i, line in enumerate(lines) if "turn of ann: box 1" in line)
    assert len(paid) == 1 and paid[0] < turn  # settled once, before box 1's turn
    assert "Box 0 hand 0 (ann): TS 6S = 16, stake 10.00: surrender, pays 5.00  [ok]" in text
    assert "wagered 30.00, paid 45.00, net +15.00; balance 25.00 -> 40.00" in text
    assert "0 finding(s)" in text and "REPLAY OK" in text


def folded(script: Script, upto: int | None = None) -> StreamProjection:
    projection = StreamProjection.new("table-1")
    table = [e for e in script.envelopes if e.stream_id == "table-1"]
    for envelope in table[:upto]:
        projection.apply(to_wire(envelope, SEAL))
    return projection


def test_the_read_model_shows_the_half_back_at_once_and_counts_it_once() -> None:
    script = three_box_script()
    table = [e for e in script.envelopes if e.stream_id == "table-1"]
    surrendered = next(i for i, e in enumerate(table) if isinstance(e.data, ev.HandSettled))
    mid = folded(script, surrendered + 1)
    account = mid.accounts["ann"]
    # box 0 settled: its 10.00 left play, 5.00 of it back; boxes 1 and 2 still in play
    assert (account.available, account.in_play, account.wagered, account.lost) == (
        500,
        1500,
        1000,
        500,
    )
    assert mid.rounds[1].boxes[0].hands[0].outcome == "surrender"
    done = folded(script).accounts["ann"]
    assert (done.available, done.in_play, done.wagered, done.won, done.lost) == (
        4000,
        0,
        3000,
        2000,
        500,
    )
    line = folded(script).players[(1, "ann")]
    assert (line.wagered, line.paid, line.net, line.balance_after) == (3000, 4500, 1500, 4000)
