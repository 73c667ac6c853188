"""Replay and its checks: a clean log replays without a finding; a tampered payout, card,
balance or shoe reveal is found, with the place and the numbers; a round dealt from a shoe
that is still sealed needs the shoe key."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from blackjack.audit.audit import AuditReport, shoes_on_two_tables, shoes_under_keys_not_given
from blackjack.audit.recall import render, replay_round
from blackjack.audit.replay import OnceEach, replay_stream
from blackjack.audit.replayed import StreamReplay
from blackjack.audit.settlement import dealer_play_problem, hand_result
from blackjack.audit.words import describe
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.currencies import money
from blackjack.domain.decide import decide
from blackjack.domain.decisions import shuffle as shuffle_decision
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import PRESETS
from blackjack.domain.state import INITIAL_STATE, Hand
from blackjack.domain.wallet import BuyInCompleted
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import SealedShoeShuffled, WireEnvelope, decode, encode, to_wire
from blackjack.projections.projector import StreamProjection
from blackjack.rng import csprng_shuffle
from blackjack.scenario import build_shoe
from blackjack.table import apply
from tests.integration.conftest_projections import Script, placed, play_tables
from tests.unit.test_currencies import IN_YEN

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
NOW = datetime(2026, 5, 1, tzinfo=UTC)
A = "alice"


def wires(script: Script) -> list[WireEnvelope]:
    return [to_wire(e, SEAL) for e in script.envelopes if e.stream_id == script.stream_id]


def won_round() -> Script:
    """atlantic-city: 19 against the dealer's 17, 1000 wins 1000; a fresh shoe follows."""
    script = Script("atlantic-city", [["TH", "7S", "9H", "QD"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Stand(player_id=A, box=0),
    )
    return script


def tamper(
    log: list[WireEnvelope], kind: type[Any], change: Callable[[Any], dict[str, Any]]
) -> list[WireEnvelope]:
    """The log with the first event of ``kind`` changed (its data fields replaced)."""
    index = next(i for i, w in enumerate(log) if isinstance(w.data, kind))
    data = log[index].data
    forged = log[index].model_copy(update={"data": data.model_copy(update=change(data))})
    return [*log[:index], forged, *log[index + 1 :]]


def with_rules(log: list[WireEnvelope], **changes: object) -> list[WireEnvelope]:
    """The log with its table's rules changed where the table was opened (``TableOpened``)."""
    return tamper(log, ev.TableOpened, lambda e: {"rules": e.rules.model_copy(update=changes)})


def messages(log: list[WireEnvelope], seal: ShoeSeal | None = None) -> list[str]:
    """The replay's findings; with the shoe key, shoes not yet retired open too."""
    return [f.message for f in replay_stream(log, seal).findings]


def test_a_clean_log_of_every_variant_replays_without_a_finding() -> None:
    variants = ["mini-h17", "mini-s17", "atlantic-city", "atlantic-city-multi", "surrender"]
    log = play_tables([(f"t-{v}", v) for v in variants], rounds=30, seed=21)
    streams = sorted({e.stream_id for e in log.envelopes})
    checks = 0
    for stream_id in streams:
        stream = [to_wire(e, SEAL) for e in log.envelopes if e.stream_id == stream_id]
        replay = replay_stream(stream, SEAL)
        assert replay.findings == [], stream_id
        assert replay.stopped is None and replay.events == len(stream)
        if stream_id in log.states:
            assert replay.state.players == log.states[stream_id].players
            settled = [r for r in replay.rounds.values() if r.status == "settled"]
            assert len(settled) == 30
            assert all(s.verified for s in replay.shoes.values())
        checks += replay.checks
    assert checks > 3000


def test_a_blackjack_paid_before_the_hole_card_needs_the_rule_that_says_so() -> None:
    """surrender pays a blackjack at once (box 0 here, before box 1 plays); the same log at a
    table whose rules settle it with the round is found out."""
    script = Script("surrender", [["AS", "5S", "9S", "KS", "6S", "7S", "TS"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=1, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Stand(player_id=A, box=1),
    )
    log = wires(script)
    kinds = [type(w.data).__name__ for w in log]
    assert kinds.index("HandSettled") < kinds.index("TurnStarted")
    assert messages(log) == []

    def settle_with_the_round(e: ev.TableOpened) -> dict[str, Any]:
        return {"rules": e.rules.model_copy(update={"blackjack_paid_at_once": False})}

    assert messages(tamper(log, ev.TableOpened, settle_with_the_round)) == [
        "box 0 hand 0 paid before the dealer's hand is known: recorded ('blackjack', False, "
        "True), the rules give ('blackjack', True, True)"
    ]

    # With a ten up, paying at once needs the rules' peek on a ten.
    ten_up = Script("surrender", [["AS", "5S", "TH", "KS", "6S", "7S", "TS"]])
    ten_up.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=1, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Stand(player_id=A, box=1),
    )
    assert messages(wires(ten_up)) == []

    def no_peek_on_ten(e: ev.TableOpened) -> dict[str, Any]:
        return {"rules": e.rules.model_copy(update={"peek_on_ten": False})}

    assert (
        "box 0 hand 0 paid before the dealer's hand is known: recorded ('blackjack', True, "
        "False), the rules give ('blackjack', True, True)"
    ) in messages(tamper(wires(ten_up), ev.TableOpened, no_peek_on_ten))

    # The blackjack's HandSettled sent twice (the balance moving twice): found as well.
    at = kinds.index("HandSettled")
    paid = log[at].data
    assert isinstance(paid, ev.HandSettled)
    again = paid.model_copy(update={"balance_after": paid.balance_after + paid.payout})
    later = [placed(w, w.sequence + 1) for w in log[at + 1 :]]
    twice = [
        *log[: at + 1],
        placed(log[at], log[at].sequence + 1, data=again),
        *later,
    ]
    assert "box 0 hand 0 settled again: recorded True, the rules give False" in messages(twice)


def test_without_the_key_the_retired_shoes_are_verified_by_their_reveal() -> None:
    replay = replay_stream(wires(won_round()))
    assert replay.findings == [] and replay.stopped is None
    assert replay.shoes[1].source == "revealed" and replay.shoes[1].verified
    assert replay.shoes[2].source == "sealed"  # the new shoe: nothing dealt from it yet


def test_a_round_settled_that_lists_a_player_twice_is_found() -> None:
    """The read model sums every result into the game report (1,000 wagered read as 2,000):
    a result listed twice is a finding, not the last one kept."""

    def twice(e: ev.RoundSettled) -> dict[str, Any]:
        return {"results": (e.results[0], e.results[0])}

    found = messages(tamper(wires(won_round()), ev.RoundSettled, twice), SEAL)
    assert any("the players in the results" in m for m in found), found


def test_a_tampered_payout_is_found_even_when_every_balance_agrees() -> None:
    def pay_more(e: ev.HandSettled) -> dict[str, Any]:
        return {"payout": e.payout + 500, "balance_after": e.balance_after + 500}

    def report_more(e: ev.RoundSettled) -> dict[str, Any]:
        r = e.results[0]
        forged = r.model_copy(
            update={
                "paid": r.paid + 500,
                "net": r.net + 500,
                "balance_after": r.balance_after + 500,
            }
        )
        return {"results": (forged,)}

    log = tamper(tamper(wires(won_round()), ev.HandSettled, pay_more), ev.RoundSettled, report_more)
    found = messages(log)
    assert "box 0 hand 0 result: recorded ('win', 2500), the rules give ('win', 2000)" in found
    assert "alice's payout in the round: recorded 2500, the rules give 2000" in found
    # the read model alone cannot tell: the forged amounts add up
    projection = StreamProjection.new("table-1")
    for w in log:
        projection.apply(w)
    account = projection.accounts[A]
    assert account.deposited + account.won - account.lost == account.available + account.in_play


def test_a_box_dealt_under_the_table_minimum_is_found() -> None:
    def chip(e: ev.BetPlaced) -> dict[str, Any]:  # 0.99 taken instead of 10.00
        return {"amount": 99, "box_total": 99, "balance_after": e.balance_after + 901}

    found = messages(tamper(wires(won_round()), ev.BetPlaced, chip))
    assert "box 0 dealt with 99, outside 100-50000" in found
    # a chip under the minimum is no finding by itself: the stack is checked when dealt
    assert not any("chip" in m for m in found)


def test_a_changed_card_does_not_fold() -> None:
    log = tamper(wires(won_round()), ev.CardDealt, lambda e: {"card": "AS"})
    replay = replay_stream(log)
    assert replay.stopped is not None
    found = [m for m in messages(log) if "card AS dealt" in m]
    assert found == [
        "the engine cannot fold CardDealt: card AS dealt as card 1 of shoe 1, which the shoe "
        "does not hold there"
    ]
    assert "TH" not in found[0]  # the card the shoe holds is not told: it may be in play


def test_a_balance_one_cent_off_is_found() -> None:
    log = tamper(wires(won_round()), ev.BetPlaced, lambda e: {"balance_after": e.balance_after - 1})
    assert "alice's balance after: recorded 8999, the rules give 9000" in messages(log)


def test_an_event_with_the_id_of_another_place_is_found() -> None:
    """Event ids derive from the place (stream and sequence): a copy of another event's id,
    or an event moved from its place with its id, was not written there by the handler."""
    log = wires(won_round())
    copied = log[5].model_copy(update={"event_id": log[4].event_id})
    assert messages([*log[:5], copied, *log[6:]]) == [
        f"event id {log[4].event_id} is not the id of table-1 event 6 ({log[5].event_id})"
    ]
    wallet = [
        to_wire(e, SEAL)
        for e in Script("atlantic-city-multi", [[]], players={A: 500}).envelopes
        if e.stream_id == "wallet:alice"
    ]
    moved = wallet[0].model_copy(update={"stream_id": "wallet:bob"})
    assert [f.message for f in replay_stream([moved]).findings] == [
        f"event id {wallet[0].event_id} is not the id of wallet:bob event 1 "
        f"({placed(moved, 1).event_id})"
    ]


@pytest.mark.parametrize(
    ("back", "found"), [(timedelta(seconds=59), False), (timedelta(minutes=2), True)]
)
def test_an_event_dated_well_before_the_one_before_it_is_found(
    back: timedelta, found: bool
) -> None:
    """Timestamps were not checked (a tamper review moved events back in time). A handler
    taking a partition over may run a little behind the one before: up to a minute is
    allowed; further is a clock that wrong, or an event moved."""
    log = wires(won_round())
    at = next(i for i, w in enumerate(log) if isinstance(w.data, ev.PlayerStood))
    moved = log[at].model_copy(update={"occurred_at": log[at - 1].occurred_at - back})
    told = [m for m in messages([*log[:at], moved, *log[at + 1 :]]) if "written at" in m]
    if not found:
        assert told == []
        return
    assert told == [
        f"written at {moved.occurred_at.isoformat()}, 0:02:00 before the event before it "
        f"({log[at - 1].occurred_at.isoformat()}): a clock that far behind, or an event moved "
        "in time"
    ]


def test_a_balance_changed_in_one_event_is_named_there_only() -> None:
    """The events after it are checked against the balance the rules give: before, the next
    one was named too (from the changed figure, as if it were the one changed)."""
    log = tamper(
        wires(won_round()), ev.BetPlaced, lambda e: {"balance_after": e.balance_after + 500}
    )
    assert [m for m in messages(log) if "balance" in m] == [
        "alice's balance after: recorded 9500, the rules give 9000"
    ]


def test_a_balance_changed_from_one_event_on_is_named_at_each() -> None:
    """Every later balance carried over from the changed one is a balance the rules do not
    give: each is named, none taken as the start of a new count."""
    log = wires(won_round())
    first = next(i for i, w in enumerate(log) if isinstance(w.data, ev.BetPlaced))
    forged = [
        tamper([w], type(w.data), lambda e: {"balance_after": e.balance_after + 500})[0]
        if i >= first and isinstance(w.data, ev.BetPlaced | ev.HandSettled)
        else w
        for i, w in enumerate(log)
    ]
    assert [m for m in messages(forged) if "balance" in m] == [
        "alice's balance after: recorded 9500, the rules give 9000",
        "alice's balance after: recorded 11500, the rules give 11000",
    ]


def test_a_reveal_that_does_not_match_the_commitment_is_found() -> None:
    def swap(e: ev.ShoeRetired) -> dict[str, Any]:
        order = list(e.order)
        order[0], order[1] = order[1], order[0]
        return {"order": tuple(order)}

    found = messages(tamper(wires(won_round()), ev.ShoeRetired, swap))
    assert "shoe 1: the revealed order does not match its commitment" in found


def _played_from(
    shoe: tuple[str, ...], rounds: int = 2, stream_id: str = "table-1"
) -> list[WireEnvelope]:
    """atlantic-city (a new shoe every round) with every shoe after the first drawn as
    ``shoe`` with one salt: what a handler whose shuffler was changed would write."""
    script = Script("atlantic-city", [["TH", "7S", "9H", "QD"]], stream_id=stream_id)
    script.shuffler = lambda rules: cmd.ShuffleShoe(order=shoe, salt="one-salt-for-all")  # type: ignore[assignment]
    for _ in range(rounds):
        script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
        while script.state.phase == "playing":
            script.do(cmd.Stand(player_id=A, box=0))
    return wires(script)


def test_a_shoe_that_is_not_whole_decks_is_found_from_its_reveal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A handler that skipped the permutation check could deal from a shoe without fives,
    committed to honestly: the reveal alone shows it (the fairness review's stacked shoe)."""
    monkeypatch.setattr(shuffle_decision, "_is_permutation_of_decks", lambda order, decks: True)
    no_fives = tuple("K" + c[1] if c[0] == "5" else c for c in build_shoe(8, []))
    found = messages(_played_from(no_fives))  # no key: shoe 2 is opened by its reveal
    assert (
        "shoe 2 is not 8 whole deck(s): 5C 0 times, 5D 0 times, 5H 0 times, 5S 0 times, "
        "KC 16 times, KD 16 times, KH 16 times, KS 16 times" in found
    )
    miscounted = tamper(wires(won_round()), SealedShoeShuffled, lambda e: {"cards": 207})
    assert "shoe 1 cards: recorded 207, the order holds 416" in messages(miscounted)
    short = build_shoe(8, [])[:60]
    found = messages(_played_from(short), SEAL)
    assert any(m.startswith("shoe 2 is not 8 whole deck(s): 2C 1 times, ") for m in found), found


def test_a_shoe_used_again_is_found_even_sealed() -> None:
    same = tuple(build_shoe(8, ["9S", "7D", "TC", "TD"]))
    log = _played_from(same, rounds=2)
    assert "shoe 3 has the commitment of shoe 2: a shoe used again" in messages(log)
    # shoe 3 is not retired: without the key it stays sealed, and its commitment tells it
    replay = replay_stream(log)
    assert replay.shoes[3].source == "sealed"


def test_a_shoe_dealt_at_two_tables_is_found() -> None:
    same = tuple(build_shoe(8, ["9S", "7D", "TC", "TD"]))
    replays = [replay_stream(_played_from(same, 1, table)) for table in ("t-1", "t-2")]
    assert [r.findings for r in replays] == [[], []]  # one shoe 2 at each table
    shoes_on_two_tables(replays)
    assert replays[0].findings == []
    # (the script's first shoe, one order and one salt, is the same at both tables too)
    assert [f.message for f in replays[1].findings] == [
        "shoe 1 has the commitment of t-1's shoe 1",
        "shoe 2 has the commitment of t-1's shoe 2",
    ]


def test_a_shoe_shuffled_after_the_bets_is_found() -> None:
    """The decider refuses it; a log that has it (a forged or changed handler) is a finding."""
    script = won_round()
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    log = wires(script)
    new_shoe = [
        i for i, w in enumerate(log) if isinstance(w.data, ev.ShoeRetired | SealedShoeShuffled)
    ][-2:]
    moved = [w for i, w in enumerate(log) if i not in new_shoe] + [log[i] for i in new_shoe]
    renumbered = [placed(w, n) for n, w in enumerate(moved, start=1)]
    assert "shoe 2 shuffled in round 2, after its bets" in messages(renumbered)
    assert messages(log) == []


def test_a_wallet_transfer_closed_twice_is_found() -> None:
    script = Script("atlantic-city-multi", [[]], players={A: 5000})
    log = [to_wire(e, SEAL) for e in script.envelopes if e.stream_id == "wallet:alice"]
    assert replay_stream(log).findings == []
    completed = next(w for w in log if isinstance(w.data, BuyInCompleted))
    again = placed(completed, len(log) + 1)
    assert messages([*log, again]) == ["buy-in 1 closed, but no such transfer is pending"]


def test_a_round_in_play_from_a_sealed_shoe_needs_the_key() -> None:
    script = Script("mini-h17", [["TH", "7S", "9H", "QD"]])  # the shoe lasts many rounds
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    log = wires(script)
    blind = replay_round(log, 1, None, "table-1")
    assert blind.found and not blind.ok
    assert blind.stopped is not None and "BLACKJACK_SHOE_KEY" in blind.stopped
    # nothing wrong found, only not checked to its end: not "FAILED" (the upgrade drill)
    shown = render(blind)
    assert "REPLAY NOT VERIFIED" in shown and "REPLAY FAILED" not in shown
    assert "as far as replayed" in shown
    keyed = replay_round(log, 1, SEAL, "table-1")
    assert keyed.ok and keyed.shoe is not None and keyed.shoe.source == "key"
    text = render(keyed)
    assert "dealer: hole card, face down" in text and "(+ hole card)" in text
    assert "QD" not in text  # a round in play keeps its hole card hidden


def test_the_auditor_s_key_replays_a_round_in_play_and_leaves_older_shoes_to_their_reveal() -> None:
    script = Script("mini-h17", [["TH", "7S", "9H", "QD"]])  # the shoe lasts many rounds
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    auditor = ShoeSeal.for_auditor(SEAL.audit_key_hex())
    keyed = replay_round(wires(script), 1, auditor, "table-1")
    assert keyed.ok and keyed.shoe is not None and keyed.shoe.source == "key"
    # a shoe the handlers sealed before the auditor's key: not a finding, only not yet open
    master = ShoeSeal(bytes(32), master=bytes(32), writes=1)
    older = [to_wire(e, master) for e in script.envelopes]
    blind = replay_stream(older, ShoeSeal(bytes(32)))
    assert blind.findings == [] and blind.stopped is not None
    assert "BLACKJACK_AUDIT_KEY" in blind.stopped


def test_a_wrong_key_is_told_from_a_changed_shoe() -> None:
    """Another deployment's key, or the master key given as the auditor's: the shoes are not
    opened and the replay is not verified, but nothing is called forged. A shoe sealed under
    another key at a table whose earlier shoes the key opened is a finding (whoever writes the
    events topic may have chosen its order, reveal included), naming the key id: a key
    rotation's key, which the audit was not given, says the same; given it, the audit
    verifies every shoe."""
    script = Script("atlantic-city", [["TH", "7S", "9H", "QD"]])  # a new shoe every round
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.Stand(player_id=A, box=0), cmd.PlaceBet(player_id=A, box=0, amount=1000))
    script.do(cmd.Deal(player_id=A))
    log = wires(script)
    wrong = replay_stream(log, ShoeSeal.for_auditor(ShoeSeal.new_key_hex()))
    assert wrong.findings == [] and wrong.stopped is not None
    assert "sealed under another key" in wrong.stopped
    # the table's last shoe (in play) sealed under another key than the one before it
    other = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
    last = max(i for i, e in enumerate(script.envelopes) if isinstance(e.data, ev.ShoeShuffled))
    swapped = [*log[:last], to_wire(script.envelopes[last], other), *log[last + 1 :]]
    found = [f.message for f in replay_stream(swapped, SEAL).findings]
    assert found == [
        f"shoe 2 is sealed under another key than the shoes before (key id {other.key_id}: "
        "a key rotation's key this audit was not given, or a shoe no handler sealed)"
    ]
    both = ShoeSeal.for_auditor(other.audit_key_hex(), SEAL.audit_key_hex())
    opened = replay_stream(swapped, both)
    assert opened.findings == [] and opened.stopped is None


def test_a_table_whose_shoes_are_all_under_a_key_not_given_fails_an_audit_the_key_serves() -> None:
    """A whole table copied into the log by whoever writes the events topic, its shoes sealed
    under a key of their own (reveals to match), had no shoe the key opened before: no finding,
    and the audit passed. Where the key opens the log's other shoes, each of its shoes is one;
    where it opens none (another deployment's key), the audit is incomplete, nothing called
    forged."""
    script = Script("atlantic-city", [["TH", "7S", "9H", "QD"]])  # a new shoe every round
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.Stand(player_id=A, box=0))
    other = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
    auditor = ShoeSeal.for_auditor(SEAL.audit_key_hex())
    real = replay_stream(wires(script), auditor)
    forged = replay_stream([to_wire(e, other) for e in script.envelopes], auditor)
    assert real.opened_by_key and forged.findings == []  # the table alone cannot tell
    shoes_under_keys_not_given([real, forged])
    assert real.findings == []
    assert forged.under_other_keys
    assert sorted(f.message for f in forged.findings) == [
        f"shoe {shoe} is sealed under a key this audit was not given (key id {other.key_id}), "
        "where the key opens the log's other shoes: a key rotation's key missing from "
        "BLACKJACK_AUDIT_KEY (`blackjack audit-key` prints every one), or a shoe no handler "
        "sealed"
        for shoe in sorted(forged.under_other_keys)
    ]
    wrong = ShoeSeal.for_auditor(ShoeSeal.new_key_hex())
    blind = [replay_stream(wires(script), wrong), replay_stream(wires(script), wrong)]
    shoes_under_keys_not_given(blind)
    assert [f for r in blind for f in r.findings] == [] and blind[0].under_other_keys


def test_a_mini_s17_round_in_play_shows_the_upcard_dealt_second_and_hides_the_first() -> None:
    script = Script("mini-s17", [["TH", "QD", "9H", "7S"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    keyed = replay_round(wires(script), 1, SEAL, "table-1")
    assert keyed.ok
    text = render(keyed)
    assert "dealer: hole card, face down" in text and "dealer: 7S  ->  7S = 7" in text
    assert "Dealer: 7S = 7 (+ hole card)" in text
    assert "QD" not in text  # the hole card is the first card dealt, still hidden

    script.do(cmd.Stand(player_id=A, box=0))
    done = render(replay_round(wires(script), 1, None, "table-1"))
    assert "dealer turns the hole card: QD  ->  QD 7S = 17" in done and "REPLAY OK" in done


def test_the_replay_tells_money_paid_in_and_a_disconnection_during_the_round() -> None:
    script = Script("surrender", [["5H", "6S", "6H", "TS", "TD", "8C"]], players={A: 1500})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.Disconnect(player_id=A), cmd.Reconnect(player_id=A))
    script.do(cmd.Deposit(player_id=A, amount=500), cmd.Double(player_id=A, box=0))
    text = render(replay_round(wires(script), 1, None, "table-1"))
    for expected in (
        "alice disconnects",
        "alice reconnects",
        "alice pays in 5.00 (balance 10.00)",
        "alice doubles box 0 hand 0 for 10.00",
        # 15.00 + 20.00 won + 5.00 paid in = 40.00
        "net +20.00, paid in 5.00 at the table; balance 15.00 -> 40.00",
        "REPLAY OK",
    ):
        assert expected in text, (expected, text)


def test_the_replay_tells_the_round_with_its_checks() -> None:
    verdict = replay_round(wires(won_round()), 1, None, "table-1")
    assert verdict.ok
    text = render(verdict)
    for expected in (
        "Round table-1:1 - atlantic-city - USD - settled",
        "matches the commitment",
        "alice bets 10.00 on box 0",
        "box 0 hand 0: 9H  ->  TH 9H = 19",
        "dealer turns the hole card: QD  ->  7S QD = 17",
        "Box 0 hand 0 (alice): TH 9H = 19, stake 10.00: win, pays 20.00  [ok]",
        "alice: wagered 10.00, paid 20.00, net +10.00; balance 100.00 -> 110.00",
        "REPLAY OK",
    ):
        assert expected in text, expected


def test_the_replay_tells_each_event_s_time_to_the_microsecond() -> None:
    """As the events and the query API have it: before, whole seconds (a move a few
    milliseconds late read as on time)."""
    later = timedelta(microseconds=123_456)
    log = [w.model_copy(update={"occurred_at": w.occurred_at + later}) for w in wires(won_round())]
    [bet] = [w for w in log if isinstance(w.data, ev.BetPlaced)]
    text = render(replay_round(log, 1, None, "table-1"))
    assert f"  {bet.occurred_at:%Y-%m-%d %H:%M:%S}.123456Z  #{bet.sequence:<5} alice bets" in text


def test_an_unknown_round_is_not_found() -> None:
    assert not replay_round(wires(won_round()), 9, None, "table-1").found


@pytest.mark.parametrize(
    ("variant", "cards", "dealer", "expected"),
    [
        ("atlantic-city", ("AS", "KD"), ("9C", "8D"), ("blackjack", 1000 + 1500)),
        ("mini-h17", ("AS", "KD"), ("AC", "QD"), ("push", 1000)),
        ("mini-h17", ("TS", "9D"), ("AC", "QD"), ("lose", 0)),
        ("mini-h17", ("TS", "9D", "5C"), ("9C", "8D"), ("bust", 0)),
        ("mini-h17", ("TS", "8D"), ("9C", "9D"), ("push", 1000)),
        ("mini-h17", ("TS", "8D"), ("9C", "5D", "9S"), ("win", 2000)),
    ],
)
def test_the_auditors_settlement(
    variant: str, cards: tuple[str, ...], dealer: tuple[str, ...], expected: tuple[str, int]
) -> None:
    hand = Hand(cards=cards, stake=1000)
    assert hand_result(PRESETS[variant], hand, dealer) == expected


def test_the_auditors_settlement_of_split_hands_surrender_and_cents() -> None:
    rules = PRESETS["atlantic-city"]
    split_21 = Hand(cards=("AS", "KD"), stake=1000, from_split=True)
    assert hand_result(rules, split_21, ("9C", "8D")) == ("win", 2000)
    assert hand_result(rules, Hand(cards=("AS", "KD"), stake=500), ("9C", "8D")) == (
        "blackjack",
        500 + 700,  # "bet $5 ... paid out $5 plus $7": the cents of the win are not paid
    )
    surrendered = Hand(cards=("TS", "6D"), stake=1001, status="surrendered")
    assert hand_result(PRESETS["mini-h17"], surrendered, ("TC", "7D")) == ("surrender", 500)


def test_the_dealer_draws_by_the_table_rule() -> None:
    h17, s17 = PRESETS["mini-h17"], PRESETS["mini-s17"]
    soft_17 = ("AS", "6D")
    assert dealer_play_problem(s17, soft_17, any_live_hand=True) is None
    assert dealer_play_problem(h17, soft_17, any_live_hand=True) == (
        "the dealer stood on 17, where the rule is to draw"
    )
    assert dealer_play_problem(s17, (*soft_17, "2C"), any_live_hand=True) == (
        "the dealer drew on 17, where the rule is to stand"
    )
    assert dealer_play_problem(h17, (*soft_17, "2C"), any_live_hand=True) is None
    assert dealer_play_problem(h17, ("TS", "6D", "5C"), any_live_hand=False) == (
        "the dealer drew 1 card(s) with nothing to play for"
    )


def test_a_partial_refund_must_be_a_players_removal() -> None:
    script = Script("surrender", [["TH", "7S", "9H", "QD"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.RemoveBet(player_id=A, box=0, amount=400),
    )
    log = wires(script)
    assert messages(log) == []

    def as_cleared(e: ev.BetRefunded) -> dict[str, Any]:
        return {"reason": "cleared"}

    assert messages(tamper(log, ev.BetRefunded, as_cleared)) == [
        "box 0 partial refund's reason: recorded cleared, the rules give removed"
    ]


def test_a_bet_or_a_seat_taken_at_a_suspended_table_is_found() -> None:
    script = Script("atlantic-city-multi", [["TH", "7S", "9H", "QD"]])
    script.do(
        cmd.SuspendTable(operator="ops-1", reason="maintenance"),
        cmd.ResumeTable(operator="ops-1"),
        cmd.SitDown(player_id="bo", seat=1),
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Pass(player_id="bo"),
        cmd.Stand(player_id=A, box=0),
    )
    log = wires(script)
    assert messages(log) == []
    replayed = replay_stream(log, SEAL)
    [record] = replayed.rounds.values()
    assert record.status == "settled"
    told = [
        describe(INITIAL_STATE, w.data)
        for w in log
        if isinstance(w.data, ev.TableSuspended | ev.TableResumed)
    ]
    assert "ops-1 suspends the table (maintenance): no new bet or player" in told
    assert "ops-1 resumes the table" in told
    # the same log without the resumption: the seat and the bet came while suspended
    index = next(i for i, w in enumerate(log) if isinstance(w.data, ev.TableResumed))
    forged = [
        placed(w, w.sequence - 1) if i > index else w for i, w in enumerate(log) if i != index
    ]
    assert messages(forged) == [
        "bo sits down at a suspended table",
        "alice bets 1000 on box 0 at a suspended table",
    ]


def test_money_paid_in_at_a_suspended_table_is_found() -> None:
    """A suspended table takes no money in: this release refuses a platform's Deposit there
    and declines a buy-in back to the wallet (``table_suspended``), but the releases before
    took both. An auditor replaying their logs sees each: the same logs as this release
    writes them, with the resumption before the money taken out."""
    single = Script("mini-h17", [["TH", "7S", "9H", "QD"]])
    shared = Script("atlantic-city-multi", [["TH", "7S", "9H", "QD"]])
    for script in (single, shared):
        script.do(
            cmd.SuspendTable(operator="ops-1", reason="maintenance"),
            cmd.ResumeTable(operator="ops-1"),
        )
        script.fund(A, 700)  # a Deposit at the single-player table, a buy-in at the shared one
    found = []
    for script in (single, shared):
        log = wires(script)
        assert messages(log) == []
        index = next(i for i, w in enumerate(log) if isinstance(w.data, ev.TableResumed))
        forged = [
            placed(w, w.sequence - 1) if i > index else w for i, w in enumerate(log) if i != index
        ]
        found.append(messages(forged))
    [deposited] = [w.data for w in wires(shared)[-1:] if isinstance(w.data, ev.FundsDeposited)]
    assert found == [
        ["alice pays 700 in at a suspended table (a deposit)"],
        [f"alice pays 700 in at a suspended table (buy-in {deposited.transfer})"],
    ]


# ---- moves the rules did not allow ----------------------------------------------------------


def _with_rules(**changes: Any) -> Callable[[ev.TableOpened], dict[str, Any]]:
    def change(e: ev.TableOpened) -> dict[str, Any]:
        return {"rules": e.rules.model_copy(update=changes)}

    return change


def test_a_move_the_tables_rules_forbid_is_found() -> None:
    """The same clean rounds, replayed under rules that forbid their moves: the replay reads
    the rule data itself, so a forged move is found even with every amount right."""
    surrendered = Script("mini-h17", [["TH", "9S", "6S", "7D"]])  # 16 against a 9
    surrendered.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Surrender(player_id=A, box=0),
    )
    assert messages(wires(surrendered), SEAL) == []
    no_surrender = tamper(wires(surrendered), ev.TableOpened, _with_rules(late_surrender=False))
    # the turn's offer is found wrong first (it listed surrender), then the move itself
    assert messages(no_surrender, SEAL) == [
        "actions offered on box 0 hand 0: recorded ('hit', 'stand', 'double', 'surrender'), "
        "the rules give ('hit', 'stand', 'double')",
        "a surrender the table does not allow on this hand",
    ]

    doubled = Script("atlantic-city", [["6H", "7S", "9H", "QD", "5C"]])  # 15 against a 7
    doubled.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Double(player_id=A, box=0),
    )
    assert messages(wires(doubled), SEAL) == []
    on_totals = _with_rules(double_on="totals", double_totals=frozenset({9, 10, 11}))
    assert messages(tamper(wires(doubled), ev.TableOpened, on_totals), SEAL) == [
        "actions offered on box 0 hand 0: recorded ('hit', 'stand', 'double'), "
        "the rules give ('hit', 'stand')",
        "a double on 15, not one of the table's totals",
    ]

    split = Script("mini-h17", [["KS", "6D", "QH", "7C", "9S", "8S", "TD"]])  # K Q by value
    split.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Split(player_id=A, box=0),
        cmd.Stand(player_id=A, box=0, hand=0),
        cmd.Stand(player_id=A, box=0, hand=1),
    )
    assert messages(wires(split), SEAL) == []
    by_rank = tamper(wires(split), ev.TableOpened, _with_rules(split_by="rank"))
    assert messages(by_rank, SEAL) == [
        "actions offered on box 0 hand 0: recorded ('hit', 'stand', 'double', 'split', "
        "'surrender'), the rules give ('hit', 'stand', 'double', 'surrender')",
        "a split of KS QH, not a pair at this table",
    ]


def two_players_stood() -> Script:
    """The shared table: alice on box 0 and bo on box 1 each stand on the cards dealt."""
    script = Script(
        "atlantic-city-multi", [["TH", "9D", "7S", "6C", "QD", "8H"]], {A: 5000, "bo": 5000}
    )
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id="bo", box=1, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Deal(player_id="bo"),
        cmd.Stand(player_id=A, box=0),
        cmd.Stand(player_id="bo", box=1),
    )
    return script


def test_a_move_out_of_turn_or_by_someone_else_is_found() -> None:
    log = wires(two_players_stood())
    assert messages(log, SEAL) == []
    out_of_turn = messages(tamper(log, ev.PlayerStood, lambda e: {"box": 1}), SEAL)
    assert "a stand on box 1 hand 0, whose turn it was not" in out_of_turn
    by_another = messages(tamper(log, ev.PlayerStood, lambda e: {"player_id": "bo"}), SEAL)
    assert "a stand by bo on a box that is not theirs" in by_another
    # a payout booked to the other player, balances and all: whose box it was gives it away
    paid_to_bo = messages(tamper(log, ev.HandSettled, lambda e: {"player_id": "bo"}), SEAL)
    assert "box 0's player: recorded bo, the rules give alice" in paid_to_bo


def test_a_false_or_missing_peek_is_found() -> None:
    """mini-h17 peeks under a ten: a dealer blackjack ends the round before anyone plays."""
    blackjack = Script("mini-h17", [["TH", "KS", "6S", "AD"]])  # 16 against K up, A in the hole
    blackjack.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    log = wires(blackjack)
    assert messages(log, SEAL) == []
    hidden = messages(tamper(log, ev.DealerPeeked, lambda e: {"has_blackjack": False}), SEAL)
    assert "what the peek found: recorded False, the rules give True" in hidden

    no_blackjack = Script("mini-h17", [["TH", "KS", "6S", "7D"]])
    no_blackjack.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Stand(player_id=A, box=0),
    )
    log = wires(no_blackjack)
    assert messages(log, SEAL) == []
    at = next(i for i, w in enumerate(log) if isinstance(w.data, ev.DealerPeeked))
    skipped = [
        *log[:at],
        *(placed(w, w.sequence - 1) for w in log[at + 1 :]),
    ]
    assert messages(skipped, SEAL) == ["play started without the peek the rules require"]
    # and a peek under an upcard the rules do not look under
    assert "a peek the rules do not make" in messages(
        tamper(log, ev.TableOpened, _with_rules(peek_on_ten=False)), SEAL
    )


def _read_once_each(records: list[WireEnvelope]) -> list[WireEnvelope]:
    """What ``blackjack replay --source kafka`` feeds the replay of records read in order."""
    once = OnceEach()
    return [w for w in records if once.first(w)]


def test_an_event_the_topic_holds_twice_is_replayed_once() -> None:
    """``blackjack replay --source kafka`` reads the topic: a record written twice (the same
    bytes, as a retried write can leave it) is one event, as for the projections, however
    far after the first; two different events at one place are both kept, and one out of
    order too, and the replay reports them."""
    log = wires(won_round())
    assert _read_once_each(log) == log and messages(log) == []
    twice = _read_once_each([*log[:5], log[4], *log[5:], log[1]])
    assert twice == log and messages(twice) == []
    # the same event in other bytes (another release's key order): one event, as for the
    # projections, which compare the events read
    document = json.loads(encode(log[4]))
    reordered = decode(json.dumps(dict(reversed(document.items()))).encode())
    assert encode(reordered) == encode(log[4]) and json.dumps(document) != json.dumps(
        dict(reversed(document.items()))
    )
    assert _read_once_each([*log[:5], reordered, *log[5:]]) == log
    forged = log[4].model_copy(update={"event_id": "another-event"})
    both = _read_once_each([*log[:5], forged, forged.model_copy(), *log[5:]])
    assert len(both) == len(log) + 1
    assert f"sequence {log[4].sequence} where {log[4].sequence + 1} was due" in messages(both)
    # (sorted, as before, it passed; the projections stop at such a log, ProjectionError)
    swapped = [*log[:3], log[4], log[3], *log[5:]]
    assert _read_once_each(swapped) == swapped
    assert _read_once_each([*swapped, log[4], log[3]]) == swapped  # their copies once
    assert f"sequence {log[4].sequence} where {log[3].sequence} was due" in messages(swapped)


def test_amounts_are_told_in_their_currency_s_decimals() -> None:
    assert (money(1050), money(1050, "USD"), money(-5, "EUR")) == ("10.50", "10.50", "-0.05")
    assert (money(1050, "JPY"), money(1050, "KWD"), money(-1, "KWD")) == ("1050", "1.050", "-0.001")
    opened = apply(
        INITIAL_STATE,
        cmd.OpenTable(variant="atlantic-city", overrides=IN_YEN),
        NOW,
        csprng_shuffle,
    )
    assert not isinstance(opened, Rejection)
    bet = ev.BetPlaced(round=1, player_id=A, box=0, amount=500, box_total=500, balance_after=9500)
    assert describe(opened.state, bet) == "alice bets 500 on box 0 (box 500, balance 9500)"


def test_the_replay_tells_a_player_without_a_result_whose_balance_moved() -> None:
    script = Script(
        "atlantic-city-multi",
        [["TH", "9S", "7S", "9H", "8D", "QD"]],
        players={A: 10_000, "ben": 10_000},
    )
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id="ben", box=1, amount=1000),
        cmd.RemoveBet(player_id="ben", box=1),
        cmd.Withdraw(player_id="ben", amount=4000),
        cmd.Pass(player_id="ben"),
        cmd.Deal(player_id=A),
        cmd.Stand(player_id=A, box=0),
    )
    text = render(replay_round(wires(script), 1, SEAL, script.stream_id))
    assert "ben: taken out 40.00 at the table; balance 100.00 -> 60.00" in text, text
    assert "REPLAY OK" in text


