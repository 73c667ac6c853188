"""The platform's money commands are never applied twice, however late a copy comes
(``domain.platform_money``): a copy after the idempotency window is refused by the ids the
stream keeps for the retention, one issued longer ago than the retention is refused
``transfer_expired``; the live handler, a snapshot and a rebuild from the events keep the
same ids."""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime, timedelta

from blackjack.audit.replay import replay_stream
from blackjack.audit.wallet_replay import replay_wallet
from blackjack.bus.topics import SNAPSHOT_MAX_BYTES
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
from blackjack.messages.wire import to_wire
from blackjack.projections.projector import StreamProjection
from blackjack.projections.wallets import WalletProjection
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

    def forward_steps(self) -> None:
        """The signed steps the last command wrote, delivered, and theirs, until none is left
        (a buy-in's deposit at the table, then its confirmation at the wallet)."""
        steps = [r for r in self.handled[-1].outgoing if r.topic == TOPICS.commands]
        while steps:
            record = steps.pop(0)
            self.offset += 1
            inbound = Inbound(record.key, record.value, record.headers, 0, self.offset)
            handled = self.processor.handle(self.store, inbound, self.now)
            self.handled.append(handled)
            steps += [r for r in handled.outgoing if r.topic == TOPICS.commands]

    def other_commands(self, count: int = WINDOW + 2, paid: bool = True) -> None:
        """Answers that push the wallet's window on: refused withdrawals (the refusals'
        window) and, if ``paid``, a cent paid in and out (the window of those that wrote
        events), remembered, the balance as it was."""
        for _ in range(count):
            refused = self.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=10**12))
            assert refused.rejection is not None
            assert refused.rejection.code == "insufficient_funds"
        for _ in range(count // 2 + 1 if paid else 0):
            for command in (WalletDeposit, WalletWithdraw):
                assert self.send(WALLET, command(player_id=PLAYER, amount=1)).status == "accepted"

    def other_table_commands(self, table: str = SOLO) -> None:
        """As ``other_commands``, at a table where ``PLAYER`` is seated and funded."""
        for _ in range(WINDOW + 2):
            refused = self.send(table, cmd.Withdraw(player_id=PLAYER, amount=10**9))
            assert code(refused) == "insufficient_funds"
        for _ in range(WINDOW // 2 + 1):
            for command in (cmd.Deposit, cmd.Withdraw):
                assert self.send(table, command(player_id=PLAYER, amount=1)).status == "accepted"

    def wallet(self) -> WalletState:
        state = self.store.streams[WALLET].state
        assert isinstance(state, WalletState)
        return state

    def events_of(self, stream_id: str) -> list[EventEnvelope]:
        return [e for h in self.handled for e in h.events if e.stream_id == stream_id]


def paid_in_and_out_past_the_window() -> Harness:
    """A table the platform funds: 500 deposited (``in-1``), 200 withdrawn (``out-1``), both
    answers since pushed out of the window."""
    h = Harness()
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city"))
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    assert h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=500), "in-1").status == "accepted"
    assert h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=200), "out-1").status == ("accepted")
    h.other_table_commands()
    assert not {"in-1", "out-1"} & set(h.store.streams[SOLO].results)
    return h


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
        kept = platform_money.Kept(accepted, {}, RETENTION)
        refusal = platform_money.check(kept, command_id, sent_at, now, now)
        return None if refusal is None else refusal.code

    assert check("d-2", sent, START) is None
    assert check("d-2", None, START + 30 * RETENTION) is None  # no sent_at: arrived now
    assert check("d-1", sent, START + timedelta(days=1)) == "already_applied"
    assert check("d-1", None, START + RETENTION) == "already_applied"
    # issued longer ago than the retention: a copy the stream still remembers is answered
    # as one, whatever its sent_at (before, "transfer_expired: not applied" of money that was,
    # and that answer stuck to the id: a ledger review); one it does not is refused
    assert check("d-1", sent, sent + RETENTION) == "already_applied"
    assert check("d-9", sent, sent + RETENTION) == "transfer_expired"
    ahead = START + platform_money.SENT_AHEAD + timedelta(seconds=1)
    assert check("d-1", ahead, START) == "already_applied"
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


