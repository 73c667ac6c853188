"""A buy-in sent to a table that does not exist (a wallet's ``BuyIn`` naming an id no one
opened): the table declines its signed ``Deposit`` and the money goes back to the wallet,
once. Each such deposit made a stream of its own, kept for good (its ``TransferDeclined``,
its snapshot, its window), so that a copy of it is never taken later, even by a table opened
later under that id. Now no stream is made for the id: the decline is an event of the
partition's stream of such declines (``ids.declines_stream``), a table never opened that
keeps one number per wallet, and the guarantee holds, live and after a rebuild from the
whole log (``python -m tests.integration.measure_stray_commands --kind deposit``)."""

from __future__ import annotations

from blackjack.command_handler.processor import Handled
from blackjack.command_handler.records import Outgoing
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.state import TableState
from blackjack.domain.wallet import BuyIn, WalletDeposit, WalletState, wallet_stream
from blackjack.messages.envelope import CommandEnvelope
from tests.unit.processor_harness import TOPICS
from tests.unit.test_handler_windows import T0, Handler

PLAYER = "ann"
WALLET = wallet_stream(PLAYER)
DECLINES = "#declined/0"  # ``ids.declines_stream(0, 1)``: the one partition's


def steps(handled: Handled) -> list[Outgoing]:
    return [r for r in handled.outgoing if r.topic == TOPICS.commands]


def step_type(record: Outgoing) -> str:
    return str(CommandEnvelope.model_validate_json(record.value).command.type)


def forward(handler: Handler, record: Outgoing) -> Handled:
    return handler.forward(record.key, record.value, T0, record.headers)


def wallet(handler: Handler) -> WalletState:
    state = handler.store.get(WALLET).state
    assert isinstance(state, WalletState)
    return state


def table(handler: Handler, stream_id: str) -> TableState:
    state = handler.store.get(stream_id).state
    assert isinstance(state, TableState)
    return state


def buy_in(handler: Handler, table_id: str, number: int) -> Outgoing:
    """The wallet's buy-in of 100 to ``table_id``: its signed Deposit."""
    sent = handler.send(
        WALLET, BuyIn(player_id=PLAYER, table_id=table_id, amount=100), f"b{number}", T0
    )
    assert sent.result.status == "accepted", sent.result
    [deposit] = steps(sent)
    return deposit


def assert_copy_refused(handled: Handled) -> None:
    """Refused as a copy: nothing written, no confirmation nor refund."""
    rejection = handled.result.rejection
    assert rejection is not None and rejection.code == "transfer_already_handled", rejection
    assert handled.events == [] and steps(handled) == [] and handled.duplicate


def junk_buy_ins(handler: Handler, count: int) -> list[Outgoing]:
    """``count`` buy-ins to tables no one opened, each declined and refunded: their Deposits."""
    handler.send(WALLET, WalletDeposit(player_id=PLAYER, amount=10_000), "w", T0)
    deposits = []
    for number in range(count):
        deposit = buy_in(handler, f"nowhere-{number}", number)
        answer = forward(handler, deposit)
        result = answer.result
        assert result.status == "rejected" and result.rejection is not None
        assert result.rejection.code == "table_not_open" and result.first_sequence is None
        assert [e.stream_id for e in answer.events] == [DECLINES]
        assert isinstance(answer.events[0].data, ev.TransferDeclined)
        [refund] = steps(answer)
        assert step_type(refund) == "RefundBuyIn"
        assert forward(handler, refund).result.status == "accepted"
        deposits.append(deposit)
    assert wallet(handler).balance == 10_000 and wallet(handler).pending == ()
    return deposits


async def test_buy_ins_to_tables_that_do_not_exist_make_no_stream_and_are_never_taken() -> None:
    handler = Handler(window=4)
    deposits = junk_buy_ins(handler, 10)
    live = handler.store
    # the wallet and the partition's declines: not ten streams more
    assert live.count() == 2 and not any(live.holds(f"nowhere-{n}") for n in range(10))
    assert table(handler, DECLINES).buy_ins == {WALLET: 10}
    assert list(live.get(DECLINES).results) == []  # its answers are the partition's strays
    # Inside the window a copy gets the original answer; after it, refused as a copy.
    again = forward(handler, deposits[9])
    assert again.duplicate and again.result.rejection is not None
    assert again.result.rejection.code == "table_not_open" and steps(again) == []
    assert_copy_refused(forward(handler, deposits[0]))
    # The id opened as a table since, the player seated: a copy is still never taken.
    for command in (cmd.OpenTable(variant="atlantic-city-multi"), cmd.SitDown(player_id=PLAYER)):
        assert (
            handler.send("nowhere-0", command, f"t-{command.type}", T0).result.status == "accepted"
        )
    assert_copy_refused(forward(handler, deposits[0]))
    assert_copy_refused(forward(handler, deposits[5]))  # another id's, out of the window
    assert table(handler, "nowhere-0").players[PLAYER].balance == 0
    # A new buy-in there is taken, and confirmed.
    taken = forward(handler, buy_in(handler, "nowhere-0", 10))
    assert taken.result.status == "accepted" and [step_type(s) for s in steps(taken)] == [
        "ConfirmBuyIn"
    ]
    [confirm] = steps(taken)
    assert forward(handler, confirm).result.status == "accepted"
    assert table(handler, "nowhere-0").players[PLAYER].balance == 100
    assert wallet(handler).balance == 9_900
    windows = {s.stream_id: list(s.results) for s in handler.store.all_streams()}
    strays = handler.store.strays.stored()
    # A rebuild from the whole log (no checkpoint: the strays' record is not read) refuses
    # the copies the same way, with the same windows.
    await handler.take_over()
    rebuilt = handler.store
    assert {s.stream_id: list(s.results) for s in rebuilt.all_streams()} == windows
    assert rebuilt.strays.stored() == strays and rebuilt.count() == 3
    assert table(handler, DECLINES).buy_ins == {WALLET: 10}
    for deposit in (deposits[0], deposits[1], deposits[5]):
        assert_copy_refused(forward(handler, deposit))
    assert table(handler, "nowhere-0").players[PLAYER].balance == 100
    assert wallet(handler).balance == 9_900 and wallet(handler).pending == ()


async def test_a_copy_within_the_window_after_a_rebuild_gets_the_original_answer() -> None:
    handler = Handler(window=4)
    [deposit] = junk_buy_ins(handler, 1)
    first = forward(handler, deposit)
    await handler.take_over()
    again = forward(handler, deposit)
    assert again.duplicate and again.result == first.result and steps(again) == []
    assert handler.store.count() == 2 and not handler.store.holds("nowhere-0")
