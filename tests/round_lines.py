"""What a player's line in a round must say, from the round's events alone (the unit and the
integration tests of the game recall): every stake placed so far, what the wagers settled so
far paid and their result, and once the round is settled or voided, its own figures."""

from __future__ import annotations

from dataclasses import dataclass

from blackjack.domain import events as ev


@dataclass
class _Line:
    wagered: int = 0
    paid: int = 0
    settled: int = 0
    final: tuple[int, int, int] | None = None


class LineTally:
    def __init__(self) -> None:
        self.lines: dict[tuple[int, str], _Line] = {}

    def _of(self, number: int, player_id: str) -> _Line:
        return self.lines.setdefault((number, player_id), _Line())

    def add(self, event: object) -> None:
        match event:
            case ev.BetPlaced() | ev.InsuranceTaken() | ev.HandSplit() | ev.HandDoubled():
                self._of(event.round, event.player_id).wagered += event.amount
            case ev.BetRefunded():
                self._of(event.round, event.player_id).wagered -= event.amount
            case ev.HandSettled() | ev.InsuranceSettled():
                line = self._of(event.round, event.player_id)
                line.paid += event.payout
                line.settled += event.stake
            case ev.RoundSettled():
                for result in event.results:
                    final = (result.wagered, result.paid, result.net)
                    line = self._of(event.round, result.player_id)
                    # what the line showed as the round played adds up to the settlement
                    assert (line.wagered, line.paid, line.paid - line.settled) == final
                    line.final = final
            case ev.RoundVoided():
                for back in event.returns:
                    paid = back.paid + back.returned
                    final = (back.wagered, paid, paid - back.wagered)
                    self._of(event.round, back.player_id).final = final

    def line(self, number: int, player_id: str) -> tuple[int, int, int]:
        """(wagered, paid, net) of the player's line in the round now."""
        line = self._of(number, player_id)
        if line.final is not None:
            return line.final
        return line.wagered, line.paid, line.paid - line.settled
