"""Folding the events of one player's wallet stream into its read model, without I/O: the
money between tables, and the buy-ins on their way (``WalletProjection``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from blackjack.domain import wallet as wl
from blackjack.messages.wire import WireEnvelope
from blackjack.projections.ids import utc
from blackjack.projections.projector import check_next
from blackjack.projections.views import ProjectionError


class _Model(BaseModel):
    # Answers carry every field, defaults included: the OpenAPI document says so (required).
    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)


class Transfer(_Model):
    transfer: int
    table_id: str
    amount: int
    sent_at: datetime = Field(
        description="when the wallet sent it (its BuyInSent): how long it has been on its way"
    )


class WalletView(_Model):
    """The player's wallet stream: money between tables, and buy-ins on their way."""

    stream_id: str
    player_id: str = ""
    last_sequence: int = 0
    updated_at: datetime | None = None
    balance: int = 0
    deposited: int = 0
    withdrawn: int = 0
    bought_in: int = 0
    refunded: int = 0
    cashed_in: int = 0
    pending: list[Transfer] = []
    currency: str | None = None  # set by the first deposit
    cashed_in_from: dict[str, int] = {}
    """what each table paid back (``cashed_in`` by table id): a table's payouts the wallet has
    not received are told from it, one table from another (``transit.py``)"""

    @property
    def in_transit(self) -> int:
        return sum(t.amount for t in self.pending)


class WalletProjection:
    def __init__(self, view: WalletView) -> None:
        self.view = view

    @classmethod
    def new(cls, stream_id: str) -> WalletProjection:
        return cls(WalletView(stream_id=stream_id))

    def apply(self, envelope: WireEnvelope) -> None:
        view = self.view
        check_next(view.stream_id, view.last_sequence, envelope)
        event = envelope.data
        if not isinstance(event, wl.WalletEvent):
            raise ProjectionError(f"{type(event).__name__} in the wallet stream {view.stream_id}")
        handler = _WALLET_HANDLERS.get(type(event))
        if handler is None:
            raise ProjectionError(f"no wallet projection rule for {type(event).__name__}")
        view.player_id = event.player_id
        at = utc(envelope.occurred_at)
        handler(view, event, at)
        view.last_sequence = envelope.sequence
        view.updated_at = at


def _wallet_deposited(w: WalletView, e: wl.WalletDeposited, at: datetime) -> None:
    w.deposited += e.amount
    w.balance = e.balance_after
    w.currency = e.currency


def _wallet_withdrawn(w: WalletView, e: wl.WalletWithdrawn, at: datetime) -> None:
    w.withdrawn += e.amount
    w.balance = e.balance_after


def _wallet_command_refused(w: WalletView, e: wl.WalletCommandRefused, at: datetime) -> None:
    """No money moved (the handler keeps the refused command's id)."""


def _buy_in_sent(w: WalletView, e: wl.BuyInSent, at: datetime) -> None:
    w.bought_in += e.amount
    w.balance = e.balance_after
    w.pending.append(
        Transfer(transfer=e.transfer, table_id=e.table_id, amount=e.amount, sent_at=at)
    )


def _buy_in_completed(w: WalletView, e: wl.BuyInCompleted, at: datetime) -> None:
    _close_transfer(w, e.transfer)


def _buy_in_refunded(w: WalletView, e: wl.BuyInRefunded, at: datetime) -> None:
    w.refunded += e.amount
    w.balance = e.balance_after
    _close_transfer(w, e.transfer)


def _cash_out_received(w: WalletView, e: wl.CashOutReceived, at: datetime) -> None:
    w.cashed_in += e.amount
    w.cashed_in_from[e.table_id] = w.cashed_in_from.get(e.table_id, 0) + e.amount
    w.balance = e.balance_after


def _close_transfer(w: WalletView, transfer: int) -> None:
    pending = [t for t in w.pending if t.transfer != transfer]
    if len(pending) == len(w.pending):
        raise ProjectionError(f"buy-in {transfer} of {w.stream_id} is not pending")
    w.pending = pending


_WALLET_HANDLERS: dict[type[wl.WalletEvent], Callable[[WalletView, Any, datetime], None]] = {
    wl.WalletDeposited: _wallet_deposited,
    wl.WalletWithdrawn: _wallet_withdrawn,
    wl.WalletCommandRefused: _wallet_command_refused,
    wl.BuyInSent: _buy_in_sent,
    wl.BuyInCompleted: _buy_in_completed,
    wl.BuyInRefunded: _buy_in_refunded,
    wl.CashOutReceived: _cash_out_received,
}

WALLET_EVENTS_PROJECTED = frozenset(_WALLET_HANDLERS)
"""Every event type of a wallet stream the projection has a rule for."""
