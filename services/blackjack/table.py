"""The service layer around the pure decider: apply one command to one table, fold its events,
and ask the shell's shuffler for a new shoe whenever the rules call for one.

The Kafka handler, the scenario runner, the simulator and the tests all go through here, so a
new shoe is always drawn at the same point: right after the command that made it due.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Final

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decide import decide_and_evolve
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import Rules
from blackjack.domain.shoe import needs_shuffle
from blackjack.domain.state import TableState

Shuffler = Callable[[Rules], cmd.ShuffleShoe]
"""Returns a new shoe order and salt for these rules (a CSPRNG in production)."""


class Applied:
    """A command's events and the state they fold to. A plain class, so that mypyc compiles
    it to a native one: the simulator makes three or four a round."""

    __slots__ = ("events", "state")

    def __init__(self, state: TableState, events: list[ev.Event]) -> None:
        self.state: Final = state
        self.events: Final = events

    def __repr__(self) -> str:
        return f"Applied(state={self.state!r}, events={self.events!r})"


def apply(
    state: TableState,
    command: cmd.Command,
    now: datetime,
    shuffler: Shuffler,
    received_at: datetime | None = None,
) -> Applied | Rejection:
    """``received_at``: when the service received the command, if not ``now`` (see
    ``decide_and_evolve``)."""
    decision = decide_and_evolve(state, command, now, received_at)
    # A Rejection, tested as "not the tuple": isinstance of a pydantic class goes through its
    # ABC metaclass (about 150 ns when it fails), a tuple's is a type check; twice a command.
    if not isinstance(decision, tuple):
        return decision
    events, state = decision
    if needs_shuffle(state):
        shuffle = decide_and_evolve(state, shuffler(state.rules), now)
        if not isinstance(shuffle, tuple):  # a broken shuffler, never the player's fault
            raise RuntimeError(f"the shuffler's shoe was refused: {shuffle.message}")
        events = [*events, *shuffle[0]]
        state = shuffle[1]
    return Applied(state=state, events=events)
