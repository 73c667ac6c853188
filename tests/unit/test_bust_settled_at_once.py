"""Pages 001 and 003: a hand that busts is lost at once (``bust_settled_at_once``).

Page 003 (surrender): "If your hand busts (its total exceeds 21), this hand loses and is
removed from the table." and "A BUST indicator appears next to the corresponding hand." Page
001 (mini-s17): "If you bust, a message will be displayed alongside your cards and you
immediately lose the game, plus your bet."

A hand that busts (on a hit or a double) is settled when it busts: its ``HandSettled``
(outcome bust, nothing back) follows the card, the hand is out of play while the player's
other boxes or split hands are played, and the round's settlement counts it without settling
it again. Before, a busted hand waited for the round's settlement: at page 003's three boxes
it was still "in play" (and shown without its BUST) while the other boxes were played. Pages
000 and 002 say nothing of when a bust is settled: there it is settled with the round, as
before. No money moves differently (a bust pays nothing either way): only when the loss is
recorded and shown.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter
from rich.console import Console

from blackjack.audit.recall import render, replay_round
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.evolve import fold
from blackjack.domain.rules import PRESETS, Rules, fingerprint
from blackjack.domain.state import TableState
from blackjack.messages import wire
from blackjack.messages.wire import to_wire
from blackjack.play.screen import table_screen
from blackjack.projections.projector import StreamProjection
from tests.integration.conftest_projections import Script
from tests.unit.stacked_table import StackedTable
from tests.unit.test_replay_engine import SEAL, messages, tamper, wires
from tests.unit.test_rules_corners import Ledger, bet, deal, double, hit, split, stand

EVENT: TypeAdapter[ev.TableEvent] = TypeAdapter(ev.AnyEvent)

# surrender, two boxes: box 0 T 6 (16), box 1 9 2 (11) against the dealer's T up and 7 in the
# hole (checked: no blackjack, 17). Box 0 hits a Q (26, bust); box 1 doubles and draws a T (21).
TWO_BOXES = ["T", "9", "T", "6", "2", "7", "Q", "T"]


def two_boxes(**overrides: object) -> Ledger:
    """20.00 of a balance of 30.00 bet on two boxes. ``Ledger`` checks after every command
    that money is only moved (balances plus what is on the table)."""
    t = Ledger("surrender", TWO_BOXES, players=(("p", 0, 3000),), overrides=overrides)
    t.do(bet(1000, 0), bet(1000, 1), deal())
    assert t.balance() == 1000 and t.state.phase == "playing"
    return t


def kinds(events: list[ev.Event]) -> list[str]:
    return [type(e).__name__ for e in events]


# ---- the decider ------------------------------------------------------------------------


def test_a_bust_on_one_box_is_lost_at_once_while_the_next_box_plays() -> None:
    t = two_boxes()
    events = t.do(hit(0))
    assert kinds(events) == ["PlayerHit", "CardDealt", "HandSettled", "TurnStarted"]
    assert t.settled() == [(0, 0, "bust", 1000, 0)]
    assert t.state.boxes[0].hands[0].settled
    assert t.balance() == 1000  # nothing back, nothing more taken
    t.do(double(1))
    # dealer T 7 = 17: box 1's 21 wins; box 0 is not settled again
    assert t.settled() == [(0, 0, "bust", 1000, 0), (1, 0, "win", 2000, 4000)]
    [settled] = [e for e in t.events if isinstance(e, ev.RoundSettled)]
    [result] = settled.results
    assert (result.wagered, result.paid, result.net) == (3000, 4000, 1000)
    assert result.balance_after == t.balance() == 4000


def test_a_double_that_busts_is_lost_at_once() -> None:
    """surrender: a double on 16 draws a T (26): settled with the card, before the next box."""
    t = Ledger("surrender", ["T", "9", "T", "6", "2", "7", "T", "T"], players=(("p", 0, 5000),))
    t.do(bet(1000, 0), bet(1000, 1), deal())
    events = t.do(double(0))
    assert kinds(events) == ["HandDoubled", "CardDealt", "HandSettled", "TurnStarted"]
    assert t.settled() == [(0, 0, "bust", 2000, 0)]


def test_a_split_hand_that_busts_is_lost_before_the_second_hand_plays() -> None:
    """mini-s17 (the hole card dealt first): 8 8 against the dealer's 9 up, T in the hole;
    the split hands get 5 and 3, the first hits a K (23, bust) and is lost at once; the second
    doubles its 11 (page 001: "Doubling down after splitting") and draws a 9 (20)."""
    t = Ledger("mini-s17", ["8", "T", "8", "9", "5", "3", "K", "9"])
    t.do(bet(1000), deal(), split())
    events = t.do(hit(0, 0))
    assert kinds(events) == ["PlayerHit", "CardDealt", "HandSettled", "TurnStarted"]
    assert t.settled() == [(0, 0, "bust", 1000, 0)]
    t.do(double(0, 1))
    # dealer T 9 = 19: the doubled 20 wins; the bust is counted once, no "Break Even" here
    assert t.settled() == [(0, 0, "bust", 1000, 0), (0, 1, "win", 2000, 4000)]
    assert t.balance() == 10_000 - 3000 + 4000


def test_without_the_term_a_bust_waits_for_the_round() -> None:
    """The behaviour before (and of a surrender table opened with the term off)."""
    t = two_boxes(bust_settled_at_once=False)
    assert kinds(t.do(hit(0))) == ["PlayerHit", "CardDealt", "TurnStarted"]
    assert t.settled() == []
    t.do(stand(1))
    assert t.settled() == [(0, 0, "bust", 1000, 0), (1, 0, "lose", 1000, 0)]


@pytest.mark.parametrize("variant", sorted(PRESETS))
def test_pages_001_and_003_lose_a_bust_at_once_the_others_with_the_round(variant: str) -> None:
    """A lone box that busts: where the term holds its HandSettled comes before the hole card
    is turned; elsewhere after it, as before. Either way the dealer draws nothing."""
    t = Ledger(variant, ["T", "T", "6", "7", "Q"], players=(("p", 0, 10_000),))
    t.do(bet(1000), deal())
    if t.state.phase == "insurance":  # never: the dealer shows no ace
        pytest.fail("no insurance under a ten")
    order = kinds(t.do(hit(0)))
    settled_first = order.index("HandSettled") < order.index("DealerHoleCardRevealed")
    assert settled_first is (variant in ("mini-s17", "surrender"))
    assert order.count("HandSettled") == 1 and order.count("CardDealt") == 1
    assert t.settled() == [(0, 0, "bust", 1000, 0)] and t.balance() == 9000


def test_the_presets_with_the_term() -> None:
    assert {name for name, rules in PRESETS.items() if rules.bust_settled_at_once} == {
        "mini-s17",
        "surrender",
    }


def test_a_void_gives_a_bust_settled_at_once_back_with_the_other_wagers() -> None:
    """Page 000's term added to a surrender table: a bust settled at once paid nothing, so the
    void returns every wager and the balance is as before the round."""
    t = StackedTable("surrender", TWO_BOXES, {"void_on_malfunction": True})
    t.do(cmd.SitDown(player_id="p", seat=0), cmd.Deposit(player_id="p", amount=3000))
    t.do(bet(1000, 0), bet(1000, 1), deal(), hit(0))
    t.do(cmd.VoidRound(round=1, operator="ops-1", reason="the shoe reader jammed"))
    [voided] = [e for e in t.events if isinstance(e, ev.RoundVoided)]
    [back] = voided.returns
    assert (back.wagered, back.paid, back.returned, back.not_recovered) == (2000, 0, 2000, 0)
    assert t.state.players["p"].balance == 3000


# ---- rules documents: the presets' unchanged, an earlier release's tables -------------------


@pytest.mark.parametrize(
    ("name", "term"), [("surrender", True), ("mini-s17", True), ("mini-h17", False), ("x", False)]
)
def test_a_document_without_the_term_reads_with_its_presets(name: str, term: bool) -> None:
    """The pages' sentences were there from the start: a table an earlier release opened (its
    rules without the option) plays on with its preset's term, as an event and as a snapshot;
    the presets' documents do not name it, so their fingerprints are unchanged."""
    rules = PRESETS["surrender"].model_dump(mode="json")
    assert "bust_settled_at_once" not in rules
    rules["name"] = name
    opened = EVENT.validate_python(
        wire.upcast({"type": "TableOpened", "version": 2, "rules": rules})
    )
    assert isinstance(opened, ev.TableOpened)
    assert opened.rules.bust_settled_at_once is term
    snapshot = fold([opened]).to_doc()
    assert "bust_settled_at_once" not in snapshot["rules"]
    assert TableState.from_doc(snapshot).rules.bust_settled_at_once is term


