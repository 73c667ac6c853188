"""A kept platform money id is the command's, not any command's: after its answer has left the
idempotency window, a copy is refused ``already_applied`` (or its first refusal again), and
another command sent under the id (another kind, player or amount) is refused ``malformed``,
as the window refuses one whose fields differ. Before, a platform that reused an id for a
withdrawal of 60 was told ``already_applied`` where 50 had left the stream, and booked 60."""

from __future__ import annotations

from datetime import timedelta

from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.domain import commands as cmd
from blackjack.domain import platform_money
from blackjack.domain.state import TableState
from blackjack.domain.wallet import BuyIn, WalletDeposit, WalletWithdraw
from tests.unit.test_handler_signed_replay import resealed, sealed_body
from tests.unit.test_platform_money import (
    PLAYER,
    RETENTION,
    SOLO,
    START,
    WALLET,
    Harness,
    code,
    deposit,
    paid_in_and_out_past_the_window,
    rebuilt_from,
)


def test_the_check_tells_another_command_from_a_copy_by_its_terms() -> None:
    wallet = h_wallet()
    first = WalletWithdraw(player_id=PLAYER, amount=50)
    terms = {"out-1": platform_money.command_terms(first, wallet)}
    kept = platform_money.Kept({"out-1": START}, {}, RETENTION, terms=terms)  # type: ignore[arg-type]

    def check(command: object) -> str | None:
        another = platform_money.terms_differ(command, "out-1", wallet, kept)
        refusal = platform_money.check(kept, "out-1", None, START, START, another=bool(another))
        return None if refusal is None else refusal.code

    assert check(first) == "already_applied"
    assert check(WalletWithdraw(player_id=PLAYER, amount=60)) == "malformed"
    assert check(WalletDeposit(player_id=PLAYER, amount=50)) == "malformed"
    assert check(WalletWithdraw(player_id="gus", amount=50)) == "malformed"
    unknown = platform_money.Kept({"out-1": START}, {}, RETENTION)  # no terms kept
    assert platform_money.terms_differ(first, "out-1", wallet, unknown) is None


def h_wallet() -> object:
    h = Harness()
    h.send(WALLET, deposit(1))
    return h.wallet()


def test_another_withdrawal_under_a_kept_id_is_refused_and_changes_nothing() -> None:
    h = Harness()
    h.send(WALLET, deposit(1_000), "pay-1")
    assert h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=50), "out-1").status == (
        "accepted"
    )
    h.other_commands()
    assert "out-1" not in h.store.streams[WALLET].results
    sequence = h.store.streams[WALLET].sequence
    other = h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=60), "out-1")
    assert code(other) == "malformed" and not h.handled[-1].duplicate
    assert other.rejection is not None and "another command" in other.rejection.message
    assert h.handled[-1].events == [] and h.store.streams[WALLET].sequence == sequence
    assert h.wallet().balance == 950
    # not remembered: the id stays the first command's, whose copy is still told as one
    assert "out-1" not in h.store.streams[WALLET].results
    copy = h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=50), "out-1")
    assert code(copy) == "already_applied" and h.handled[-1].duplicate
    assert h.wallet().balance == 950


def test_another_command_under_a_refused_id_is_refused_not_given_the_refusal() -> None:
    h = Harness()
    h.send(WALLET, deposit(100), "pay-1")
    refused = h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=300), "out-1")
    assert code(refused) == "insufficient_funds"
    h.other_commands()
    other = h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=30), "out-1")
    assert code(other) == "malformed" and h.wallet().balance == 100
    copy = h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=300), "out-1")
    assert code(copy) == "insufficient_funds" and h.handled[-1].duplicate


def test_at_a_table_another_player_or_amount_under_a_kept_id_is_refused() -> None:
    h = paid_in_and_out_past_the_window()
    others = [
        h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=501), "in-1"),
        h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=199), "out-1"),
        h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=200), "out-1"),  # another kind
    ]
    assert [code(o) for o in others] == ["malformed"] * 3
    copies = [
        h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=500), "in-1"),
        h.send(SOLO, cmd.Withdraw(player_id=PLAYER, amount=200), "out-1"),
    ]
    assert [code(c) for c in copies] == ["already_applied"] * 2
    state = h.store.streams[SOLO].state
    assert isinstance(state, TableState) and state.players[PLAYER].balance == 300


def test_every_kind_s_terms_are_read_alike_from_the_command_and_from_its_event() -> None:
    """What the live handler keeps (from the event it writes) is what a copy is compared
    with (from the command): for every platform money command, accepted or refused."""
    h = Harness()
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    h.send("solo-2", cmd.OpenTable(variant="atlantic-city"))
    h.send("solo-2", cmd.SitDown(player_id=PLAYER))
    sent: dict[str, list[tuple[str, object]]] = {
        WALLET: [
            ("w-in", WalletDeposit(player_id=PLAYER, amount=1_000, currency="USD")),
            ("w-out", WalletWithdraw(player_id=PLAYER, amount=100)),
            ("w-out-no", WalletWithdraw(player_id=PLAYER, amount=10**9)),
            ("buy", BuyIn(player_id=PLAYER, table_id=SOLO, amount=300)),
            ("buy-no", BuyIn(player_id=PLAYER, table_id=SOLO, amount=10**9)),
            ("w-in-no", WalletDeposit(player_id=PLAYER, amount=1, currency="EUR")),
        ],
        "solo-2": [
            ("t-in", cmd.Deposit(player_id=PLAYER, amount=500)),
            ("t-out", cmd.Withdraw(player_id=PLAYER, amount=200)),
            ("t-out-no", cmd.Withdraw(player_id=PLAYER, amount=10**9)),
            ("t-in-no", cmd.Deposit(player_id="gus", amount=5)),
        ],
    }
    for stream_id, commands in sent.items():
        for command_id, command in commands:
            h.send(stream_id, command, command_id)
        live = h.store.streams[stream_id]
        state = live.state
        expected = {
            i: platform_money.command_terms(c, state, refused=i in live.money_refused)
            for i, c in commands
        }
        assert live.money_terms == expected
        assert set(live.money_refused) == {i for i, _ in commands if i.endswith("-no")}
        codec = SnapshotCodec(b"s" * 32)
        for opened in (rebuilt_from(h.events_of(stream_id)), codec.decode(codec.encode(live))):
            assert opened.money_terms == live.money_terms


