"""A game command naming its round (``round``) through the handler's processor, with a small
idempotency window: a copy of a bet sent after its answer left the window is refused
``stale_command`` instead of betting again in a later round; ``BLACKJACK_COMMAND_ROUND=
required`` refuses a command that does not name it; the client names it for its sender."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from blackjack.client import BlackjackClient, ClientStopped
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.service import CommandHandler
from blackjack.command_handler.streams import PartitionStore
from blackjack.configuration import ConfigurationError
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.rules import Rules
from blackjack.domain.state import TableState
from blackjack.messages.envelope import CommandEnvelope, CommandResult, EventEnvelope
from blackjack.messages.wire import WireEnvelope
from tests.unit.processor_harness import TOPICS, new_processor
from tests.unit.test_rejections import shoe_starting

NOW = datetime(2026, 5, 1, tzinfo=UTC)
WINDOW = 4
TABLE, ANN = "solo-ann", "ann"
KEY = "ab" * 32


class Table:
    """One single-player table on a processor whose window keeps ``WINDOW`` answers."""

    def __init__(self) -> None:
        # ann's first hand: 10 and 10 against the dealer's 7 and 9 (she stands)
        self.processor = new_processor(
            dedup_window=WINDOW, shuffler=shoe_starting("TS", "7S", "TH", "9S")
        )
        self.store = PartitionStore(0)
        self.offset = 0
        self.events: list[EventEnvelope] = []

    def send(self, command: cmd.Command, command_id: str | None = None) -> CommandResult:
        self.offset += 1
        envelope = CommandEnvelope(
            command_id=command_id or f"c-{self.offset}",
            stream_id=TABLE,
            sent_at=NOW,
            command=command,
        )
        inbound = Inbound(TABLE.encode(), envelope.model_dump_json().encode(), [], 0, self.offset)
        handled = self.processor.handle(self.store, inbound, NOW)
        self.events += handled.events
        [result] = [
            CommandResult.model_validate_json(r.value)
            for r in handled.outgoing
            if r.topic == TOPICS.results
        ]
        return result

    def state(self) -> TableState:
        state = self.store.streams[TABLE].state
        assert isinstance(state, TableState)
        return state

    def bets(self) -> list[ev.BetPlaced]:
        return [e.data for e in self.events if isinstance(e.data, ev.BetPlaced)]

    def round_one_played(self, bet: cmd.PlaceBet) -> None:
        for command, command_id in (
            (cmd.OpenTable(variant="mini-h17"), None),
            (cmd.SitDown(player_id=ANN), None),
            (cmd.Deposit(player_id=ANN, amount=10_000), None),
            (bet, "bet-1"),
            (cmd.Deal(player_id=ANN, round=bet.round), None),
            (cmd.Stand(player_id=ANN, box=0, hand=0, round=bet.round), None),
        ):
            assert self.send(command, command_id).status == "accepted", command
        assert (self.state().round, self.state().round_open) == (1, False)
        for _ in range(WINDOW + 1):  # answers that push bet-1's out of the window
            for paid in (
                cmd.Withdraw(player_id=ANN, amount=1),
                cmd.Deposit(player_id=ANN, amount=1),
            ):
                assert self.send(paid).status == "accepted"  # (a refusal, kept apart, did not)


def code(result: CommandResult) -> str | None:
    return None if result.rejection is None else result.rejection.code


def test_a_copy_of_a_bet_naming_its_round_is_refused_after_the_window() -> None:
    table = Table()
    bet = cmd.PlaceBet(player_id=ANN, box=0, amount=1000, round=1)
    table.round_one_played(bet)
    balance = table.state().players[ANN].balance
    copy = table.send(bet, "bet-1")
    assert code(copy) == "stale_command" and copy.first_sequence is None
    assert len(table.bets()) == 1 and table.state().players[ANN].balance == balance
    assert not table.state().round_open


def test_a_copy_of_a_bet_without_a_round_is_still_taken_again() -> None:
    """What the round is for: a command that names none is decided as before (backward
    compatible), so its copy after the window is a second chip in round 2."""
    table = Table()
    bet = cmd.PlaceBet(player_id=ANN, box=0, amount=1000)
    table.round_one_played(bet)
    assert table.send(bet, "bet-1").status == "accepted"
    assert [b.round for b in table.bets()] == [1, 2]


def test_a_handler_that_requires_the_round_refuses_a_command_without_it() -> None:
    table = Table()
    table.processor.round_required = True
    for command in (
        cmd.OpenTable(variant="mini-h17"),  # acts in no round: no round asked of it
        cmd.SitDown(player_id=ANN),
        cmd.Deposit(player_id=ANN, amount=10_000),
    ):
        assert table.send(command).status == "accepted"
    unnamed = table.send(cmd.PlaceBet(player_id=ANN, box=0, amount=1000))
    assert code(unnamed) == "malformed" and "BLACKJACK_COMMAND_ROUND" in str(unnamed.rejection)
    assert unnamed.first_sequence is None and table.bets() == []
    assert table.send(cmd.PlaceBet(player_id=ANN, box=0, amount=1000, round=1)).status == (
        "accepted"
    )


def test_the_round_setting_comes_from_the_environment() -> None:
    assert HandlerConfig.from_env({"BLACKJACK_SHOE_KEY": KEY}).command_round == "optional"
    env = {"BLACKJACK_SHOE_KEY": KEY, "BLACKJACK_COMMAND_ROUND": " Required "}
    config = HandlerConfig.from_env(env)
    assert config.command_round == "required"
    assert CommandHandler(config).processor.round_required
    with pytest.raises(ConfigurationError, match="BLACKJACK_COMMAND_ROUND"):
        HandlerConfig.from_env({**env, "BLACKJACK_COMMAND_ROUND": "always"})


def _wire(
    sequence: int,
    event: ev.TableOpened | ev.RoundOpened | ev.RoundSettled,
    at: datetime = NOW,
) -> WireEnvelope:
    return WireEnvelope(
        event_id=f"e-{sequence}",
        type=event.type,
        schema_version=event.version,
        stream_id=TABLE,
        sequence=sequence,
        occurred_at=at,
        data=event,
    )


def commands_sent(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The commands every ``BlackjackClient`` sends from now on, kept instead of sent."""
    sent: list[Any] = []

    async def keep(self: BlackjackClient, envelope: CommandEnvelope) -> None:
        sent.append(envelope.command)

    monkeypatch.setattr(BlackjackClient, "send_envelope", keep)
    return sent


