"""Money into and out of a table: a platform's deposit, a buy-in from the player's wallet
(taken or declined, never simply refused) and a withdrawal. A suspended table takes no money
in (``table_suspended``) and always lets it out."""

from __future__ import annotations

from blackjack.domain import commands as cmd
from blackjack.domain import facts
from blackjack.domain.decisions.checks import (
    check_affordable,
    check_amount,
    check_balance_limit,
    check_currency,
    check_not_suspended,
    seated,
)
from blackjack.domain.decisions.draft import Draft, Refused, refuse
from blackjack.domain.rejections import decline_code
from blackjack.domain.rules import Rules
from blackjack.domain.transfers import transfer_origin, transfer_ref
from blackjack.domain.wallet import wallet_stream

NO_MONEY_IN = "no money comes in until it reopens (withdrawing and leaving still pay out)"
"""Game disable: a suspended table takes no deposit or buy-in, as it takes no new wager or
player; the money already there can always be taken out."""


def is_transfer(command: cmd.Command) -> bool:
    """A buy-in's deposit from the player's wallet: decided even at a table not yet open."""
    return isinstance(command, cmd.Deposit) and command.transfer is not None


WALLET_FUNDED = "money comes to a multi-seat table from the player's wallet: send BuyIn to {wallet}"
"""Why a table several players share takes no platform ``Deposit`` (page 002: each player's
money at the table is what they bought in with from their own wallet)."""


def buy_in_deposit(player_id: str, amount: int, number: int = 1) -> cmd.Deposit:
    """The ``Deposit`` of ``player_id``'s buy-in ``number`` from their wallet, as the table
    decides it (a table takes a wallet's buy-ins in increasing numbers)."""
    transfer = transfer_ref(player_id, number)
    return cmd.Deposit(player_id=player_id, amount=amount, transfer=transfer)


def first_funding(rules: Rules, player_id: str, amount: int) -> cmd.Deposit:
    """How ``amount`` first comes to a table under ``rules`` for a player seated there (the
    simulator's and the scenarios' set-up): the platform's ``Deposit``, or at a table funded
    by wallets the ``Deposit`` of the player's first buy-in."""
    if not rules.funded_by_wallet:
        return cmd.Deposit(player_id=player_id, amount=amount)
    return buy_in_deposit(player_id, amount)


def deposit(r: Draft, c: cmd.Deposit) -> None:
    if c.transfer is not None:
        _transfer_deposit(r, c, c.transfer)
        return
    if r.state.opened and r.state.rules.funded_by_wallet:
        raise refuse("unauthorized", WALLET_FUNDED.format(wallet=wallet_stream(c.player_id)))
    player = seated(r.state, c.player_id)
    check_not_suspended(r.state, NO_MONEY_IN)
    check_amount(c.amount)
    check_currency(r.state, c.currency)
    check_balance_limit(player, c.amount)
    balance = player.balance + c.amount
    r.emit(facts.funds_deposited(player_id=c.player_id, amount=c.amount, balance_after=balance))


def _transfer_deposit(r: Draft, c: cmd.Deposit, transfer: str) -> None:
    """A buy-in's deposit is taken (``FundsDeposited`` with its transfer) or declined
    (``TransferDeclined``, the money goes back to the wallet), never simply refused: either
    way the table's log keeps the transfer, so a copy of it is never taken later. A wallet's
    buy-ins arrive in the order it numbered them (``domain.transfers``): one numbered at or
    below the last this table handled from that wallet is a copy."""
    state = r.state
    try:
        wallet, number = transfer_origin(transfer)
    except ValueError as error:
        raise refuse("malformed", str(error)) from error
    last = state.buy_ins.get(wallet, 0)
    if number <= last:
        raise refuse(
            "transfer_already_handled",
            f"buy-in {transfer} was already taken or declined here "
            f"(the last one from {wallet} was number {last})",
        )
    try:
        if not state.opened:
            raise refuse("table_not_open", "the table has not been opened")
        if not state.rules.funded_by_wallet:
            raise refuse(
                "unauthorized", "a single-player table is funded by the platform's Deposit"
            )
        player = seated(state, c.player_id)
        check_not_suspended(state, NO_MONEY_IN)
        check_amount(c.amount)
        check_currency(state, c.currency)
        check_balance_limit(player, c.amount)
    except Refused as refused:
        r.emit(
            facts.transfer_declined(
                player_id=c.player_id,
                amount=c.amount,
                transfer=transfer,
                reason_code=decline_code(refused.code),
                message=refused.message,
            )
        )
        return
    balance = player.balance + c.amount
    r.emit(
        facts.funds_deposited(
            player_id=c.player_id,
            amount=c.amount,
            balance_after=balance,
            transfer=transfer,
        )
    )


def withdraw(r: Draft, c: cmd.Withdraw) -> None:
    player = seated(r.state, c.player_id)
    check_amount(c.amount)
    check_affordable(player, c.amount, "the withdrawal")
    balance = player.balance - c.amount
    r.emit(facts.funds_withdrawn(player_id=c.player_id, amount=c.amount, balance_after=balance))
