"""What the terminal client reads of a table's rules from its public view (the rules document
as the read model folded it: a JSON object, none before the table opens), in one place."""

from __future__ import annotations

from blackjack.projections.projector import StreamProjection


def shared_table(table: StreamProjection) -> bool:
    """A table of several seats: funded from the players' wallets (``Rules.funded_by_wallet``:
    a buy-in, no deposit; leaving pays back to the wallet), seats shown."""
    return int((table.view.rules or {}).get("seats", 1)) > 1


def boxes_per_seat(table: StreamProjection) -> int:
    """The boxes a seat bets on (page 003's "up to three hands")."""
    return int((table.view.rules or {}).get("boxes_per_seat", 1))
