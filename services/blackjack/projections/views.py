"""The read model's shapes, as the fold makes them and the query API answers them: the
table's public view (``TableView``), each player's account at the table (``Account``), each
round (``RoundRecord``) and each player's line in it (``RoundPlayer``), and what a table's
closed game cycles add to a UTC day's game performance (``GameDay``)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from blackjack.domain.hand import total


class ProjectionError(ValueError):
    """The events cannot be folded: they contradict the read model built so far."""


class _Model(BaseModel):
    # Answers carry every field, defaults included: the OpenAPI document says so (required).
    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)


# ---- the table ----------------------------------------------------------------------------


class ShoeView(_Model):
    shoe: int
    commitment: str
    cards: int
    cards_dealt: int = 0


class Turn(_Model):
    """The hand waiting for a decision, and the decisions the table accepts on it now."""

    box: int
    hand: int
    player_id: str | None = None  # None in a view folded before TurnStarted named it here
    actions: list[str] | None = None  # None when the event did not list them (version 1)


class Suspension(_Model):
    """The operator has disabled the game at the table: no new bet or player until resumed."""

    reason: str
    since: datetime


class TableView(_Model):
    """What anyone at the table may see of it between and during rounds."""

    stream_id: str
    opened: bool = False
    variant: str | None = None
    currency: str | None = None
    rules: dict[str, Any] | None = Field(
        default=None,
        description="the table's rules; in the query API's answers every term written out "
        "(TableOpened's document leaves out a preset's own terms and the options off)",
    )
    last_sequence: int = 0
    updated_at: datetime | None = None
    shoe: ShoeView | None = None
    round: int = 0
    round_open: bool = False
    phase: Literal["betting", "insurance", "playing", "dealer"] = "betting"
    active: Turn | None = None
    deadline: datetime | None = None
    suspended: Suspension | None = None


class Account(_Model):
    """A player's money at one table."""

    stream_id: str
    player_id: str
    currency: str
    funded_by_wallet: bool = False
    """a multi-seat table: money comes from the player's wallet and goes back to it"""
    seat: int | None = None
    seated: bool = True
    connected: bool = True
    available: int = 0
    in_play: int = 0
    deposited: int = 0
    withdrawn: int = 0
    cashed_out: int = 0
    wagered: int = 0
    won: int = 0
    lost: int = 0
    rounds: int = 0
    sitting_out: bool | None = False
    """left out of a round by the betting clock and no bet or pass since (the decider's
    ``Player.sitting_out``); None: not known (folded before migration 0006, and the player has
    neither bet, passed nor been left out since: docs/projections.md)"""
    rounds_sat_out: int | None = 0
    """rounds dealt in a row while sitting out, counted where the table's rules free such a
    seat (``seat_released_after_rounds_sat_out``; else 0), as the decider counts; None: not
    known, as above"""
    paid_out_at: datetime | None = None
    """when a table funded by the player's wallet last paid them money back (a withdrawal, or
    their balance as they left), the event's time: the earliest a payout still on its way to
    the wallet can have left (``transit.py``); None: it never did (migration 0012)"""

    def settle(self, stake: int, payout: int, balance_after: int) -> None:
        self.in_play -= stake
        self.wagered += stake
        self.won += max(payout - stake, 0)
        self.lost += max(stake - payout, 0)
        self.available = balance_after

    def unsettle(self, stake: int, payout: int) -> None:
        """A settlement's lifetime sums taken back (its round voided): nothing it paid stands."""
        self.wagered -= stake
        self.won -= max(payout - stake, 0)
        self.lost -= max(stake - payout, 0)


# ---- a round ------------------------------------------------------------------------------


class HandView(_Model):
    cards: list[str] = []
    stake: int
    total: int = 0
    soft: bool = False
    doubled: bool = False
    split: bool = False
    stood: bool = False
    surrendered: bool = False
    outcome: str | None = None
    payout: int | None = None
    voided: bool = False
    """the round was voided for a malfunction: the hand's play and pay are void, and an
    ``outcome`` and ``payout`` settled before the void (a blackjack paid at once) say what was
    paid then and taken back by the void"""

    def set_cards(self, cards: list[str]) -> None:
        self.cards = cards
        best, soft = total(cards)
        self.total, self.soft = best, soft


class InsuranceView(_Model):
    status: Literal["offered", "taken", "declined", "settled"]
    stake: int = 0
    won: bool | None = None
    payout: int | None = None
    voided: bool = False
    """the round was voided for a malfunction: the stake came back, and a payout settled at
    the peek (``status`` settled) was taken back"""


class BoxView(_Model):
    box: int
    player_id: str
    bet: int
    hands: list[HandView] = []
    insurance: InsuranceView | None = None


class DealerView(_Model):
    cards: list[str | None] = []
    """In the order dealt; the hole card (the first or the second, ``Rules.hole_card_first``)
    is ``None`` until it is revealed."""
    upcard: str | None = None
    """The card the dealer shows (first or second of ``cards``, by the table's rules)."""
    total: int = 0
    soft: bool = False
    peeked: bool = False
    blackjack: bool | None = None

    def set_cards(self, cards: list[str | None]) -> None:
        self.cards = cards
        best, soft = total([c for c in cards if c is not None])
        self.total, self.soft = best, soft