async def test_the_client_names_the_round_it_last_saw(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = commands_sent(monkeypatch)
    client = BlackjackClient("127.0.0.1:1")
    bet = cmd.PlaceBet(player_id=ANN, box=0, amount=100)
    await client.send(TABLE, bet)  # nothing known of the table yet: sent as it is
    opened = ev.TableOpened(rules=Rules())
    client.learn_round(TABLE, [_wire(1, opened)])  # the table from its start: no round yet
    await client.send(TABLE, bet)
    client.learn_round(TABLE, [_wire(5, ev.RoundOpened(round=3))])
    await client.send(TABLE, bet)
    await client.send(TABLE, cmd.Hit(player_id=ANN, box=0, hand=0))
    settled = ev.RoundSettled(round=3, dealer_total=20, dealer_blackjack=False, results=())
    client.learn_round(TABLE, [_wire(6, settled)])
    await client.send(TABLE, bet)
    await client.send(TABLE, cmd.PlaceBet(player_id=ANN, box=0, amount=100, round=9))
    await client.send(TABLE, cmd.SitDown(player_id=ANN))  # acts in no round
    await client.send("other", bet)  # another table's round is not this one's
    assert [getattr(c, "round", None) for c in sent] == [None, 1, 3, 3, 4, 9, None, None]


async def test_a_table_opened_after_refusals_at_its_id_has_no_round_yet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A platform's ``Deposit`` sent before the table is refused ``table_not_open`` and
    written at sequence 1; the ``OpenTable`` after it writes from sequence 2: the client
    learnt nothing from its events, and the first bet went out naming no round (a client
    review: a late copy of it would not be refused ``stale_command``)."""
    sent = commands_sent(monkeypatch)
    client = BlackjackClient("127.0.0.1:1")
    client.learn_round(TABLE, [_wire(2, ev.TableOpened(rules=Rules()))])
    await client.send(TABLE, cmd.PlaceBet(player_id=ANN, box=0, amount=100))
    # the same events read again later, after a round was learnt: older, they change nothing
    client.learn_round(TABLE, [_wire(9, ev.RoundOpened(round=4))])
    client.learn_round(TABLE, [_wire(2, ev.TableOpened(rules=Rules()))])
    await client.send(TABLE, cmd.PlaceBet(player_id=ANN, box=0, amount=100))
    assert [getattr(c, "round", None) for c in sent] == [1, 4]


async def test_an_older_command_s_events_do_not_roll_the_round_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The client review: a bet's round settled, the bet resent under its id (its original
    answer), then ``events()`` of that answer read again: ``rounds`` went back to the open
    round 1 and the next bet was refused ``stale_command`` ("round 1 is over")."""
    sent = commands_sent(monkeypatch)
    client = BlackjackClient("127.0.0.1:1")
    client.learn_round(TABLE, [_wire(1, ev.TableOpened(rules=Rules()))])
    bet_events = [_wire(2, ev.RoundOpened(round=1))]
    client.learn_round(TABLE, bet_events)
    settled = ev.RoundSettled(round=1, dealer_total=20, dealer_blackjack=False, results=())
    client.learn_round(TABLE, [_wire(9, settled)])
    client.learn_round(TABLE, bet_events)  # the first bet's events, read again
    assert client.rounds[TABLE] == (1, False)
    await client.send(TABLE, cmd.PlaceBet(player_id=ANN, box=0, amount=100))
    assert [getattr(c, "round", None) for c in sent] == [2]


async def test_an_empty_command_id_is_refused_not_replaced() -> None:
    """The client review: ``command_id=""`` was swapped for a new UUID at each call, so three
    resends of one deposit under a stored id that was empty were three deposits."""
    client = BlackjackClient("127.0.0.1:1")
    deposit = cmd.Deposit(player_id=ANN, amount=100)
    for call in (client.send, client.execute):
        with pytest.raises(ValueError, match="command_id"):
            await call(TABLE, deposit, command_id="")


def test_a_log_begun_again_from_sequence_1_is_learnt() -> None:
    """The diff review: the events topic made anew, the table opened again writes from
    sequence 1, later than anything known: what it says counts (ignored, every bet named the
    old log's round and was refused)."""
    client = BlackjackClient("127.0.0.1:1")
    client.learn_round(TABLE, [_wire(1, ev.TableOpened(rules=Rules()))])
    client.learn_round(TABLE, [_wire(40, ev.RoundOpened(round=7))])
    later = NOW + timedelta(days=1)
    client.learn_round(TABLE, [_wire(1, ev.TableOpened(rules=Rules()), later)])
    assert client.rounds[TABLE] == (0, False)
    client.learn_round(TABLE, [_wire(2, ev.RoundOpened(round=1), later)])
    assert client.rounds[TABLE] == (1, True)


async def test_senders_waiting_on_a_failed_start_each_get_their_own_command_named() -> None:
    """The diff review: a start that failed gave every sender waiting on it one error object,
    which the first named with its command, so the second's error named the first's id and
    table (a resend so would put its deposit on another table)."""
    client = BlackjackClient("127.0.0.1:1", send_timeout_s=2)
    starting = asyncio.ensure_future(client.start())
    await asyncio.sleep(0)

    async def execute(n: int) -> BaseException:
        deposit = cmd.Deposit(player_id=ANN, amount=100)
        with pytest.raises(ClientStopped) as stopped:
            await client.execute(f"table-{n}", deposit, command_id=f"id-{n}")
        return stopped.value

    first, second = await asyncio.gather(execute(1), execute(2))
    with pytest.raises(Exception):  # noqa: B017 (no broker there: any connection error)
        await starting
    assert isinstance(first, ClientStopped) and isinstance(second, ClientStopped)
    assert (first.command_id, first.stream_id) == ("id-1", "table-1")
    assert (second.command_id, second.stream_id) == ("id-2", "table-2")
