"""A player's line in a round (``round_players``: the betting history and the recall's
``players``) shows the money as it moves, at every event of the round: every stake placed so
far (``wagered``), what the wagers settled before the round's settlement paid (``paid``: a
bust or a surrender settled at once, a blackjack paid at once, insurance settled at the peek)
and their result (``net``), and then exactly the settlement's figures.

Found reading the fold: ``paid`` and ``net`` read 0 until ``RoundSettled`` however much the
round had paid already, and ``wagered`` only counted the stakes the fold itself had seen
(a round an older release folded while it played showed only the stakes placed after the
upgrade)."""

from __future__ import annotations

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import to_wire
from blackjack.projections.projector import StreamProjection
from tests.integration.conftest_projections import Script, play_tables
from tests.round_lines import LineTally

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
A = "alice"


def folded_event_by_event(envelopes: list[EventEnvelope], stream_id: str) -> list[str]:
    """Fold the table's events one by one; after each, every line of the round it belongs to
    must say what the events so far say. The types of the settlements made before the
    dealer's hole card was revealed (to show the test reached them)."""
    projection = StreamProjection.new(stream_id)
    tally = LineTally()
    paid_early: list[str] = []
    revealed: set[int] = set()
    for envelope in envelopes:
        if envelope.stream_id != stream_id:
            continue
        projection.apply(to_wire(envelope, SEAL))
        tally.add(envelope.data)
        for (number, player_id), line in projection.players.items():
            expected = tally.line(number, player_id)
            got = (line.wagered, line.paid, line.net)
            assert got == expected, (envelope.sequence, envelope.type, player_id, got, expected)
            moved = line.deposited - line.withdrawn
            assert line.balance_before - line.wagered + line.paid + moved == line.balance_after
        data = envelope.data
        if isinstance(data, ev.DealerHoleCardRevealed):
            revealed.add(data.round)
        elif isinstance(data, ev.HandSettled | ev.InsuranceSettled) and data.round not in revealed:
            paid_early.append(envelope.type)
    return paid_early


def test_surrender_pays_a_blackjack_a_surrender_and_loses_a_bust_at_once() -> None:
    # boxes 0, 1, 2 then the upcard, again then the hole card: A K blackjack, T 6 surrendered,
    # T 5 hits a ten and busts; the dealer's 9 and 8 (no peek under a 9).
    script = Script("surrender", [["AS", "TH", "TD", "9C", "KS", "6H", "5D", "8C", "TC"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=1, amount=1000),
        cmd.PlaceBet(player_id=A, box=2, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Surrender(player_id=A, box=1),
        cmd.Hit(player_id=A, box=2),
    )
    assert "RoundSettled" in [e.type for e in script.envelopes]
    early = folded_event_by_event(script.envelopes, script.stream_id)
    assert early == ["HandSettled", "HandSettled", "HandSettled"]  # blackjack, surrender, bust


def test_mini_s17_loses_a_bust_at_once_and_insurance_at_the_peek() -> None:
    # mini-s17 deals the dealer's hole card first: player T 6 against the dealer's 9 in the
    # hole and ace up: insured, the peek finds no blackjack (the insurance is lost there);
    # T 6 hits a ten and busts, settled at once.
    script = Script("mini-s17", [["TH", "9C", "6D", "AS", "TC"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.TakeInsurance(player_id=A, box=0),
        cmd.Hit(player_id=A, box=0),
    )
    assert "InsuranceSettled" in [e.type for e in script.envelopes]
    early = folded_event_by_event(script.envelopes, script.stream_id)
    assert early[:2] == ["InsuranceSettled", "HandSettled"]


def test_mini_h17_insurance_lost_at_the_peek_then_a_split_and_a_double() -> None:
    script = Script("mini-h17", [["8H", "AS", "8D", "7C", "3S", "TD", "TH"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=0, amount=500),
        cmd.RemoveBet(player_id=A, box=0, amount=500),
        cmd.Deal(player_id=A),
        cmd.TakeInsurance(player_id=A, box=0),
        cmd.Split(player_id=A, box=0),
        cmd.Double(player_id=A, box=0),
        cmd.Stand(player_id=A, box=0),
    )
    early = folded_event_by_event(script.envelopes, script.stream_id)
    assert early == ["InsuranceSettled"]


def test_a_line_an_older_release_folded_in_play_counts_every_stake_from_the_next_event() -> None:
    """The release before counted no stake in the line while the round played (0 until the
    settlement): a line it stored mid-round reads every stake from the round's next event."""
    script = Script("mini-h17", [["8H", "6S", "8D", "TC", "3S", "TD", "TH"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Split(player_id=A, box=0),
    )
    projection = StreamProjection.new(script.stream_id)
    for envelope in script.envelopes:
        projection.apply(to_wire(envelope, SEAL))
    line = projection.players[(1, A)]
    line.wagered = line.paid = line.net = 0  # as the release before stored it
    more = script.do(cmd.Double(player_id=A, box=0))
    projection.apply(to_wire(more[0], SEAL))  # the double's first event
    assert (line.wagered, line.paid, line.net) == (3000, 0, 0)


def test_over_long_random_logs_of_every_preset_each_line_follows_the_money() -> None:
    """Random legal play at each preset's table (bets taken back, passes, timeouts,
    disconnections, deposits and withdrawals during rounds): at every event every line says
    what the events so far say, and adds up to the settlement's figures."""
    variants = ["mini-h17", "mini-s17", "atlantic-city", "atlantic-city-multi", "surrender"]
    log = play_tables([(f"t-{v}", v) for v in variants], rounds=40, seed=23)
    early = []
    for variant in variants:
        early += folded_event_by_event(log.envelopes, f"t-{variant}")
    assert "HandSettled" in early and "InsuranceSettled" in early
    assert log.count("RoundVoided") + log.count("RoundSettled") >= 200
