"""Replaying a table's events through the pure engine, checking each against the rules.

The events arrive in their public (wire) form. To fold them, ``evolve`` needs each shoe's
order: it comes from the shoe key (``BLACKJACK_SHOE_KEY``, which opens the sealed
``ShoeShuffled``) or, once the shoe is retired, from the ``ShoeRetired`` reveal. Either way
the order must hash to the commitment published when the shoe was shuffled.

Every event is checked against the state the events before it fold to: every balance moves by
exactly the amount of its event and never goes below zero, every stake is what the rules
charge, every card is the next one of the shoe, every move (hit, stand, double, split,
surrender, insurance) was one the table's rules allowed that player on that hand at that
point, the dealer peeked where the rules make her and the peek found what her cards hold, the
dealer draws by the table's rule, every payout is derived again (``audit.settlement``) and
compared with the recorded one, paid to the box's own player, and each round's results add
up. A failed check is a ``Finding``; the replay continues unless the log
can no longer be folded at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from blackjack.audit.replayed import (
    Finding,
    Line,
    RoundReplay,
    Settlement,
    ShoeCheck,
    StreamReplay,
)
from blackjack.audit.settlement import (
    Move,
    dealer_blackjack_ruled_out,
    dealer_play_problem,
    hand_result,
    insurance_result,
    move_problem,
    moves_allowed,
    peek_required,
)
from blackjack.audit.wallet_replay import replay_wallet
from blackjack.audit.words import describe
from blackjack.domain import events as ev
from blackjack.domain import wallet as wl
from blackjack.domain.cards import fresh_shoe
from blackjack.domain.decided_by import DecisionsInOrder
from blackjack.domain.evolve import evolve
from blackjack.domain.hand import is_natural, total
from blackjack.domain.payouts import insurance_stake
from blackjack.domain.shoe import commitment
from blackjack.domain.state import INITIAL_STATE, Hand
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


class _Replayer:
    def __init__(
        self, stream_id: str, wires: list[WireEnvelope], seal: ShoeSeal | None, complete: bool
    ) -> None:
        self.out = StreamReplay(stream_id)
        self.wires = wires
        self.seal = seal
        self.complete = complete
        self.reveals = {w.data.shoe: w.data for w in wires if isinstance(w.data, ev.ShoeRetired)}
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
        """when the event before this one was written (a ``RoundResumed`` aside: the table's
        last event stays the one before it)"""
        self.closing: tuple[int, str | None] | None = None
        """the round an operator's CloseInterruptedRound is closing, and that command's id"""
        self.decisions = DecisionsInOrder()
        """who decided each event of the round's recall"""
        self.resumed_by: str | None = None
        """the command whose ``RoundResumed`` was the event just folded: its own events must
        follow at once"""
        self.due_to_stand_up: dict[str, int] = {}
        """players the table's rules stand up at the end of the round just settled (their
        rounds sat out): each one's ``SeatLeft`` (reason ``sat_out``) must follow at once"""

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
                if isinstance(event, ev.RoundSettled):
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
        self._expect(f"{player_id}'s balance after", balance_after, before + delta)
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

    def interrupted_round_closed(self, e: ev.InterruptedRoundClosed) -> None:
        """Closed only as the table's rules allow: after their days of waiting, counted from
        no earlier than the table's last event."""
        assert self.envelope is not None
        self.closing = (e.round, self.envelope.causation_id)
        if not self.state.round_open:
            self._find(f"round {e.round} closed as interrupted when it was not open")
        days = self.state.rules.interrupted_round_days
        if days is None:
            self._find("a round closed as interrupted at a table whose rules allow no such closing")
            return
        self._expect("the days a round may wait", e.after_days, days)
        previous = self.previous_at
        if previous is not None and e.idle_since < previous:
            self._find(
                f"a round closed as idle since {e.idle_since.isoformat()}, before the table's "
                f"last event at {previous.isoformat()}"
            )
        assert self.envelope is not None
        waited = self.envelope.occurred_at - max(e.idle_since, previous or e.idle_since)
        if waited < timedelta(days=days):
            self._find(f"a round closed as interrupted after {waited} of waiting ({days} days due)")

    def round_resumed(self, e: ev.RoundResumed) -> None:
        """The service marks an interruption only inside a round in play (a bet placed or
        cards dealt, not settled), naming the time of the table's last event before it."""
        assert self.envelope is not None
        self.resumed_by = self.envelope.causation_id
        if not self.state.round_in_play:
            self._find(f"round {e.round} marked as resumed when no round was in play")
        previous = self.previous_at
        if e.last_event_at is not None and previous is not None and e.last_event_at != previous:
            self._find(
                f"a round resumed after an event at {e.last_event_at.isoformat()}, but the "
                f"table's last event was written at {previous.isoformat()}"
            )

    def _after_resumed(self, event: ev.Event) -> None:
        """A ``RoundResumed`` comes first among its command's events, never alone."""
        resumed_by, self.resumed_by = self.resumed_by, None
        if resumed_by is None:
            return
        assert self.envelope is not None
        if isinstance(event, ev.RoundResumed) or self.envelope.causation_id != resumed_by:
            self._find("a RoundResumed not followed by an event of the command that wrote it")

    def player_timed_out(self, e: ev.PlayerTimedOut) -> None:
        """The server decides for a player only when a deadline of the table's clock has
        passed, or while closing an interrupted round."""
        if self.closing is not None:
            return
        deadline = self.state.deadline
        assert self.envelope is not None
        if deadline is None:
            self._find(f"{e.player_id} timed out ({e.phase}) with no deadline running")
        elif self.envelope.occurred_at < deadline:
            self._find(
                f"{e.player_id} timed out ({e.phase}) at {self.envelope.occurred_at.isoformat()}, "
                f"before the deadline {deadline.isoformat()}"
            )

    def funds(self, e: ev.FundsDeposited | ev.FundsWithdrawn) -> None:
        sign = 1 if isinstance(e, ev.FundsDeposited) else -1
        if e.amount <= 0:
            self._find(f"a {type(e).__name__} of {e.amount}")
        self._moves(e.player_id, sign * e.amount, e.balance_after)

    def seat_left(self, e: ev.SeatLeft) -> None:
        balance = self._balance(e.player_id)
        self._expect(f"{e.player_id}'s money paid out", e.balance_returned, balance)
        self._round_balance(e.player_id, balance, -balance, 0)
        if (e.reason == "operator") != (e.operator is not None and e.operator_reason is not None):
            self._find(f"{e.player_id} stood up by the operator without naming who and why")
        if e.reason != "sat_out":
            if e.rounds_sat_out is not None:
                self._find(f"{e.player_id} left with a count of rounds sat out")
            if self.state.hands_in_play and any(
                self.state.boxes[i].hands for i in self.state.boxes_of(e.player_id)
            ):
                self._find(f"{e.player_id} left the table with a hand in play")
            return
        # The server stood the player up: only as the table's rules say, when the count of
        # rounds sat out (folded from the log) reaches them, at the end of a round.
        limit = self.state.rules.seat_released_after_rounds_sat_out
        sat_out = self.state.players[e.player_id].rounds_sat_out
        if limit is None:
            self._find(f"{e.player_id} stood up by the server at a table whose rules free no seat")
            return
        self._expect(f"rounds {e.player_id} sat out", e.rounds_sat_out, sat_out)
        if sat_out < limit:
            self._find(f"{e.player_id} stood up after {sat_out} rounds sat out ({limit} due)")
        if self.state.round_open or self.state.hands_in_play or self.state.boxes_of(e.player_id):
            self._find(f"{e.player_id} stood up by the server during round {self.state.round}")

    def _due_to_stand_up(self) -> None:
        limit = self.state.rules.seat_released_after_rounds_sat_out
        if limit is not None:
            self.due_to_stand_up = {
                p.player_id: p.rounds_sat_out
                for p in self.state.players.values()
                if p.rounds_sat_out >= limit
            }

    def _stood_up_when_due(self, event: ev.Event | None) -> None:
        """A player due to be stood up at the end of a round is, by the same decision: the
        events right after its ``RoundSettled`` are their ``SeatLeft``s."""
        if not self.due_to_stand_up:
            return
        if (
            isinstance(event, ev.SeatLeft)
            and event.reason == "sat_out"
            and event.player_id in self.due_to_stand_up
        ):
            del self.due_to_stand_up[event.player_id]
            return
        for player, rounds in sorted(self.due_to_stand_up.items()):
            self._find(
                f"{player} sat out {rounds} rounds in a row and was not stood up at the end "
                f"of round {self.state.round}"
            )
        self.due_to_stand_up = {}

    def _shuffled(self, shoe: int, commitment: str) -> None:
        """A new shoe is committed to before anyone wagers on it, and is new: checked on the
        commitment alone, so even a shoe that stays sealed is."""
        self.out.checks += 1
        if self.state.round_open or self.state.hands_in_play:
            self._find(f"shoe {shoe} shuffled in round {self.state.round}, after its bets")
        first = self.commitments.setdefault(commitment, shoe)
        if first != shoe:
            self._find(f"shoe {shoe} has the commitment of shoe {first}: a shoe used again")

    def shoe_shuffled(self, e: ev.ShoeShuffled) -> None:
        """The order opened (by the key or its reveal) is whole decks of the table's rules."""
        decks = self.state.rules.decks
        # counted for the stream, not for the round that just ended (``_expect`` would)
        self.out.checks += 2
        if e.cards != len(e.order):
            self._find(f"shoe {e.shoe} cards: recorded {e.cards}, the order holds {len(e.order)}")
        counts = Counter(e.order)
        if counts != Counter(fresh_shoe(decks)):
            wrong = sorted(c for c in {*counts, *fresh_shoe(1)} if counts[c] != decks)
            self._find(
                f"shoe {e.shoe} is not {decks} whole deck(s): "
                + ", ".join(f"{card} {counts[card]} times" for card in wrong[:8])
                + (f" and {len(wrong) - 8} more" if len(wrong) > 8 else "")
            )

    def shoe_retired(self, e: ev.ShoeRetired) -> None:
        shoe = self.state.shoe
        if shoe is None or shoe.number != e.shoe:
            self._find(f"shoe {e.shoe} retired, but it is not the shoe in use")
            return
        self._expect(f"shoe {e.shoe} commitment at retirement", e.commitment, shoe.commitment)
        self._expect(f"shoe {e.shoe} cards dealt", e.cards_dealt, shoe.position)
        self._expect(f"shoe {e.shoe} revealed order", (e.order, e.salt), (shoe.order, shoe.salt))

    def bet_placed(self, e: ev.BetPlaced) -> None:
        box = self.state.boxes[e.box]
        if self.state.suspended:
            self._find(f"{e.player_id} bets {e.amount} on box {e.box} at a suspended table")
        self._expect(f"box {e.box} total", e.box_total, box.bet + e.amount)
        if e.amount <= 0:
            self._find(f"a chip of {e.amount} on box {e.box}")
        if e.box_total > self.state.rules.max_bet:
            self._find(
                f"box {e.box} bet {e.box_total} is over the maximum {self.state.rules.max_bet}"
            )
        self._moves(e.player_id, -e.amount, e.balance_after)

    def seat_taken(self, e: ev.SeatTaken) -> None:
        if self.state.suspended:
            self._find(f"{e.player_id} sits down at a suspended table")

    def bet_refunded(self, e: ev.BetRefunded) -> None:
        box = self.state.boxes[e.box]
        self._expect(f"box {e.box} bet left after a refund", e.box_total, box.bet - e.amount)
        if e.amount <= 0 or e.amount > box.bet:
            self._find(f"a refund of {e.amount} from box {e.box}, which holds {box.bet}")
        if e.box_total:  # only a player's RemoveBet leaves part of a bet on the box
            self._expect(f"box {e.box} partial refund's reason", e.reason, "removed")
        self._moves(e.player_id, e.amount, e.balance_after)

    def deal_started(self, e: ev.DealStarted) -> None:
        rules = self.state.rules
        for index in e.boxes:  # the minimum binds the stack on each box dealt, not each chip
            bet = self.state.boxes[index].bet
            if not rules.min_bet <= bet <= rules.max_bet:
                self._find(f"box {index} dealt with {bet}, outside {rules.min_bet}-{rules.max_bet}")
        if self.current is not None:
            self.current.shoe = e.shoe
            self.current.status = "playing"

    def _rule(self, problem: str | None) -> None:
        """One check that the table's rules allowed what the event records."""
        self.out.checks += 1
        if self.current is not None:
            self.current.checks += 1
        if problem is not None:
            self._find(problem)

    def _move(self, e: ev.PlayerHit | ev.PlayerStood | ev.HandSurrendered, move: Move) -> None:
        self._rule(move_problem(self.state, e.player_id, e.box, e.hand, move))

    def player_hit(self, e: ev.PlayerHit) -> None:
        self._move(e, "hit")

    def player_stood(self, e: ev.PlayerStood) -> None:
        self._move(e, "stand")

    def hand_surrendered(self, e: ev.HandSurrendered) -> None:
        self._move(e, "surrender")

    def dealer_peeked(self, e: ev.DealerPeeked) -> None:
        self._rule(None if peek_required(self.state) else "a peek the rules do not make")
        self._expect("what the peek found", e.has_blackjack, is_natural(self.state.dealer))
        if self.current is not None:
            self.current.peeked = True

    def turn_started(self, e: ev.TurnStarted) -> None:
        current = self.current
        peeked = current is not None and current.peeked
        missing = peek_required(self.state) and not peeked
        self._rule("play started without the peek the rules require" if missing else None)
        if e.actions is not None:  # version 1 did not list them
            # judged on the table as the turn leaves it: the event makes it this hand's turn
            turn = evolve(self.state, e)
            allowed = moves_allowed(turn, e.player_id, e.box, e.hand)
            self._expect(f"actions offered on box {e.box} hand {e.hand}", e.actions, allowed)

    def insurance_taken(self, e: ev.InsuranceTaken) -> None:
        box = self.state.boxes[e.box]
        offered = box.insurance == "offered" and box.player_id == e.player_id
        self._rule(None if offered else f"insurance on box {e.box}, not offered to {e.player_id}")
        stake = insurance_stake(self.state.boxes[e.box].bet)
        self._expect(f"insurance stake on box {e.box}", e.amount, stake)
        self._moves(e.player_id, -e.amount, e.balance_after)

    def insurance_settled(self, e: ev.InsuranceSettled) -> None:
        box = self.state.boxes[e.box]
        self._expect(f"box {e.box}'s player", e.player_id, box.player_id)
        self._expect(f"insurance stake on box {e.box}", e.stake, box.insurance_stake)
        won, payout = insurance_result(self.state.rules, box.insurance_stake, self.state.dealer)
        self._expect(f"insurance on box {e.box}", (e.won, e.payout), (won, payout))
        self._moves(e.player_id, e.payout, e.balance_after)
        current = self.current
        if current is not None:
            current.paid[e.player_id] = current.paid.get(e.player_id, 0) + payout
            current.insurance.append(
                Settlement(
                    e.box,
                    -1,
                    e.player_id,
                    (),
                    0,
                    e.stake,
                    ("won" if e.won else "lost", e.payout),
                    ("won" if won else "lost", payout),
                )
            )

    def _hand(self, box: int, index: int) -> Hand:
        hands = self.state.boxes[box].hands
        if not 0 <= index < len(hands):
            raise _Unfoldable(f"box {box} has no hand {index}")
        return hands[index]

    def hand_doubled(self, e: ev.HandDoubled) -> None:
        self._rule(move_problem(self.state, e.player_id, e.box, e.hand, "double"))
        self._expect("the double's stake", e.amount, self._hand(e.box, e.hand).stake)
        self._moves(e.player_id, -e.amount, e.balance_after)

    def hand_split(self, e: ev.HandSplit) -> None:
        self._rule(move_problem(self.state, e.player_id, e.box, e.hand, "split"))
        self._expect("the split's stake", e.amount, self._hand(e.box, e.hand).stake)
        self._moves(e.player_id, -e.amount, e.balance_after)

    def hand_settled(self, e: ev.HandSettled) -> None:
        hand = self._hand(e.box, e.hand)
        rules, dealer = self.state.rules, self.state.dealer
        self._expect(f"box {e.box}'s player", e.player_id, self.state.boxes[e.box].player_id)
        self._expect(f"box {e.box} hand {e.hand} stake", e.stake, hand.stake)
        self._expect(f"box {e.box} hand {e.hand} total", e.total, total(hand.cards).best)
        derived = hand_result(rules, hand, dealer)
        recorded = (e.outcome, e.payout)
        self._expect(f"box {e.box} hand {e.hand} result", recorded, derived)
        self._expect(f"box {e.box} hand {e.hand} settled again", hand.settled, False)
        if self.state.phase != "dealer":  # before the hole card: a blackjack paid at once only
            self._expect(
                f"box {e.box} hand {e.hand} paid before the dealer's hand is known",
                (e.outcome, rules.blackjack_paid_at_once, dealer_blackjack_ruled_out(self.state)),
                ("blackjack", True, True),
            )
        self._moves(e.player_id, e.payout, e.balance_after)
        current = self.current
        if current is not None:
            current.paid[e.player_id] = current.paid.get(e.player_id, 0) + derived[1]
            current.settlements.append(
                Settlement(
                    e.box,
                    e.hand,
                    e.player_id,
                    hand.cards,
                    total(hand.cards).best,
                    hand.stake,
                    recorded,
                    derived,
                )
            )

    def round_settled(self, e: ev.RoundSettled) -> None:
        state = self.state
        dealer = state.dealer
        self._expect("the dealer's total", e.dealer_total, total(dealer).best)
        self._expect("the dealer's blackjack", e.dealer_blackjack, is_natural(dealer))
        live = any(h.status == "standing" for b in state.boxes for h in b.hands)
        problem = dealer_play_problem(state.rules, dealer, live)
        self.out.checks += 1
        if problem is not None:
            self._find(problem)
        wagered: dict[str, int] = {}
        for box in state.boxes:
            if box.hands and box.player_id is not None:
                stake = sum(h.stake for h in box.hands) + box.insurance_stake
                wagered[box.player_id] = wagered.get(box.player_id, 0) + stake
        current = self.current
        paid = current.paid if current is not None else {}
        results = {r.player_id: r for r in e.results}
        self._expect("the players in the results", sorted(results), sorted(wagered))
        for player_id, result in results.items():
            derived_paid = paid.get(player_id, 0)
            derived_wagered = wagered.get(player_id, 0)
            self._expect(f"{player_id}'s wager in the round", result.wagered, derived_wagered)
            self._expect(f"{player_id}'s payout in the round", result.paid, derived_paid)
            self._expect(f"{player_id}'s net", result.net, derived_paid - derived_wagered)
            if player_id in state.players:
                self._expect(
                    f"{player_id}'s balance after the round",
                    result.balance_after,
                    self._balance(player_id),
                )
        if current is not None:
            current.results = list(e.results)
            current.dealer = dealer


class _Unfoldable(Exception):
    """An event refers to something the state does not have."""


_OPEN = ("betting", "playing")
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
}
