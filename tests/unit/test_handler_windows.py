"""What the handler remembers by command id, live and after a rebuild from the topics, without
Kafka (tests/integration cover the real broker):

* an ``ExpireTimers`` with the clock's id handled before its deadline (sent by anyone who reads
  the deadline in ``RoundOpened``, or by an instance whose clock is ahead) changes nothing and
  must not answer the clock's own command for that deadline as a duplicate;
* a rebuild remembers the same ids in the same order as the live window, so a retried command
  that was answered is answered the same way after a takeover.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from blackjack.command_handler.answers import remembered
from blackjack.command_handler.clock import (
    disconnect_command_id,
    due_commands,
    expire_command_id,
)
from blackjack.command_handler.processor import Handled
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.replay import _Events, _open_strays
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.domain.rejections import Rejection, RejectionCode
from blackjack.domain.state import TableState
from blackjack.domain.wallet import BuyIn, WalletDeposit, WalletWithdraw, wallet_stream
from blackjack.messages.envelope import CommandEnvelope, CommandResult, StreamCommand
from tests.unit.committed_log import CODEC, CommittedLog, checkpointed
from tests.unit.processor_harness import TOPICS, new_processor

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
TABLE = "multi-1"


class Handler:
    """One partition's processor; every transaction it makes is committed to ``log``."""

    def __init__(self, window: int = 100) -> None:
        self.window = window
        self.processor = new_processor(dedup_window=window)
        self.store = PartitionStore(0)
        self.log = CommittedLog()
        self.offset = 0

    def deliver(self, envelope: CommandEnvelope, now: datetime) -> Handled:
        return self.forward(envelope.stream_id.encode(), envelope.model_dump_json().encode(), now)

    def forward(
        self,
        key: bytes,
        value: bytes,
        now: datetime,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> Handled:
        self.offset += 1
        inbound = Inbound(key, value, headers or [], 0, self.offset)
        return self.log.commit(self.processor.handle(self.store, inbound, now))

    def send(self, stream: str, command: StreamCommand, command_id: str, now: datetime) -> Handled:
        envelope = CommandEnvelope(command_id=command_id, stream_id=stream, command=command)
        return self.deliver(envelope, now)

    async def take_over(self) -> None:
        """Another instance rebuilds the partition from what was committed."""
        self.store = await self.log.rebuild(self.processor, self.window)

    def table(self) -> TableState:
        state = self.store.streams[TABLE].state
        assert isinstance(state, TableState)
        return state


def _betting_round_with_a_silent_player(handler: Handler) -> datetime:
    """ann bets at a multi-seat table, ben neither bets nor passes: the betting deadline."""
    setup: tuple[cmd.TableCommand, ...] = (
        cmd.OpenTable(variant="atlantic-city-multi"),
        cmd.SitDown(player_id="ann", seat=0),
        cmd.SitDown(player_id="ben", seat=1),
    )
    for number, command in enumerate(setup):
        assert handler.send(TABLE, command, f"setup-{number}", T0).result.status == "accepted"
    wallet = wallet_stream("ann")
    handler.send(wallet, WalletDeposit(player_id="ann", amount=10_000), "w-1", T0)
    buy_in = handler.send(wallet, BuyIn(player_id="ann", table_id=TABLE, amount=1_000), "w-2", T0)
    # the signed steps: the table's Deposit, then the wallet's confirmation
    for _ in range(2):
        [record] = [r for r in buy_in.outgoing if r.topic.endswith("commands")]
        buy_in = handler.forward(record.key, record.value, T0, record.headers)
    bet = handler.send(TABLE, cmd.PlaceBet(player_id="ann", box=0, amount=100), "bet", T0)
    assert bet.result.status == "accepted"
    deadline = handler.table().deadline
    assert deadline is not None and handler.table().phase == "betting"
    return deadline


def _clock_command(handler: Handler, at: datetime) -> CommandEnvelope:
    [timer] = [
        envelope
        for envelope in due_commands(handler.store, at, timedelta(seconds=30))
        if isinstance(envelope.command, cmd.ExpireTimers)
    ]
    return timer


async def test_an_early_copy_of_the_clocks_command_does_not_swallow_it() -> None:
    handler = Handler()
    deadline = _betting_round_with_a_silent_player(handler)
    timer = _clock_command(handler, deadline)
    assert timer.command_id == expire_command_id(TABLE, deadline)
    # a copy with the clock's id, handled half a second early: answered, nothing changes
    early = handler.deliver(timer, deadline - timedelta(milliseconds=500))
    assert early.result.status == "accepted" and early.events == []
    assert handler.table().phase == "betting"
    # at the deadline the clock's command acts: ben is left out and ann is dealt in
    due = handler.deliver(timer, deadline + timedelta(seconds=1))
    assert not due.duplicate
    kinds = [e.type for e in due.events]
    assert kinds[0] == "PlayerTimedOut" and "DealStarted" in kinds
    assert handler.table().deadline != deadline
    # and once it has acted, it is remembered: the clock firing it again is a duplicate
    again = handler.deliver(timer, deadline + timedelta(seconds=6))
    assert again.duplicate and again.events == []


async def test_a_rebuild_does_not_remember_an_early_copy_either() -> None:
    handler = Handler()
    deadline = _betting_round_with_a_silent_player(handler)
    timer = _clock_command(handler, deadline)
    handler.deliver(timer, deadline - timedelta(seconds=1))
    await handler.take_over()
    assert timer.command_id not in handler.store.streams[TABLE].results
    due = handler.deliver(timer, deadline + timedelta(seconds=1))
    assert not due.duplicate and "DealStarted" in [e.type for e in due.events]
    # the acting answer is remembered by the next rebuild
    await handler.take_over()
    assert handler.deliver(timer, deadline + timedelta(seconds=6)).duplicate


async def test_a_rebuild_remembers_the_newest_ids_like_the_live_window() -> None:
    """A window of four of each kind: the last four accepted answers and the last four
    rejections (refused withdrawals written down, a bet refused) are what a retry must find
    after a takeover, in the order the live window holds them."""
    handler = Handler(window=4)
    solo = "solo-1"
    commands: tuple[cmd.TableCommand, ...] = (
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id="ann"),
        cmd.Deposit(player_id="ann", amount=10_000),
        cmd.PlaceBet(player_id="ann", box=0, amount=100),
        *(cmd.Withdraw(player_id="ann", amount=50_000) for _ in range(3)),
        cmd.PlaceBet(player_id="ann", box=0, amount=20_000),
    )
    for number, command in enumerate(commands):
        handled = handler.send(solo, command, f"c-{number}", T0 + timedelta(seconds=number))
    assert handled.result.rejection is not None
    assert handled.result.rejection.code == "insufficient_funds"
    live = list(handler.store.streams[solo].results)
    assert live == [f"c-{number}" for number in (4, 5, 6, 7, 0, 1, 2, 3)]  # refusals first
    await handler.take_over()
    assert list(handler.store.streams[solo].results) == live
    # the player can afford the bet now, but a retry of that command keeps its answer
    handler.send(solo, cmd.Deposit(player_id="ann", amount=50_000), "c-8", T0)
    retry = handler.send(solo, cmd.PlaceBet(player_id="ann", box=0, amount=20_000), "c-7", T0)
    assert retry.duplicate and retry.result.status == "rejected" and retry.events == []


