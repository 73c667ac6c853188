"""One player's session at a table: a typed line in, what to show out. The Kafka clients
are the caller's (``cli``); the tests drive a session the same way."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiokafka.errors import KafkaError
from rich.console import RenderableType
from rich.text import Text

from blackjack.client import BlackjackClient
from blackjack.command_handler.ids import event_id, step_id
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import wallet as wl
from blackjack.domain.currencies import money
from blackjack.domain.rules import RECORDED, Rules
from blackjack.messages.envelope import CommandResult
from blackjack.play.follow import TableFollower, WalletFollower
from blackjack.play.moves import Help, History, NotAMove, Quit, ShowRules, move
from blackjack.play.screen import history_screen, result_line, rules_screen, table_screen
from blackjack.play.table_rules import shared_table
from blackjack.rules_sheet import Returns, table_returns


def unanswered(command: str, timeout: float) -> str:
    """What a move without an answer in time means: it is on the commands topic, and the
    table takes or refuses it when its handler runs again (a restart, a partition changing
    hands); the session goes on, and the screen shows the move's events when they come. The
    session ended on it ("blackjack play: TimeoutError"), and the move was taken later, the
    player's money moved, with no client left to show it."""
    return (
        f"{command}: no answer from the table in {timeout:g} s; it was sent, and the table "
        "may still take it: the screen shows it when it does"
    )


