"""The replay's checks on the table's rules: seats taken and left (and stood up when the rules
say), shoes committed to before their bets and made of whole decks, the clock's deadlines,
interrupted rounds resumed and closed as the rules allow, every move one the rules allowed that
player on that hand at that point, and the dealer's peek where the rules make her."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from blackjack.audit.checking import Checker
from blackjack.audit.settlement import (
    Move,
    insurance_due,
    move_problem,
    moves_allowed,
    peek_required,
)
from blackjack.domain import events as ev
from blackjack.domain.cards import fresh_shoe
from blackjack.domain.evolve import evolve
from blackjack.domain.hand import is_natural


class TableChecks(Checker):
    def interrupted_round_closed(self, e: ev.InterruptedRoundClosed) -> None:
        """Closed only as the table's rules allow: after their days of waiting, counted from
        no earlier than the table's last event of play (a refused platform money command's
        record is none: ``platform_money.counts_as_activity``)."""
        assert self.envelope is not None
        self.closing = (e.round, self.envelope.causation_id)
        if not self.state.round_open:
            self._find(f"round {e.round} closed as interrupted when it was not open")
        days = self.state.rules.interrupted_round_days
        if days is None:
            self._find("a round closed as interrupted at a table whose rules allow no such closing")
            return
        self._expect("the days a round may wait", e.after_days, days)
        previous = self.active_at
        if previous is not None and e.idle_since < previous:
            self._find(
                f"a round closed as idle since {e.idle_since.isoformat()}, before the table's "
                f"last event of play at {previous.isoformat()}"
            )
        assert self.envelope is not None
        waited = self.envelope.occurred_at - max(e.idle_since, previous or e.idle_since)
        if waited < timedelta(days=days):
            self._find(f"a round closed as interrupted after {waited} of waiting ({days} days due)")

    def round_resumed(self, e: ev.RoundResumed) -> None:
        """The service marks an interruption only inside a round in play (a bet placed or
        cards dealt, not settled), naming the time of the table's last event before it. It
        restarts the round's clock only at a table of one seat whose clock runs, by a whole
        turn from the marker; there it may be its command's only event (the clock's
        ExpireTimers, sent for it). (A marker that does not restart such a clock was written
        by a release before the restart: not a finding.)"""
        assert self.envelope is not None
        if e.deadline is None:
            self.resumed_by = self.envelope.causation_id
        elif self.state.rules.seats != 1 or self.state.deadline is None:
            self._find(f"round {e.round} resumed with its clock restarted where none restarts")
        else:
            self._expect("the restarted clock's deadline", e.deadline, self._fresh_deadline())
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

    def _card_flow(self, event: ev.Event) -> None:
        """Each card goes where the decider deals it (``decisions.betting.close_betting``,
        ``decisions.play``): at the deal, each box's first card, the dealer's, each box's
        second, the dealer's; after a hit or a double, one to that hand; after a split, one
        to each of its two hands; after the hole card, the dealer's draws (their count is the
        dealer's rule: ``dealer_play_problem``). Only there: a card moved to another hand
        changes who wins, and one no hit asked for draws for the player."""
        if isinstance(event, ev.CardDealt):
            where = None if event.to == "dealer" else (event.box, event.hand)
            if self.cards_due:
                due = self.cards_due.pop(0)
                if where != due:
                    self._find(f"a card dealt to {_place(where)}, where {_place(due)} was due")
            elif not (where is None and self.state.phase == "dealer"):
                drawn = "that no deal, hit, double or split drew"
                self._find(f"a card dealt to {_place(where)} {drawn}")
            return
        if self.cards_due:
            places = ", ".join(_place(due) for due in self.cards_due)
            self._find(f"card(s) due to {places} never dealt")
        match event:
            case ev.DealStarted(boxes=boxes):
                first: list[tuple[int, int] | None] = [(box, 0) for box in boxes]
                self.cards_due = [*first, None, *first, None]
            case ev.PlayerHit(box=box, hand=hand) | ev.HandDoubled(box=box, hand=hand):
                self.cards_due = [(box, hand)]
            case ev.HandSplit(box=box, hand=hand):
                self.cards_due = [(box, hand), (box, hand + 1)]
            case _:
                self.cards_due = []

    def _fresh_deadline(self) -> datetime | None:
        """A clock started now: the table's turn seconds from this event (``Draft.deadline``),
        none at a table without one."""
        seconds = self.state.rules.turn_seconds
        assert self.envelope is not None
        return None if seconds is None else self.envelope.occurred_at + timedelta(seconds=seconds)

    def seat_changed(self, e: ev.SeatChanged) -> None:
        """Between rounds, with no bet out, to a free seat (``decisions.seats.move_seat``): a
        box with money moved under another player's seat."""
        state = self.state
        busy = state.boxes_of(e.player_id) or state.hands_in_play
        self._rule(f"{e.player_id} changed seats during round {state.round}" if busy else None)
        taken = state.player_at(e.to_seat)
        self._rule(None if taken is None else f"{e.player_id} moved to seat {e.to_seat}, taken")

    def table_opened(self, e: ev.TableOpened) -> None:
        """Once: the decider refuses a second ``OpenTable``, whose rules would otherwise
        govern the rounds after it (a 6:5 blackjack slipped in between two rounds)."""
        self._rule("the table opened again, with new rules" if self.state.opened else None)

    def round_opened(self, e: ev.RoundOpened) -> None:
        """The game cycles are numbered one after the other, one open at a time: a round
        numbered again or out of turn would be recalled for the wrong one."""
        state = self.state
        self.open_at_reveal = []  # a void's, which settles no hand
        self._rule(
            f"round {e.round} opened while round {state.round} is open"
            if state.round_open
            else None
        )
        self._expect("the round's number", e.round, state.round + 1)
        self._expect("the betting deadline", e.betting_deadline, self._fresh_deadline())

    def seat_taken(self, e: ev.SeatTaken) -> None:
        if self.state.suspended:
            self._find(f"{e.player_id} sits down at a suspended table")

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
        events right after its ``RoundSettled`` are their ``SeatLeft``s (none is due after a
        ``RoundVoided``, a voided round being no round sat out, but after a version 1's: its
        handler counted the round and stood them up after it)."""
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
        # The decider retires the shoe in use (revealing it) before it shuffles the next one,
        # numbered on: a shoe shuffled again would deal its cards again from the top.
        in_use = self.state.shoe
        self._rule(
            None
            if in_use is None
            else f"shoe {shoe} shuffled while shoe {in_use.number} is in use, never retired"
        )
        due = self.state.shoes_used + 1
        self._rule(None if shoe == due else f"shoe {shoe} shuffled where shoe {due} was due")
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
        # Between rounds only (``decisions.shuffle``): its reveal would show the cards still
        # to come in the round in play.
        in_round = self.state.round_open or self.state.hands_in_play
        self._rule(f"shoe {e.shoe} retired during round {self.state.round}" if in_round else None)
        shoe = self.state.shoe
        if shoe is None or shoe.number != e.shoe:
            self._find(f"shoe {e.shoe} retired, but it is not the shoe in use")
            return
        self._expect(f"shoe {e.shoe} commitment at retirement", e.commitment, shoe.commitment)
        self._expect(f"shoe {e.shoe} cards dealt", e.cards_dealt, shoe.position)
        self._expect(f"shoe {e.shoe} revealed order", (e.order, e.salt), (shoe.order, shoe.salt))

    def hole_card_revealed(self, e: ev.DealerHoleCardRevealed) -> None:
        """Once a round. Played out, when every hand is done, or at once on a dealer
        blackjack found by the peek (``decisions.settlement.reveal_and_settle``); a void
        reveals it too, whatever the hands (``decisions.voiding``): the hands still open are
        noted here and found if the round is then settled, each without its player's
        decision (``round_settled``)."""
        state = self.state
        again = state.phase == "dealer"
        self._rule(f"the hole card revealed again in round {e.round}" if again else None)
        self.open_at_reveal = (
            []
            if is_natural(state.dealer)
            else [
                f"box {index} hand {number}"
                for index, box in enumerate(state.boxes)
                for number, hand in enumerate(box.hands)
                if hand.status == "open"
            ]
        )

    def _move(self, e: ev.PlayerHit | ev.PlayerStood | ev.HandSurrendered, move: Move) -> None:
        self._rule(move_problem(self.state, e.player_id, e.box, e.hand, move))

    def player_hit(self, e: ev.PlayerHit) -> None:
        self._move(e, "hit")

    def player_stood(self, e: ev.PlayerStood) -> None:
        self._move(e, "stand")

    def hand_surrendered(self, e: ev.HandSurrendered) -> None:
        self._move(e, "surrender")

    def insurance_offered(self, e: ev.InsuranceOffered) -> None:
        """The boxes offered insurance are the ones the rules offer it to (``insurance_due``):
        none where the upcard is no ace or the table has no insurance, never a blackjack, never
        one whose balance cannot cover half its bet, and every other box dealt."""
        self._expect("the boxes offered insurance", tuple(e.boxes), insurance_due(self.state))
        self._expect("the insurance deadline", e.deadline, self._fresh_deadline())
        if self.current is not None:
            asked = self.current.insurance_asked
            self._rule(f"insurance offered again in round {e.round}" if asked else None)
            self.current.insurance_asked = True

    def _insurance_skipped(self) -> None:
        """At the round's first peek or turn: insurance due to a box was offered first."""
        current = self.current
        if current is None or current.insurance_asked:
            return
        current.insurance_asked = True
        due = insurance_due(self.state)
        self._rule(f"insurance not offered to box(es) {due} under the ace" if due else None)

    def dealer_peeked(self, e: ev.DealerPeeked) -> None:
        self._insurance_skipped()
        again = self.current is not None and self.current.peeked
        self._rule(f"the dealer peeked again in round {e.round}" if again else None)
        self._rule(None if peek_required(self.state) else "a peek the rules do not make")
        self._expect("what the peek found", e.has_blackjack, is_natural(self.state.dealer))
        if self.current is not None:
            self.current.peeked = True

    def turn_started(self, e: ev.TurnStarted) -> None:
        self._insurance_skipped()
        current = self.current
        peeked = current is not None and current.peeked
        missing = peek_required(self.state) and not peeked
        self._rule("play started without the peek the rules require" if missing else None)
        # The turn stays on the hand that moved while it is open (after a hit or a split),
        # else goes to the first open hand in the layout's order, with a clock of its own
        # (``decisions.play.next_turn``): out of order, a hand takes another's cards.
        state = self.state
        before = state.active
        fresh = self._fresh_deadline()
        if before is not None and before == (e.box, e.hand):
            kept = e.deadline in (state.deadline, fresh)
            self._rule(None if kept else f"box {e.box} hand {e.hand}'s clock reset to {e.deadline}")
        else:
            if before is not None:
                box, hand = before
                hands = state.boxes[box].hands
                left_open = hand < len(hands) and hands[hand].status == "open"
                self._rule(
                    f"the turn passed from box {box} hand {hand} while it was still open"
                    if left_open
                    else None
                )
            due = next(
                (
                    (index, number)
                    for index in state.boxes_in_play()
                    for number, hand in enumerate(state.boxes[index].hands)
                    if hand.status == "open"
                ),
                None,
            )
            self._rule(
                None
                if due == (e.box, e.hand)
                else f"the turn went to box {e.box} hand {e.hand}, where {_place(due)} was due"
            )
            self._expect(f"box {e.box} hand {e.hand}'s deadline", e.deadline, fresh)
        if e.actions is not None:  # version 1 did not list them
            # judged on the table as the turn leaves it: the event makes it this hand's turn
            turn = evolve(self.state, e)
            allowed = moves_allowed(turn, e.player_id, e.box, e.hand)
            self._expect(f"actions offered on box {e.box} hand {e.hand}", e.actions, allowed)


def _place(where: tuple[int | None, int | None] | None) -> str:
    return "the dealer" if where is None else f"box {where[0]} hand {where[1]}"
