"""One player's session at a table: a typed line in, what to show out. The Kafka clients
are the caller's (``cli``); the tests drive a session the same way."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime

from rich.console import RenderableType
from rich.text import Text

from blackjack.client import BlackjackClient
from blackjack.domain import commands as cmd
from blackjack.domain import wallet as wl
from blackjack.domain.rules import Rules
from blackjack.messages.envelope import CommandResult
from blackjack.play.follow import TableFollower
from blackjack.play.moves import Help, History, NotAMove, Quit, ShowRules, move
from blackjack.play.screen import history_screen, result_line, rules_screen, table_screen
from blackjack.rules_sheet import Returns, table_returns


@dataclass
class PlaySession:
    client: BlackjackClient
    follower: TableFollower
    player_id: str
    timeout: float = 10.0
    over: bool = False
    results: list[CommandResult] = field(default_factory=list)
    _returns: dict[Rules, Returns] = field(default_factory=dict)

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
        result = await self.client.execute(stream_id, command, timeout=self.timeout)
        self.results.append(result)
        if stream_id == self.stream_id and result.last_sequence is not None:
            await self.follower.until(result.last_sequence, self.timeout)
        return result

    async def funded(self, before: int) -> bool:
        """Wait (up to the timeout) for the player's money at the table to move from
        ``before``: a buy-in credited. False when it did not (declined, or late)."""
        try:
            await self.follower.wait_until(lambda: self.available() != before, self.timeout)
        except TimeoutError:
            return False
        return True

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
            self.over = True
            return []
        if isinstance(chosen, Help):
            return [Text(chosen.text)]
        if isinstance(chosen, History):
            return [history_screen(self.follower.table, self.player_id, chosen.rounds)]
        if isinstance(chosen, ShowRules):
            return [await self.rules()]
        result = await self.send(chosen)
        return [result_line(type(chosen).__name__, result), self.screen()]

    async def rules(self) -> RenderableType:
        """The table's own rules (overrides included) and their return, computed once (a few
        seconds, in a thread: the table is still followed meanwhile)."""
        opened = self.follower.table.view.rules
        if opened is None:
            return Text("the table is not open", style="yellow")
        rules = Rules.model_validate(opened)
        if rules not in self._returns:
            self._returns[rules] = await asyncio.to_thread(table_returns, rules)
        return rules_screen(rules, self._returns[rules])

    def screen(self) -> RenderableType:
        return table_screen(self.follower.table, self.player_id, datetime.now(UTC))