async def test_a_rebuild_from_the_results_keeps_each_answer_s_command_digest() -> None:
    """Another command under a handled id is refused live (its fields differ); after a
    takeover that read the answers from the results topic (no checkpoint), alike: each answer's
    record carries its command's digest. Rebuilt from the events alone, the window cannot
    tell, but a platform money command still is told by the terms its event keeps."""
    handler = Handler(window=4)
    solo = "solo-1"
    commands: tuple[cmd.TableCommand, ...] = (
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id="ann"),
        cmd.Deposit(player_id="ann", amount=10_000),
        cmd.Withdraw(player_id="ann", amount=50_000),  # refused, written down
    )
    for number, command in enumerate(commands):
        handler.send(solo, command, f"c-{number}", T0)
    live = handler.store.streams[solo].results.stored_digests()
    await handler.take_over()
    assert handler.store.streams[solo].results.stored_digests() == live
    assert None not in live
    for command_id, other in (
        ("c-2", cmd.Deposit(player_id="ann", amount=1)),
        ("c-3", cmd.Withdraw(player_id="ann", amount=5)),
    ):
        refused = handler.send(solo, other, command_id, T0)
        assert refused.result.rejection is not None and not refused.duplicate
        assert "its fields differ" in refused.result.rejection.message
    copy = handler.send(solo, cmd.Deposit(player_id="ann", amount=10_000), "c-2", T0)
    assert copy.duplicate and copy.result.status == "accepted"

    handler.log.expire(TOPICS.results)
    await handler.take_over()
    assert handler.store.streams[solo].results.stored_digests() == [None] * len(live)
    again = handler.send(solo, cmd.Deposit(player_id="ann", amount=1), "c-2", T0)
    assert again.result.rejection is not None and not again.duplicate
    assert "its fields differ" in again.result.rejection.message
    copy = handler.send(solo, cmd.Deposit(player_id="ann", amount=10_000), "c-2", T0)
    assert copy.duplicate and copy.result.status == "accepted"