def test_the_platform_s_money_commands_and_the_buy_ins_are_kept() -> None:
    h = Harness()
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    h.send(WALLET, deposit(1_000), "pay-1")
    h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=300), "buy-1")
    h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=10**9), "out-refused")
    # the refused one is kept too, with its code (``money_refused``); the buy-in, which draws
    # on the wallet as a withdrawal does, is kept like the platform's
    assert list(h.store.streams[WALLET].money) == ["pay-1", "buy-1", "out-refused"]
    assert h.store.streams[WALLET].money_refused == {"out-refused": "insufficient_funds"}
    assert not h.store.streams[SOLO].money


def a_shared_table_bought_into() -> Harness:
    """An atlantic-city-multi table the player sat at and bought 3.00 into, its money ids
    limited to 12 (five seats and the players not seated: 2 ids a share)."""
    h = Harness()
    h.processor.money_ids_max = 12
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    h.send(WALLET, deposit(1_000), "pay-1")
    h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=300), "buy-1")
    h.forward_steps()
    return h


def test_no_one_fills_a_shared_table_s_ids_with_withdrawals_refused() -> None:
    """A Withdraw at a table several players share is a player's own, kept by id for 7 days,
    refused ones too: anyone, seated or not, sending refused ones in a loop (10,000 took
    1.7 s) filled the table's ids, and every seated player's Withdraw was refused
    ``money_ids_full`` for 7 days. A player's take their share of the ids at most, the
    limit over the seats; the others' still have theirs."""
    h = a_shared_table_bought_into()
    flood = [h.send(SOLO, cmd.Withdraw(player_id="mallory", amount=1)) for _ in range(10)]
    assert [code(a) for a in flood] == ["not_seated"] * 2 + ["money_ids_full"] * 8
    assert "players not seated at it" in str(flood[-1].rejection)
    # before: all ten kept, and this refused money_ids_full
    assert h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=100), "out-1").status == "accepted"
    live = h.store.streams[SOLO]
    assert list(live.money_players.values()) == ["mallory", "mallory", PLAYER]
    # a copy of a kept refusal is still told as one; the share counts the kept ids only
    copy = h.send(SOLO, cmd.Withdraw(player_id="mallory", amount=1), flood[0].command_id)
    assert code(copy) == "not_seated"
    h.now = START + platform_money.kept_for(RETENTION) + timedelta(seconds=1)
    later = h.send(SOLO, cmd.Withdraw(player_id="mallory", amount=1))
    assert code(later) == "not_seated" and list(live.money_players.values()) == ["mallory"]
    # a rebuild from the events and a snapshot keep whose each id is
    codec = SnapshotCodec(b"s" * 32)
    for opened in (rebuilt_from(h.events_of(SOLO)), codec.decode(codec.encode(live))):
        assert opened.money_players == live.money_players and opened.money == live.money


def test_players_not_seated_share_one_share_of_a_shared_table_s_ids() -> None:
    """Each id a share, five ids not seated filled a five-seat table's ids (10,000 refused
    Withdraws of 1 under x0..x4 took 19.7 s on a live service) and every seated player's
    Withdraw was refused ``money_ids_full`` for 7 days. The players not seated now share one
    share, whatever ids they name; a player who sits down has their own."""
    h = a_shared_table_bought_into()
    flood = [h.send(SOLO, cmd.Withdraw(player_id=f"x{n % 5}", amount=1)) for n in range(10)]
    assert [code(a) for a in flood] == ["not_seated"] * 2 + ["money_ids_full"] * 8
    assert "players not seated at it" in str(flood[-1].rejection)
    before = len(h.events_of(SOLO))
    assert h.send(SOLO, cmd.Withdraw(player_id="x9", amount=1)).status == "rejected"
    assert len(h.events_of(SOLO)) == before  # money_ids_full is not written down
    # before: money_ids_full for 7 days
    for number in range(2):
        out = h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=10), f"out-{number}")
        assert out.status == "accepted"
    third = h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=10), "out-2")
    assert code(third) == "money_ids_full" and "share for one player" in str(third.rejection)
    # a player who sits down has a share of their own, the strangers' full or not
    h.send(SOLO, cmd.SitDown(player_id="x3", seat=1))
    assert code(h.send(SOLO, cmd.Withdraw(player_id="x3", amount=1))) == "insufficient_funds"


