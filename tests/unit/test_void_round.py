"""Voiding a round for a malfunction (page 000: "Malfunctions voids all pays and plays"):
only where the table's rules say so (``void_on_malfunction``, the mini-h17 preset's), only the
round in play and named, and then every wager of the round goes back and nothing it paid
stands: each player's balance is what it was before the round, to the cent."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.funds import buy_in_deposit, first_funding
from blackjack.domain.evolve import fold
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import PRESETS, Rules, fingerprint
from blackjack.domain.state import TableState
from blackjack.messages import wire
from tests.unit.stacked_table import StackedTable

EVENT: TypeAdapter[ev.TableEvent] = TypeAdapter(ev.AnyEvent)
BEFORE = 10_000


def ann_at(
    variant: str, cards: list[str], *, bet: int = 1_000, **overrides: object
) -> StackedTable:
    t = StackedTable(variant, cards, overrides)
    t.do(cmd.SitDown(player_id="ann", seat=0), first_funding(t.state.rules, "ann", BEFORE))
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=bet))
    return t


def void(t: StackedTable, round: int | None = None) -> list[ev.Event] | Rejection:
    number = t.state.round if round is None else round
    return t.send(cmd.VoidRound(round=number, operator="ops-1", reason="the shoe reader jammed"))


def voided(events: list[ev.Event] | Rejection) -> ev.RoundVoided:
    assert not isinstance(events, Rejection), events
    [last] = [e for e in events if isinstance(e, ev.RoundVoided)]
    return last


def test_a_split_and_doubled_round_is_voided_and_every_stake_comes_back() -> None:
    # ann's pair of 8s against the dealer's 6 (hole T); she splits, draws a 3 to the first 8
    # and doubles it (a 2), then the game fails while her second hand waits
    t = ann_at("mini-h17", ["8S", "6H", "8D", "TD", "3C", "2C", "9D"])
    t.do(cmd.Deal(player_id="ann"), cmd.Split(player_id="ann", box=0))
    t.do(cmd.Double(player_id="ann", box=0))
    assert t.state.phase == "playing" and t.state.players["ann"].balance == BEFORE - 3_000
    events = void(t)
    assert not isinstance(events, Rejection)
    assert [type(e).__name__ for e in events] == ["DealerHoleCardRevealed", "RoundVoided"]
    revealed = events[0]
    assert isinstance(revealed, ev.DealerHoleCardRevealed) and revealed.card == "TD"
    done = voided(events)
    assert (done.round, done.operator, done.reason) == (1, "ops-1", "the shoe reader jammed")
    [back] = done.returns
    assert (back.player_id, back.wagered, back.paid, back.returned, back.not_recovered) == (
        "ann",
        3_000,
        0,
        3_000,
        0,
    )
    assert back.balance_after == BEFORE == t.state.players["ann"].balance
    assert not t.state.round_open and not t.state.hands_in_play
    assert not any(isinstance(e, ev.HandSettled | ev.RoundSettled) for e in t.events)


def test_the_next_round_is_played_after_a_void() -> None:
    t = ann_at("mini-h17", ["TS", "6H", "5S", "TD", "9C"])
    t.do(cmd.Deal(player_id="ann"))
    voided(void(t))
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=500))
    assert t.state.round == 2 and t.state.players["ann"].balance == BEFORE - 500


def test_an_insurance_lost_at_the_peek_comes_back_with_the_bet() -> None:
    # ann's 19 against the dealer's ace, hole 7: she insures for 500, loses it at the peek
    t = ann_at("mini-h17", ["TS", "AH", "9S", "7D"])
    t.do(cmd.Deal(player_id="ann"), cmd.TakeInsurance(player_id="ann", box=0))
    assert t.state.phase == "playing" and t.state.players["ann"].balance == BEFORE - 1_500
    [back] = voided(void(t)).returns
    assert (back.wagered, back.paid, back.returned) == (1_500, 0, 1_500)
    assert t.state.players["ann"].balance == BEFORE


def test_bets_not_dealt_go_back_and_no_card_is_revealed() -> None:
    t = ann_at("mini-h17", ["TS", "6H", "5S", "TD"], bet=700)
    events = void(t)
    assert not isinstance(events, Rejection)
    assert [type(e).__name__ for e in events] == ["RoundVoided"]
    [back] = voided(events).returns
    assert (back.wagered, back.returned, back.balance_after) == (700, 700, BEFORE)
    assert not t.state.round_open


def test_a_blackjack_paid_at_once_is_taken_back_with_the_round() -> None:
    # surrender with the operator's void term: box 0 a blackjack paid at once (1,000 + 1,500),
    # box 1 a 15 still to play against the dealer's 6
    t = ann_at("surrender", ["AS", "TC", "6H", "KS", "5C", "TD"], void_on_malfunction=True)
    t.do(cmd.PlaceBet(player_id="ann", box=1, amount=1_000), cmd.Deal(player_id="ann"))
    assert t.state.players["ann"].balance == BEFORE - 2_000 + 2_500
    [back] = voided(void(t)).returns
    assert (back.wagered, back.paid, back.returned, back.not_recovered) == (2_000, 2_500, -500, 0)
    assert t.state.players["ann"].balance == BEFORE


def test_a_payment_taken_out_of_the_table_is_not_recovered_below_zero() -> None:
    t = ann_at("surrender", ["AS", "TC", "6H", "KS", "5C", "TD"], void_on_malfunction=True)
    t.do(cmd.PlaceBet(player_id="ann", box=1, amount=1_000), cmd.Deal(player_id="ann"))
    t.do(cmd.Withdraw(player_id="ann", amount=BEFORE + 300))  # all but 200 of the 10,500
    [back] = voided(void(t)).returns
    assert (back.returned, back.not_recovered, back.balance_after) == (-200, 300, 0)
    assert t.state.players["ann"].balance == 0


def test_every_player_of_a_shared_table_gets_their_own_wagers_back() -> None:
    t = StackedTable(
        "atlantic-city-multi", ["TS", "9S", "6H", "5S", "7D", "TD"], {"void_on_malfunction": True}
    )
    for seat, (name, money) in enumerate((("bob", 4_000), ("ann", 6_000))):
        t.do(cmd.SitDown(player_id=name, seat=seat), buy_in_deposit(name, money))
    t.do(cmd.PlaceBet(player_id="bob", box=0, amount=1_000))
    t.do(cmd.PlaceBet(player_id="ann", box=1, amount=2_500))
    t.do(cmd.Deal(player_id="bob"), cmd.Deal(player_id="ann"))
    assert t.state.phase == "playing"
    returns = voided(void(t)).returns
    assert [(r.player_id, r.returned, r.balance_after) for r in returns] == [
        ("bob", 1_000, 4_000),
        ("ann", 2_500, 6_000),
    ]


@pytest.mark.parametrize(
    "variant", ["mini-s17", "atlantic-city", "atlantic-city-multi", "surrender"]
)
def test_a_table_whose_rules_are_silent_refuses_it_and_nothing_changes(variant: str) -> None:
    t = ann_at(variant, ["TS", "6H", "5S", "TD", "9C"])
    before = t.state
    refused = void(t)
    assert isinstance(refused, Rejection) and refused.code == "voiding_not_allowed"
    assert t.state is before


def test_only_the_round_in_play_and_named_is_voided() -> None:
    t = ann_at("mini-h17", ["TS", "6H", "5S", "TD", "9C"])
    t.do(cmd.Deal(player_id="ann"))
    other = void(t, round=2)
    assert isinstance(other, Rejection) and other.code == "round_not_in_play"
    assert "round 1 is" in other.message and t.state.hands_in_play
    t.do(cmd.Stand(player_id="ann", box=0))  # settled: its money has left the round
    ended = void(t, round=1)
    assert isinstance(ended, Rejection) and ended.code == "round_not_in_play"
    assert "has ended" in ended.message


def test_a_round_opened_with_no_wager_has_nothing_to_void() -> None:
    t = StackedTable("atlantic-city-multi", ["TS"], {"void_on_malfunction": True})
    t.do(cmd.SitDown(player_id="bob", seat=0), buy_in_deposit("bob", 1_000))
    t.do(cmd.PlaceBet(player_id="bob", box=0, amount=500), cmd.ClearBets(player_id="bob"))
    assert t.state.round_open  # a clocked table keeps its round open to the deadline
    refused = void(t)
    assert isinstance(refused, Rejection) and refused.code == "round_not_in_play"
    assert "nothing to void" in refused.message


def test_a_void_folds_to_the_state_the_decider_left() -> None:
    t = ann_at("mini-h17", ["8S", "6H", "8D", "TD", "3C", "2C", "9D"])
    t.do(cmd.Deal(player_id="ann"), cmd.Split(player_id="ann", box=0))
    voided(void(t))
    assert fold(t.events).to_doc() == t.state.to_doc()


# ---- the term in a table's rules document -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "term"), [("mini-h17", True), ("atlantic-city", False), ("house-special", False)]
)
def test_a_document_without_the_term_reads_with_its_presets(name: str, term: bool) -> None:
    """Page 000's clause was there from the start: a mini-h17 table an earlier release opened
    may be voided, as an event and as a snapshot."""
    rules = PRESETS["mini-h17"].model_dump(mode="json")
    assert "void_on_malfunction" not in rules  # the preset's term is not written
    rules["name"] = name
    opened = EVENT.validate_python(
        wire.upcast({"type": "TableOpened", "version": 2, "rules": rules})
    )
    assert isinstance(opened, ev.TableOpened) and opened.rules.void_on_malfunction is term
    snapshot = fold([opened]).to_doc()
    assert "void_on_malfunction" not in snapshot["rules"]
    assert TableState.from_doc(snapshot).rules.void_on_malfunction is term


def test_a_term_other_than_the_presets_is_written_and_kept() -> None:
    """A mini-h17 table opened without the clause, an atlantic-city one with it: each
    document names its term, and reads back with it (an older release refuses it, as any
    rules document with an option it does not know)."""
    for variant, term in (("mini-h17", False), ("atlantic-city", True)):
        rules = PRESETS[variant].with_overrides({"void_on_malfunction": term})
        doc = rules.model_dump(mode="json")
        assert doc["void_on_malfunction"] is term
        assert Rules.model_validate(doc) == rules and rules.with_overrides({}) == rules
        assert fingerprint(rules) != fingerprint(PRESETS[variant])


def test_the_presets_documents_and_fingerprints_are_the_previous_releases() -> None:
    """A table playing its preset's terms has the rules document it had before the option
    existed: a handler of that release reads its snapshots, and its rule set's fingerprint
    in the game report is unchanged (those of the release before, pinned here)."""
    before = {
        "mini-h17": "89625393adaa32b8",
        "mini-s17": "24056ca53ac499f8",
        "atlantic-city": "53675bdca5bbcae8",
        "atlantic-city-multi": "fd05b375da3f0d14",
        "surrender": "6e4064ec5ede9266",
    }
    assert {name: fingerprint(rules) for name, rules in PRESETS.items()} == before


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_reader_filling_in_the_schemas_defaults_reads_each_presets_terms(name: str) -> None:
    """A platform reading a TableOpened (or a table's view) by the published schema fills in
    what the document leaves out with the schema's defaults: for the term left out because it
    is the preset's (mini-h17's void_on_malfunction true), the schema gives no default that
    would read otherwise."""
    properties = Rules.model_json_schema()["properties"]
    doc = PRESETS[name].model_dump(mode="json")
    filled = {key: prop["default"] for key, prop in properties.items() if "default" in prop}
    assert Rules.model_validate({**filled, **doc}) == PRESETS[name]
    said = properties["void_on_malfunction"]["description"]
    assert "absent" in said and "preset" in said
