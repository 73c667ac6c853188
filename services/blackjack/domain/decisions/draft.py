"""A decision in progress: the draft of the state its events fold into as they are emitted,
and the refusal that abandons it (its events are thrown away)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from blackjack.domain import events as ev
from blackjack.domain.evolve import apply_event
from blackjack.domain.rejections import Rejection, RejectionCode
from blackjack.domain.state import TableState


class Refused(Exception):
    """Carries a rejection out of a half-made decision; its events are thrown away.

    The pydantic ``Rejection`` is built only when the decider returns it, and a message that
    takes work to format may be given as a function: the options of each decision a hand
    waits for (``hand_actions``, ``turn_options``) drop two or three refusals."""

    def __init__(self, code: RejectionCode, message: str | Callable[[], str]) -> None:
        # No super().__init__: BaseException.__new__ has kept the arguments already, and the
        # option checks make two or three of these per decision.
        self.code = code
        self._message = message

    @property
    def message(self) -> str:
        return self._message if isinstance(self._message, str) else self._message()

    @property
    def rejection(self) -> Rejection:
        return Rejection(code=self.code, message=self.message)

    def __str__(self) -> str:
        return self.message


def refuse(code: RejectionCode, message: str | Callable[[], str]) -> Refused:
    return Refused(code, message)


class Draft:
    """The state of a decision in progress and the events it has emitted so far."""

    __slots__ = ("events", "now", "state")

    def __init__(self, state: TableState, now: datetime) -> None:
        self.state = state.copy()  # the draft: the caller's state is never changed
        self.now = now
        self.events: list[ev.Event] = []

    def emit(self, event: ev.Event) -> None:
        self.events.append(event)
        apply_event(self.state, event)

    def deadline(self) -> datetime | None:
        seconds = self.state.rules.turn_seconds
        return None if seconds is None else self.now + timedelta(seconds=seconds)
