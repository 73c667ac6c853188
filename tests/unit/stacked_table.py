"""A table played through ``blackjack.table.apply`` from a shoe whose first cards are given
(each box then the upcard, each box then the hole card), with the clock under the test's
control: what the unit tests of turns and clocks play on."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import Rules
from blackjack.domain.state import TableState
from blackjack.scenario import build_shoe
from blackjack.table import apply

START = datetime(2026, 1, 1, tzinfo=UTC)


class StackedTable:
    def __init__(
        self, variant: str, cards: Sequence[str], overrides: dict[str, object] | None = None
    ) -> None:
        def shuffler(rules: Rules) -> cmd.ShuffleShoe:
            order = build_shoe(rules.decks, list(cards))
            return cmd.ShuffleShoe(order=order, salt="stacked-salt-0000")

        self.shuffler = shuffler
        self.state = TableState()
        self.now = START
        self.events: list[ev.Event] = []
        self.do(cmd.OpenTable(variant=variant, overrides=overrides or {}))

    def send(self, command: cmd.Command) -> list[ev.Event] | Rejection:
        """The command's events, or its rejection (which changes nothing)."""
        result = apply(self.state, command, self.now, self.shuffler)
        if isinstance(result, Rejection):
            return result
        self.state = result.state
        self.events += result.events
        return result.events

    def do(self, *commands: cmd.Command) -> list[ev.Event]:
        """Each command must be accepted; the events of the last one."""
        events: list[ev.Event] = []
        for command in commands:
            sent = self.send(command)
            assert not isinstance(sent, Rejection), (command, sent)
            events = sent
        return events