async def test_an_id_used_again_after_the_window_is_rebuilt_with_its_own_command() -> None:
    """An id let go of by the window and used again answers another command: the rebuild
    pairs each answer with the digest its own record carries, not the id's first (a review:
    the rebuilt window refused a true copy of the second command)."""
    handler = Handler(window=2)
    solo = "solo-1"
    handler.send(solo, cmd.OpenTable(variant="mini-h17"), "open", T0)
    handler.send(solo, cmd.SitDown(player_id="ann"), "sit", T0)
    handler.send(solo, cmd.Deposit(player_id="ann", amount=10_000), "in", T0)
    # (not platform money, whose ids are kept past the window)
    handler.send(solo, cmd.PlaceBet(player_id="ann", box=0, amount=100), "cmd-1", T0)
    for number in range(3):  # cmd-1 leaves the window
        handler.send(solo, cmd.PlaceBet(player_id="ann", box=0, amount=1), f"b-{number}", T0)
    assert "cmd-1" not in handler.store.streams[solo].results
    second = handler.send(solo, cmd.ClearBets(player_id="ann"), "cmd-1", T0)
    assert second.result.status == "accepted" and not second.duplicate
    live = handler.store.streams[solo].results.stored_digests()
    await handler.take_over()
    assert handler.store.streams[solo].results.stored_digests() == live
    copy = handler.send(solo, cmd.ClearBets(player_id="ann"), "cmd-1", T0)
    assert copy.duplicate and copy.result == second.result
    first_again = handler.send(solo, cmd.PlaceBet(player_id="ann", box=0, amount=100), "cmd-1", T0)
    assert first_again.result.rejection is not None and not first_again.duplicate


def _deposits(handler: Handler, stream: str, count: int) -> list[Handled]:
    """A solo table opened, ann seated, and ``count`` deposits: each an accepted command with
    an event."""
    setup: tuple[cmd.TableCommand, ...] = (
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id="ann"),
    )
    handled = [handler.send(stream, command, f"s-{n}", T0) for n, command in enumerate(setup)]
    for number in range(count):
        deposit = cmd.Deposit(player_id="ann", amount=100)
        handled.append(handler.send(stream, deposit, f"d-{number}", T0))
    assert all(h.result.status == "accepted" and h.events for h in handled)
    return handled


async def test_a_rebuild_from_the_events_alone_remembers_the_newest_commands() -> None:
    """Every answer past the results topic's retention: the window is the newest accepted
    commands the events prove, as many as it holds, and a retry of one is a duplicate."""
    handler = Handler(window=3)
    solo = "solo-1"
    _deposits(handler, solo, 8)
    refused = handler.send(solo, cmd.PlaceBet(player_id="ann", box=0, amount=10**9), "big", T0)
    assert refused.result.status == "rejected" and refused.events == []  # gone with its answer
    handler.log.expire(TOPICS.results)
    await handler.take_over()
    assert list(handler.store.streams[solo].results) == ["d-5", "d-6", "d-7"]
    retry = handler.send(solo, cmd.Deposit(player_id="ann", amount=100), "d-7", T0)
    assert retry.duplicate and retry.events == []