# ---- at a table the platform funds -------------------------------------------------------


def test_a_table_deposit_or_withdrawal_sent_again_after_the_window_is_refused() -> None:
    h = paid_in_and_out_past_the_window()
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
        h.other_commands(2, paid=False)
    live = h.store.streams[WALLET]
    accepted = [i for i in live.money if i not in live.money_refused]
    assert accepted == [f"pay-{day}" for day in range(2, 10)]  # the last 7 days
    assert len(live.money_refused) == 16  # the refused withdrawals of those days, kept too
    rebuilt = rebuilt_from(h.events_of(WALLET))
    assert rebuilt.money == live.money and rebuilt.money_refused == live.money_refused
    codec = SnapshotCodec(b"s" * 32)
    opened = codec.decode(codec.encode(live))
    assert opened.money == live.money and list(opened.money) == list(live.money)
    assert opened.money_refused == live.money_refused
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


# ---- a refusal is kept too: a late copy is never decided again ------------------------------


def test_a_refused_withdrawal_replayed_after_the_window_and_a_deposit_is_not_debited() -> None:
    """Given a wallet of 100 that refused a withdrawal of 300 (the platform booked it as
    failed), when the platform's outbox replays it after the window and after a deposit that
    would cover it, then it gets its first refusal again and nothing is debited. Before: it
    was decided again, and debited."""
    h = Harness()
    h.send(WALLET, deposit(100), "pay-1", sent_at=START)
    withdraw = WalletWithdraw(player_id=PLAYER, amount=300)
    first = h.send(WALLET, withdraw, "out-1", sent_at=START)
    assert code(first) == "insufficient_funds" and first.first_sequence == 2
    [written] = h.handled[-1].events
    assert written.data.type == "WalletCommandRefused" and written.causation_id == "out-1"
    assert written.data.model_dump(include={"command", "amount", "reason_code"}) == {
        "command": "WalletWithdraw",
        "amount": 300,
        "reason_code": "insufficient_funds",
    }
    assert h.send(WALLET, withdraw, "out-1", sent_at=START) == first  # within the window
    h.send(WALLET, deposit(1_000), "pay-2", sent_at=START)
    h.other_commands()
    h.now = START + timedelta(days=1)
    copy = h.send(WALLET, withdraw, "out-1", sent_at=START)
    assert code(copy) == "insufficient_funds" and h.handled[-1].duplicate
    assert copy.rejection is not None and "not decided again" in copy.rejection.message
    assert h.handled[-1].events == [] and h.wallet().balance == 1_100


def test_a_refusal_is_kept_by_a_rebuild_from_the_events_and_by_a_snapshot() -> None:
    h = Harness()
    h.send(WALLET, deposit(100), "pay-1", sent_at=START)
    h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=300), "out-1", sent_at=START)
    h.send(WALLET, deposit(1_000), "pay-2", sent_at=START)
    live = h.store.streams[WALLET]
    codec = SnapshotCodec(b"s" * 32)
    for opened in (rebuilt_from(h.events_of(WALLET)), codec.decode(codec.encode(live))):
        assert opened.money_refused == {"out-1": "insufficient_funds"}
        fresh = Harness()
        fresh.now = START + timedelta(days=2)
        fresh.store.streams[WALLET] = opened
        copy = fresh.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=300), "out-1")
        assert code(copy) == "insufficient_funds" and fresh.wallet().balance == 1_100


