"""What players, the platform and the service's own clock ask a table to do.

Amounts are ``StrictInt`` minor units: ``10.5`` or ``"10"`` is malformed, never rounded; every
whole number is within ``MAX_INT`` (2^53 - 1) either way.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt

from blackjack.domain.cards import Card

# the commands' bound is the rules' amounts' too: defined there (rules import no command)
from blackjack.domain.rules import MAX_INT as MAX_INT  # noqa: PLC0414 (re-exported)
from blackjack.domain.rules import PRESETS, Currency

UNPRINTABLE = r"\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufffd"
"""The characters no player id, operator or reason may hold (a regular expression's class, in
Python's and JSON Schema's syntax): the control characters (NUL, ESC, line breaks: C0, DEL and
C1), the line and paragraph separators and the bidirectional formatting characters. A NUL
cannot be stored by PostgreSQL (its text and JSONB refuse it): the projection worker stopped
for good at the event that carried one, and every later event of its partition with it. The
others rewrite a terminal's screen (``blackjack play`` shows reasons and other players' ids),
break a log line or reorder what is read around them. The replacement character U+FFFD is what
the read model stores for a NUL of an older log (``projections.store.NUL_STORED_AS``): a player
id holding it would be stored as the same key as an older player's with a NUL in its place (an
account's primary key: the fold failed on it for ever)."""

NUL_STORED_AS = "\ufffd"
"""What the read model stores for a NUL character (``projections.store``: PostgreSQL's text
refuses it), so what an operator reads there for a NUL an older release took in a player id;
``StandUpPlayer`` finds the seat by that form too."""

_UNPRINTABLE = re.compile(f"[{UNPRINTABLE}]")


def unprintable(text: str) -> str | None:
    """What in ``text`` no player id, name or reason may hold, said for a person; None if
    nothing."""
    found = _UNPRINTABLE.search(text)
    if found is None:
        return None
    if found.group() == "\ufffd":
        return (
            f"the replacement character (U+FFFD) at position {found.start()}, which the read "
            "model stores for a NUL"
        )
    return (
        f"a control, line-breaking or bidirectional formatting character "
        f"(U+{ord(found.group()):04X}) at position {found.start()}"
    )


def _no_unprintable(text: str) -> str:
    said = unprintable(text)
    if said is not None:
        raise ValueError(said)
    return text


def printable(max_length: int, description: str | None = None) -> Any:
    """A text field a person reads (an id, a name, a reason): 1 to ``max_length`` characters,
    none of them ``UNPRINTABLE``."""
    return Field(
        min_length=1,
        max_length=max_length,
        description=description,
        # "not" one of them anywhere: an anchored "^[^...]*$" lets a trailing line feed through
        # a validator whose "$" also matches before one (Python's re, as jsonschema's)
        json_schema_extra={"not": {"pattern": f"[{UNPRINTABLE}]"}},
    )


PrintableText = Annotated[str, AfterValidator(_no_unprintable)]


def seated_player(description: str) -> Any:
    """The id of a player a command acts on only if they hold a seat (the decider refuses
    anyone else ``not_seated``, writing nothing): any id a seat holds, ``UNPRINTABLE``
    characters included, since a log written before the commands refused them seats such
    players. The clock's ``Disconnect`` names them (a refusal raised in the clock ended the
    handler), ``LeaveTable``, ``Withdraw`` and the operator's ``StandUpPlayer`` pay their
    money out, and ``Deal``, ``ClearBets``, ``RemoveBet``, the insurance decisions and the hand
    commands finish or take back the round such a player bet in before the upgrade (refused,
    it stayed in play with their money: nothing else ends a single-player table's round); a
    new wager (``PlaceBet``, ``Rebet``, ``Deposit``) is still refused. No new id enters the log
    this way."""
    return Field(min_length=1, max_length=128, description=description)


SEATED_UNDER_AN_OLDER_RELEASE = (
    "a seated player (one seated under an older release may hold a character other player ids "
    "may not)"
)


BoundedInt = Annotated[StrictInt, Field(ge=-MAX_INT, le=MAX_INT)]
"""A command's whole number, within ``MAX_INT`` either way (the decider refuses what the
table's rules do not take: a box out of range, an amount of 0 or less, ...). These bounds win
over a ``Field``'s on the field: a field with a bound of its own is a ``StrictInt`` that says
both (``Field(ge=1, le=MAX_INT)``)."""


