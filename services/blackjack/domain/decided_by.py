"""Who made a player's decision: the player, or the server in the player's place.

GLI-19 game recall must show which decisions the server made for a player (a turn timer run
out, an operator closing an interrupted round). The events carry no actor: the server's
decision is the one that comes right after its ``PlayerTimedOut`` for that player, in the
same command. Game recall (the query API) and ``blackjack replay`` both read it here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from blackjack.domain import events as ev

DecidedBy = Literal["player", "server"]


def _type(event: type[ev.Event]) -> str:
    return str(event.model_fields["type"].default)


TIMED_OUT = _type(ev.PlayerTimedOut)
"""The event type of a decision the clock or a closing takes over."""

WRITTEN_FOR_THE_PLAYER: dict[str, str | None] = {
    "left_out": None,  # no decision: the player sits this round out
    "dealt_in": _type(ev.DealRequested),
    "declined_insurance": _type(ev.InsuranceDeclined),
    "stood": _type(ev.PlayerStood),
}
"""What each ``PlayerTimedOut.action`` writes next, in the player's place."""

PLAYER_DECISIONS: frozenset[str] = frozenset(
    _type(event)
    for event in (
        ev.BetPlaced,
        ev.BetRefunded,  # taken back (RemoveBet, ClearBets), passed, left: the server's below
        ev.PlayerPassed,
        ev.DealRequested,
        ev.InsuranceTaken,
        ev.InsuranceDeclined,
        ev.PlayerHit,
        ev.PlayerStood,
        ev.HandDoubled,
        ev.HandSplit,
        ev.HandSurrendered,
    )
)
"""The events that record a choice a player makes (every one a player's command can write)."""

_MADE_FOR_THE_PLAYER = frozenset(t for t in WRITTEN_FOR_THE_PLAYER.values() if t is not None)

SAYS_THE_SERVER_DECIDED: dict[str, tuple[str, frozenset[object]]] = {
    _type(ev.SeatLeft): ("reason", frozenset({"sat_out", "operator"})),
    _type(ev.BetRefunded): (
        "reason",
        frozenset({"timed_out", "disconnected", "cancelled", "stood_up"}),
    ),
}
"""Events that say themselves when the server decided them for the player, by the value of
one of their fields: a player stood up after the rounds they sat out, or by the operator (a
``SeatLeft`` with reason ``sat_out`` or ``operator``), left by a decision not their own; a
bet the server gave back in the player's place (``BetRefunded`` at the betting deadline, on a
disconnection before Deal, at an operator's closing of an interrupted round or when the
operator stands the player up), where one
the player took back, passed or left with is the player's."""


def decided_by(
    event_type: str,
    player_id: str | None,
    earlier: Sequence[tuple[str, str | None]],
    data: Mapping[str, object] | None = None,
) -> DecidedBy | None:
    """Who decided the event ``event_type`` of ``player_id``; ``None`` for an event that is not
    a decision (a card, a peek, a settlement).

    ``earlier`` lists the (type, player id) of the events the same command wrote before this
    one, oldest first. A ``PlayerTimedOut`` hands the player's next such decision to the
    server; a decision after it in the same command that is not the one it wrote is the
    player's again (there is none today: the clock's and the closing's commands write only
    their own). ``data``, the event's fields, tells the events that say it themselves
    (``SAYS_THE_SERVER_DECIDED``)."""
    says = SAYS_THE_SERVER_DECIDED.get(event_type)
    if says is not None and data is not None and data.get(says[0]) in says[1]:
        return "server"
    if event_type not in PLAYER_DECISIONS:
        return None
    if event_type in _MADE_FOR_THE_PLAYER:
        for earlier_type, earlier_player in reversed(earlier):
            if earlier_player != player_id:
                continue
            if earlier_type == TIMED_OUT:
                return "server"
            if earlier_type in _MADE_FOR_THE_PLAYER:
                break  # that decision took the timeout's place
    return "player"


class DecisionsInOrder:
    """Who decided each event of a log read in order: the events of one command are read
    together, and a new command (or an event without one) starts afresh."""

    def __init__(self) -> None:
        self._command: str | None = None
        self._earlier: list[tuple[str, str | None]] = []

    def decided_by(
        self,
        command_id: str | None,
        event_type: str,
        player_id: str | None,
        data: Mapping[str, object] | None = None,
    ) -> DecidedBy | None:
        if command_id is None or command_id != self._command:
            self._command, self._earlier = command_id, []
        by = decided_by(event_type, player_id, self._earlier, data)
        self._earlier.append((event_type, player_id))
        return by