def test_a_refusal_s_rebuilt_answer_is_the_live_one() -> None:
    """A rebuild whose results have expired answers a copy from the events: rejected, with the
    code, message and sequence the live handler answered."""
    from blackjack.command_handler.replay import _Events

    h = Harness()
    h.send(WALLET, deposit(100), "pay-1", sent_at=START)
    live = h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=300), "out-1")
    events = _Events(window=1000)
    for envelope in h.events_of(WALLET):
        events.accept(envelope)
    rebuilt = events.refused[WALLET]["out-1"]  # (a window of their own)
    # (the events carry the command id as correlation id where the command named none, as
    # for an accepted command's rebuilt answer)
    assert rebuilt.model_dump(exclude={"correlation_id"}) == live.model_dump(
        exclude={"correlation_id"}
    )
    assert rebuilt.status == "rejected" and rebuilt.first_sequence == 2


def test_a_refusal_at_a_wallet_never_paid_into_is_final_after_the_wallet_is_made() -> None:
    """A platform's ``WalletWithdraw`` from a wallet never paid into is refused and written
    down like any refusal: its ``WalletCommandRefused`` is the wallet's first event (the
    stream is made by it), so a copy replayed after the window and after a deposit that would
    cover it gets the first refusal again and is not debited. Before: the refusal made no
    stream, was kept only among the partition's stray answers (1,000), and a copy after them
    and after the deposit was decided again, and debited."""
    h = Harness()
    withdraw = WalletWithdraw(player_id=PLAYER, amount=300)
    refused = h.send(WALLET, withdraw, "out-0", sent_at=START)
    assert code(refused) == "insufficient_funds" and refused.first_sequence == 1
    [written] = h.handled[-1].events
    assert written.data.type == "WalletCommandRefused" and written.causation_id == "out-0"
    assert h.store.streams[WALLET].money_refused == {"out-0": "insufficient_funds"}
    assert h.send(WALLET, withdraw, "out-0", sent_at=START) == refused  # within the window
    h.send(WALLET, deposit(1_000), "pay-1", sent_at=START)
    h.other_commands()
    h.now = START + timedelta(days=1)
    copy = h.send(WALLET, withdraw, "out-0", sent_at=START)
    assert code(copy) == "insufficient_funds" and h.handled[-1].duplicate
    assert h.handled[-1].events == [] and h.wallet().balance == 1_000
    # a rebuild from the events and a snapshot keep it too
    codec = SnapshotCodec(b"s" * 32)
    live = h.store.streams[WALLET]
    for opened in (rebuilt_from(h.events_of(WALLET)), codec.decode(codec.encode(live))):
        assert opened.money_refused["out-0"] == "insufficient_funds"


def test_a_refusal_at_a_table_never_opened_is_final_after_the_table_is_opened() -> None:
    """A platform's ``Deposit`` (and ``Withdraw``) at a table id no one opened yet: refused,
    its ``MoneyCommandRefused`` the stream's first event; the table opened later under that id
    is a table like any other (the refusal is no opening), and a copy of the deposit replayed
    after the window, once the player is seated there, is refused as first, not credited."""
    h = Harness()
    first = h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=500), "in-0", sent_at=START)
    assert code(first) is not None and first.first_sequence == 1
    out = h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=5), "out-0", sent_at=START)
    assert code(out) is not None and out.first_sequence == 2
    assert [e.data.type for e in h.events_of(SOLO)] == ["MoneyCommandRefused"] * 2
    opened = h.send(SOLO, cmd.OpenTable(variant="atlantic-city"))
    assert opened.status == "accepted", opened.rejection
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    for _ in range(WINDOW + 2):
        h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=10**9))  # refused, remembered
    h.now = START + timedelta(days=1)
    copy = h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=500), "in-0", sent_at=START)
    assert code(copy) == code(first) and h.handled[-1].duplicate
    state = h.store.streams[SOLO].state
    assert isinstance(state, TableState) and state.players[PLAYER].balance == 0
    # read back: the read model and the audit fold a stream that starts with a refusal
    seal = h.processor.seal
    table = StreamProjection.new(SOLO)
    for envelope in h.events_of(SOLO):
        table.apply(to_wire(envelope, seal))
    assert table.view.opened and table.view.last_sequence == len(h.events_of(SOLO))
    replayed = replay_stream([to_wire(e, seal) for e in h.events_of(SOLO)], seal)
    assert [f.message for f in replayed.findings] == []


