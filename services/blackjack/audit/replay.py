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

from collections.abc import Callable, Iterable
from hashlib import sha256
from typing import Any

from blackjack.audit.checking import _OPEN, _Unfoldable
from blackjack.audit.money_checks import MoneyChecks
from blackjack.audit.replayed import (
    Line,
    RoundReplay,
    ShoeCheck,
    StreamReplay,
    newer_than_read,
    placement_problems,
)
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
from blackjack.messages.wire import SealedShoeShuffled, WireEnvelope, WireEvent, encode


class _Stop(Exception):
    pass


class _Sealed(ev.Event):
    """Stands for a shuffle that cannot be opened: folded as nothing."""


class OnceEach:
    """A stream's events as read from the topic, in the order written (its single writer
    writes them in sequence), with an event the topic holds twice (the same event, as a
    retried write can leave it, or another release's copy of it) passed once, as the
    projections count it. Two different events at one place both pass, and so does one out
    of order: the replay reports them ("sequence N where M was due").

    The events are not held: ``blackjack replay --source kafka`` held a table's whole log (a
    month of a busy table is about 860,000 events), sorted. A SHA-256 of each event as this
    release encodes it is kept instead (27 MB for those 860,000, in sequence order; a shorter
    digest would let whoever writes to the topic make a forged event pass unseen as a copy)."""

    DIGEST_BYTES = 32

    def __init__(self) -> None:
        self._in_order = bytearray()  # the digest of sequence n at (n - 1) * DIGEST_BYTES
        self._elsewhere: dict[int, set[bytes]] = {}  # out of order, or more than one

    def first(self, envelope: WireEnvelope) -> bool:
        """Whether ``envelope`` is read for the first time at its sequence."""
        digest = sha256(encode(envelope)).digest()
        size = self.DIGEST_BYTES
        at = (envelope.sequence - 1) * size
        elsewhere = self._elsewhere.get(envelope.sequence)
        if elsewhere is None and 0 <= at == len(self._in_order):
            self._in_order += digest  # the next in sequence: the usual case
            return True
        if 0 <= at < len(self._in_order) and self._in_order[at : at + size] == digest:
            return False
        if elsewhere is None:
            elsewhere = self._elsewhere[envelope.sequence] = set()
        if digest in elsewhere:
            return False
        elsewhere.add(digest)
        return True


def replay_stream(
    wires: Iterable[WireEnvelope],
    seal: ShoeSeal | None = None,
    stream_id: str | None = None,
    *,
    complete: bool = True,
) -> StreamReplay:
    """Fold and check one stream's events (in sequence order). ``complete``: ``wires`` is the
    whole log so far, not a read model that may lag it (where a decision's events may be
    folded only in part: a stand-up due at the end is then not missing, only not yet read)."""
    wires = list(wires)
    name = stream_id or (wires[0].stream_id if wires else "?")
    if is_wallet_stream(name):
        return replay_wallet(name, wires)
    replayer = TableReplayer(name, seal, complete)
    for envelope in wires:
        replayer.feed(envelope)
    return replayer.finish()