async def test_a_rebuild_from_the_events_alone_keeps_the_refusals_apart_too() -> None:
    """Platform money refused is written down (its events prove the refusal): a rebuild from
    the events alone keeps those refusals in a window of their own, as the live window does.
    (A review found the events read trimming both kinds to one window: the deposits' answers
    were let go of.)"""
    handler = Handler(window=4)
    wallet = wallet_stream("fay")
    for number in range(4):
        at = T0 + timedelta(seconds=number)
        paid = handler.send(wallet, WalletDeposit(player_id="fay", amount=100), f"pay-{number}", at)
        assert paid.result.status == "accepted"
    for number in range(4):
        at = T0 + timedelta(seconds=10 + number)
        withdraw = WalletWithdraw(player_id="fay", amount=10**12)
        refused = handler.send(wallet, withdraw, f"ref-{number}", at)
        assert refused.result.status == "rejected" and refused.events
    live = list(handler.store.streams[wallet].results)
    assert sorted(live) == [*(f"pay-{n}" for n in range(4)), *(f"ref-{n}" for n in range(4))]
    handler.log.expire(TOPICS.results)
    await handler.take_over()
    assert list(handler.store.streams[wallet].results) == live


async def test_a_command_id_decided_again_after_a_checkpoint_stays_in_the_rebuilt_window() -> None:
    """The checkpoint's snapshot holds a window; commands after it whose answers are past
    retention, then a command id of that window sent again once let go of (decided again):
    the rebuilt window is the live one, so a retry of it is still a duplicate (a review of
    the trimmed events read: it let the snapshot's answer to it stay in place, and pushed
    it out)."""
    handler = Handler(window=3)
    solo = "solo-1"
    _deposits(handler, solo, 1)  # the window: s-0, s-1, d-0
    checkpointed(
        handler.log,
        handler.store.streams[solo],
        results_from=handler.log.end(TOPICS.results),
        events_from=handler.log.end(TOPICS.events),
    )
    for number in (1, 2, 3):
        handler.send(solo, cmd.Deposit(player_id="ann", amount=100), f"d-{number}", T0)
    handler.log.expire(TOPICS.results)
    again = handler.send(solo, cmd.SitDown(player_id="ann"), "s-1", T0)
    assert not again.duplicate and again.result.status == "rejected"
    for number in (4, 5):
        handler.send(solo, cmd.Deposit(player_id="ann", amount=100), f"d-{number}", T0)
    live = list(handler.store.streams[solo].results)
    assert live == ["s-1", "d-3", "d-4", "d-5"]  # (the refusals, then the accepted)
    await handler.take_over()
    assert list(handler.store.streams[solo].results) == live
    assert handler.send(solo, cmd.SitDown(player_id="ann"), "s-1", T0).duplicate


def test_the_events_read_keep_each_streams_newest_commands_only() -> None:
    """Read from a log's start (no checkpoint), the accepted commands kept while the events
    are read are a stream's window's worth, not its history; the command that made each
    stream is kept apart."""
    handler = Handler(window=3)
    handled = [*_deposits(handler, "solo-1", 50), *_deposits(handler, "solo-2", 2)]
    events = _Events(window=3)
    for envelope in (event for h in handled for event in h.events):
        events.accept(envelope)
        assert all(len(kept) <= 3 for kept in events.accepted.values())
    assert list(events.accepted["solo-1"]) == ["d-47", "d-48", "d-49"]
    assert list(events.accepted["solo-2"]) == ["s-1", "d-0", "d-1"]
    assert events.first_commands == {"solo-1": "s-0", "solo-2": "s-0"}


async def test_a_signed_step_resent_after_the_window_is_refused_alike_live_and_rebuilt() -> None:
    """A signed step delivered again once its answer has left the window is refused by the
    table's decider (it knows the wallet's last buy-in number), and that answer is remembered
    in the same place live and rebuilt."""
    handler = Handler(window=3)
    setup: tuple[cmd.TableCommand, ...] = (
        cmd.OpenTable(variant="atlantic-city-multi"),
        cmd.SitDown(player_id="ann", seat=0),
    )
    for number, command in enumerate(setup):
        handler.send(TABLE, command, f"setup-{number}", T0)
    wallet = wallet_stream("ann")
    handler.send(wallet, WalletDeposit(player_id="ann", amount=10_000), "w-1", T0)
    buy_in = handler.send(wallet, BuyIn(player_id="ann", table_id=TABLE, amount=1_000), "w-2", T0)
    [deposit] = [r for r in buy_in.outgoing if r.topic.endswith("commands")]
    assert handler.forward(deposit.key, deposit.value, T0, deposit.headers).events
    for number in range(4):  # the deposit's answer leaves the table's window of three
        withdraw = cmd.Withdraw(player_id="ann", amount=1)
        taken = handler.send(TABLE, withdraw, f"x-{number}", T0 + timedelta(seconds=number))
        assert taken.result.status == "accepted"
    again = handler.forward(deposit.key, deposit.value, T0, deposit.headers)
    assert again.result.rejection is not None
    assert again.result.rejection.code == "transfer_already_handled"
    assert again.events == [] and not [r for r in again.outgoing if r.topic.endswith("commands")]
    live = list(handler.store.streams[TABLE].results)
    assert live == [again.result.command_id, "x-1", "x-2", "x-3"]
    await handler.take_over()
    assert list(handler.store.streams[TABLE].results) == live