def test_terms_are_let_go_with_their_ids() -> None:
    h = Harness()
    h.send(WALLET, deposit(), "pay-1")
    h.now = START + platform_money.kept_for(RETENTION) + timedelta(seconds=1)
    h.send(WALLET, deposit(), "pay-2")
    live = h.store.streams[WALLET]
    assert list(live.money) == list(live.money_terms) == ["pay-2"]


def test_a_snapshot_from_before_the_terms_is_completed_from_the_events() -> None:
    """A snapshot of the release before keeps its ids without their terms: they are read from
    the events, as the ids were when they were first kept (told by the id alone until then,
    the incident came back for the retention after an upgrade, or a rollback, a review
    found). One whose terms do not follow its ids likewise."""
    h = Harness()
    h.send(WALLET, deposit(1_000), "pay-1")
    h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=50), "out-1")
    h.other_commands()
    codec = SnapshotCodec(b"s" * 32)
    live = h.store.streams[WALLET]
    record, body = sealed_body(codec.encode(live))
    for terms in (None, body["money_terms"][:-1]):
        if terms is None:
            del body["money_terms"]
        else:
            body["money_terms"] = terms
        opened = codec.decode(resealed(record, body))
        assert opened.money_incomplete and not opened.money and not opened.money_terms
        for envelope in h.events_of(WALLET):  # what the rebuild reads before the checkpoint
            opened.note_money(envelope, RETENTION)
        assert opened.money == live.money and opened.money_terms == live.money_terms


def test_a_deposit_in_another_currency_or_a_buy_in_to_another_table_is_another_command() -> None:
    """The terms of an accepted deposit name its currency, of a buy-in its table: a EUR deposit
    under the id of a USD one, or a buy-in to another table, was told ``already_applied``
    after the window (a ledger review), and booked as a credit that never happened."""
    h = Harness()
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    h.send("solo-2", cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(WALLET, WalletDeposit(player_id=PLAYER, amount=1_000), "pay-1")
    h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=300), "buy-1")
    h.other_commands()
    assert not {"pay-1", "buy-1"} & set(h.store.streams[WALLET].results)
    other_currency = WalletDeposit(player_id=PLAYER, amount=1_000, currency="EUR")
    other_table = BuyIn(player_id=PLAYER, table_id="solo-2", amount=300)
    assert code(h.send(WALLET, other_currency, "pay-1")) == "malformed"
    assert code(h.send(WALLET, other_table, "buy-1")) == "malformed"
    # the first commands' copies, the USD one naming its currency or not, are still copies
    copies = [
        h.send(WALLET, WalletDeposit(player_id=PLAYER, amount=1_000, currency="USD"), "pay-1"),
        h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=300), "buy-1"),
    ]
    assert [code(c) for c in copies] == ["already_applied"] * 2
    assert h.wallet().balance == 700


def test_in_the_window_a_money_copy_is_told_by_its_terms_as_after_it() -> None:
    """A table deposit naming the table's currency and one naming none are the same command:
    within the window they were refused ``malformed`` to each other (their digests differ),
    after it answered as copies; and the answer a late copy was given, kept in the window
    under the copy's digest, refused the first command's own copies after it."""
    h = Harness()
    h.send(SOLO, cmd.OpenTable(variant="atlantic-city"))
    h.send(SOLO, cmd.SitDown(player_id=PLAYER))
    first = h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=500), "in-1")
    named = cmd.Deposit(player_id=PLAYER, amount=500, currency="USD")
    assert h.send(SOLO, named, "in-1") == first  # in the window: the same command
    assert code(h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=501), "in-1")) == "malformed"
    h.other_table_commands()
    late = h.send(SOLO, named, "in-1")  # after the window: a copy, kept under its digest
    assert code(late) == "already_applied"
    again = h.send(SOLO, cmd.Deposit(player_id=PLAYER, amount=500), "in-1")
    assert again == late  # the first form's copy: the same answer, not malformed
    state = h.store.streams[SOLO].state
    assert isinstance(state, TableState) and state.players[PLAYER].balance == 500


def test_in_the_window_another_buy_in_under_a_refused_id_is_refused_by_its_digest() -> None:
    """A refused id's terms name no table (its refusal records none): in the window the
    answer's digest still refuses a buy-in to another table under it (a diff review: it was
    answered with the first refusal, counted a copy); after the window it gets that refusal
    (no money moves either way)."""
    h = Harness()
    h.send(WALLET, deposit(100), "pay-1")
    refused = h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=300), "buy-1")
    assert code(refused) == "insufficient_funds"
    other = h.send(WALLET, BuyIn(player_id=PLAYER, table_id="solo-2", amount=300), "buy-1")
    assert code(other) == "malformed" and not h.handled[-1].duplicate
    copy = h.send(WALLET, BuyIn(player_id=PLAYER, table_id=SOLO, amount=300), "buy-1")
    assert copy == refused and h.handled[-1].duplicate
    assert h.wallet().balance == 100
