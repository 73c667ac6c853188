"""``blackjack play`` against the real handler on the real broker: a session plays rounds by
what its screen offers, its view is the one a newcomer to the table folds from the topic, the
money adds up; the command line plays a stacked round from standard input."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from rich.console import Console

from blackjack.bus.topics import partition_for
from blackjack.client import BlackjackClient
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from blackjack.domain.wallet import BuyIn, WalletDeposit
from blackjack.messages.wire import encode
from blackjack.play.follow import TableFollower, WalletFollower
from blackjack.play.help import HELP
from blackjack.play.session import PlaySession
from blackjack.projections.projector import StreamProjection
from tests.integration.cli_runs import lines_until
from tests.integration.conftest import (
    WAIT_S,
    KafkaSpace,
    QueuedShuffler,
    accept,
    command_log,
    running_handler,
)
from tests.integration.header_bytes import JUNK, send_one_batch, write_raw_header_names

pytestmark = pytest.mark.integration

BLACKJACK = Path(sys.executable).parent / "blackjack"
A = "alice"


async def play(
    space: KafkaSpace, *args: str, env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    """``blackjack play ARGS`` on the space's topics, its standard input a pipe held open."""
    return await asyncio.create_subprocess_exec(
        str(BLACKJACK),
        "play",
        *args,
        env={**os.environ, **space.env(), "COLUMNS": "100", **(env or {})},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


def bob_s_money(watching: TableFollower) -> int:
    account = watching.table.accounts.get("bob")
    return 0 if account is None else account.available


def follower(space: KafkaSpace, table: str) -> TableFollower:
    return TableFollower(space.bootstrap, table, space.topics)


def next_line(table: StreamProjection, player_id: str) -> str:
    """A simple player: bet 5, deal, no insurance, hit below 12, stand."""
    view = table.view
    record = table.rounds.get(view.round)
    if view.round_open and view.phase == "insurance":
        return "n"
    turn = view.active
    if view.round_open and view.phase == "playing" and turn is not None:
        assert record is not None and turn.player_id == player_id
        return "h" if record.hand(turn.box, turn.hand).total < 12 else "s"
    if view.round_open and record is not None and record.status == "betting" and record.boxes:
        return "deal"
    return "bet 5"


async def test_a_session_plays_rounds_and_sees_what_a_newcomer_to_the_table_folds(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient
) -> None:
    table = "play-session-1"
    async with follower(space, table) as following:
        await following.caught_up()
        session = PlaySession(client, following, A)
        for command in (
            cmd.OpenTable(variant="mini-h17"),
            cmd.SitDown(player_id=A),
            cmd.Deposit(player_id=A, amount=10_000),
        ):
            assert (await session.send(command)).status == "accepted"
        settled = 0
        for _ in range(200):
            before = following.table.view.round_open
            await session.handle(next_line(following.table, A))
            assert session.results[-1].status == "accepted", session.results[-1].rejection
            if before and not following.table.view.round_open:
                settled += 1
            if settled == 5:
                break
        assert settled == 5
        seen = following.table
        [sheet] = await session.handle("rules")  # the table's own rules, and their return
        console = Console(width=300, record=True, color_system=None)
        console.print(sheet)
        text = console.export_text()
        assert "mini-h17: the rules" in text and "hits a soft 17" in text
        assert "for a round dealt from a full shoe: 99.39 %" in text
        assert "blackjack rtp mini-h17 --as-dealt computes it" in text
    async with follower(space, table) as newcomer:
        await newcomer.caught_up()
        assert newcomer.table.view == seen.view
        assert newcomer.table.accounts == seen.accounts
    account = seen.accounts[A]
    assert account.rounds == 5 and account.in_play == 0
    assert account.deposited == 10_000
    assert account.available == 10_000 + account.won - account.lost


async def test_the_command_line_plays_a_round_from_standard_input(
    space: KafkaSpace, handler: CommandHandler, shuffler: QueuedShuffler
) -> None:
    shuffler.queue(["TH", "7S", "9H", "QD"])  # 19 against the dealer's 17
    opening = ["--open", "atlantic-city", "--deposit", "50"]
    process = await play(space, "play-cli-1", "--player", A, *opening, env={"COLUMNS": "80"})
    typed = b"bet 5\ndeal\nfold\nhit me\ns\nwithdraw 1000\nwithdraw 10.50\n?\nq\n"
    output, _ = await asyncio.wait_for(process.communicate(typed), WAIT_S)
    text = output.decode()
    assert process.returncode == 0, text[-3000:]
    # the moves at the start and on ``?``, each line as it is at 80 columns (not wrapped
    # at column 0 mid-table), "[box N]" shown (it was read as markup and dropped)
    for line in HELP.splitlines():
        assert text.count(line + "\n") == 2, (line, text[:3000])
    for line in (
        "OpenTable: accepted",
        "SitDown: accepted",
        "Deposit: accepted",
        "PlaceBet: accepted",
        "Deal: accepted",
        "'fold' is not a move",
        "hit takes nothing after it",
        "Stand: accepted",
        "10♥ 9♥  19  win pays 5.00 (10.00 back)",
        "Dealer  7♠ Q♦  17",
        "Withdraw refused (",
        "Withdraw: accepted",
        "balance 44.50 USD",
    ):
        assert line in text, (line, text[-3000:])
    assert "Traceback" not in text


async def test_a_player_at_a_shared_table_buys_in_and_sees_the_others_move_without_typing(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient
) -> None:
    table = "play-shared-1"
    opening = ["--open", "atlantic-city-multi", "--deposit", "50"]
    process = await play(space, table, "--player", A, *opening)
    assert process.stdin is not None and process.stdout is not None
    try:
        seen = await lines_until(process.stdout, "? help, q quit")  # drawn, then the help
        for line in ("OpenTable: accepted", "WalletDeposit: accepted", "BuyIn: accepted"):
            assert any(line in shown for shown in seen), (line, "".join(seen))
        assert any("balance 50.00 USD" in shown for shown in seen), "".join(seen)
        await accept(client, table, cmd.SitDown(player_id="bob", seat=1))
        async with follower(space, table) as watching:  # bob's money reaches the table
            await accept(
                client,
                "wallet:bob",
                WalletDeposit(player_id="bob", amount=10_000),
                BuyIn(player_id="bob", table_id=table, amount=5_000),
            )
            await watching.wait_until(lambda: bob_s_money(watching) > 0, WAIT_S)
        await accept(client, table, cmd.PlaceBet(player_id="bob", box=1, amount=500))
        seen = await lines_until(process.stdout, "bet 5.00 (bob)")  # nothing typed
        assert any("round 1 · betting" in line for line in seen), "".join(seen)
        await accept(client, "wallet:alice", WalletDeposit(player_id=A, amount=1_000))
        await lines_until(process.stdout, "Wallet  10.00 USD")  # the cashier's deposit, drawn
        process.stdin.write(b"buyin 10\n")  # credited by the table after the wallet's answer
        await lines_until(process.stdout, "balance 60.00 USD")
        await lines_until(process.stdout, "Wallet  0.00 USD")
        process.stdin.close()  # end of input: the session ends
        assert await asyncio.wait_for(process.wait(), WAIT_S) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_ctrl_c_ends_a_session_waiting_for_a_line(
    space: KafkaSpace, handler: CommandHandler
) -> None:
    """It waited for one more Enter: the line was read by one of asyncio's worker threads,
    which the interpreter joins at exit."""
    # Ctrl-C at a terminal: the process starts with SIGINT's default action, whoever runs
    # the tests. A suite started in the background by a non-interactive shell (``cmd &``,
    # as a script or a CI step may) ignores SIGINT, and a child inherits that: Python then
    # leaves SIGINT ignored, the process never ended, and the test failed every time.
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:  # a handler of Python's is reset to the default action in the child
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = await play(space, "play-ctrl-c", "--player", A, "--open", "mini-h17")
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    assert process.stdout is not None
    try:
        await lines_until(process.stdout, "? help, q quit")
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 10) == 130
        rest = (await process.stdout.read()).decode()
        assert "Traceback" not in rest and "Unclosed" not in rest, rest[-3000:]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_the_follower_passes_an_event_the_log_holds_twice(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient
) -> None:
    """The read model skips the same event again at a later offset (and counts it, alert
    ``BlackjackProjectionDuplicateEvents``); the follower, folding with the same fold, failed
    on it ("event 1 follows 3"), and every later ``blackjack play`` at that table with it."""
    table = "play-duplicate-1"
    results = await accept(
        client, table, cmd.OpenTable(variant="mini-h17"), cmd.SitDown(player_id=A)
    )
    events = [e for result in results for e in await client.events(result)]
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    producer = AIOKafkaProducer(bootstrap_servers=space.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            space.topics.events,
            encode(events[0]),
            key=table.encode(),
            partition=partition_for(table, space.partitions),
        )
    finally:
        await producer.stop()
    await accept(client, table, cmd.Deposit(player_id=A, amount=1_000))
    async with follower(space, table) as newcomer:
        await newcomer.caught_up()
        assert newcomer.failure is None
        assert newcomer.table.accounts[A].available == 1_000
        assert newcomer.sequence == len(events) + 1


