"""What the replay of one table knows as it folds, and how a check it makes is counted and,
when it fails, becomes a ``Finding`` of the stream and of the round it belongs to.

``Checker`` is the base of the table's replayer (``replay.TableReplayer``) and of the checks it
makes (``money_checks``, ``table_checks``).
"""

from __future__ import annotations

from datetime import datetime

from blackjack.audit.replayed import Finding, RoundReplay, StreamReplay
from blackjack.domain import events as ev
from blackjack.domain.decided_by import DecisionsInOrder
from blackjack.domain.state import INITIAL_STATE
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import WireEnvelope


class Checker:
    def __init__(self, stream_id: str, seal: ShoeSeal | None, complete: bool) -> None:
        self.out = StreamReplay(stream_id)
        self.seal = seal
        self.complete = complete
        self.reveals: dict[int, ev.ShoeRetired] = {}
        """the reveals read and not folded yet, by shoe"""
        self.state = INITIAL_STATE
        self.current: RoundReplay | None = None
        self.envelope: WireEnvelope | None = None
        self.sealed: int | None = None
        """a shoe that neither the key nor a reveal opens: nothing can be dealt from it"""
        self.sealed_because: str | None = None
        """why the key did not open the last shoe it could not open"""
        self.opened_v2 = False
        """the key opened a shoe sealed under the shoe key (``2.``) at this table"""
        self.commitments: dict[str, int] = {}
        """each shoe's commitment -> the shoe that first had it"""
        self.previous_at: datetime | None = None
        """when the event before this one was written (a ``RoundResumed`` that restarts no
        clock aside: the table's last event stays the one before it)"""
        self.active_at: datetime | None = None
        """when the table's last event of play before this one was written: its last event
        but a refused platform money command's record and a ``RoundResumed``
        (``platform_money.counts_as_activity``), from which an interrupted round's wait
        counts"""
        self.closing: tuple[int, str | None] | None = None
        """the round an operator's CloseInterruptedRound is closing, and that command's id"""
        self.decisions = DecisionsInOrder()
        """who decided each event of the round's recall"""
        self.resumed_by: str | None = None
        """the command whose ``RoundResumed`` was the event just folded: its own events must
        follow at once"""
        self.cards_due: list[tuple[int, int] | None] = []
        """where the next cards go, in order, as the decider deals them after a deal, a hit, a
        double or a split: a box's hand, or None for the dealer"""
        self.open_at_reveal: list[str] = []
        """the hands still open when the round's hole card was revealed"""
        self.misrecorded: dict[str, int] = {}
        """players whose event just folded recorded a balance the rules do not give -> the
        balance the rules give: the state takes it once the event is folded, so that the
        events after it are checked against the rules, not against the recorded figure (a
        balance changed in one event is named there, not at the next event too)"""
        self.due_to_stand_up: dict[str, int] = {}
        """players the table's rules stand up at the end of the round just settled (their
        rounds sat out): each one's ``SeatLeft`` (reason ``sat_out``) must follow at once"""

    # ---- findings -----------------------------------------------------------------------

    def _find(self, message: str) -> None:
        envelope = self.envelope
        data = envelope.data if envelope else None
        number = data.round if isinstance(data, ev.RoundEvent) else None
        finding = Finding(
            self.out.stream_id, envelope.sequence if envelope else None, number, message
        )
        self.out.findings.append(finding)
        current = self.current
        if current is not None and number == current.round:
            current.findings.append(finding)
            if current.lines and envelope and current.lines[-1].sequence == envelope.sequence:
                current.lines[-1].problems.append(message)

    def _expect(self, what: str, recorded: object, derived: object) -> bool:
        self.out.checks += 1
        if self.current is not None:
            self.current.checks += 1
        if recorded == derived:
            return True
        self._find(f"{what}: recorded {recorded}, the rules give {derived}")
        return False

    def _balance(self, player_id: str) -> int:
        player = self.state.players.get(player_id)
        if player is None:
            raise _Unfoldable(f"{player_id} is not seated")
        return player.balance

    def _moves(self, player_id: str, delta: int, balance_after: int) -> None:
        before = self._balance(player_id)
        if not self._expect(f"{player_id}'s balance after", balance_after, before + delta):
            self.misrecorded[player_id] = before + delta
        if balance_after < 0:
            self._find(f"{player_id}'s balance went below zero ({balance_after})")
        self._round_balance(player_id, before, delta, balance_after)

    def _round_balance(self, player_id: str, before: int, delta: int, balance_after: int) -> None:
        """The open round's balances: moved by its wagers and payouts from the player's first
        one on, and by money paid in or taken out at the table while it plays."""
        current = self.current
        data = self.envelope.data if self.envelope else None
        if current is not None and isinstance(data, ev.RoundEvent) and data.round == current.round:
            span = current.balances.setdefault(player_id, [before, before])
            span[1] = balance_after
        elif current is not None and current.status in _OPEN and player_id in current.balances:
            current.moved[player_id] = current.moved.get(player_id, 0) + delta
            current.balances[player_id][1] = balance_after

    def _balances_as_the_rules_give(self) -> None:
        """After an event that recorded a balance the rules do not give is folded."""
        if self.misrecorded:
            draft = self.state.copy()
            draft.players = {
                pid: player.changed(balance=self.misrecorded.get(pid, player.balance))
                for pid, player in draft.players.items()
            }
            self.state, self.misrecorded = draft, {}

    def _rule(self, problem: str | None) -> None:
        """One check that the table's rules allowed what the event records."""
        self.out.checks += 1
        if self.current is not None:
            self.current.checks += 1
        if problem is not None:
            self._find(problem)


class _Unfoldable(Exception):
    """An event refers to something the state does not have."""


_OPEN = ("betting", "playing")