class Command(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PlayerCommand(Command):
    player_id: PrintableText = printable(128)


POSITIVE_AMOUNT: dict[str, Any] = {"exclusiveMinimum": 0}
"""Said in the schema of every amount a platform sends: the decider refuses 0 or less
(``invalid_amount``), and a platform validating against ``schemas/`` learns it there."""


ROUND_DESCRIPTION = (
    "the round this command is meant for, as the table announced it (RoundOpened, and every "
    "round event's round); before the first bet of a round, the number after the last one: "
    "refused stale_command when that round is over and round_not_in_play when it has not "
    "started, so that a copy sent after its answer left the idempotency window never acts in "
    "a later round. Left out, the command acts in whatever round is in play (a handler run with "
    "BLACKJACK_COMMAND_ROUND=required refuses it malformed)"
)


def named_round() -> Any:
    """The optional ``round`` of a command that acts in a round (``ROUND_COMMANDS``)."""
    return Field(None, ge=1, le=MAX_INT, description=ROUND_DESCRIPTION)


class HandCommand(PlayerCommand):
    """An action on one hand; ``hand`` may be left out to mean the box's hand whose turn it is."""

    player_id: str = seated_player(SEATED_UNDER_AN_OLDER_RELEASE)
    box: BoundedInt
    round: StrictInt | None = named_round()
    hand: BoundedInt | None = Field(
        None,
        description="the hand the TurnStarted named (0, and after a split 1, ...); left out, the "
        "box's hand whose turn it is, so a repeated click acts on the next hand where one with "
        "the hand is refused not_your_turn",
    )


# ---- operator and platform ----------------------------------------------------------------


class OpenTable(Command):
    type: Literal["OpenTable"] = "OpenTable"
    variant: str = Field(
        min_length=1,
        max_length=64,
        description="a preset's name: " + ", ".join(PRESETS) + " (another is refused "
        "unknown_variant)",
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict, max_length=64, description="rule options: at most 64 of them"
    )


class SitDown(PlayerCommand):
    type: Literal["SitDown"] = "SitDown"
    seat: BoundedInt = 0


class MoveSeat(PlayerCommand):
    type: Literal["MoveSeat"] = "MoveSeat"
    seat: BoundedInt


class LeaveTable(PlayerCommand):
    type: Literal["LeaveTable"] = "LeaveTable"
    player_id: str = seated_player(SEATED_UNDER_AN_OLDER_RELEASE)


class Deposit(PlayerCommand):
    type: Literal["Deposit"] = "Deposit"
    amount: BoundedInt = Field(
        description="positive minor units; refused (balance_limit) if the seat's balance would "
        "pass 10^15",
        json_schema_extra=POSITIVE_AMOUNT,
    )
    currency: Currency | None = Field(
        None,
        description="the currency of the money: omitted, the table's; another is refused "
        "(currency_mismatch). A buy-in's carries its wallet's. (A WalletDeposit's, omitted, is "
        "USD: a wallet takes the currency of its first deposit)",
    )
    transfer: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="the wallet buy-in this deposit carries (wallet:<player>/<number>): only "
        "the service's buy-in Deposit has one, read from its signed bj_transfer header (its "
        "body's is null and not read); a Deposit naming one without the service's signature "
        "is refused unauthorized",
    )


class Withdraw(PlayerCommand):
    type: Literal["Withdraw"] = "Withdraw"
    player_id: str = seated_player(SEATED_UNDER_AN_OLDER_RELEASE)
    amount: BoundedInt = Field(
        description="positive minor units", json_schema_extra=POSITIVE_AMOUNT
    )


class Disconnect(PlayerCommand):
    type: Literal["Disconnect"] = "Disconnect"
    player_id: str = seated_player(SEATED_UNDER_AN_OLDER_RELEASE)


class Reconnect(PlayerCommand):
    type: Literal["Reconnect"] = "Reconnect"


class CloseInterruptedRound(Command):
    """The operator closes a round that has waited on its players longer than the table's
    ``interrupted_round_days`` (page 003: "After a 30 days period we reserve the right to
    manage all interrupted games"). The server finishes it under the rules, as the clock of a
    shared table would: bets not dealt go back, insurance is declined, every hand left is
    stood, the dealer plays and the round settles."""

    type: Literal["CloseInterruptedRound"] = "CloseInterruptedRound"
    operator: PrintableText = printable(128, "who closes it, for the record")
    idle_since: datetime | None = Field(
        None,
        description="set by the service only: when the table's last event was written",
    )


