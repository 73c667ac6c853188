"""How money comes to a table several players share in a test that plays the decider alone:
the ``Deposit`` of a player's buy-in from their wallet (a plain ``Deposit`` is the platform's,
for a single-player table, and a shared table refuses it)."""

from __future__ import annotations

from blackjack.domain import commands as cmd
from blackjack.domain.transfers import buy_in_ref
from blackjack.domain.wallet import wallet_stream


def bought_in(player_id: str, amount: int, number: int = 1) -> cmd.Deposit:
    """The ``Deposit`` of ``player_id``'s buy-in ``number`` (a table takes a wallet's buy-ins
    in increasing numbers: a second one at the same table is number 2)."""
    transfer = buy_in_ref(wallet_stream(player_id), number)
    return cmd.Deposit(player_id=player_id, amount=amount, transfer=transfer)