async def test_a_buy_in_the_table_declines_is_shown_declined_not_accepted(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient
) -> None:
    """The wallet accepts a buy-in before the table takes or declines it: the session showed
    "BuyIn: accepted" for a buy-in the table declined (the player not seated), the money on
    its way back to the wallet."""
    table = "play-buyin-declined-1"
    await accept(client, table, cmd.OpenTable(variant="atlantic-city-multi"))
    await accept(client, "wallet:carl", WalletDeposit(player_id="carl", amount=5_000))
    async with follower(space, table) as following:
        await following.caught_up()
        session = PlaySession(client, following, "carl")
        said = "".join(text_of(line) for line in await session.handle("buyin 10"))
        assert "BuyIn declined by the table (not_seated)" in said, said
        assert "10.00 goes back to your wallet" in said and "accepted" not in said, said
        await session.handle("sit 2")
        said = "".join(text_of(line) for line in await session.handle("buyin 10"))
        assert "BuyIn: accepted, 10.00 USD credited at the table" in said, said
        assert session.available() == 1_000


async def test_a_buy_in_to_a_table_that_does_not_exist_is_shown_declined(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient
) -> None:
    """A buy-in to an id no table was opened under is declined in the partition's stream of
    such declines (``ids.declines_stream``), never in the table's log, which the session
    waited on: it said "sent by your wallet; the table has not credited it yet" after its
    timeout, about money already on its way back to the wallet."""
    table = "play-buyin-nowhere-1"
    await accept(client, "wallet:cleo", WalletDeposit(player_id="cleo", amount=5_000))
    async with follower(space, table) as following:
        await following.caught_up()
        session = PlaySession(client, following, "cleo", timeout=WAIT_S)
        said = "".join(text_of(line) for line in await session.handle("buyin 10"))
        assert "BuyIn declined" in said and "(table_not_open)" in said, said
        assert "10.00 goes back to your wallet" in said and "credited" not in said, said