def test_a_wallet_made_by_a_refusal_reads_as_a_wallet_with_nothing_moved() -> None:
    h = Harness()
    h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=300), "out-0")
    h.send(WALLET, deposit(100), "pay-1")
    wires = [to_wire(e, h.processor.seal) for e in h.events_of(WALLET)]
    wallet = WalletProjection.new(WALLET)
    for wire in wires:
        wallet.apply(wire)
    assert (wallet.view.balance, wallet.view.withdrawn, wallet.view.last_sequence) == (100, 0, 2)
    replayed = replay_wallet(WALLET, wires)
    assert not replayed.findings and replayed.events == 2


def test_a_table_s_refused_deposit_replayed_after_the_window_is_not_credited() -> None:
    """A platform's ``Deposit`` for a player not seated yet, replayed once they sit down."""
    h = Harness()
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city"))
    first = h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=500), "in-1")
    assert code(first) == "not_seated"
    assert h.handled[-1].events[0].data.type == "MoneyCommandRefused"
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    for _ in range(WINDOW + 2):
        h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=10**9))  # refused, remembered
    copy = h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=500), "in-1")
    assert code(copy) == "not_seated" and h.handled[-1].duplicate
    state = h.store.streams[SOLO].state
    assert isinstance(state, TableState) and state.players[PLAYER].balance == 0


def test_only_the_deciders_money_refusals_are_written_down() -> None:
    """A player's refused buy-in is written down like the platform's refusals; an expired
    command and a sent_at ahead of the clock write nothing (they were never decided)."""
    h = Harness()
    h.send(WALLET, deposit(100), "pay-1")
    h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=10**6), "buy-1")
    h.send(WALLET, deposit(), "late", sent_at=START - RETENTION)
    h.send(WALLET, deposit(), "ahead", sent_at=START + timedelta(hours=1))
    [refused] = [e for h_ in h.handled[1:] for e in h_.events]
    assert refused.data.model_dump(include={"command", "reason_code"}) == {
        "command": "BuyIn",
        "reason_code": "insufficient_funds",
    }
    assert list(h.store.streams[WALLET].money) == ["pay-1", "buy-1"]


def test_a_refused_buy_in_replayed_after_the_window_and_a_deposit_is_not_taken() -> None:
    """A player's ``BuyIn`` of 300 refused ``insufficient_funds`` (the wallet held 100),
    replayed by the client after the window and after the wallet was paid 1,000: its first
    refusal again, nothing leaves the wallet. Before: decided again, and 300 sent to the
    table. An accepted buy-in's copy after the window is refused ``already_applied``, not
    sent a second time."""
    h = Harness()
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    h.send(WALLET, deposit(100), "pay-1", sent_at=START)
    buy = BuyIn(player_id=PLAYER, table_id=SOLO, amount=300)
    first = h.send(WALLET, buy, "buy-1", sent_at=START)
    assert code(first) == "insufficient_funds" and first.first_sequence == 2
    h.send(WALLET, deposit(1_000), "pay-2", sent_at=START)
    taken = h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=50), "buy-2")
    assert taken.status == "accepted"
    h.other_commands()
    h.now = START + timedelta(days=1)
    copy = h.send(WALLET, buy, "buy-1", sent_at=START)
    assert code(copy) == "insufficient_funds" and h.handled[-1].duplicate
    again = h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=50), "buy-2")
    assert code(again) == "already_applied" and h.handled[-1].events == []
    assert h.wallet().balance == 1_050 and len(h.wallet().pending) <= 1
    # a rebuild from the events and a snapshot keep both
    codec = SnapshotCodec(b"s" * 32)
    live = h.store.streams[WALLET]
    for opened in (rebuilt_from(h.events_of(WALLET)), codec.decode(codec.encode(live))):
        assert opened.money_refused.get("buy-1") == "insufficient_funds"
        assert "buy-2" in opened.money and "buy-2" not in opened.money_refused


