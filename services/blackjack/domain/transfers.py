"""How a table names a wallet's buy-in, and what it remembers of the buy-ins it handled.

A wallet numbers its buy-ins 1, 2, 3... and sends each one's ``Deposit`` to its table in that
order, in transactions committed one after the other to the table's partition. So a table
sees a wallet's buy-ins in increasing numbers, and needs to remember only the highest it has
taken or declined from each wallet: a deposit at or below it is a copy. That keeps a table's
memory to one number per wallet, however many buy-ins it handles.
"""

from __future__ import annotations

from collections.abc import Iterable

from blackjack.domain.wallet import wallet_stream

DECLINES_PREFIX = "#declined/"
"""The stream of a partition's buy-ins declined at tables that do not exist
(``command_handler.ids.declines_stream``): no command can name it (``#``), and it is a table
never opened, whose state keeps the last buy-in number it declined from each wallet."""


def is_declines_stream(stream_id: str) -> bool:
    """Whether ``stream_id`` is a partition's stream of buy-ins declined at tables that do not
    exist: its ``TransferDeclined`` events answer buy-ins the wallets sent to other ids."""
    return stream_id.startswith(DECLINES_PREFIX)


def buy_in_ref(wallet_stream: str, number: int) -> str:
    """``wallet:<player>/<number>``: the wallet stream and its buy-in number."""
    return f"{wallet_stream}/{number}"


def transfer_ref(player_id: str, transfer: int) -> str:
    """How a table names a wallet's buy-in: the wallet stream and its transfer number."""
    return buy_in_ref(wallet_stream(player_id), transfer)


def transfer_origin(ref: str) -> tuple[str, int]:
    """The wallet stream and buy-in number a reference names (``ValueError`` if it names
    none)."""
    wallet, slash, number = ref.rpartition("/")
    if not slash or not wallet or not number.isdigit() or not number.isascii():
        raise ValueError(f"{ref!r} is not a buy-in reference (wallet:<player>/<number>)")
    return wallet, int(number)


def highest_per_wallet(refs: Iterable[str]) -> dict[str, int]:
    """The highest buy-in number of each wallet among ``refs`` (how a table's older snapshot,
    which listed every buy-in it handled, becomes what a table remembers now)."""
    highest: dict[str, int] = {}
    for ref in refs:
        wallet, number = transfer_origin(ref)
        highest[wallet] = max(number, highest.get(wallet, 0))
    return highest
