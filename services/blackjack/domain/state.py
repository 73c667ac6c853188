"""The state of one table: a left fold of ``evolve`` over its events. Frozen, so it can be
shared by replay, snapshots and the decider without copies."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from blackjack.domain.hand import Total, total
from blackjack.domain.rules import Rules

HandStatus = Literal["open", "standing", "bust", "blackjack", "surrendered"]
Phase = Literal["betting", "insurance", "playing", "dealer"]
InsuranceStatus = Literal["none", "offered", "taken", "declined", "settled"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


_Model = TypeVar("_Model", bound=BaseModel)


# The slot setters of BaseModel, looked up once: ``replace`` runs about 40 times per round.
_new = object.__new__
_set_dict = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def replace(model: _Model, **changes: Any) -> _Model:
    """A copy with some fields changed, without validation: ``evolve`` applies facts the
    decider has already checked, and this is its hot path. Built like pydantic's own
    ``model_construct`` (``__dict__`` and the three slots), with one merged dict and the slot
    setters bound once: about twice as fast as ``model_copy``, 10 % more rounds per second."""
    copy = _new(model.__class__)
    _set_dict(copy, "__dict__", {**model.__dict__, **changes})
    _set_fields_set(copy, model.__pydantic_fields_set__)
    _set_extra(copy, None)
    _set_private(copy, None)
    return copy


_REQUIRED = object()


@cache
def _fact_template(cls: type[BaseModel]) -> tuple[dict[str, Any], frozenset[str]]:
    """Every field in declaration order (the order ``model_dump`` follows), with its default
    or ``_REQUIRED``; and the names that have no default."""
    template: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if field.default_factory is not None:
            raise TypeError(f"fact() does not call default factories ({cls.__name__}.{name})")
        template[name] = _REQUIRED if field.is_required() else field.default
    required = frozenset(name for name, value in template.items() if value is _REQUIRED)
    return template, required


def fact(cls: type[_Model], **fields: Any) -> _Model:
    """``cls(**fields)`` without validation, for the events the decider builds from values it
    has already checked (validating each one was about 7 % of a simulated round). The result
    equals, dumps and serializes exactly like the validated model: defaults filled in, fields
    in declaration order, ``model_fields_set`` the names given. Missing or unknown names are
    still refused; types and constraints are not checked, so anything read from outside (the
    event log, commands) goes through pydantic as before."""
    template, required = _fact_template(cls)
    values = {**template, **fields}
    if len(values) != len(template) or not required <= fields.keys():
        unknown = sorted(fields.keys() - template.keys())
        missing = sorted(required - fields.keys())
        raise TypeError(f"{cls.__name__}: unknown fields {unknown}, missing fields {missing}")
    model = _new(cls)
    _set_dict(model, "__dict__", values)
    _set_fields_set(model, set(fields))
    _set_extra(model, None)
    _set_private(model, None)
    return model


class Hand(_Frozen):
    cards: tuple[str, ...] = ()
    stake: int
    status: HandStatus = "open"
    from_split: bool = False
    split_aces: bool = False
    doubled: bool = False

    @property
    def total(self) -> Total:
        return total(self.cards)


class Box(_Frozen):
    """A betting position. ``bet`` is the initial bet of the current round."""

    player_id: str | None = None
    bet: int = 0
    hands: tuple[Hand, ...] = ()
    insurance: InsuranceStatus = "none"
    insurance_stake: int = 0
    insurance_paid: int = 0  # what the settled insurance returned (stake included)


class Player(_Frozen):
    player_id: str
    seat: int
    balance: int = 0
    ready: bool = False  # pressed Deal this round
    passed: bool = False
    connected: bool = True
    last_bets: tuple[tuple[int, int], ...] = ()  # (box within the seat, amount) last dealt


class Shoe(_Frozen):
    number: int
    order: tuple[str, ...]
    salt: str
    commitment: str
    position: int = 0


class TableState(_Frozen):
    opened: bool = False
    rules: Rules = Rules()
    players: dict[str, Player] = {}
    shoe: Shoe | None = None
    shoes_used: int = 0
    round: int = 0  # the number of the round open now, or of the last one
    round_open: bool = False
    phase: Phase = "betting"
    boxes: tuple[Box, ...] = ()
    dealer: tuple[str, ...] = ()
    active: tuple[int, int] | None = None  # (box, hand) whose turn it is
    deadline: datetime | None = None
    transfers: frozenset[str] = frozenset()
    """The wallet buy-ins this table has taken or declined: neither is ever taken again."""

    def player_at(self, seat: int) -> Player | None:
        for player in self.players.values():
            if player.seat == seat:
                return player
        return None

    def seat_of_box(self, box: int) -> int:
        return box // self.rules.boxes_per_seat

    def boxes_of(self, player_id: str) -> list[int]:
        return [i for i, b in enumerate(self.boxes) if b.player_id == player_id]

    def boxes_in_play(self) -> list[int]:
        return [i for i, b in enumerate(self.boxes) if b.hands]

    @property
    def upcard(self) -> str | None:
        return self.dealer[0] if self.dealer else None

    @property
    def hole_card(self) -> str | None:
        return self.dealer[1] if len(self.dealer) > 1 else None


INITIAL_STATE = TableState()