def test_the_audit_counts_a_stream_no_table_was_opened_under_apart() -> None:
    """The newcomer review: a wallet's buy-in to a mistyped table id left a declined transfer
    in a stream of that name, and the audit counted it as a fifth table."""
    script = Script("atlantic-city-multi", [[]], players={A: 5000})
    streams = {e.stream_id for e in script.envelopes}
    report = AuditReport("events")
    for stream_id in sorted(streams):
        log = [to_wire(e, SEAL) for e in script.envelopes if e.stream_id == stream_id]
        report.replays.append(replay_stream(log, SEAL))
    declined = decide(
        INITIAL_STATE, cmd.Deposit(player_id=A, amount=500, transfer="wallet:alice/9"), NOW
    )
    assert isinstance(declined, list)
    typo = EventEnvelope(
        event_id="typo-1",
        type="TransferDeclined",
        schema_version=1,
        stream_id="table-typo",
        sequence=1,
        occurred_at=NOW,
        data=declined[0],
    )
    report.replays.append(replay_stream([to_wire(typo, SEAL)], SEAL))
    first = report.render().splitlines()[0]
    assert first.endswith(
        "1 tables, 1 wallets, 1 streams with no table (refusals only), 0 rounds replayed"
    ), first


def test_an_incomplete_audit_asks_for_the_auditors_key() -> None:
    """The newcomer review: the stream lines asked for BLACKJACK_AUDIT_KEY, the verdict under
    them for the handlers' master key, which an auditor is not meant to hold."""
    report = AuditReport("events")
    report.replays.append(StreamReplay("table-1", stopped="shoe 1 is still sealed"))
    last = report.render().splitlines()[-1]
    assert last.startswith("AUDIT INCOMPLETE"), last
    assert "set BLACKJACK_AUDIT_KEY, which `blackjack audit-key` prints" in last, last


