"""The platform's money commands are never applied twice, however late a copy comes
(``domain.platform_money``): a copy after the idempotency window is refused by the ids the
stream keeps for the retention, one issued longer ago than the retention is refused
``transfer_expired``; the live handler, a snapshot and a rebuild from the events keep the
same ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from blackjack.command_handler.processor import Handled
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.streams import PartitionStore, Stream, initial_state
from blackjack.domain import commands as cmd
from blackjack.domain import platform_money
from blackjack.domain.state import TableState
from blackjack.domain.wallet import (
    BuyIn,
    WalletDeposit,
    WalletState,
    WalletWithdraw,
    wallet_stream,
)
from blackjack.messages.envelope import CommandEnvelope, CommandResult, EventEnvelope
from tests.unit.processor_harness import TOPICS, new_processor
from tests.unit.test_handler_signed_replay import resealed, sealed_body

START = datetime(2026, 5, 1, tzinfo=UTC)
WINDOW = 4
RETENTION = platform_money.DEFAULT_RETENTION
PLAYER, WALLET, SOLO = "fay", wallet_stream("fay"), "solo-1"


class Harness:
    """A partition of one handler whose clock the test moves."""

    def __init__(self) -> None:
        self.processor = new_processor(dedup_window=WINDOW)
        self.store = PartitionStore(0)
        self.now = START
        self.offset = 0
        self.handled: list[Handled] = []

    def send(
        self,
        stream: str,
        command: object,
        command_id: str | None = None,
        sent_at: datetime | None = None,
        received_at: datetime | None = None,
    ) -> CommandResult:
        self.offset += 1
        envelope = CommandEnvelope(
            command_id=command_id or f"c-{self.offset}",
            stream_id=stream,
            sent_at=sent_at,
            command=command,
        )
        value = envelope.model_dump_json().encode()
        inbound = Inbound(stream.encode(), value, [], 0, self.offset, received_at=received_at)
        handled = self.processor.handle(self.store, inbound, self.now)
        self.handled.append(handled)
        [result] = [
            CommandResult.model_validate_json(r.value)
            for r in handled.outgoing
            if r.topic == TOPICS.results
        ]
        return result

    def other_commands(self, count: int = WINDOW + 2) -> None:
        """Answers that push the wallet's window on (refused withdrawals, remembered)."""
        for _ in range(count):
            refused = self.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=10**12))
            assert refused.rejection is not None
            assert refused.rejection.code == "insufficient_funds"

    def wallet(self) -> WalletState:
        state = self.store.streams[WALLET].state
        assert isinstance(state, WalletState)
        return state

    def events_of(self, stream_id: str) -> list[EventEnvelope]:
        return [e for h in self.handled for e in h.events if e.stream_id == stream_id]


def code(result: CommandResult) -> str | None:
    return None if result.rejection is None else result.rejection.code


def deposit(amount: int = 100) -> WalletDeposit:
    return WalletDeposit(player_id=PLAYER, amount=amount)


def rebuilt_from(events: list[EventEnvelope], retention: timedelta = RETENTION) -> Stream:
    """A stream rebuilt from its events alone, as a rebuild without a checkpoint reads them."""
    stream = Stream(events[0].stream_id, initial_state(events[0].stream_id))
    for envelope in events:
        stream.fold(envelope)
        stream.note_money(envelope, retention)
    return stream


# ---- the check itself: pure, time an argument ------------------------------------------


def test_the_check_refuses_a_copy_an_expired_or_a_future_command_and_takes_a_new_one() -> None:
    accepted = {"d-1": START}
    sent = START - timedelta(seconds=1)

    def check(command_id: str, sent_at: datetime | None, now: datetime) -> str | None:
        refusal = platform_money.check(accepted, command_id, sent_at, now, now, RETENTION)
        return None if refusal is None else refusal.code

    assert check("d-2", sent, START) is None
    assert check("d-2", None, START + 30 * RETENTION) is None  # no sent_at: arrived now
    assert check("d-1", sent, START + timedelta(days=1)) == "already_applied"
    assert check("d-1", None, START + RETENTION) == "already_applied"
    # issued longer ago than the retention: refused whether the stream remembers it or not
    assert check("d-1", sent, sent + RETENTION) == "transfer_expired"
    assert check("d-9", sent, sent + RETENTION) == "transfer_expired"
    # an id older than it is kept counts as let go, remembered or not
    assert check("d-1", None, START + platform_money.kept_for(RETENTION) + timedelta(1)) is None
    ahead = START + platform_money.SENT_AHEAD + timedelta(seconds=1)
    assert check("d-3", ahead, START) == "malformed"