def test_the_presets_documents_do_not_name_the_term() -> None:
    for rules in PRESETS.values():
        assert "bust_settled_at_once" not in rules.model_dump(mode="json")


def test_a_term_other_than_the_presets_is_written_and_kept() -> None:
    for variant, term in (("surrender", False), ("mini-s17", False), ("atlantic-city", True)):
        rules = PRESETS[variant].with_overrides({"bust_settled_at_once": term})
        doc = rules.model_dump(mode="json")
        assert doc["bust_settled_at_once"] is term
        assert Rules.model_validate(doc) == rules and rules.with_overrides({}) == rules
        assert fingerprint(rules) != fingerprint(PRESETS[variant])


def test_a_round_an_earlier_release_left_with_a_bust_unsettled_settles_it_once() -> None:
    """A snapshot taken mid-round by the release before (box 0 bust, not settled, the rules
    document without the term) read by this release: the round's settlement settles box 0
    once."""
    t = two_boxes(bust_settled_at_once=False)
    t.do(hit(0))
    doc = t.state.to_doc()
    del doc["rules"]["bust_settled_at_once"]  # as the earlier release wrote it
    t.state = TableState.from_doc(doc)
    assert t.state.rules.bust_settled_at_once and not t.state.boxes[0].hands[0].settled
    t.do(stand(1))
    assert t.settled() == [(0, 0, "bust", 1000, 0), (1, 0, "lose", 1000, 0)]
    assert t.balance() == 1000