class LogEntry(_Model):
    sequence: int
    at: datetime
    event: str
    data: dict[str, Any]


class BoxMessageView(_Model):
    box: int
    message: str


class RoundRecord(_Model):
    """One game cycle, enough to show it again to the player or an auditor."""

    round_id: str
    stream_id: str
    round: int
    variant: str
    currency: str
    status: Literal["betting", "playing", "settled", "cancelled", "voided"] = "betting"
    opened_at: datetime
    betting_deadline: datetime | None = None
    dealt_at: datetime | None = None
    closed_at: datetime | None = None
    shoe: int | None = None
    shoe_commitment: str | None = None
    boxes: list[BoxView] = []
    dealer: DealerView = Field(default_factory=DealerView)
    messages: list[BoxMessageView] = []
    first_sequence: int
    last_sequence: int
    log: list[LogEntry] = []

    @model_validator(mode="after")
    def _voided_throughout(self) -> RoundRecord:
        # A record stored before hands and insurance said voided reads as the fold writes it.
        if self.status == "voided":
            self.mark_voided()
        return self

    def stored(self) -> dict[str, Any]:
        """The record as the store keeps it (``stored_record``)."""
        return stored_record(self.model_dump(mode="json"))

    def mark_voided(self) -> None:
        """Every hand and insurance of the round voided: nothing the round paid stands."""
        for box in self.boxes:
            for hand in box.hands:
                hand.voided = True
            if box.insurance is not None:
                box.insurance.voided = True

    def money_of(self, player_id: str) -> tuple[int, int, int]:
        """The player's money in the round as its record holds it now: (wagered, paid,
        settled). ``wagered``: every stake of theirs in it (a box's bet until it is dealt,
        then its hands' stakes, splits and doubles included, and an insurance taken);
        ``paid``: what their hands and insurance settled so far paid (a bust or a surrender
        settled at once, a blackjack paid at once, insurance settled at the peek), stakes
        returned included; ``settled``: the stakes of those settlements. The settlement's
        result is these figures once every wager is settled."""
        wagered = paid = settled = 0
        for box in self.boxes:
            if box.player_id != player_id:
                continue
            wagers = [(hand.stake, hand.payout) for hand in box.hands]
            if not box.hands:
                wagers.append((box.bet, None))
            insurance = box.insurance
            if insurance is not None and insurance.status in ("taken", "settled"):
                wagers.append((insurance.stake, insurance.payout))
            for stake, payout in wagers:
                wagered += stake
                if payout is not None:
                    paid += payout
                    settled += stake
        return wagered, paid, settled

    def box(self, index: int) -> BoxView:
        for box in self.boxes:
            if box.box == index:
                return box
        raise ProjectionError(f"round {self.round_id} has no bet on box {index}")

    def hand(self, box: int, hand: int) -> HandView:
        hands = self.box(box).hands
        if not 0 <= hand < len(hands):
            raise ProjectionError(f"round {self.round_id} box {box} has no hand {hand}")
        return hands[hand]


class RoundPlayer(_Model):
    """A player's part in one round: the line of their betting history.

    ``deposited`` and ``withdrawn`` are the money the player paid in or took out at the table
    (not wagers or payouts) between their first bet and the end of the round, so that
    ``balance_before + net + deposited - withdrawn == balance_after`` once the round is over.
    While it plays, ``wagered`` is every stake of the player's placed so far (less a bet taken
    back), ``paid`` what the wagers settled so far paid (a hand or insurance settled before the
    round: ``RoundRecord.money_of``) and ``net`` their result (``paid`` less their stakes), so
    that ``balance_before - wagered + paid + deposited - withdrawn == balance_after`` at every
    event; the settlement then sets the round's result, the same figures."""

    stream_id: str
    round: int
    player_id: str
    started_at: datetime
    balance_before: int
    balance_after: int
    wagered: int = 0
    paid: int = 0
    net: int = 0
    deposited: int = 0
    withdrawn: int = 0


@dataclass
class GameDay:
    """What one table's game cycles closed on one UTC day add to the game performance report
    (``game_days``): summed by the writer into the day's row, so only sums belong here."""

    rounds: int = 0
    cancelled: int = 0
    voided: int = 0
    """rounds the operator voided for a malfunction: every wager returned, nothing paid (their
    money is in none of the sums below)"""
    player_rounds: int = 0
    initial_bets: int = 0
    """the bets dealt in, before any double, split or insurance: the unit the theoretical
    return is stated per"""
    wagered: int = 0
    paid: int = 0

    def add(self, more: GameDay) -> None:
        for name in fields(self):
            setattr(self, name.name, getattr(self, name.name) + getattr(more, name.name))


def stored_record(doc: dict[str, Any]) -> dict[str, Any]:
    """A round's record as the store keeps it: its hands and insurance say ``voided`` only in a
    voided round (every one of them, as the fold marks them). A worker or query API of the
    release before refuses a field it does not know, so in a rolling update it still reads
    every other round's record; and a record that release stored (none says ``voided``)
    compares equal with a rebuild's (``dump``). Read back, the field is there, false."""
    voided = doc.get("status") == "voided"
    for box in doc.get("boxes", []):
        insurance = box.get("insurance")
        for part in [*box.get("hands", []), *([insurance] if insurance else [])]:
            if voided:
                part["voided"] = True
            else:
                part.pop("voided", None)
    return doc