# ---- insurance offered to the boxes the rules offer it to -----------------------------------


def test_insurance_offered_to_a_blackjack_or_not_offered_under_an_ace_is_found() -> None:
    """Given box 0's blackjack and box 1's 16 against an ace at page 003's table, the log offers
    insurance to box 1 alone and replays clean. When the log is made to offer it to box 0 too
    (page 001: "No Insurance will be offered if you have Blackjack"), or to a table without
    insurance, or a table with insurance skips the offer, then the auditor finds it: the
    boxes offered are derived from the rules, the cards and the balances, not read from the
    event (before, no check looked at them)."""
    script = Script("surrender", [["AS", "9S", "AH", "KS", "7S", "6S", "2S"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=1, amount=1000),
        cmd.Deal(player_id=A),
        cmd.DeclineInsurance(player_id=A, box=1),
        cmd.Stand(player_id=A, box=1),
    )
    log = wires(script)
    [offer] = [w.data for w in log if isinstance(w.data, ev.InsuranceOffered)]
    assert offer.boxes == (1,)
    assert messages(log, SEAL) == []

    def to_both(e: ev.InsuranceOffered) -> dict[str, Any]:
        return {"boxes": (0, 1)}

    assert messages(tamper(log, ev.InsuranceOffered, to_both), SEAL) == [
        "the boxes offered insurance: recorded (0, 1), the rules give (1,)"
    ]
    no_insurance = tamper(log, ev.TableOpened, _with_rules(insurance=False))
    assert "the boxes offered insurance: recorded (1,), the rules give ()" in messages(
        no_insurance, SEAL
    )

    # A table opened without insurance deals its ace and plays on at once; read under rules
    # with insurance, the offer box 0 was due is missing.
    skipped = Script("mini-h17", [["9S", "AS", "7S", "6S", "2S"]], overrides={"insurance": False})
    skipped.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Stand(player_id=A, box=0),
    )
    assert messages(wires(skipped), SEAL) == []
    with_insurance = tamper(wires(skipped), ev.TableOpened, _with_rules(insurance=True))
    assert messages(with_insurance, SEAL) == ["insurance not offered to box(es) (0,) under the ace"]


