"""Folding the public events of one table into its read model, in memory and without I/O.

``StreamProjection`` holds what the events of one stream (a table) have made of the read model
so far: the table's public view, each player's account at the table, and the rounds (game
cycles) touched. ``apply`` folds one wire envelope into it; the writer loads the pieces an event
needs from the store beforehand and saves what changed afterwards.

Only the public form of the events is used: the shoe order stays sealed, and the dealer's hole
card is shown face down (``None``) until ``DealerHoleCardRevealed``.

Money (integer minor units) per account:
    available  the balance at the table (every money event carries ``balance_after``)
    in_play    moved in by BetPlaced, HandDoubled, HandSplit, InsuranceTaken and back out by
               BetRefunded, HandSettled and InsuranceSettled (the stake)
    won, lost  per settled wager, payout - stake when positive, stake - payout when positive
so that ``deposited - withdrawn - cashed_out = available + in_play + (lost - won)``, the money
conservation that the audit checks.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel

from blackjack.domain import events as ev
from blackjack.domain.platform_money import counts_as_activity
from blackjack.messages.wire import WireEnvelope
from blackjack.projections.fold_round import ROUND_HANDLERS
from blackjack.projections.fold_table import TABLE_HANDLERS
from blackjack.projections.ids import round_id, utc
from blackjack.projections.views import (
    Account,
    GameDay,
    LogEntry,
    ProjectionError,
    RoundPlayer,
    RoundRecord,
    TableView,
)


def check_next(stream_id: str, last_sequence: int, envelope: WireEnvelope) -> None:
    """The envelope must be the stream's next event: its own stream, the next sequence."""
    if envelope.stream_id != stream_id:
        raise ProjectionError(f"event of {envelope.stream_id} folded into {stream_id}")
    if envelope.sequence != last_sequence + 1:
        raise ProjectionError(f"{stream_id}: event {envelope.sequence} follows {last_sequence}")


# ---- the fold -----------------------------------------------------------------------------

_LOG_EXCLUDE = {"type", "version", "round"}


