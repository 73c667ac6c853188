"""Cards from the shoe to a box's hand or to the dealer (the hole card face down, no card in
its event)."""

from __future__ import annotations

from blackjack.domain import facts
from blackjack.domain.decisions.draft import Draft


def _next_card(r: Draft) -> str:
    shoe = r.state.shoe
    assert shoe is not None
    return shoe.order[shoe.position]


def deal_card(r: Draft, box: int, hand: int) -> None:
    card = _next_card(r)
    r.emit(facts.card_dealt(round=r.state.round, to="box", box=box, hand=hand, card=card))


def deal_dealer(r: Draft, face_up: bool) -> None:
    card = _next_card(r) if face_up else None
    r.emit(facts.card_dealt(round=r.state.round, to="dealer", card=card, face_up=face_up))