def test_a_break_even_message_shown_or_left_out_against_the_rule_is_found() -> None:
    """Page 000: "After split, if you win one hand & lose another hand you will be shown a
    message 'Break Even' which indicates that you don't win or lose anything". Given 8 8 split
    against the dealer's 9 T (19), 8 T loses and 8 3 T wins: the log shows Break Even and
    replays clean. When the message is dropped, or shown on a round where both hands lose, the
    auditor finds it (before, no check read the messages)."""
    even = Script("mini-h17", [["8S", "9S", "8H", "TS", "TH", "3S", "TD"]])
    even.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Split(player_id=A, box=0),
        cmd.Stand(player_id=A, box=0, hand=0),
        cmd.Hit(player_id=A, box=0, hand=1),
    )
    log = wires(even)
    [settled] = [w.data for w in log if isinstance(w.data, ev.RoundSettled)]
    assert [(m.box, m.message) for m in settled.messages] == [(0, "Break Even")]
    assert messages(log, SEAL) == []

    def silent(e: ev.RoundSettled) -> dict[str, Any]:
        return {"messages": ()}

    assert messages(tamper(log, ev.RoundSettled, silent), SEAL) == [
        "the boxes' messages: recorded (), the rules give ((0, 'Break Even'),)"
    ]

    lost = Script("mini-h17", [["8S", "9S", "8H", "TS", "TH", "9H"]])
    lost.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Split(player_id=A, box=0),
        cmd.Stand(player_id=A, box=0, hand=0),
        cmd.Stand(player_id=A, box=0, hand=1),
    )
    assert messages(wires(lost), SEAL) == []

    def shown(e: ev.RoundSettled) -> dict[str, Any]:
        return {"messages": (ev.BoxMessage(box=0, message="Break Even"),)}

    assert messages(tamper(wires(lost), ev.RoundSettled, shown), SEAL) == [
        "the boxes' messages: recorded ((0, 'Break Even'),), the rules give ()"
    ]