def test_a_buy_in_is_not_held_to_the_platform_s_sent_at_contract() -> None:
    """A player's device may run ahead: a buy-in whose sent_at is an hour ahead is taken
    (kept from its arrival), where a platform money command is ``malformed``; required
    sent_at does not apply to it. One sent longer ago than the retention is still expired."""
    h = Harness()
    h.processor.money_sent_at_required = True
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    h.send(WALLET, deposit(1_000), "pay-1", sent_at=START)
    ahead = START + timedelta(hours=1)
    buy = BuyIn(player_id=PLAYER, table_id=SOLO, amount=10)
    assert h.send(WALLET, buy, "buy-ahead", sent_at=ahead).status == "accepted"
    assert h.send(WALLET, buy, "buy-bare").status == "accepted"
    assert code(h.send(WALLET, deposit(), "pay-ahead", sent_at=ahead)) == "malformed"
    late = h.send(WALLET, buy, "buy-late", sent_at=START - RETENTION)
    assert code(late) == "transfer_expired"
    assert h.wallet().balance == 980


# ---- the bound on kept ids ---------------------------------------------------------------


def test_a_stream_keeping_its_limit_of_ids_refuses_new_money_commands_typed() -> None:
    h = Harness()
    h.processor.money_ids_max = 3
    h.processor.dedup_window = 1  # (only the last deposit's answer in the window)
    for n in range(3):
        h.send(WALLET, deposit(), f"pay-{n}", sent_at=START)
    sequence = h.store.streams[WALLET].sequence
    full = h.send(WALLET, deposit(), "pay-3", sent_at=START)
    assert code(full) == "money_ids_full" and full.rejection is not None
    assert "send it again (same id)" in full.rejection.message
    assert h.store.streams[WALLET].sequence == sequence  # nothing written
    assert "pay-3" not in h.store.streams[WALLET].results  # not remembered
    # a refusal needs room too: refused so, not written down
    short = h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=10**9))
    assert code(short) == "money_ids_full" and h.store.streams[WALLET].sequence == sequence
    # a copy of a kept id is still told as one (its answer out of the window)
    assert "pay-0" not in h.store.streams[WALLET].results
    assert code(h.send(WALLET, deposit(), "pay-0", sent_at=START)) == "already_applied"
    # once the oldest are let go, the same command is decided
    h.now = START + platform_money.kept_for(RETENTION) + timedelta(seconds=1)
    retried = h.send(WALLET, deposit(), "pay-3", sent_at=h.now)
    assert retried.status == "accepted" and h.wallet().balance == 400


def test_a_player_s_buy_ins_cannot_fill_the_ids_the_platform_s_money_needs() -> None:
    """A player's refused ``BuyIn``s are kept by id for 7 days: sent in a loop, they would fill
    the stream's ``BLACKJACK_MONEY_IDS_MAX`` and every ``WalletDeposit`` of the cashier would
    be refused ``money_ids_full`` (a denial of service by a player). They may take half the
    limit at most: the platform's own always have the other half."""
    h = Harness()
    h.processor.money_ids_max = 4
    answers = [
        h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=10**6), f"buy-{n}")
        for n in range(6)
    ]
    assert [code(a) for a in answers] == ["insufficient_funds"] * 2 + ["money_ids_full"] * 4
    sequence = h.store.streams[WALLET].sequence
    for n in range(2):
        assert h.send(WALLET, deposit(), f"pay-{n}", sent_at=START).status == "accepted"
    assert h.wallet().balance == 200 and h.store.streams[WALLET].sequence == sequence + 2
    # the buy-ins' share full, the platform's too: both refused, typed, nothing written
    assert code(h.send(WALLET, deposit(), "pay-2", sent_at=START)) == "money_ids_full"
    buy = h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=10), "buy-9")
    assert code(buy) == "money_ids_full"


