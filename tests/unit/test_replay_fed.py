"""The table replayer fed one event at a time (``TableReplayer.feed``/``finish``), as the
audit feeds it a page of the store at a time: the same findings, shoes and state as the whole
log at once, and only one shoe's events held back (until its reveal), not the log. A wallet's
replayer is fed the same way (``WalletReplayer``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from blackjack.audit.recall import RoundReplayer, render
from blackjack.audit.replay import TableReplayer, replay_stream
from blackjack.audit.wallet_replay import WalletReplayer, replay_wallet
from blackjack.domain import events as ev
from blackjack.domain.wallet import BuyInCompleted, BuyInSent, WalletDeposited
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import SealedShoeShuffled, WireEnvelope, to_wire
from tests.integration.conftest_projections import Script, placed, play_tables
from tests.unit.test_replay_engine import tamper

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())


def table_log(variant: str, rounds: int) -> list[WireEnvelope]:
    log = play_tables([("t-1", variant)], rounds=rounds, seed=5)
    return [to_wire(e, SEAL) for e in log.envelopes if e.stream_id == "t-1"]


def longest_shoe(log: list[WireEnvelope]) -> int:
    """The most events from a sealed shuffle to its reveal (or to the log's end)."""
    longest, start = 0, None
    for index, envelope in enumerate(log):
        if isinstance(envelope.data, SealedShoeShuffled):
            start = index
        if isinstance(envelope.data, ev.ShoeRetired) and start is not None:
            longest, start = max(longest, index - start + 1), None
    return max(longest, 0 if start is None else len(log) - start)


@pytest.mark.parametrize("variant", ["mini-h17", "atlantic-city", "atlantic-city-multi"])
@pytest.mark.parametrize("seal", [None, SEAL], ids=["by-reveal", "by-key"])
def test_fed_an_event_at_a_time_it_holds_back_one_shoe_at_most(
    variant: str, seal: ShoeSeal | None
) -> None:
    log = table_log(variant, rounds=40)
    replayer = TableReplayer("t-1", seal, keep=lambda number: False)
    held = 0
    for envelope in log:
        replayer.feed(envelope)
        held = max(held, len(replayer._waiting))
    fed = replayer.finish()
    assert 0 < held <= longest_shoe(log) < len(log) / 2
    whole = replay_stream(log, seal, "t-1")
    assert fed.findings == whole.findings == []
    assert (fed.stopped, fed.events) == (whole.stopped, whole.events)
    if seal is not None:  # without it the shoe in play stays sealed: the replay stops there
        assert fed.stopped is None and fed.events == len(log)
    assert fed.shoes == whole.shoes and fed.checks == whole.checks and fed.state == whole.state
    settled = [r for r in whole.rounds.values() if r.status == "settled"]
    assert len(settled) >= 30 and fed.rounds_replayed == len(whole.rounds)
    assert list(fed.rounds) == [max(whole.rounds)]  # the round in play, or the last one
    retired = sum(isinstance(w.data, ev.ShoeRetired) for w in log)
    assert sum(s.verified for s in fed.shoes.values()) >= retired > 1
    assert replayer.reveals == {}  # each reveal let go once its shoe retired


def test_a_reveal_that_does_not_match_is_found_whichever_page_it_is_read_in() -> None:
    log = table_log("mini-h17", rounds=40)
    at = next(i for i, w in enumerate(log) if isinstance(w.data, ev.ShoeRetired))
    data = log[at].data
    assert isinstance(data, ev.ShoeRetired)
    forged_order = (data.order[1], data.order[0], *data.order[2:])
    forged = log[at].model_copy(update={"data": data.model_copy(update={"order": forged_order})})
    log = [*log[:at], forged, *log[at + 1 :]]
    replayer = TableReplayer("t-1", None)
    for envelope in log:
        replayer.feed(envelope)
    found = [f.message for f in replayer.finish().findings]
    assert f"shoe {data.shoe}: the revealed order does not match its commitment" in found


def test_a_round_replayed_fed_keeps_that_round_and_lets_the_others_go() -> None:
    log = table_log("mini-h17", rounds=40)
    replayer = RoundReplayer(5, SEAL, "t-1")
    for envelope in log:
        replayer.feed(envelope)
    verdict = replayer.finish()
    assert verdict.ok and verdict.replay is not None and verdict.replay.status == "settled"
    last = max(replayer.table.out.rounds)
    assert sorted(replayer.table.out.rounds) == [5, last] and last > 40 - 1
    assert verdict.shoe is not None and verdict.shoe.verified
    told = render(verdict)
    assert told.startswith("Round t-1:5 - mini-h17") and told.endswith("REPLAY OK")
    # round 5 of the whole log, as the other rounds of the table are kept
    whole = replay_stream(log, SEAL, "t-1").rounds[5]
    assert verdict.replay.lines == whole.lines and verdict.replay.settlements == whole.settlements


def wallet_log() -> list[WireEnvelope]:
    """alice's wallet: 50.00 paid in, 50.00 sent to a shared table's buy-in, completed."""
    script = Script("atlantic-city-multi", [[]], players={"alice": 5000})
    return [to_wire(e, SEAL) for e in script.envelopes if e.stream_id == "wallet:alice"]


@pytest.mark.parametrize(
    ("kind", "change", "found"),
    [
        (
            WalletDeposited,
            lambda e: {"balance_after": e.balance_after + 1},
            [  # there only: the next event moves from the balance the amounts give (before,
                # it was named too, as moving from the balance the first one recorded)
                "balance after: recorded 5001, the amounts give 5000",
            ],
        ),
        (
            BuyInSent,
            lambda e: {"amount": e.amount + 100, "balance_after": -100},
            [  # and the table's completion no longer closes the transfer sent
                "the wallet went below zero (-100)",
                "buy-in 1 closed, but no such transfer is pending",
            ],
        ),
    ],
)
def test_a_wallet_fed_an_event_at_a_time_finds_a_forged_amount(
    kind: type[Any], change: Callable[[Any], dict[str, Any]], found: list[str]
) -> None:
    """The audit feeds a wallet's events a page at a time, as a table's: it holds the
    wallet's state, not its log, and still finds what moves money other than it says."""
    log = wallet_log()
    assert [type(w.data) for w in log][:3] == [WalletDeposited, BuyInSent, BuyInCompleted]
    replayer = WalletReplayer("wallet:alice")
    for envelope in tamper(log, kind, change):
        replayer.feed(envelope)
    replayed = replayer.finish()
    assert [f.message for f in replayed.findings] == found
    assert replayed.events == len(log) and replayed.stopped is None
    assert replay_wallet("wallet:alice", log).findings == []


def test_a_wallet_fed_a_table_s_event_stops_there() -> None:
    """Past a corrupt event nothing is read: the events after it are not counted."""
    log = wallet_log()
    table_event = placed(table_log("atlantic-city", 1)[0], 2)
    forged = [
        log[0],
        table_event,
        *[placed(w, w.sequence + 1) for w in log[1:]],
    ]
    replayer = WalletReplayer("wallet:alice")
    for envelope in forged:
        replayer.feed(envelope)
    replayed = replayer.finish()
    assert [f.message for f in replayed.findings] == ["TableOpened in a wallet stream"]
    assert (replayed.events, replayed.stopped) == (1, "corrupt log at event 2")
