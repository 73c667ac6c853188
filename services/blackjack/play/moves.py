"""What the player types, as the table's commands: pure, no I/O (the moves in a player's
words: ``play.help.HELP``, what ``?`` shows).

A hand's decision goes to the hand whose turn it is; typed when it is not the player's turn,
it is sent all the same and the table refuses it (``not_your_turn``): the table decides. (So
during an insurance offer a move goes to the player's first box, where page 002's rules take
it as declining that box's insurance: ``move_declines_insurance``.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from blackjack.domain import commands as cmd
from blackjack.domain import wallet as wl
from blackjack.domain.currencies import decimals
from blackjack.play.help import HELP
from blackjack.play.table_rules import boxes_per_seat, shared_table
from blackjack.projections.projector import StreamProjection


class NotAMove(ValueError):
    """What was typed is not a move: said to the player, nothing is sent."""


@dataclass(frozen=True)
class Quit:
    pass


@dataclass(frozen=True)
class Help:
    text: str = HELP


@dataclass(frozen=True)
class History:
    rounds: int = 10


@dataclass(frozen=True)
class ShowRules:
    pass


Move = cmd.TableCommand | wl.BuyIn | Quit | Help | History | ShowRules

_HAND_COMMANDS: dict[str, Callable[..., cmd.TableCommand]] = {
    "h": cmd.Hit,
    "hit": cmd.Hit,
    "s": cmd.Stand,
    "stand": cmd.Stand,
    "d": cmd.Double,
    "double": cmd.Double,
    "p": cmd.Split,
    "split": cmd.Split,
    "r": cmd.Surrender,
    "surrender": cmd.Surrender,
}


# Digits and a point only: an exponent ("1e2") is refused, not read as 100.00 (a typo for 12
# would stake eight times what was meant).
_AMOUNT = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+", re.ASCII)
MOST_DIGITS = 20
"""Past this many digits of minor units an amount is no bet or balance any table takes
(a balance stops at 10^15): refused here, never sent as a number of a thousand digits."""


def amount_in_minor_units(text: str, currency: str) -> int:
    """``"5"`` or ``"5.50"`` in ``currency`` as its minor units (550 for USD); no rounding:
    more decimals than the currency has are refused. Exact whatever the number of digits
    (``decimal``'s context would round past 28 of them), ASCII digits only; one of thousands
    of digits is refused before Python reads it as an integer (past 4,300 digits that raised,
    and ended the session)."""
    places = decimals(currency)
    shown = _shown(text)
    if not _AMOUNT.fullmatch(text):
        raise NotAMove(f"{shown!r} is not an amount")
    sign, digits, exponent = Decimal(text).as_tuple()  # exact: no context applies
    assert isinstance(exponent, int) and sign == 0  # finite and not negative, by _AMOUNT
    written = "".join(map(str, digits))
    significant = written.rstrip("0")  # 5.000 is 5: its zeros say nothing
    if not significant:
        raise NotAMove(f"{shown!r} is not an amount above 0")
    shift = exponent + len(written) - len(significant) + places
    if shift < 0:  # its last digit is not 0: a fraction of the minor unit is left
        raise NotAMove(f"{shown} {currency} has more than {places} decimals")
    if len(significant) + shift > MOST_DIGITS:  # the minor units' digits
        raise NotAMove(f"{shown} {currency} is more than any table takes")
    minor: int = int(significant) * 10**shift
    if minor > cmd.MAX_INT:  # malformed as a command: never sent, the session goes on
        raise NotAMove(f"{shown} {currency} is more than any table takes")
    return minor


def _shown(text: str) -> str:
    """What a player typed, quoted back: cut when long (a line of thousands of digits)."""
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def move(line: str, table: StreamProjection, player_id: str) -> Move:
    """The move ``line`` names for ``player_id`` at ``table`` (its public view)."""
    words = line.strip().lower().split()
    if not words:
        raise NotAMove("type a move, ? for the list")
    word, rest = words[0], words[1:]
    for reading in _READINGS:  # each knows its own words: none is known to two of them
        found = reading(word, rest, table, player_id)
        if found is not None:
            return found
    raise NotAMove(f"{line.strip()!r} is not a move, ? for the list")


# Each reading of a line's first ``word`` and the ``rest``: its move, or None when the word is
# not one of its own or is not followed by what it takes (then ``move`` says it is no move).
_Reading = Callable[[str, list[str], StreamProjection, str], Move | None]


def _session_move(
    word: str, rest: list[str], table: StreamProjection, player_id: str
) -> Move | None:
    """What the session does itself, nothing sent: leave it, help, the rounds played, the
    table's rules."""
    if word in ("q", "quit", "exit"):
        return Quit()
    if word in ("?", "help"):
        return Help()
    if word in ("history", "recall"):
        _no_more(rest, word)
        return History()
    if word == "rules":
        _no_more(rest, word)
        return ShowRules()
    return None


def _hand_decision(
    word: str, rest: list[str], table: StreamProjection, player_id: str
) -> Move | None:
    """Hit, stand, double, split or surrender, for the hand whose turn it is."""
    decision = _HAND_COMMANDS.get(word)
    if decision is None:
        return None
    _no_more(rest, word)
    turn = table.view.active
    if turn is None or turn.player_id != player_id:
        box = _boxes(table, player_id)[0]
        return decision(player_id=player_id, box=box)  # the table says why not
    return decision(player_id=player_id, box=turn.box, hand=turn.hand)


_MONEY_USAGE = {
    "bet": "bet 5 [box N]",
    "b": "bet 5 [box N]",
    "remove": "remove [5] [box N]",
    "deposit": "deposit 100",
    "dep": "deposit 100",
    "buyin": "buyin 50",
    "buy-in": "buyin 50",
    "withdraw": "withdraw 20",
    "w": "withdraw 20",
}
"""How each money move is typed: said back when its amount or box is missing."""


def _money_move(word: str, rest: list[str], table: StreamProjection, player_id: str) -> Move | None:
    """A bet or chips taken back, or money into or out of the table: the amount in the
    table's currency."""
    if word not in _MONEY_USAGE:
        return None
    currency = table.view.currency or "USD"
    if word in ("deposit", "dep") and shared_table(table):
        raise NotAMove("this table is funded from your wallet: buyin AMOUNT")
    match word, rest:
        case (("bet" | "b"), [amount]):
            return cmd.PlaceBet(
                player_id=player_id,
                box=_boxes(table, player_id)[0],
                amount=amount_in_minor_units(amount, currency),
            )
        case (("bet" | "b"), [amount, "box", box_text]):
            chips = amount_in_minor_units(amount, currency)
            return cmd.PlaceBet(player_id=player_id, box=_number(box_text), amount=chips)
        case (("deposit" | "dep"), [amount]):
            return cmd.Deposit(player_id=player_id, amount=amount_in_minor_units(amount, currency))
        case (("buyin" | "buy-in"), [amount]):
            chips = amount_in_minor_units(amount, currency)
            return wl.BuyIn(player_id=player_id, table_id=table.view.stream_id, amount=chips)
        case (("withdraw" | "w"), [amount]):
            return cmd.Withdraw(player_id=player_id, amount=amount_in_minor_units(amount, currency))
        # Chips back from one box (the player's one with chips unless named): all of them,
        # or the amount (page 003: "To remove a bet completely or decrease its value, you should
        # remove the chip or chips placed").
        case "remove", []:
            return cmd.RemoveBet(player_id=player_id, box=_box_with_chips(table, player_id))
        case "remove", ["box", box_text]:
            return cmd.RemoveBet(player_id=player_id, box=_number(box_text))
        case "remove", [amount] if amount != "box":
            chips = amount_in_minor_units(amount, currency)
            box = _box_with_chips(table, player_id)
            return cmd.RemoveBet(player_id=player_id, box=box, amount=chips)
        case "remove", [amount, "box", box_text]:
            chips = amount_in_minor_units(amount, currency)
            return cmd.RemoveBet(player_id=player_id, box=_number(box_text), amount=chips)
    raise NotAMove(f"{word} is typed as {_MONEY_USAGE[word]}")


def _box_with_chips(table: StreamProjection, player_id: str) -> int:
    """The box a ``remove`` naming none means: the player's one box with chips on it (the
    first of the seat when none has: the table says there is no bet); with chips on several,
    the player says which."""
    record = table.rounds.get(table.view.round)
    staked: list[int] = []
    if record is not None and table.view.round_open and table.view.phase == "betting":
        staked = [b.box for b in record.boxes if b.player_id == player_id and b.bet]
    if len(staked) > 1:
        listed = ", ".join(map(str, staked))
        raise NotAMove(f"chips are on boxes {listed}: remove [AMOUNT] box N says which")
    return staked[0] if staked else _boxes(table, player_id)[0]


def _round_move(word: str, rest: list[str], table: StreamProjection, player_id: str) -> Move | None:
    """The round's other moves: insurance, the bets again or cleared, deal or pass."""
    match word, rest:
        case (("i" | "insure" | "insurance"), []):
            return cmd.TakeInsurance(player_id=player_id, box=_insurance_box(table, player_id))
        case (("n" | "no"), []):
            return cmd.DeclineInsurance(player_id=player_id, box=_insurance_box(table, player_id))
        case "rebet", []:
            return cmd.Rebet(player_id=player_id)
        case (("rebet2" | "rebet3" | "rebet4"), []):  # the multiples a table may offer
            return cmd.Rebet(player_id=player_id, multiplier=int(word[-1]))
        case "clear", []:
            return cmd.ClearBets(player_id=player_id)
        case "deal", []:
            return cmd.Deal(player_id=player_id)
        case "pass", []:
            return cmd.Pass(player_id=player_id)
    return None


def _seat_move(word: str, rest: list[str], table: StreamProjection, player_id: str) -> Move | None:
    """Sitting down, changing seats, leaving the table."""
    match word, rest:
        case "leave", []:
            return cmd.LeaveTable(player_id=player_id)
        case "sit", [seat]:
            return cmd.SitDown(player_id=player_id, seat=_number(seat, "seat"))
        case "seat", [seat]:
            return cmd.MoveSeat(player_id=player_id, seat=_number(seat, "seat"))
    return None


_READINGS: tuple[_Reading, ...] = (
    _session_move,
    _hand_decision,
    _money_move,
    _round_move,
    _seat_move,
)


def _no_more(rest: list[str], word: str) -> None:
    if rest:
        raise NotAMove(f"{word} takes nothing after it")


def _number(text: str, what: str = "box") -> int:
    """A box or seat number as typed; past ``MOST_DIGITS`` digits no table has it (and past
    4,300 Python does not read it: that raised, and ended the session)."""
    if not (text.isascii() and text.isdigit()) or len(text) > MOST_DIGITS:
        raise NotAMove(f"{_shown(text)!r} is not a {what} number")
    if int(text) > cmd.MAX_INT:  # past what a command holds: no table has it
        raise NotAMove(f"{_shown(text)!r} is not a {what} number")
    return int(text)


def _boxes(table: StreamProjection, player_id: str) -> list[int]:
    """The player's boxes: those of the seat, by the table's rules (box 0 before sitting)."""
    account = table.accounts.get(player_id)
    per_seat = boxes_per_seat(table)
    seat = account.seat if account is not None and account.seat is not None else 0
    return [seat * per_seat + k for k in range(per_seat)]


def _insurance_box(table: StreamProjection, player_id: str) -> int:
    """The player's first box still offered insurance in the round (else the first box)."""
    record = table.rounds.get(table.view.round)
    if record is not None:
        for box in record.boxes:
            if box.player_id == player_id and box.insurance and box.insurance.status == "offered":
                return box.box
    return _boxes(table, player_id)[0]