def test_only_the_clocks_command_may_use_its_id_prefix() -> None:
    """An answer under an ``expire-`` id that changed nothing is not remembered, so only an
    ``ExpireTimers`` may have one: a player's Reconnect under it would be decided again."""
    handler = Handler()
    _betting_round_with_a_silent_player(handler)
    reconnect = handler.send(TABLE, cmd.Reconnect(player_id="ann"), "expire-mine", T0)
    assert reconnect.result.rejection is not None
    assert reconnect.result.rejection.code == "unauthorized"
    assert "expire-mine" not in handler.store.streams[TABLE].results
    timers = handler.send(TABLE, cmd.ExpireTimers(), "expire-any-id", T0)
    assert timers.result.status == "accepted" and timers.events == []


def test_which_answers_a_window_keeps_is_one_rule() -> None:
    now = datetime(2026, 5, 1, tzinfo=UTC)

    def answer(command_id: str, code: RejectionCode | None, first: int | None = 1) -> CommandResult:
        return CommandResult(
            command_id=command_id,
            stream_id="table-1",
            status="accepted" if code is None else "rejected",
            rejection=None if code is None else Rejection(code=code, message="-"),
            first_sequence=first if code is None else None,
            handled_at=now,
        )

    expire = expire_command_id("table-1", now)
    disconnect = disconnect_command_id("table-1", "ann", now)
    kept = {
        "accepted": answer("c-1", None),
        "refused by the rules": answer("c-2", "not_your_turn"),
        "unauthorized under a player's id": answer("c-3", "unauthorized"),
        "the clock's, with events": answer(expire, None),
        "a disconnection under the clock's id": answer(disconnect, None),
    }
    dropped = {
        "malformed": answer("c-4", "malformed"),
        "unknown command": answer("c-5", "unknown_command"),
        "a step's id taken": answer("e-1.deposit", "unauthorized"),
        "the clock's id taken": answer(expire, "unauthorized"),
        "the clock's, nothing due": answer(expire, None, first=None),
        "the clock's disconnect id taken": answer(disconnect, "unauthorized"),
        "a stale disconnection": answer(disconnect, "player_present"),
        "a disconnect refused by the rules": answer(disconnect, "not_seated"),
    }
    assert [name for name, a in kept.items() if not remembered(a)] == []
    assert [name for name, a in dropped.items() if remembered(a)] == []


async def test_refusals_do_not_push_a_bet_out_of_the_window() -> None:
    """Anyone at a shared table, seated or not, could send commands refused in a loop
    (1,000 take about a second), each remembered like any answer: a window of 4 let go of
    another player's bet after 4 refusals, and that bet resent within the same betting time
    was placed a second time. Refusals are remembered apart: live and after a takeover, the
    bet's resend gets its original answer, and the last refusal's resend its refusal."""
    handler = Handler(window=4)
    _betting_round_with_a_silent_player(handler)  # ann's "bet" of 100 placed
    bet = cmd.PlaceBet(player_id="ann", box=0, amount=100)
    placed = handler.send(TABLE, bet, "bet", T0)  # its original answer, given again
    assert placed.duplicate and placed.result.status == "accepted"
    flood = cmd.PlaceBet(player_id="mallory", box=1, amount=100)
    for number in range(10):
        refused = handler.send(TABLE, flood, f"flood-{number}", T0 + timedelta(seconds=1))
        assert refused.result.status == "rejected" and refused.events == []
    for takeover in (False, True):
        if takeover:
            await handler.take_over()
        for command_id, original, command in (("bet", placed, bet), ("flood-9", refused, flood)):
            again = handler.send(TABLE, command, command_id, T0 + timedelta(seconds=2))
            assert again.duplicate and again.events == [], (takeover, command_id)
            [answer] = [r for r in again.outgoing if r.topic.endswith("command-results")]
            [first] = [r for r in original.outgoing if r.topic.endswith("command-results")]
            assert (answer.value, answer.headers) == (first.value, first.headers)
        assert handler.table().boxes[0].bet == 100, takeover  # before: 200, bet twice