def text_of(renderable: object) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


async def test_leaving_a_shared_table_shows_the_wallet_after_the_cash_out_lands(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient
) -> None:
    """At a table funded by the wallets, the money a ``leave`` pays out reaches the wallet in
    a second step (the table's ``SeatLeft``, then the wallet's ``CashOutReceived``): the
    session drew the screen once the table's events were in, the wallet as it was before,
    and a player quitting then saw the table's money gone and the wallet no richer."""
    table = "play-leave-cash-out-1"
    await accept(client, table, cmd.OpenTable(variant="atlantic-city-multi"))
    await accept(client, "wallet:dora", WalletDeposit(player_id="dora", amount=5_000))
    wallet = WalletFollower(space.bootstrap, "dora", space.topics)
    async with follower(space, table) as following, wallet:
        await following.caught_up()
        await wallet.caught_up()
        session = PlaySession(client, following, "dora", wallet=wallet)
        await session.handle("sit 2")
        await session.handle("buyin 20")
        assert session.available() == 2_000
        await wallet.wait_until(lambda: not wallet.wallet.view.pending, WAIT_S)
        assert wallet.wallet.view.balance == 3_000
        said = "".join(text_of(line) for line in await session.handle("withdraw 5"))
        assert wallet.wallet.view.balance == 3_500, said  # a withdraw pays out the same way
        assert "Wallet  35.00 USD" in said and "on its way" not in said, said
        said = "".join(text_of(line) for line in await session.handle("leave"))
        assert wallet.wallet.view.balance == 5_000, said  # landed before the screen is drawn
        assert "Wallet  50.00 USD" in said, said
        said = "".join(text_of(line) for line in await session.handle("q"))
        assert "on its way" not in said, said