def test_ids_are_let_go_oldest_first_once_older_than_they_are_kept() -> None:
    kept = platform_money.kept_for(RETENTION)
    accepted: dict[str, datetime] = {}
    platform_money.remember(accepted, "a", START, RETENTION)
    platform_money.remember(accepted, "b", START + timedelta(days=1), RETENTION)
    platform_money.forget_before(accepted, START + kept, RETENTION)
    assert list(accepted) == ["a", "b"]  # not older yet
    platform_money.forget_before(accepted, START + kept + timedelta(seconds=1), RETENTION)
    assert list(accepted) == ["b"]
    platform_money.remember(accepted, "c", START + kept + timedelta(days=2), RETENTION)
    assert list(accepted) == ["c"]


# ---- at a wallet, through the processor ------------------------------------------------


def test_a_wallet_deposit_sent_again_after_the_window_is_not_credited_twice() -> None:
    h = Harness()
    first = h.send(WALLET, deposit(), "pay-1", sent_at=START)
    assert first.status == "accepted" and h.wallet().balance == 100
    # Within the window: its first answer, exactly, as always.
    assert h.send(WALLET, deposit(), "pay-1", sent_at=START) == first
    h.other_commands()
    assert "pay-1" not in h.store.streams[WALLET].results
    h.now = START + timedelta(days=3)
    sequence = h.store.streams[WALLET].sequence
    copy = h.send(WALLET, deposit(), "pay-1", sent_at=START)
    assert code(copy) == "already_applied" and h.handled[-1].duplicate
    assert h.handled[-1].events == [] and h.wallet().balance == 100
    assert h.store.streams[WALLET].sequence == sequence
    # The refusal is now in the window: answered so again, nothing changes.
    assert h.send(WALLET, deposit(), "pay-1", sent_at=START) == copy
    assert h.wallet().balance == 100


def test_a_wallet_withdrawal_sent_again_after_the_window_is_not_debited_twice() -> None:
    h = Harness()
    h.send(WALLET, deposit(1_000), sent_at=START)
    assert h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=300), "out-1").status == (
        "accepted"
    )
    h.other_commands()
    copy = h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=300), "out-1")
    assert code(copy) == "already_applied" and h.wallet().balance == 700


def test_a_money_command_issued_longer_ago_than_the_retention_is_refused_expired() -> None:
    h = Harness()
    h.send(WALLET, deposit(), "pay-1", sent_at=START)
    h.now = START + RETENTION
    late = h.send(WALLET, deposit(), "pay-2", sent_at=START)
    assert code(late) == "transfer_expired" and h.wallet().balance == 100
    assert late.rejection is not None and "7 days" in late.rejection.message
    assert "pay-2" in h.store.streams[WALLET].results  # remembered, as any decided answer
    # sent just within the retention: taken
    fresh = h.send(WALLET, deposit(), "pay-3", sent_at=START + timedelta(seconds=1))
    assert fresh.status == "accepted" and h.wallet().balance == 200


def test_a_sent_at_ahead_of_the_service_s_clock_is_malformed_and_not_remembered() -> None:
    h = Harness()
    ahead = START + timedelta(hours=1)
    refused = h.send(WALLET, deposit(), "pay-1", sent_at=ahead)
    assert code(refused) == "malformed" and WALLET not in h.store.streams
    # sent again with its clock right: handled
    assert h.send(WALLET, deposit(), "pay-1", sent_at=START).status == "accepted"


