"""Replaying a table's events through the pure engine, checking each against the rules.

The events arrive in their public (wire) form. To fold them, ``evolve`` needs each shoe's
order: it comes from the shoe key (``BLACKJACK_SHOE_KEY``, which opens the sealed
``ShoeShuffled``) or, once the shoe is retired, from the ``ShoeRetired`` reveal. Either way
the order must hash to the commitment published when the shoe was shuffled.

Every event is checked against the state the events before it fold to: every balance moves by
exactly the amount of its event and never goes below zero, every stake is what the rules
charge, every card is the next one of the shoe, every move (hit, stand, double, split,
surrender, insurance) was one the table's rules allowed that player on that hand at that
point, insurance was offered under an ace to exactly the boxes the rules offer it to (never a
blackjack, never a box whose balance cannot cover it, no box left out), the dealer peeked
where the rules make her and the peek found what her cards hold, the dealer draws by the
table's rule, every payout is derived again (``audit.settlement``) and compared with the
recorded one, paid to the box's own player, each round's results add up and its messages are
the rules' (page 000's Break Even). A failed check is a ``Finding``; the replay continues
unless the log can no longer be folded at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from blackjack.audit.checking import _OPEN, _Unfoldable
from blackjack.audit.money_checks import MoneyChecks
from blackjack.audit.replayed import Line, RoundReplay, ShoeCheck, StreamReplay
from blackjack.audit.table_checks import TableChecks
from blackjack.audit.wallet_replay import replay_wallet
from blackjack.audit.words import describe
from blackjack.domain import events as ev
from blackjack.domain import wallet as wl
from blackjack.domain.evolve import evolve
from blackjack.domain.platform_money import counts_as_activity
from blackjack.domain.shoe import commitment
from blackjack.domain.wallet import is_wallet_stream
from blackjack.messages.sealing import SEALED_V2, SealedForOthers, SealError, ShoeSeal
from blackjack.messages.wire import SealedShoeShuffled, WireEnvelope, WireEvent


class _Stop(Exception):
    pass


class _Sealed(ev.Event):
    """Stands for a shuffle that cannot be opened: folded as nothing."""


def in_sequence(records: Iterable[WireEnvelope]) -> list[WireEnvelope]:
    """A stream's events as read from the topic, in sequence order, with a record the topic
    holds twice (the same event, byte for byte, as a retried write can leave it) counted once,
    as the projections count it. Two different events at one place are both kept: the replay
    reports them."""
    kept: list[WireEnvelope] = []
    at: dict[int, list[WireEnvelope]] = {}
    for envelope in sorted(records, key=lambda e: e.sequence):
        here = at.setdefault(envelope.sequence, [])
        if envelope not in here:
            here.append(envelope)
            kept.append(envelope)
    return kept


def replay_stream(
    wires: Sequence[WireEnvelope],
    seal: ShoeSeal | None = None,
    stream_id: str | None = None,
    *,
    complete: bool = True,
) -> StreamReplay:
    """Fold and check one stream's events (in sequence order). ``complete``: ``wires`` is the
    whole log so far, not a read model that may lag it (where a decision's events may be
    folded only in part: a stand-up due at the end is then not missing, only not yet read)."""
    name = stream_id or (wires[0].stream_id if wires else "?")
    if is_wallet_stream(name):
        return replay_wallet(name, wires)
    return _Replayer(name, list(wires), seal, complete).run()


class _Replayer(MoneyChecks, TableChecks):
    """Folds a table's events in order, opening each sealed shoe, and checks each one (the
    money in ``MoneyChecks``, the table's rules in ``TableChecks``) before folding it."""

    # ---- the fold -----------------------------------------------------------------------

    def run(self) -> StreamReplay:
        expected = 1
        for envelope in self.wires:
            self.envelope = envelope
            if envelope.stream_id != self.out.stream_id:
                self._find(f"event of stream {envelope.stream_id} in this stream's log")
            if envelope.sequence != expected:
                self._find(f"sequence {envelope.sequence} where {expected} was due")
            expected = envelope.sequence + 1
            try:
                event = self._opened(envelope.data)
                if isinstance(event, _Sealed):
                    self.out.events += 1
                    continue
                if not isinstance(event, ev.Event):
                    raise _Unfoldable(f"{type(event).__name__} is a wallet's event, not a table's")
                if isinstance(event, ev.DealStarted) and event.shoe == self.sealed:
                    raise _Stop(
                        f"shoe {event.shoe} is still sealed{self._why_sealed()}: set "
                        f"BLACKJACK_AUDIT_KEY (or BLACKJACK_SHOE_KEY, for a shoe sealed before "
                        f"the audit key) to replay round {event.round} and what follows it"
                    )
                self._check(event)
                self._stood_up_when_due(event)
                self.state = evolve(self.state, event)
                # A settled game cycle's end; not a void's: a voided round is no round sat
                # out, so it brings no one to the table's limit (a stand-up after it is found
                # as one before the count reached the limit), but where a version 1's handler
                # counted it and stood up after it those it brought there.
                if isinstance(event, ev.RoundSettled) or (
                    isinstance(event, ev.RoundVoided) and event.counts_as_round_sat_out
                ):
                    self._due_to_stand_up()
            except _Stop as stop:
                self.out.stopped = str(stop)
                break
            except Exception as error:  # a log the engine cannot fold: tampered or misordered
                self._find(f"the engine cannot fold {envelope.type}: {error}")
                self.out.stopped = f"corrupt log at event {envelope.sequence}"
                break
            self.out.events += 1
            if not isinstance(event, ev.RoundResumed):  # written with the command after it
                self.previous_at = envelope.occurred_at
            if counts_as_activity(event):
                self.active_at = envelope.occurred_at
        if self.due_to_stand_up and not self.out.stopped and self.complete:
            self._stood_up_when_due(None)  # the log ends without them
        if self.resumed_by is not None and not self.out.stopped and self.complete:
            self._find("the log ends with a RoundResumed and none of its command's events")
        self.out.state = self.state
        return self.out

    def _why_sealed(self) -> str:
        return "" if self.sealed_because is None else f" ({self.sealed_because})"

    def _opened(self, data: WireEvent) -> ev.Event | wl.WalletEvent | _Sealed:
        """The event in the clear: a sealed shoe opened with the key or by its reveal."""
        if isinstance(data, SealedShoeShuffled | ev.ShoeShuffled):
            self._shuffled(data.shoe, data.commitment)
        if not isinstance(data, SealedShoeShuffled):
            return data
        shoe = data.shoe
        sources: list[tuple[str, tuple[str, ...], str]] = []
        revealed = self.reveals.get(shoe)
        if revealed is not None:
            sources.append(("revealed", tuple(revealed.order), revealed.salt))
        if self.seal is not None:
            try:
                order, salt = self.seal.unseal(self.out.stream_id, shoe, data.sealed)
                sources.append(("key", order, salt))
                self.opened_v2 = self.opened_v2 or data.sealed.startswith(SEALED_V2)
            except SealedForOthers as other:
                # sealed under the master key (before the shoe key) or under another shoe key
                # (a key of another deployment given?): opened by its reveal, a finding only
                # where this key opened the table's shoes sealed the same way before
                self.sealed_because = str(other)
                if self.opened_v2 and data.sealed.startswith(SEALED_V2):
                    self._find(f"shoe {shoe} is sealed under another key than the shoes before")
            except SealError:
                self._find(f"shoe {shoe} does not open with the shoe key")
        if not sources:
            self.out.shoes[shoe] = ShoeCheck(shoe, data.commitment, "sealed", False)
            self.sealed = shoe
            return _Sealed()
        verified = True
        for source, order, salt in sources:
            self.out.checks += 1
            if commitment(order, salt) != data.commitment:
                verified = False
                self._find(f"shoe {shoe}: the {source} order does not match its commitment")
        if len({(o, s) for _, o, s in sources}) > 1:
            verified = False
            self._find(f"shoe {shoe}: the sealed order differs from the revealed one")
        label = "+".join(source for source, _, _ in sources)
        self.out.shoes[shoe] = ShoeCheck(shoe, data.commitment, label, verified)
        _, order, salt = sources[0]
        return ev.ShoeShuffled(
            version=data.version,
            shoe=shoe,
            commitment=data.commitment,
            cards=data.cards,
            order=order,
            salt=salt,
        )

    # ---- the checks ---------------------------------------------------------------------

    def _decided_by_the_server(self, envelope: WireEnvelope, event: ev.Event) -> str:
        player_id: str | None = getattr(event, "player_id", None)
        said = {"reason": getattr(event, "reason", None)}  # SeatLeft's (SAYS_THE_SERVER_DECIDED)
        by = self.decisions.decided_by(envelope.causation_id, envelope.type, player_id, said)
        return "  [decided by the server]" if by == "server" else ""

    def _check(self, event: ev.Event) -> None:
        self._after_resumed(event)
        if isinstance(event, ev.RoundOpened):
            rules = self.state.rules
            self.current = RoundReplay(self.out.stream_id, event.round, rules.name, rules.currency)
            self.out.rounds[event.round] = self.current
        current = self.current
        if isinstance(event, ev.RoundEvent) and (current is None or current.round != event.round):
            raise _Unfoldable(f"round {event.round} was never opened")
        during = current is not None and current.status in _OPEN
        stood_up = isinstance(event, ev.SeatLeft) and event.reason == "sat_out"
        if isinstance(event, ev.RoundEvent) or (
            current is not None and (stood_up or (during and isinstance(event, _IN_RECALL)))
        ):
            assert self.envelope is not None and current is not None
            text = describe(self.state, event) + self._decided_by_the_server(self.envelope, event)
            current.lines.append(Line(self.envelope.sequence, self.envelope.occurred_at, text))
        closing = self.closing
        if closing is not None and (
            not isinstance(event, ev.RoundEvent)
            or (event.round, self.envelope and self.envelope.causation_id) != closing
        ):
            self.closing = None  # the closing command's events are over
        if self.closing is not None and isinstance(event, _NEVER_WHEN_CLOSING):
            self._find(
                f"{type(event).__name__} while closing an interrupted round, which only stands"
            )
        checker = _CHECKS.get(type(event))
        if checker is not None:
            checker(self, event)
        if current is not None and isinstance(event, ev.RoundSettled | ev.RoundCancelled):
            current.status = "settled" if isinstance(event, ev.RoundSettled) else "cancelled"