@dataclass
class PlaySession:
    client: BlackjackClient
    follower: TableFollower
    player_id: str
    timeout: float = 10.0
    over: bool = False
    results: list[CommandResult] = field(default_factory=list)
    wallet: WalletFollower | None = None
    """The player's wallet, followed at a table funded from it (shown with the table)."""
    last_sent: float = -math.inf
    """When this session last sent the table a command (``time.monotonic``): never, at its
    start, so that a session started over a bet says at once that the player is there (the
    service's clock counts from the last session's last command: a client started again 20 s
    later waited a whole beat, and the bet was returned under the player's eyes)."""
    reminded: set[datetime] = field(default_factory=set)
    """The clock's deadlines the player was reminded of (once each, whatever lines follow)."""
    _returns: dict[Rules, Returns] = field(default_factory=dict)
    _awaiting: int = 0
    """The table commands this session sent that it has no answer to yet (a bet among them)."""
    _since: int = -1
    """The table's last event when the session began: the cash-outs it watches come after."""

    def __post_init__(self) -> None:
        if self._since < 0:
            self._since = self.follower.sequence

    @property
    def stream_id(self) -> str:
        return self.follower.stream_id

    async def send(self, command: cmd.TableCommand | wl.AnyWalletCommand) -> CommandResult:
        """The command, its result, and once accepted its events folded into the view (a
        wallet's command goes to the player's wallet: what it does at the table, a buy-in
        credited or declined, follows in the background and is drawn when it comes)."""
        if isinstance(command, wl.WALLET_COMMAND_TYPES):
            stream_id = wl.wallet_stream(self.player_id)
        else:
            stream_id = self.stream_id
        if stream_id == self.stream_id:  # the table's presence clock counts its own commands
            self.last_sent = time.monotonic()
            # a bet or a move names the round on the screen: a copy of it sent later (after
            # its id left the idempotency window) is refused, never acted on in a later round
            view = self.follower.table.view
            command = cmd.naming_round(command, view.round, view.round_open)
        ours = stream_id == self.stream_id
        self._awaiting += ours
        try:
            result = await self.client.execute(stream_id, command, timeout=self.timeout)
            self.results.append(result)
            if ours and result.last_sequence is not None:
                await self.follower.until(result.last_sequence, self.timeout)
        finally:
            self._awaiting -= ours
        return result

    def _table_answer(self, after: int) -> ev.FundsDeposited | ev.TransferDeclined | None:
        for envelope in self.follower.folded_since(after):
            event = envelope.data
            if isinstance(event, ev.TransferDeclined) and event.player_id == self.player_id:
                return event
            if (
                isinstance(event, ev.FundsDeposited)
                and event.player_id == self.player_id
                and event.transfer is not None
            ):
                return event
        return None

    async def buy_in(self, command: wl.BuyIn) -> list[RenderableType]:
        """A buy-in, and the table's answer to it: the wallet accepts it (``BuyInSent``),
        then the table credits the seat or declines it (not seated, ...) and the money goes
        back to the wallet. "BuyIn: accepted" alone read as money at the table when the
        table had declined it."""
        after = self.follower.sequence
        result = await self.send(command)
        if result.status != "accepted":
            return [result_line("BuyIn", result, self.follower.table.view.currency or "USD")]
        currency = self.follower.table.view.currency or "USD"
        amount = money(command.amount, currency)
        if not self.follower.table.view.opened:
            # No table under the id: the deposit is declined in the partition's stream of
            # such declines (``ids.declines_stream``), never in this table's log, and its
            # answer says so (``table_not_open``); a table opened meanwhile answers below.
            declined = await self._declined_nowhere(result, command.table_id)
            if declined is not None:
                return [Text(f"{declined}; {amount} goes back to your wallet", style="bold red")]
        try:
            await self.follower.wait_until(
                lambda: self._table_answer(after) is not None, self.timeout
            )
        except TimeoutError:
            said = f"BuyIn: {amount} sent by your wallet; the table has not credited it yet"
            return [Text(said, style="bold yellow")]
        answer = self._table_answer(after)
        if isinstance(answer, ev.TransferDeclined):
            said = (
                f"BuyIn declined by the table ({answer.reason_code}): {answer.message}; "
                f"{amount} goes back to your wallet"
            )
            return [Text(said, style="bold red")]
        return [Text(f"BuyIn: accepted, {amount} {currency} credited at the table", "green")]

    async def _declined_nowhere(self, sent: CommandResult, table_id: str) -> str | None:
        """The deposit of the buy-in the wallet accepted (``sent``) to ``table_id``, if it
        was declined without reaching a table's log (``table_not_open``, refunded): what to
        say of it. None otherwise (a table's log says what it did), or without an answer in
        time. (The wallet's handler sent it: the client keeps its answer with the others'
        it reads, and one let go of is looked back for at the table's stream.)"""
        if sent.first_sequence is None:
            return None
        buy_in_sent = event_id(wl.wallet_stream(self.player_id), sent.first_sequence)
        try:
            deposit = step_id(buy_in_sent, "deposit")
            answer = await self.client.result(deposit, self.timeout, stream_id=table_id)
        except TimeoutError:
            return None
        if answer.rejection is None or answer.rejection.code != "table_not_open":
            return None  # taken, or refused with nothing done (no refund either)
        return "BuyIn declined by the table (table_not_open): the table is not open"

    def watched_for_presence(self) -> bool:
        """The table's presence clock watches this player now: a table with the
        disconnection policy, and a bet or a hand of the player's in the open round."""
        table = self.follower.table
        view = table.view
        if not view.round_open or not (view.rules or {}).get("refund_bets_on_disconnect"):
            return False
        record = table.rounds.get(view.round)
        return record is not None and any(b.player_id == self.player_id for b in record.boxes)

    def _needs_presence(self) -> bool:
        """The presence clock watches the player now, or may from a command of theirs not
        answered yet (a bet: the service counts from when it takes it, the session sees it
        only once answered and folded, which can take longer than the timeout)."""
        if self._awaiting and (self.follower.table.view.rules or {}).get(
            "refund_bets_on_disconnect"
        ):
            return True
        return self.watched_for_presence()

    async def keep_present(self, every: float) -> None:
        """Run for the session's life: while the presence clock watches the player, say at
        least every ``every`` seconds that they are still here (``Reconnect``, which changes
        nothing for a connected player). The service takes a player silent for its presence
        timeout (30 s by default) for gone: a bet not dealt is returned, a connected player
        thinking over a bet lost it and had the Deal refused (``no_bets``). Without this
        session (the process ended or killed) the silence, and the policy, are real.

        The beats go out on their own schedule, each sent without waiting for its answer:
        the service counts a command as presence when it handles it, and nothing in the
        answer changes what the next beat says. A beat that waited for its answer put that
        answer's delay between beats, so a slow answer (a loaded service, a slow network)
        made a player who was there look gone and returned their bet."""
        beats: set[asyncio.Task[None]] = set()
        try:
            while True:
                now = time.monotonic()
                if now < self.last_sent + every:  # a move was sent meanwhile: it said so
                    await asyncio.sleep(self.last_sent + every - now)
                elif not self._needs_presence():
                    await asyncio.sleep(every)  # watched only from the player's own bet, a send
                else:
                    self.last_sent = now
                    beat = asyncio.create_task(self._beat())
                    beats.add(beat)
                    beat.add_done_callback(beats.discard)
        finally:
            for beat in beats:
                beat.cancel()

    async def _beat(self) -> None:
        present = cmd.Reconnect(player_id=self.player_id)
        with contextlib.suppress(TimeoutError, OSError, KafkaError):  # the next beat's turn
            await self.client.send(self.stream_id, present)

    def available(self) -> int:
        account = self.follower.table.accounts.get(self.player_id)
        return 0 if account is None else account.available

    async def handle(self, line: str) -> list[RenderableType]:
        """What to show after the player typed ``line``."""
        try:
            chosen = move(line, self.follower.table, self.player_id)
        except NotAMove as error:
            return [Text(str(error), style="yellow")]
        if isinstance(chosen, Quit):
            return await self.quit()
        if isinstance(chosen, Help):
            return [Text(chosen.text)]
        if isinstance(chosen, History):
            return [history_screen(self.follower.table, self.player_id, chosen.rounds)]
        if isinstance(chosen, ShowRules):
            return [await self.rules()]
        try:
            if isinstance(chosen, wl.BuyIn):
                return [*await self.buy_in(chosen), self.screen()]
            result = await self.send(chosen)
        except TimeoutError:  # the service restarting, a partition changing hands
            return [
                Text(unanswered(type(chosen).__name__, self.timeout), "bold yellow"),
                self.screen(),
            ]
        currency = self.follower.table.view.currency or "USD"
        said: list[RenderableType] = [result_line(type(chosen).__name__, result, currency)]
        return [*said, *await self.cash_outs_landed(), self.screen()]

    async def quit(self) -> list[RenderableType]:
        """Said on quitting (``q``, or the end of the input): a cash-out not in the wallet
        yet waited for, or said to be on its way, and a seat still held."""
        self.over = True
        landing = self.cashing_out()
        said = await self.cash_outs_landed()
        if landing and not said and self.wallet is not None:  # it landed meanwhile: now in
            wallet = self.wallet.wallet.view
            currency = wallet.currency or "USD"
            said = [
                Text(
                    f"cash-out of {money(landing, currency)} {currency} received: wallet "
                    f"{money(wallet.balance, currency)} {currency}",
                    style="green",
                )
            ]
        return [*said, *self._still_seated()]

    def _cash_outs(self) -> list[tuple[int, int]]:
        """The table's events since the session began that paid this player's money out to
        their wallet (``SeatLeft``, ``FundsWithdrawn`` at a table funded by the wallets, as
        the handler sends them on as ``CashOut``): (sequence, amount)."""
        if not shared_table(self.follower.table):
            return []
        paid: list[tuple[int, int]] = []
        for envelope in self.follower.folded_since(self._since):
            event = envelope.data
            if isinstance(event, ev.SeatLeft) and event.player_id == self.player_id:
                amount = event.balance_returned
            elif isinstance(event, ev.FundsWithdrawn) and event.player_id == self.player_id:
                amount = event.amount
            else:
                continue
            if amount > 0:
                paid.append((envelope.sequence, amount))
        return paid

    def cashing_out(self) -> int:
        """The money the table paid out to the wallet that the wallet has not received yet:
        the table's event is in, the wallet's ``CashOutReceived`` (a second step, the
        handler's ``CashOut``) not yet. 0 without a wallet followed."""
        if self.wallet is None:
            return 0
        paid = self._cash_outs()
        if not paid:
            return 0
        received: set[int] = set()
        unnumbered: list[int] = []  # from a handler older than ``table_sequence``
        for envelope in self.wallet.folded_since(0):
            event = envelope.data
            if isinstance(event, wl.CashOutReceived) and event.table_id == self.stream_id:
                if event.table_sequence is None:
                    unnumbered.append(event.amount)
                else:
                    received.add(event.table_sequence)
        owed = 0
        for sequence, amount in paid:
            if sequence in received:
                continue
            if amount in unnumbered:
                unnumbered.remove(amount)
                continue
            owed += amount
        return owed

    async def cash_outs_landed(self) -> list[RenderableType]:
        """Wait (up to the session's timeout) for the money the table paid out to land in
        the wallet, so that the screen drawn next shows it there; what to say if it did not
        land in time (then the screen shows it on its way)."""
        if self.wallet is None or not self.cashing_out():
            return []
        wallet = self.wallet
        with contextlib.suppress(TimeoutError):
            await wallet.wait_until(lambda: not self.cashing_out(), self.timeout)
        owed = self.cashing_out()
        if not owed:
            return []
        currency = self.follower.table.view.currency or "USD"
        return [
            Text(
                f"cash-out of {money(owed, currency)} {currency} from {self.stream_id} is on "
                f"its way to your wallet (not received in {self.timeout:g} s): the handler "
                "sends it on, and your wallet shows it when it lands",
                style="bold yellow",
            )
        ]

    def _still_seated(self) -> list[RenderableType]:
        """Said on quitting: the seat and its money stay at the table (only ``leave`` cashes
        out), and a hand in play is finished by the table's clock, not by the player."""
        table = self.follower.table
        account = table.accounts.get(self.player_id)
        if account is None or not account.seated:
            return []
        currency = table.view.currency or "USD"
        held = account.available + account.in_play
        said = f"you are still seated at {table.view.stream_id}"
        if held:
            # the screen shows the two apart ("balance 95.00 · in play 5.00"): so does this
            said += f" with {money(held, currency)} {currency}"
            if account.in_play:
                said += f" ({money(account.available, currency)} available and "
                said += f"{money(account.in_play, currency)} in play)"
            said += ": start blackjack play again and type leave to cash out"
        else:  # "leave to cash out" with 0.00 read as money waiting
            said += ", with no money there: start blackjack play again to play on"
        return [Text(said + self._round_left(), style="yellow")]

    def _round_left(self) -> str:
        """What becomes of the player's part of the round under way when the session ends:
        a shared table's clock plays on for them, the disconnection policy gives a bet not
        dealt back, and elsewhere the round waits as it was left (the rules sheet's words)."""
        table = self.follower.table
        view = table.view
        record = table.rounds.get(view.round)
        if not view.round_open or record is None:
            return ""
        mine = [box for box in record.boxes if box.player_id == self.player_id]
        if not mine:
            return ""
        rules = view.rules or {}
        dealt = any(box.hands for box in mine)
        if rules.get("turn_seconds"):
            if dealt:
                return "; the round goes on without you: the clock stands your hand at its deadline"
            return (
                "; the round goes on without you: your bet is dealt in with the round (once the "
                "others press Deal, at the latest at the deadline), and the clock stands your hand"
            )
        if rules.get("refund_bets_on_disconnect") and not dealt:
            return "; your bet not dealt is returned to you once the table finds you gone"
        return "; your round waits for you as you left it"

    async def rules(self) -> RenderableType:
        """The table's own rules (overrides included) and their return, computed once (a few
        seconds, in a thread: the table is still followed meanwhile)."""
        opened = self.follower.table.view.rules
        if opened is None:
            return Text("the table is not open", style="yellow")
        rules = Rules.model_validate(opened, context=RECORDED)  # as the table was opened
        if rules not in self._returns:
            self._returns[rules] = await asyncio.to_thread(table_returns, rules)
        return rules_screen(rules, self._returns[rules])

    def stood_up_between_rounds(self) -> list[dict[str, Any]]:
        """The players the operator stood up since the table's last round closed: such a
        ``SeatLeft`` is in no round's recall, so the round's notes did not say it (the player
        read only "not seated", as if they had left, and the others nothing)."""
        table = self.follower.table
        if table.view.round_open:
            return []  # the open round's recall holds them
        record = table.rounds.get(table.view.round)
        return [
            envelope.data.model_dump(mode="json")
            for envelope in self.follower.folded_since(
                0 if record is None else record.last_sequence
            )
            if isinstance(envelope.data, ev.SeatLeft) and envelope.data.reason == "operator"
        ]

    def screen(self) -> RenderableType:
        wallet = None if self.wallet is None else self.wallet.wallet.view
        return table_screen(
            self.follower.table,
            self.player_id,
            datetime.now(UTC),
            wallet,
            self.stood_up_between_rounds(),
            cashing_out=self.cashing_out(),
        )