def test_a_broker_clock_ahead_of_the_handler_s_lets_no_copy_through() -> None:
    """An id is kept by the handler's clock (its event's time), so ``sent_at`` is bounded by
    that clock too, not by the broker's stamp. A platform and a broker 10 minutes ahead of
    the handler: the deposit, then its copy 7 days and 6 minutes later by the handler's
    clock (before: both taken, the id let go at 7 days 5 minutes while the copy's sent_at
    was not yet 7 days old: credited twice)."""
    h = Harness()
    skew = timedelta(minutes=10)
    h.send(WALLET, deposit(), "pay-0", sent_at=START)  # the wallet, 100
    first = h.send(WALLET, deposit(), "pay-1", sent_at=START + skew, received_at=START + skew)
    h.other_commands()
    h.now = START + platform_money.kept_for(RETENTION) + timedelta(minutes=1)
    h.send(WALLET, deposit(), "pay-1", sent_at=START + skew, received_at=h.now + skew)
    assert h.wallet().balance == 200  # pay-1 credited once
    assert code(first) == "malformed"  # ahead of the clock that keeps the ids
    assert first.rejection is not None
    assert "ahead of the service's clock" in first.rejection.message


def test_ids_older_than_the_retention_are_let_go_and_their_copies_refused_expired() -> None:
    h = Harness()
    for n in range(3):
        h.send(WALLET, deposit(), f"pay-{n}", sent_at=START)
    assert list(h.store.streams[WALLET].money) == ["pay-0", "pay-1", "pay-2"]
    h.now = START + platform_money.kept_for(RETENTION) + timedelta(seconds=1)
    h.send(WALLET, deposit(), "pay-new", sent_at=h.now)
    assert list(h.store.streams[WALLET].money) == ["pay-new"]  # the memory is bounded
    h.other_commands()
    copy = h.send(WALLET, deposit(), "pay-1", sent_at=START)
    assert code(copy) == "transfer_expired" and h.wallet().balance == 400


def test_only_the_platform_s_money_commands_are_kept() -> None:
    h = Harness()
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    h.send(WALLET, deposit(1_000), "pay-1")
    h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=300), "buy-1")
    h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=10**9), "out-refused")
    assert list(h.store.streams[WALLET].money) == ["pay-1"]
    assert not h.store.streams[SOLO].money


# ---- at a table the platform funds -------------------------------------------------------


def test_a_table_deposit_or_withdrawal_sent_again_after_the_window_is_refused() -> None:
    h = Harness()
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city"))
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    assert h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=500), "in-1").status == "accepted"
    assert h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=200), "out-1").status == ("accepted")
    for _ in range(WINDOW + 2):
        h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=10**9))  # refused, remembered
    assert not {"in-1", "out-1"} & set(h.store.streams[SOLO].results)
    in_copy = h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=500), "in-1")
    out_copy = h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=200), "out-1")
    assert code(in_copy) == code(out_copy) == "already_applied"
    state = h.store.streams[SOLO].state
    assert isinstance(state, TableState) and state.players[PLAYER].balance == 300


# ---- the same ids live, from a snapshot, and from the events -----------------------------


def test_a_rebuild_from_the_events_or_a_snapshot_keeps_the_live_ids() -> None:
    h = Harness()
    for day in range(10):
        h.now = START + timedelta(days=day)
        h.send(WALLET, deposit(), f"pay-{day}", sent_at=h.now)
        h.other_commands(2)
    live = h.store.streams[WALLET]
    assert list(live.money) == [f"pay-{day}" for day in range(2, 10)]  # the last 7 days
    assert rebuilt_from(h.events_of(WALLET)).money == live.money
    codec = SnapshotCodec(b"s" * 32)
    opened = codec.decode(codec.encode(live))
    assert opened.money == live.money and list(opened.money) == list(live.money)
    assert not opened.money_incomplete
    # A fresh handler with that snapshot refuses the copy as the live one does.
    fresh = Harness()
    fresh.now = h.now
    fresh.store.streams[WALLET] = opened
    assert code(fresh.send(WALLET, deposit(), "pay-5", sent_at=START + timedelta(5))) == (
        "already_applied"
    )
    assert fresh.wallet().balance == 1_000


def test_a_snapshot_from_before_the_ids_were_kept_is_completed_from_the_events() -> None:
    h = Harness()
    h.send(WALLET, deposit(), "pay-1", sent_at=START)
    codec = SnapshotCodec(b"s" * 32)
    record, body = sealed_body(codec.encode(h.store.streams[WALLET]))
    del body["money"]
    opened = codec.decode(resealed(record, body))
    assert opened.money_incomplete and not opened.money