# ---- the readers: the audit, the recall, the read model, the screen ---------------------


def two_box_script(**overrides: Any) -> Script:
    """``TWO_BOXES`` at a surrender table: ann busts box 0, then doubles box 1."""
    script = Script("surrender", [[c + "S" for c in TWO_BOXES]], {"ann": 3000}, overrides=overrides)
    script.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="ann", box=1, amount=1000),
        cmd.Deal(player_id="ann"),
        cmd.Hit(player_id="ann", box=0),
    )
    return script


def test_the_audit_passes_a_bust_settled_at_once_where_the_rules_say_so() -> None:
    script = two_box_script()
    script.do(cmd.Double(player_id="ann", box=1))
    log = wires(script)
    assert messages(log) == []

    def settle_with_the_round(e: ev.TableOpened) -> dict[str, Any]:
        return {"rules": e.rules.model_copy(update={"bust_settled_at_once": False})}

    found = messages(tamper(log, ev.TableOpened, settle_with_the_round))
    assert (
        "box 0 hand 0 paid before the dealer's hand is known: recorded ('bust', False), "
        "the rules give ('bust', True)"
    ) in found


def test_the_audit_passes_an_earlier_releases_bust_settled_with_the_round() -> None:
    script = two_box_script(bust_settled_at_once=False)
    script.do(cmd.Stand(player_id="ann", box=1))

    def as_written_then(e: ev.TableOpened) -> dict[str, Any]:
        return {"rules": e.rules.model_copy(update={"bust_settled_at_once": True})}

    assert messages(tamper(wires(script), ev.TableOpened, as_written_then)) == []


def test_the_recall_tells_the_bust_once_before_the_next_box_plays() -> None:
    script = two_box_script()
    script.do(cmd.Double(player_id="ann", box=1))
    text = render(replay_round(wires(script), 1, SEAL, "table-1"))
    lines = text.splitlines()
    lost = [i for i, line in enumerate(lines) if "bust, stake 10.00" in line]
    turn = next(i for i, line in enumerate(lines) if "turn of ann: box 1" in line)
    assert len(lost) == 1 and lost[0] < turn, text
    assert "0 finding(s)" in text and "REPLAY OK" in text


def folded(script: Script) -> StreamProjection:
    projection = StreamProjection.new("table-1")
    for envelope in script.envelopes:
        if envelope.stream_id == "table-1":
            projection.apply(to_wire(envelope, SEAL))
    return projection


def test_the_read_model_and_the_screen_show_the_bust_out_of_play_at_once() -> None:
    """Page 003: "this hand loses and is removed from the table", "A BUST indicator appears
    next to the corresponding hand": while box 1 plays, box 0's 10.00 is no longer in play and
    its line says bust."""
    table = folded(two_box_script())
    account = table.accounts["ann"]
    assert (account.available, account.in_play, account.lost) == (1000, 1000, 1000)
    assert table.rounds[1].boxes[0].hands[0].outcome == "bust"
    console = Console(width=160, record=True, color_system=None)
    console.print(table_screen(table, "ann"))
    text = console.export_text()
    assert "10♠ 6♠ Q♠  26  bust" in text, text
    assert "balance 10.00 USD · in play 10.00" in text, text
    assert "your move: hit (h)  stand (s)  double (d)  surrender (r)" in text, text


def test_the_simulation_counts_a_split_hand_lost_at_once_before_the_last_command() -> None:
    """``blackjack simulate``'s hand outcomes count every hand settled in the round: a split
    hand that busts is settled by its own Hit or Double, commands before the one that
    settles the round, and was left out of the tally (300 rounds, seed 5: 305 hands counted
    of 306 settled, one bust missing)."""
    from collections import Counter

    from blackjack.simulation.player import play
    from blackjack.strategy import compute_strategy

    rules = PRESETS["mini-s17"]
    settled: Counter[str] = Counter()

    def watch(applied: Any) -> None:
        settled.update(e.outcome for e in applied.events if isinstance(e, ev.HandSettled))

    tally = play(rules, compute_strategy(rules), 300, rules.min_bet, 5, watch=watch)
    assert settled["bust"] > 0
    assert (tally.hands, dict(tally.outcomes)) == (settled.total(), dict(settled))