# ---- sent_at required (BLACKJACK_MONEY_SENT_AT=required) --------------------------------


def test_sent_at_required_refuses_a_new_command_without_it_but_answers_copies() -> None:
    h = Harness()
    h.send(WALLET, deposit(), "pay-1")  # taken while sent_at was optional
    h.other_commands()
    h.processor.money_sent_at_required = True
    no_sent_at = h.send(WALLET, deposit(), "pay-2")
    assert code(no_sent_at) == "malformed" and "pay-2" not in h.store.streams[WALLET].results
    assert code(h.send(WALLET, deposit(), "pay-1")) == "already_applied"  # a copy, as before
    assert h.send(WALLET, deposit(), "pay-2", sent_at=START).status == "accepted"
    assert h.wallet().balance == 200


def test_a_snapshot_from_before_refusals_were_kept_is_completed_from_the_events() -> None:
    h = Harness()
    h.send(WALLET, deposit(), "pay-1", sent_at=START)
    codec = SnapshotCodec(b"s" * 32)
    record, body = sealed_body(codec.encode(h.store.streams[WALLET]))
    del body["money_refused"]
    opened = codec.decode(resealed(record, body))
    assert opened.money_incomplete and not opened.money


def test_a_stream_at_the_bound_with_the_longest_ids_snapshots_under_half_the_limit() -> None:
    """The bound is what keeps a snapshot under the topic's limit whatever the ids: at the
    default bound, 128-character random ids, all refused (the code and terms kept too), seal to less
    than half the 4 MiB (where the alert fires; docs/kafka.md measures it with a full window:
    ``measure_money_ids_bound``). A snapshot over the limit fails the partition's checkpoint."""
    rng = random.Random(7)
    stream = Stream(WALLET, initial_state(WALLET))
    for n in range(platform_money.DEFAULT_IDS_MAX):
        command_id = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(128))
        at = START + timedelta(seconds=n)
        platform_money.remember(
            stream.money,
            command_id,
            at,
            RETENTION,
            stream.money_refused,
            "insufficient_funds",
            terms=stream.money_terms,
            term=platform_money.money_terms("WalletWithdraw", PLAYER, 10**9 + n),
        )
    sealed = SnapshotCodec(b"s" * 32).encode(stream)
    assert len(stream.money) == platform_money.DEFAULT_IDS_MAX
    assert len(sealed) < SNAPSHOT_MAX_BYTES // 2, len(sealed)


def test_the_read_model_and_the_audit_fold_the_refusal_records_as_no_money_moved() -> None:
    h = Harness()
    h.send(WALLET, deposit(100), "pay-1")
    h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=300), "out-1")
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city"))
    h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=5), "out-2")
    seal = h.processor.seal
    wallet = WalletProjection.new(WALLET)
    wallet_wires = [to_wire(e, seal) for e in h.events_of(WALLET)]
    for wire in wallet_wires:
        wallet.apply(wire)
    assert (wallet.view.balance, wallet.view.withdrawn, wallet.view.last_sequence) == (100, 0, 2)
    replayed = replay_wallet(WALLET, wallet_wires)
    assert not replayed.findings and replayed.events == 2
    table = StreamProjection.new(SOLO)
    for envelope in h.events_of(SOLO):
        table.apply(to_wire(envelope, seal))
    assert PLAYER not in table.accounts and table.view.last_sequence == 3