async def test_heartbeats_do_not_push_a_bet_out_of_the_window() -> None:
    """``blackjack play`` says a player with a bet out is still there with a ``Reconnect``
    every 10 s, which changes nothing for a connected player (no event) but was remembered
    like any answer: a window of 4 let go of the bet's answer after 4 heartbeats, and the
    bet resent was placed a second time. Live and after a takeover, the bet's resend gets
    its original answer, the same bytes and headers, and so does the last heartbeat's."""
    handler = Handler(window=4)
    solo = "solo-1"
    setup: tuple[cmd.TableCommand, ...] = (
        cmd.OpenTable(variant="surrender"),
        cmd.SitDown(player_id="ann"),
        cmd.Deposit(player_id="ann", amount=10_000),
    )
    for number, command in enumerate(setup):
        handler.send(solo, command, f"setup-{number}", T0)
    bet = cmd.PlaceBet(player_id="ann", box=0, amount=100)
    placed = handler.send(solo, bet, "bet", T0)
    assert placed.result.status == "accepted" and placed.events
    for beat in range(10):
        at = T0 + timedelta(seconds=10 * (beat + 1))
        heartbeat = handler.send(solo, cmd.Reconnect(player_id="ann"), f"beat-{beat}", at)
        assert heartbeat.result.status == "accepted" and heartbeat.events == []
    for takeover in (False, True):
        if takeover:
            await handler.take_over()
        for command_id, original, command in (
            ("bet", placed, bet),
            ("beat-9", heartbeat, cmd.Reconnect(player_id="ann")),
        ):
            again = handler.send(solo, command, command_id, T0 + timedelta(minutes=5))
            assert again.duplicate and again.events == [], (takeover, command_id)
            [answer] = [r for r in again.outgoing if r.topic.endswith("command-results")]
            [first] = [r for r in original.outgoing if r.topic.endswith("command-results")]
            assert (answer.value, answer.headers) == (first.value, first.headers)


async def test_a_window_held_to_its_bytes_is_rebuilt_the_same() -> None:
    """A window lets go of its oldest answers beyond ``ANSWER_BYTES_KEPT`` bytes as beyond its
    count (answers with 1,024-character correlation ids: a stranger's refusals filled a
    table's snapshot past the topic's limit). Told from the answers alone, in their order, a
    rebuild from the results topic keeps the same ones, and the newest's resend is answered
    as before."""
    handler = Handler(window=1_000)
    _betting_round_with_a_silent_player(handler)
    flood = cmd.PlaceBet(player_id="mallory", box=1, amount=100)
    for number in range(400):
        correlation = "".join(chr(0x10000 + (number * 1_024 + n) % 0xFFFFF) for n in range(1_024))
        envelope = CommandEnvelope(
            command_id=f"flood-{number}", stream_id=TABLE, command=flood, correlation_id=correlation
        )
        last = handler.deliver(envelope, T0 + timedelta(seconds=1))
        assert last.result.status == "rejected"
    live = list(handler.store.streams[TABLE].results)
    refused = [command_id for command_id in live if command_id.startswith("flood-")]
    assert 50 < len(refused) < 400 and refused[-1] == "flood-399"  # the newest, by bytes
    await handler.take_over()
    assert list(handler.store.streams[TABLE].results) == live
    again = handler.deliver(envelope, T0 + timedelta(seconds=2))
    assert again.duplicate and again.events == []
    [answer] = [r for r in again.outgoing if r.topic.endswith("command-results")]
    [first] = [r for r in last.outgoing if r.topic.endswith("command-results")]
    assert (answer.value, answer.headers) == (first.value, first.headers)