class VoidRound(Command):
    """The operator voids the round in play after a malfunction, where the table's rules say
    a malfunction voids it (``void_on_malfunction``; page 000: "Malfunctions voids all pays
    and plays"): every wager of the round goes back to its player and nothing the round paid
    stands. The round ends there, unsettled (``RoundVoided``). A round already settled is not
    voided here: its money has left the round, and the platform adjusts it."""

    type: Literal["VoidRound"] = "VoidRound"
    round: StrictInt = Field(
        ge=1,
        le=MAX_INT,
        description="the round to void, as the operator saw it: refused unless it is the one in "
        "play, so that a void meant for a round since settled never voids the next",
    )
    operator: PrintableText = printable(128, "who voids it, for the record")
    reason: PrintableText = printable(200, "the malfunction, as the players and the record show it")


class SuspendTable(Command):
    """The operator disables the game at this table (maintenance, an incident, a regulator's
    order): no new wager and no new player from now on, while the game cycle already under
    way completes under the rules (bets on the layout may still be dealt, hands are played
    and settled). Players may still leave, take their money out, or take bets back before the
    deal. ``ResumeTable`` enables it again."""

    type: Literal["SuspendTable"] = "SuspendTable"
    operator: PrintableText = printable(128, "who suspends it, for the record")
    reason: PrintableText = printable(200, "why, as the players and the record show it")


class StandUpPlayer(Command):
    """The operator stands a player up: the seat is freed and the player's money at the table
    is paid out as on ``LeaveTable`` (at a shared table, back to the wallet), bets not yet
    dealt returned first. For a player the platform has excluded (self-exclusion, a closed
    account), or one who holds a seat at a table where nobody plays any more. Refused while a
    hand of the player is in play: the game cycle completes under the rules, then the
    operator stands them up (the platform stops forwarding the player's own commands). A
    player id an older release took with a NUL is named as the log holds it or as the read
    model shows it (the NUL as U+FFFD, ``NUL_STORED_AS``)."""

    type: Literal["StandUpPlayer"] = "StandUpPlayer"
    player_id: str = seated_player(
        "the player to stand up (one seated under an older release may hold a character other "
        "player ids may not; a NUL in it may be written as the read model shows it, U+FFFD)"
    )
    operator: PrintableText = printable(128, "who stands them up, for the record")
    reason: PrintableText = printable(200, "why, for the record")


class ResumeTable(Command):
    """The operator enables a suspended table again."""

    type: Literal["ResumeTable"] = "ResumeTable"
    operator: PrintableText = printable(128, "who resumes it, for the record")


# ---- the service itself -------------------------------------------------------------------


class ShuffleShoe(Command):
    """A new shoe order, drawn by the shell from a CSPRNG (or fixed by a test)."""

    type: Literal["ShuffleShoe"] = "ShuffleShoe"
    order: tuple[Card, ...]
    salt: str = Field(min_length=16, max_length=128)


class ExpireTimers(Command):
    """The clock has reached ``now`` (passed to ``decide``): act on every deadline passed."""

    type: Literal["ExpireTimers"] = "ExpireTimers"


# ---- betting ------------------------------------------------------------------------------


class PlaceBet(PlayerCommand):
    """A chip on one of the player's boxes. The chips of a box add up to its bet ("You may
    need several chips to reach the desired bet amount"): the table maximum binds every chip,
    the minimum binds the stack when the player deals."""

    type: Literal["PlaceBet"] = "PlaceBet"
    round: StrictInt | None = named_round()
    box: BoundedInt
    amount: BoundedInt = Field(
        description="positive minor units: one chip, at most the table's max_bet",
        json_schema_extra=POSITIVE_AMOUNT,
    )


class ClearBets(PlayerCommand):
    """Clear: every bet of the player's boxes is returned."""

    type: Literal["ClearBets"] = "ClearBets"
    round: StrictInt | None = named_round()
    player_id: str = seated_player(SEATED_UNDER_AN_OLDER_RELEASE)