_IN_RECALL = ev.IN_A_ROUND_S_RECALL

_NEVER_WHEN_CLOSING = (
    ev.PlayerHit,
    ev.HandDoubled,
    ev.HandSplit,
    ev.HandSurrendered,
    ev.InsuranceTaken,
    ev.BetPlaced,
    ev.DealRequested,
)
"""What closing an interrupted round never does for a player."""

_CHECKS: dict[type[ev.Event], Any] = {
    ev.InterruptedRoundClosed: _Replayer.interrupted_round_closed,
    ev.PlayerTimedOut: _Replayer.player_timed_out,
    ev.RoundResumed: _Replayer.round_resumed,
    ev.FundsDeposited: _Replayer.funds,
    ev.FundsWithdrawn: _Replayer.funds,
    ev.SeatLeft: _Replayer.seat_left,
    ev.SeatTaken: _Replayer.seat_taken,
    ev.ShoeShuffled: _Replayer.shoe_shuffled,
    ev.ShoeRetired: _Replayer.shoe_retired,
    ev.BetPlaced: _Replayer.bet_placed,
    ev.BetRefunded: _Replayer.bet_refunded,
    ev.DealStarted: _Replayer.deal_started,
    ev.InsuranceOffered: _Replayer.insurance_offered,
    ev.DealerPeeked: _Replayer.dealer_peeked,
    ev.TurnStarted: _Replayer.turn_started,
    ev.PlayerHit: _Replayer.player_hit,
    ev.PlayerStood: _Replayer.player_stood,
    ev.HandSurrendered: _Replayer.hand_surrendered,
    ev.InsuranceTaken: _Replayer.insurance_taken,
    ev.InsuranceSettled: _Replayer.insurance_settled,
    ev.HandDoubled: _Replayer.hand_doubled,
    ev.HandSplit: _Replayer.hand_split,
    ev.HandSettled: _Replayer.hand_settled,
    ev.RoundSettled: _Replayer.round_settled,
    ev.RoundVoided: _Replayer.round_voided,
}