async def test_a_table_never_opened_is_said_so_and_the_session_ends_non_zero(
    space: KafkaSpace, handler: CommandHandler
) -> None:
    """The newcomer review: ``blackjack play`` without ``--open`` on a table nobody opened
    sent a SitDown, showed its refusal and an empty table, and exited 0 on ``q``."""
    process = await play(space, "never-opened-1", "--player", A, "--deposit", "10")
    output, _ = await asyncio.wait_for(process.communicate(b"bet 5\nq\n"), WAIT_S)
    text = output.decode()
    assert process.returncode == 2, text[-3000:]
    assert "blackjack play: table never-opened-1 has never been opened" in text, text[-3000:]
    assert "--open VARIANT" in text and "mini-h17" in text
    assert "Traceback" not in text
    assert await command_log(space, "never-opened-1") == []  # nothing sent: nothing changed


async def test_open_naming_another_variant_than_the_table_s_sends_nothing(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient
) -> None:
    """``--open surrender --deposit 10`` at a table open as mini-h17 sat the player down and
    paid 10.00 into a table of rules they had not asked for, without a word."""
    await accept(client, "open-other-1", cmd.OpenTable(variant="mini-h17"))
    process = await play(
        space, "open-other-1", "--player", A, "--open", "surrender", "--deposit", "10"
    )
    output, _ = await asyncio.wait_for(process.communicate(b"q\n"), WAIT_S)
    text = output.decode()
    assert process.returncode == 2, text[-3000:]
    assert (
        "blackjack play: table open-other-1 is open as mini-h17, not surrender (--open); "
        "nothing sent"
    ) in text, text[-3000:]
    assert len(await command_log(space, "open-other-1")) == 1  # its OpenTable alone


async def test_a_record_no_reader_can_read_on_the_table_s_partition_is_stepped_over(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operations review: a record whose header name is not UTF-8 on the events topic
    (anyone who may write it can; docs/operations.md, "A stuck projection worker") ended
    ``blackjack play`` at every table of its partition in a ``UnicodeDecodeError`` traceback,
    exit 1: its follower's consumer was aiokafka's own, whose reader raises at it. The
    session plays on past it, the events after it in its batch folded."""
    write_raw_header_names(monkeypatch)
    space: KafkaSpace = await kafka_space(partitions=1)
    table = "play-junk-1"
    async with running_handler(space.config()), space.client() as client:
        await accept(client, table, cmd.OpenTable(variant="mini-h17"))
        await send_one_batch(space.bootstrap, space.topics.events, 0, [(b"other", b"junk", JUNK)])
        process = await play(space, table, "--player", A, "--deposit", "10")
        output, _ = await asyncio.wait_for(process.communicate(b"q\n"), WAIT_S)
    text = output.decode()
    assert process.returncode == 0, text[-3000:]
    assert "Traceback" not in text and "UnicodeDecodeError" not in text
    assert "SitDown: accepted" in text and "Deposit: accepted" in text, text[-3000:]
    assert "balance 10.00 USD" in text, text[-3000:]