class RemoveBet(PlayerCommand):
    """Chips taken back from one box before the deal: its whole bet, or ``amount`` of it.

    Nothing left frees the box; what is left may be under ``min_bet`` until the player deals,
    like a stack being built."""

    type: Literal["RemoveBet"] = "RemoveBet"
    round: StrictInt | None = named_round()
    player_id: str = seated_player(SEATED_UNDER_AN_OLDER_RELEASE)
    box: BoundedInt
    amount: BoundedInt | None = Field(
        None,
        description="the minor units to take back (positive); left out, the box's whole bet",
        json_schema_extra=POSITIVE_AMOUNT,
    )


class Deal(PlayerCommand):
    type: Literal["Deal"] = "Deal"
    round: StrictInt | None = named_round()
    player_id: str = seated_player(SEATED_UNDER_AN_OLDER_RELEASE)


class Rebet(PlayerCommand):
    """SAME BET / REBET (multiplier 1) and DOUBLE BET / REBET X 2 (multiplier 2)."""

    type: Literal["Rebet"] = "Rebet"
    round: StrictInt | None = named_round()
    multiplier: BoundedInt = 1


class Pass(PlayerCommand):
    type: Literal["Pass"] = "Pass"
    round: StrictInt | None = named_round()


# ---- insurance and the play ---------------------------------------------------------------


class TakeInsurance(PlayerCommand):
    type: Literal["TakeInsurance"] = "TakeInsurance"
    round: StrictInt | None = named_round()
    player_id: str = seated_player(SEATED_UNDER_AN_OLDER_RELEASE)
    box: BoundedInt


class DeclineInsurance(PlayerCommand):
    type: Literal["DeclineInsurance"] = "DeclineInsurance"
    round: StrictInt | None = named_round()
    player_id: str = seated_player(SEATED_UNDER_AN_OLDER_RELEASE)
    box: BoundedInt


class Hit(HandCommand):
    type: Literal["Hit"] = "Hit"


class Stand(HandCommand):
    type: Literal["Stand"] = "Stand"


class Double(HandCommand):
    type: Literal["Double"] = "Double"


class Split(HandCommand):
    type: Literal["Split"] = "Split"


class Surrender(HandCommand):
    type: Literal["Surrender"] = "Surrender"


TableCommand = (
    OpenTable
    | SitDown
    | MoveSeat
    | LeaveTable
    | StandUpPlayer
    | Deposit
    | Withdraw
    | Disconnect
    | Reconnect
    | ShuffleShoe
    | ExpireTimers
    | CloseInterruptedRound
    | VoidRound
    | SuspendTable
    | ResumeTable
    | PlaceBet
    | ClearBets
    | RemoveBet
    | Deal
    | Rebet
    | Pass
    | TakeInsurance
    | DeclineInsurance
    | Hit
    | Stand
    | Double
    | Split
    | Surrender
)
"""Every command of a table stream."""

AnyCommand = Annotated[TableCommand, Field(discriminator="type")]

COMMAND_TYPES: tuple[type[Command], ...] = get_args(TableCommand)

ROUND_COMMANDS: tuple[type[Command], ...] = (
    PlaceBet,
    ClearBets,
    RemoveBet,
    Deal,
    Rebet,
    Pass,
    TakeInsurance,
    DeclineInsurance,
    Hit,
    Stand,
    Double,
    Split,
    Surrender,
)
"""The commands that act in a round, each with an optional ``round`` naming it."""


_C = TypeVar("_C", bound=BaseModel)
_ROUND_COMMAND_TYPES: frozenset[type[Command]] = frozenset(ROUND_COMMANDS)


def meant_round(last_round: int, round_open: bool) -> int:
    """The round a command acting in a round means at a table whose last round is
    ``last_round`` (0 before the first): that one while it is open, else the one the next bet
    opens."""
    return last_round if round_open else last_round + 1


def naming_round(command: _C, last_round: int, round_open: bool) -> _C:
    """``command`` naming the round it is meant for (``meant_round``) where it acts in a round
    and names none yet; any other command as it is. What a client sends from the table it
    shows the player (``BlackjackClient``, ``blackjack play``, ``blackjack send``)."""
    if type(command) not in _ROUND_COMMAND_TYPES or getattr(command, "round", None) is not None:
        return command
    return command.model_copy(update={"round": meant_round(last_round, round_open)})