async def test_a_window_held_to_its_bytes_is_rebuilt_the_same_from_the_events_alone() -> None:
    """The bytes a window counts of an answer come from what every rebuild has: its command
    id and correlation id, the one the events carry (the command id where none was sent).
    Counted from the whole answer, an answer rebuilt from the events alone (no player, the
    command id as its correlation id) counted otherwise, and the rebuilt window let go of an
    answer the live one kept."""
    handler = Handler(window=1_000)
    handler.send(TABLE, cmd.OpenTable(variant="atlantic-city-multi"), "open", T0)
    at = T0
    for number in range(150):
        at += timedelta(seconds=1)
        correlation = "".join(chr(0x10000 + (number * 2_048 + n) % 0xFFFFF) for n in range(1_024))
        sit_and_leave: tuple[cmd.TableCommand, ...] = (
            cmd.SitDown(player_id="m", seat=0),
            cmd.LeaveTable(player_id="m"),
        )
        for step, flooded in enumerate(sit_and_leave):
            envelope = CommandEnvelope(
                command_id=f"flood-{number}-{step}",
                stream_id=TABLE,
                command=flooded,
                correlation_id=correlation,
            )
            assert handler.deliver(envelope, at).result.status == "accepted"
        # another player: 128-character command ids, no correlation id
        ann_s: list[cmd.TableCommand] = [
            cmd.SitDown(player_id="ann", seat=1),
            cmd.LeaveTable(player_id="ann"),
        ]
        for step, move in enumerate(ann_s):
            command_id = f"ann-{number}-{step}-".ljust(128, "x")
            assert handler.send(TABLE, move, command_id, at).result.status == "accepted"
    live = list(handler.store.streams[TABLE].results)
    assert len(live) < 600  # held to its bytes
    await handler.take_over()
    assert list(handler.store.streams[TABLE].results) == live
    handler.log.expire(TOPICS.results)  # past the results' retention: from the events alone
    await handler.take_over()
    assert list(handler.store.streams[TABLE].results) == live


def test_a_window_stored_past_its_bytes_by_a_release_before_is_held_to_them_when_read() -> None:
    """A release before the byte bound stored a window of any size; read from its snapshot
    it kept every answer until the next of its kind, where a rebuild from the log (the
    checkpoint not used) kept only the newest that fit: now both keep those."""
    handler = Handler(window=1_000)
    handler.send(TABLE, cmd.OpenTable(variant="atlantic-city-multi"), "open", T0)
    table = handler.store.streams[TABLE]
    opened = table.results.stored()
    for number in range(300):  # as that release kept them: no bound
        correlation = "".join(chr(0x10000 + (number * 1_024 + n) % 0xFFFFF) for n in range(1_024))
        table.results.add_stored(
            {**opened[0], "command_id": f"old-{number}", "correlation_id": correlation}
        )
    assert len(table.results) == 301
    thawed = CODEC.decode(CODEC.encode(table))
    kept = list(thawed.results)
    assert 50 < len(kept) < 300 and kept == [f"old-{n}" for n in range(300 - len(kept), 300)]


def test_stray_answers_stored_past_their_bytes_are_held_to_them_when_read() -> None:
    """As a stream's window: the partition's stray answers a release before stored past the
    byte bound keep only the newest that fit once read (``replay._open_strays``)."""
    store = PartitionStore(0, codec=CODEC)
    for number in range(300):
        correlation = "".join(chr(0x10000 + (number * 1_024 + n) % 0xFFFFF) for n in range(1_024))
        answer = CommandResult(
            command_id=f"old-{number}",
            stream_id=f"none-{number}",
            correlation_id=correlation,
            status="rejected",
            rejection=Rejection(code="table_not_open", message="no table"),
            handled_at=T0,
        )
        store.strays.add_stored(answer.model_dump(mode="json"))
    assert len(store.strays) == 300
    read = PartitionStore(0, codec=CODEC)
    read.cold[read.strays_key] = CODEC.encode_answers(store.strays_key, store.strays.stored())
    _open_strays(read, CODEC)
    kept = [document["command_id"] for document in read.strays.stored()]
    assert 50 < len(kept) < 300 and kept == [f"old-{n}" for n in range(300 - len(kept), 300)]