class StreamProjection:
    """The read model of one stream; ``apply`` folds the next event of that stream into it.

    The ``*_dirty`` sets name what ``apply`` changed since they were last cleared.
    """

    def __init__(
        self,
        view: TableView,
        accounts: dict[str, Account] | None = None,
        rounds: dict[int, RoundRecord] | None = None,
        players: dict[tuple[int, str], RoundPlayer] | None = None,
    ) -> None:
        self.view = view
        self.accounts = accounts or {}
        self.rounds = rounds or {}
        self.players = players or {}
        self.accounts_dirty: set[str] = set()
        self.rounds_dirty: set[int] = set()
        self.players_dirty: set[tuple[int, str]] = set()
        self.days: dict[date, GameDay] = {}
        """the game cycles closed since this projection was made, by UTC day: what the
        writer adds to ``game_days``"""

    @classmethod
    def new(cls, stream_id: str) -> StreamProjection:
        return cls(TableView(stream_id=stream_id))

    def apply(self, envelope: WireEnvelope) -> None:
        view = self.view
        check_next(view.stream_id, view.last_sequence, envelope)
        event = envelope.data
        at = utc(envelope.occurred_at)
        record: RoundRecord | None = None
        if isinstance(event, ev.RoundEvent):
            record = self._round_for(event, at, envelope.sequence)
        elif (number := recalled_in(view, event)) is not None:
            record = self.round(number)  # a deposit or a disconnection during the round...
        if record is not None:
            entry = LogEntry(
                sequence=envelope.sequence,
                at=at,
                event=envelope.type,
                data=event.model_dump(mode="json", exclude=_LOG_EXCLUDE),
            )
            record.log.append(entry)
            record.last_sequence = envelope.sequence
            self.rounds_dirty.add(record.round)
        handler = _HANDLERS.get(type(event))
        if handler is None:
            raise ProjectionError(f"no projection rule for {type(event).__name__}")
        handler(self, event, at)
        if record is not None and record.status in ("betting", "playing"):
            self._recount(record, getattr(event, "player_id", None))
        view.last_sequence = envelope.sequence
        if view.updated_at is None or counts_as_activity(event):
            # the last event of play: an interrupted round's wait counts from it (a refused
            # platform money command's record is none, as for the handler)
            view.updated_at = at

    # ---- pieces -------------------------------------------------------------------------

    def _round_for(self, event: ev.RoundEvent, at: datetime, sequence: int) -> RoundRecord:
        if isinstance(event, ev.RoundOpened):
            if event.round in self.rounds:
                raise ProjectionError(f"round {event.round} of {self.view.stream_id} reopened")
            self.rounds[event.round] = RoundRecord(
                round_id=round_id(self.view.stream_id, event.round),
                stream_id=self.view.stream_id,
                round=event.round,
                variant=self.view.variant or "",
                currency=self.view.currency or "",
                opened_at=at,
                betting_deadline=utc(event.betting_deadline) if event.betting_deadline else None,
                first_sequence=sequence,
                last_sequence=sequence,
            )
        record = self.rounds.get(event.round)
        if record is None:
            raise ProjectionError(f"{type(event).__name__} for unknown round {event.round}")
        return record

    def round(self, number: int) -> RoundRecord:
        return self.rounds[number]

    def account(self, player_id: str) -> Account:
        account = self.accounts.get(player_id)
        if account is None:
            raise ProjectionError(f"{player_id} has no account at {self.view.stream_id}")
        self.accounts_dirty.add(player_id)
        return account

    def round_player(self, number: int, player_id: str) -> RoundPlayer:
        player = self.players.get((number, player_id))
        if player is None:
            raise ProjectionError(f"{player_id} has no bet in round {number}")
        self.players_dirty.add((number, player_id))
        return player

    def _recount(self, record: RoundRecord, player_id: str | None) -> None:
        """The players' lines of a round in play, as its record holds their money now
        (``RoundRecord.money_of``): every stake placed so far, and what the wagers settled
        before the round (a bust, a surrender, a blackjack paid at once, insurance at the
        peek) paid, as it is paid. Read from the record rather than added up event by event,
        so a line an older release folded while the round played (its stakes not counted)
        reads right from the round's next event on."""
        owners = {box.player_id for box in record.boxes}
        if player_id is not None:
            owners.add(player_id)  # a bet taken back: its box is gone from the record
        for owner in sorted(owners):
            key = (record.round, owner)
            line = self.players.get(key)
            if line is None:
                continue
            wagered, paid, settled = record.money_of(owner)
            if (line.wagered, line.paid, line.net) != (wagered, paid, paid - settled):
                line.wagered, line.paid, line.net = wagered, paid, paid - settled
                self.players_dirty.add(key)

    def money_moved(self, e: ev.RoundEvent, player_id: str, balance_after: int) -> Account:
        """The account after a money event of a round, and that round's balance after."""
        account = self.account(player_id)
        account.available = balance_after
        self.round_player(e.round, player_id).balance_after = balance_after
        return account

    def moved_at_the_table(self, player_id: str, amount: int, balance_after: int) -> None:
        """Money paid in (``amount`` > 0) or taken out at the table: counted in the player's
        line of the open round, if they bet in it, so the line still adds up."""
        key = (self.view.round, player_id)
        player = self.players.get(key)
        if not self.view.round_open or player is None:
            return
        if amount > 0:
            player.deposited += amount
        else:
            player.withdrawn -= amount
        player.balance_after = balance_after
        self.players_dirty.add(key)

    def seat_release(self) -> int | None:
        """The table's ``seat_released_after_rounds_sat_out``: None where its rules free no
        seat (or a view folded before the option existed, whose rules had none)."""
        limit = (self.view.rules or {}).get("seat_released_after_rounds_sat_out")
        return limit if isinstance(limit, int) else None

    def day(self, at: datetime) -> GameDay:
        return self.days.setdefault(utc(at).date(), GameDay())

    def close_round(self) -> None:
        view = self.view
        view.round_open = False
        view.phase = "betting"
        view.active = None
        view.deadline = None


Handler = Callable[[StreamProjection, Any, datetime], None]


def recalled_in(view: TableView, event: object) -> int | None:
    """The round whose recall holds ``event``, a table's event that is not a round's own:
    the open round's, for a deposit, a disconnection, a seat taken or left while it plays;
    the round just settled, for a player the server stood up as it ended (``SeatLeft``,
    reason ``sat_out``: a decision the server made for the player, and why)."""
    if isinstance(event, ev.SeatLeft) and event.reason == "sat_out" and view.round:
        return view.round
    if isinstance(event, ev.IN_A_ROUND_S_RECALL) and view.round_open:
        return view.round
    return None


_HANDLERS: dict[type[BaseModel], Handler] = {**TABLE_HANDLERS, **ROUND_HANDLERS}
"""Every event of a table stream and its rule: the table's own (``fold_table``), a round's
(``fold_round``)."""

TABLE_EVENTS_PROJECTED = frozenset(_HANDLERS)
"""Every event type of a table stream the projection has a rule for."""