class TableReplayer(MoneyChecks, TableChecks):
    """Folds a table's events in order, opening each sealed shoe, and checks each one (the
    money in ``MoneyChecks``, the table's rules in ``TableChecks``) before folding it.

    Fed one event at a time (``feed``, then ``finish``), so that a table's log need not be
    in memory at once: only a shoe's events wait, from its ``ShoeShuffled`` until its
    ``ShoeRetired`` reveals the order (or the log ends), to be checked against that reveal.
    ``keep``: which rounds to keep once the next one opens (the audit keeps none, counting
    them; ``blackjack replay`` the one it tells); every round without it."""

    def __init__(
        self,
        stream_id: str,
        seal: ShoeSeal | None,
        complete: bool = True,
        *,
        keep: Callable[[int], bool] | None = None,
    ) -> None:
        super().__init__(stream_id, seal, complete)
        self.keep = keep
        self._waiting: list[WireEnvelope] = []
        self._waiting_for: int | None = None
        """the shoe whose reveal the events in ``_waiting`` wait for"""
        self._expected = 1

    def feed(self, envelope: WireEnvelope) -> None:
        """The next event of the log: folded now, or once the reveal it waits for is read."""
        data = envelope.data
        if isinstance(data, ev.ShoeRetired):
            self.reveals.setdefault(data.shoe, data)
        self._take(envelope)
        if isinstance(data, ev.ShoeRetired) and data.shoe == self._waiting_for:
            waiting, self._waiting, self._waiting_for = self._waiting, [], None
            for waited in waiting:  # (one may be the next shoe's shuffle: it waits again)
                self._take(waited)

    def _take(self, envelope: WireEnvelope) -> None:
        data = envelope.data
        if self._waiting_for is None:
            if not isinstance(data, SealedShoeShuffled) or data.shoe in self.reveals:
                self._fold(envelope)
                return
            self._waiting_for = data.shoe  # a sealed shuffle whose reveal may still come
        self._waiting.append(envelope)

    def finish(self) -> StreamReplay:
        """The end of the log: what waits for a reveal that never came is folded without it."""
        waiting, self._waiting, self._waiting_for = self._waiting, [], None
        for envelope in waiting:
            self._fold(envelope)
        if self.due_to_stand_up and not self.out.stopped and self.complete:
            self._stood_up_when_due(None)  # the log ends without them
        if self.resumed_by is not None and not self.out.stopped and self.complete:
            self._find("the log ends with a RoundResumed and none of its command's events")
        self.out.state = self.state
        return self.out

    # ---- the fold -----------------------------------------------------------------------

    def _fold(self, envelope: WireEnvelope) -> None:
        if self.out.stopped is not None:
            return
        self.envelope = envelope
        if envelope.stream_id != self.out.stream_id:
            self._find(f"event of stream {envelope.stream_id} in this stream's log")
        if envelope.sequence != self._expected:
            self._find(f"sequence {envelope.sequence} where {self._expected} was due")
        self._expected = envelope.sequence + 1
        for problem in placement_problems(envelope, self.out):
            self._find(problem)
        try:
            event = self._opened(envelope.data)
            if isinstance(event, _Sealed):
                self.out.events += 1
                return
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
            self._balances_as_the_rules_give()
            # A settled game cycle's end; not a void's: a voided round is no round sat
            # out, so it brings no one to the table's limit (a stand-up after it is found
            # as one before the count reached the limit), but where a version 1's handler
            # counted it and stood up after it those it brought there.
            if isinstance(event, ev.RoundSettled) or (
                isinstance(event, ev.RoundVoided) and event.counts_as_round_sat_out
            ):
                self._due_to_stand_up()
            if isinstance(event, ev.ShoeRetired):
                # its reveal has served (kept, a table that shuffles every round would hold
                # one a round)
                self.reveals.pop(event.shoe, None)
        except _Stop as stop:
            self.out.stopped = str(stop)
            return
        except Exception as error:  # a log the engine cannot fold: tampered or misordered
            self._find(f"the engine cannot fold {envelope.type}: {error}")
            self.out.stopped = f"corrupt log at event {envelope.sequence}"
            return
        self.out.events += 1
        # A marker is written with the command after it, at its time, but for one that restarts
        # a clock, which may stand alone: the table's last event then, and the next names it.
        if not isinstance(event, ev.RoundResumed) or event.deadline is not None:
            self.previous_at = envelope.occurred_at
        if counts_as_activity(event):
            self.active_at = envelope.occurred_at

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
                self.out.opened_by_key = self.opened_v2
            except SealedForOthers as other:
                # sealed under the master key (before the shoe key) or under another shoe key
                # (a key of another deployment given?): opened by its reveal, a finding only
                # where this key opened the table's shoes sealed the same way before: a shoe
                # whose order whoever writes the events topic chose, sealed under a key of
                # their own, with a reveal to match (a review's drill), or a key rotation's
                # key the audit was not given (``blackjack audit-key`` prints every one)
                self.sealed_because = str(other)
                if data.sealed.startswith(SEALED_V2) and not self.opened_v2:
                    self.out.under_other_keys[shoe] = str(ShoeSeal.key_id_of(data.sealed))
                if self.opened_v2 and data.sealed.startswith(SEALED_V2):
                    self._find(
                        f"shoe {shoe} is sealed under another key than the shoes before (key "
                        f"id {ShoeSeal.key_id_of(data.sealed)}: a key rotation's key "
                        "this audit was not given, or a shoe no handler sealed)"
                    )
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
        newer = newer_than_read(event)
        if newer is not None:
            self._find(newer)
        self._card_flow(event)
        if isinstance(event, ev.RoundOpened):
            rules = self.state.rules
            self.current = RoundReplay(self.out.stream_id, event.round, rules.name, rules.currency)
            if self.keep is not None:
                for number in [n for n in self.out.rounds if not self.keep(n)]:
                    del self.out.rounds[number]
            self.out.rounds[event.round] = self.current
            self.out.rounds_replayed += 1
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
    ev.InterruptedRoundClosed: TableReplayer.interrupted_round_closed,
    ev.PlayerTimedOut: TableReplayer.player_timed_out,
    ev.RoundResumed: TableReplayer.round_resumed,
    ev.FundsDeposited: TableReplayer.funds,
    ev.FundsWithdrawn: TableReplayer.funds,
    ev.TableOpened: TableReplayer.table_opened,
    ev.RoundOpened: TableReplayer.round_opened,
    ev.DealerHoleCardRevealed: TableReplayer.hole_card_revealed,
    ev.SeatChanged: TableReplayer.seat_changed,
    ev.SeatLeft: TableReplayer.seat_left,
    ev.SeatTaken: TableReplayer.seat_taken,
    ev.ShoeShuffled: TableReplayer.shoe_shuffled,
    ev.ShoeRetired: TableReplayer.shoe_retired,
    ev.BetPlaced: TableReplayer.bet_placed,
    ev.BetRefunded: TableReplayer.bet_refunded,
    ev.DealStarted: TableReplayer.deal_started,
    ev.InsuranceOffered: TableReplayer.insurance_offered,
    ev.DealerPeeked: TableReplayer.dealer_peeked,
    ev.TurnStarted: TableReplayer.turn_started,
    ev.PlayerHit: TableReplayer.player_hit,
    ev.PlayerStood: TableReplayer.player_stood,
    ev.HandSurrendered: TableReplayer.hand_surrendered,
    ev.InsuranceTaken: TableReplayer.insurance_taken,
    ev.InsuranceSettled: TableReplayer.insurance_settled,
    ev.HandDoubled: TableReplayer.hand_doubled,
    ev.HandSplit: TableReplayer.hand_split,
    ev.HandSettled: TableReplayer.hand_settled,
    ev.RoundSettled: TableReplayer.round_settled,
    ev.RoundVoided: TableReplayer.round_voided,
}
