"""The events of a table: immutable facts, the source of truth. Each is a frozen pydantic model
with a ``type`` tag and a ``version``; the envelope that carries them lives in ``messages``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from blackjack.domain.cards import Card
from blackjack.domain.rejections import DeclineCode, RejectionCode
from blackjack.domain.rules import Rules


class Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    version: int = 1


class RoundEvent(Event):
    round: int = Field(ge=1, description="the game-cycle number at this table")


# ---- the table, its seats and the money at the table --------------------------------------


class TableOpened(Event):
    """Version 2: its rules carry ``interrupted_round_days``. A version 1 was written before
    the option existed, and is upcast on read with its preset's value (``rules.
    with_later_terms``), as a snapshot of that time is read. (``rules.PRESET_TERMS``,
    ``void_on_malfunction``, ``move_declines_insurance``, ``surrender_paid_at_once`` and
    ``bust_settled_at_once``, are in the rules only where they are not the preset's: ``Rules``
    reads them so in every version.)"""

    version: int = 2
    type: Literal["TableOpened"] = "TableOpened"
    rules: Rules


class SeatTaken(Event):
    type: Literal["SeatTaken"] = "SeatTaken"
    player_id: str
    seat: int


class SeatChanged(Event):
    type: Literal["SeatChanged"] = "SeatChanged"
    player_id: str
    from_seat: int
    to_seat: int


LeaveReason = Literal["left", "sat_out", "operator"]


class SeatLeft(Event):
    """A player leaves the table and their money is paid out (at a shared table, back to
    their wallet).

    Version 2 added ``reason``: ``left`` when the player left (``LeaveTable``), ``sat_out``
    when the server stood them up at the end of a round after ``rounds_sat_out`` rounds in a
    row sat out (the table's ``seat_released_after_rounds_sat_out``), ``operator`` when
    ``operator`` stood them up (``StandUpPlayer``, why in ``operator_reason``): decisions made
    for the player, recorded as such. A version 1 event was written before anyone but the
    player could stand them up, and is upcast on read with ``reason: left``."""

    version: int = 2
    type: Literal["SeatLeft"] = "SeatLeft"
    player_id: str
    seat: int
    balance_returned: int = Field(ge=0, description="the player's money at the table, paid out")
    reason: LeaveReason = Field(
        "left",
        description="left: the player left; sat_out: the server stood them up after "
        "rounds_sat_out rounds in a row sat out (the table's "
        "seat_released_after_rounds_sat_out); operator: the operator stood them up "
        "(StandUpPlayer)",
    )
    rounds_sat_out: int | None = Field(
        None, ge=1, description="with reason sat_out: the rounds sat out in a row; else null"
    )
    operator: str | None = Field(
        None, max_length=128, description="with reason operator: who stood them up; else null"
    )
    operator_reason: str | None = Field(
        None, max_length=200, description="with reason operator: why; else null"
    )


class FundsDeposited(Event):
    type: Literal["FundsDeposited"] = "FundsDeposited"
    player_id: str
    amount: int = Field(ge=0)
    balance_after: int = Field(ge=0)
    transfer: str | None = Field(
        None, description="the wallet's buy-in this deposit completes (a multi-seat table)"
    )


class TransferDeclined(Event):
    """A buy-in's deposit the table could not take (not seated, table not open...): no money
    moves here, and the service gives it back to the wallet (``RefundBuyIn``). Recorded so
    that the table never takes that transfer later."""

    type: Literal["TransferDeclined"] = "TransferDeclined"
    player_id: str
    amount: int
    transfer: str
    reason_code: DeclineCode = Field(
        description="the rejection code the deposit would have had: one of these, a table "
        "declines for no other reason"
    )
    message: str


class FundsWithdrawn(Event):
    type: Literal["FundsWithdrawn"] = "FundsWithdrawn"
    player_id: str
    amount: int = Field(ge=0)
    balance_after: int = Field(ge=0)


class MoneyCommandRefused(Event):
    """The platform's own ``Deposit`` or ``Withdraw`` (no buy-in's transfer) that the table
    refused (``insufficient_funds``, ``not_seated``...): no money moves. Recorded so that the
    stream keeps the command's id (its causation) for the money retention: a copy sent after
    its answer has left the idempotency window is refused again, never decided a second time
    (``domain.platform_money``)."""

    type: Literal["MoneyCommandRefused"] = "MoneyCommandRefused"
    player_id: str
    command: Literal["Deposit", "Withdraw"] = Field(description="the command refused")
    amount: int
    reason_code: RejectionCode = Field(description="the rejection code it was answered with")
    message: str = Field(description="the rejection's message, as it was answered")


class PlayerDisconnected(Event):
    type: Literal["PlayerDisconnected"] = "PlayerDisconnected"
    player_id: str


class PlayerReconnected(Event):
    type: Literal["PlayerReconnected"] = "PlayerReconnected"
    player_id: str


class TableSuspended(Event):
    """The operator disabled the game here: no new wager, player or money in until
    ``TableResumed``; a round under way completes."""

    type: Literal["TableSuspended"] = "TableSuspended"
    operator: str
    reason: str


class TableResumed(Event):
    type: Literal["TableResumed"] = "TableResumed"
    operator: str


IN_A_ROUND_S_RECALL: tuple[type[Event], ...] = (
    SeatTaken,
    SeatChanged,
    SeatLeft,
    FundsDeposited,
    TransferDeclined,
    FundsWithdrawn,
    PlayerDisconnected,
    PlayerReconnected,
    TableSuspended,
    TableResumed,
)
"""Events of the table, not of a round, that belong in the recall of the round open when they
happen (GLI-19 game recall): money paid in or taken out during the game cycle, a disconnection
that interrupts it, a seat taken or left while it plays, the table suspended or resumed."""


# ---- the shoe -----------------------------------------------------------------------------

SEALED_FIELDS = ("order", "salt")
"""Fields of ``ShoeShuffled`` that must never reach a reader of the event topic in clear."""


class ShoeShuffled(Event):
    """A new shoe. ``commitment`` = sha256 of salt and order, published now; ``order`` and
    ``salt`` are sealed by the message codec and revealed only by ``ShoeRetired``."""

    type: Literal["ShoeShuffled"] = "ShoeShuffled"
    shoe: int
    commitment: str
    cards: int
    order: tuple[Card, ...]
    salt: str


class ShoeRetired(Event):
    """The shoe is done: its order and salt are revealed so anyone can check the commitment."""

    type: Literal["ShoeRetired"] = "ShoeRetired"
    shoe: int
    commitment: str
    cards_dealt: int
    order: tuple[Card, ...]
    salt: str


# ---- betting ------------------------------------------------------------------------------

RefundReason = Literal[
    "cleared",  # ClearBets: every bet of the player
    "removed",  # RemoveBet: chips taken back from one box, all or some of its bet
    "passed",
    "timed_out",
    "disconnected",
    "left",
    "cancelled",
    "stood_up",  # StandUpPlayer: the operator stood the player up (LeaveTable's is ``left``)
]


class RoundOpened(RoundEvent):
    type: Literal["RoundOpened"] = "RoundOpened"
    betting_deadline: datetime | None = None


class BetPlaced(RoundEvent):
    type: Literal["BetPlaced"] = "BetPlaced"
    player_id: str
    box: int
    amount: int = Field(ge=0)
    box_total: int = Field(ge=0)
    balance_after: int = Field(ge=0)


class BetRefunded(RoundEvent):
    """Money of a bet not yet dealt goes back to the player's balance.

    Version 2 added ``box_total``, the bet left on the box (a bet reduced by ``RemoveBet``);
    0 frees the box. A version 1 event always returned the box's whole bet, and is upcast
    on read with ``box_total: 0``."""

    version: int = 2
    type: Literal["BetRefunded"] = "BetRefunded"
    player_id: str
    box: int
    amount: int = Field(ge=0)
    box_total: int = Field(0, ge=0, description="the bet left on the box; 0 frees the box")
    reason: RefundReason
    balance_after: int = Field(ge=0)


class DealRequested(RoundEvent):
    type: Literal["DealRequested"] = "DealRequested"
    player_id: str


class PlayerPassed(RoundEvent):
    type: Literal["PlayerPassed"] = "PlayerPassed"
    player_id: str


class RoundCancelled(RoundEvent):
    """Betting closed with no bet left to deal; nothing was wagered."""

    type: Literal["RoundCancelled"] = "RoundCancelled"


class VoidedWagers(BaseModel):
    """What voiding a round gives one player back."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    player_id: str
    wagered: int = Field(
        ge=0, description="every stake the round took: bets, doubles, splits and insurance"
    )
    paid: int = Field(
        ge=0,
        description="what the round had paid the player already (a blackjack paid at once, an "
        "insurance won), stakes included",
    )
    returned: int = Field(
        description="what goes back to the balance: wagered - paid, or less taken back when the "
        "balance no longer holds a payment (see not_recovered); negative takes a payment back"
    )
    not_recovered: int = Field(
        0,
        ge=0,
        description="a payment of the round the balance could not give back (taken out of the "
        "table since): left to the platform; 0 almost always",
    )
    balance_after: int = Field(ge=0)


class RoundVoided(RoundEvent):
    """The operator voided the round in play for a malfunction (the table's
    ``void_on_malfunction``; page 000: "Malfunctions voids all pays and plays"): every wager
    of the round goes back to its player and nothing the round paid stands, so each player's
    balance is what it was before the round, money paid in or taken out meanwhile apart. No
    card decides anything: the round ends here, unsettled (the hole card, when one was dealt,
    is revealed just before, so that the recall shows every card the round dealt).

    Version 2 added ``counts_as_round_sat_out``, false: a voided round is no round sat out
    (what its deal counted is taken back, and no one is stood up after it). A version 1 was
    written by a handler that counted it and stood up, right after it, whoever that brought
    to the table's limit; it is upcast on read with ``true``, so a log of that release folds
    (and is audited) as its handler decided it, as its snapshots have it. A handler restored
    from such a snapshot taken after the deal, which cannot tell whether the deal counted,
    voids the round as that release did and writes ``true`` too."""

    version: int = 2
    type: Literal["RoundVoided"] = "RoundVoided"
    operator: str
    reason: str
    returns: tuple[VoidedWagers, ...] = Field(
        description="one per player with money in the round, in the order of their first box"
    )
    counts_as_round_sat_out: bool = Field(
        description="the round counts as one sat out for the players who sat it out, who are "
        "then stood up after it where that brings them to the table's limit: true in a "
        "version 1 (upcast), and where a handler restored the table from that release's "
        "snapshot, which cannot tell whether the deal counted; the handlers write false, a "
        "voided round being no round played"
    )


# ---- the deal and the play ----------------------------------------------------------------


class DealStarted(RoundEvent):
    """Betting is closed: these boxes play this round with these bets."""

    type: Literal["DealStarted"] = "DealStarted"
    shoe: int
    boxes: tuple[int, ...]


class CardDealt(RoundEvent):
    """A card leaves the shoe. Face-down cards (the dealer's hole card) carry no card."""

    type: Literal["CardDealt"] = "CardDealt"
    to: Literal["box", "dealer"]
    box: int | None = None
    hand: int | None = None
    card: Card | None = None
    face_up: bool = True


class InsuranceOffered(RoundEvent):
    type: Literal["InsuranceOffered"] = "InsuranceOffered"
    boxes: tuple[int, ...]
    deadline: datetime | None = None


class InsuranceTaken(RoundEvent):
    type: Literal["InsuranceTaken"] = "InsuranceTaken"
    player_id: str
    box: int
    amount: int = Field(ge=0)
    balance_after: int = Field(ge=0)


class InsuranceDeclined(RoundEvent):
    type: Literal["InsuranceDeclined"] = "InsuranceDeclined"
    player_id: str
    box: int


class DealerPeeked(RoundEvent):
    type: Literal["DealerPeeked"] = "DealerPeeked"
    has_blackjack: bool


class InsuranceSettled(RoundEvent):
    type: Literal["InsuranceSettled"] = "InsuranceSettled"
    player_id: str
    box: int
    stake: int = Field(ge=0)
    won: bool
    payout: int = Field(ge=0)
    balance_after: int = Field(ge=0)


TurnAction = Literal["hit", "stand", "double", "split", "surrender"]


class TurnStarted(RoundEvent):
    """A hand waits for its player's decision; ``actions`` are the ones the table accepts now.

    Version 2 is emitted at every decision: when the turn comes to a hand, again after each
    card a hit or a split gives it while it stays open, and when money moved during the turn
    changes its actions. At a timed table ``deadline`` is the hand's: it starts with the
    hand's first TurnStarted and a hit does not restart it. Version 1 was emitted once per
    hand and did not list the actions: it is upcast on read with ``actions: null``."""

    version: int = 2
    type: Literal["TurnStarted"] = "TurnStarted"
    player_id: str
    box: int
    hand: int
    actions: tuple[TurnAction, ...] | None = Field(
        description="the decisions open on this hand now, in the order hit, stand, double, "
        "split, surrender (balance, rules and the hand's cards applied); absent from a stored "
        "version 1, which is read as null"
    )
    deadline: datetime | None = None


class PlayerHit(RoundEvent):
    type: Literal["PlayerHit"] = "PlayerHit"
    player_id: str
    box: int
    hand: int


class PlayerStood(RoundEvent):
    type: Literal["PlayerStood"] = "PlayerStood"
    player_id: str
    box: int
    hand: int
    total: int


class HandDoubled(RoundEvent):
    type: Literal["HandDoubled"] = "HandDoubled"
    player_id: str
    box: int
    hand: int
    amount: int = Field(ge=0)
    balance_after: int = Field(ge=0)


class HandSplit(RoundEvent):
    """The hand's second card moves to a new hand right after it, with an equal bet."""

    type: Literal["HandSplit"] = "HandSplit"
    player_id: str
    box: int
    hand: int
    amount: int = Field(ge=0)
    balance_after: int = Field(ge=0)


class HandSurrendered(RoundEvent):
    type: Literal["HandSurrendered"] = "HandSurrendered"
    player_id: str
    box: int
    hand: int


class PlayerTimedOut(RoundEvent):
    """The clock ran out on a player; ``action`` is what the server did in their place.

    Version 2 added ``sits_out``: a player left out of a round sits out from then on (later
    rounds deal without waiting for them) until they bet or pass. A version 1 event was written
    before sitting out existed, and is upcast on read with ``sits_out: false``, so a table's
    log folds to the state its handler had then."""

    version: int = 2
    type: Literal["PlayerTimedOut"] = "PlayerTimedOut"
    player_id: str
    phase: Literal["betting", "insurance", "playing"]
    action: Literal["left_out", "dealt_in", "declined_insurance", "stood"]
    box: int | None = None
    hand: int | None = None
    sits_out: bool = Field(
        False, description="the player sits out from now on, until they bet or pass"
    )


class InterruptedRoundClosed(RoundEvent):
    """The operator closed a round its players left waiting longer than the table's rules
    allow (``interrupted_round_days``). The events after it are what the server did in the
    players' place (``PlayerTimedOut``, then the round's own end)."""

    type: Literal["InterruptedRoundClosed"] = "InterruptedRoundClosed"
    operator: str
    idle_since: datetime = Field(description="when the table's last event before it was written")
    after_days: int = Field(ge=1, description="the table's interrupted_round_days")


class RoundResumed(RoundEvent):
    """The service was interrupted while this round was in play (bets placed or cards dealt,
    not settled) and the round goes on as it was: a command handler that rebuilt the table
    from the log (after taking its partition over from an instance that died or left, or
    after a transaction of its own that did not commit) writes it once, with the first
    command that writes the table's next events, in that command's transaction and before
    its events (GLI-19 interrupted games). Written by the service, never decided by the
    rules: it changes nothing at the table but a single-seat round's clock (below); the gap
    between ``last_event_at`` and its own time is how long the round waited on the service
    (and its players).

    Version 2 added ``deadline``: at a table of one seat on a clock (``turn_seconds``), the
    clock of the phase the round waits in starts again from the marker, a whole turn, since
    its player could not act while the service was away (a single-player round resumes as it
    was); the only thing the marker changes. Null elsewhere: at a shared table the deadline
    stands and the server completes the hand at it, recording what it decided. A version 1
    was written before the clock restarted, and is upcast on read with ``deadline: null``."""

    version: int = 2
    type: Literal["RoundResumed"] = "RoundResumed"
    last_event_at: datetime | None = Field(
        description="when the table's last event before the interruption was written (null "
        "only when the log no longer says: a snapshot from before this was kept, with no answer "
        "in it)"
    )
    deadline: datetime | None = Field(
        None,
        description="at a table of one seat on a clock, the new deadline of the phase the round "
        "waits in: the table's turn seconds from this event (the clock restarts); null where no "
        "clock runs or the table is shared (its deadline stands), and in a stored version 1",
    )


class DealerHoleCardRevealed(RoundEvent):
    type: Literal["DealerHoleCardRevealed"] = "DealerHoleCardRevealed"
    card: Card


# ---- settlement ---------------------------------------------------------------------------

Outcome = Literal["blackjack", "win", "push", "lose", "bust", "surrender"]


class HandSettled(RoundEvent):
    type: Literal["HandSettled"] = "HandSettled"
    player_id: str
    box: int
    hand: int
    outcome: Outcome
    total: int
    stake: int = Field(ge=0)
    payout: int = Field(ge=0, description="everything paid back for this hand, stake included")
    balance_after: int = Field(ge=0)


class PlayerRoundResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    player_id: str
    wagered: int = Field(ge=0)
    paid: int = Field(ge=0)
    net: int
    balance_after: int = Field(ge=0)


class BoxMessage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    box: int
    message: str


class RoundSettled(RoundEvent):
    type: Literal["RoundSettled"] = "RoundSettled"
    dealer_total: int
    dealer_blackjack: bool
    results: tuple[PlayerRoundResult, ...]
    messages: tuple[BoxMessage, ...] = ()


PublicTableEvent = (
    TableOpened
    | SeatTaken
    | SeatChanged
    | SeatLeft
    | FundsDeposited
    | TransferDeclined
    | FundsWithdrawn
    | MoneyCommandRefused
    | PlayerDisconnected
    | PlayerReconnected
    | TableSuspended
    | TableResumed
    | ShoeRetired
    | RoundOpened
    | BetPlaced
    | BetRefunded
    | DealRequested
    | PlayerPassed
    | RoundCancelled
    | RoundVoided
    | InterruptedRoundClosed
    | RoundResumed
    | DealStarted
    | CardDealt
    | InsuranceOffered
    | InsuranceTaken
    | InsuranceDeclined
    | DealerPeeked
    | InsuranceSettled
    | TurnStarted
    | PlayerHit
    | PlayerStood
    | HandDoubled
    | HandSplit
    | HandSurrendered
    | PlayerTimedOut
    | DealerHoleCardRevealed
    | HandSettled
    | RoundSettled
)
"""Every event of a table stream but ``ShoeShuffled``, whose order travels sealed."""

TableEvent = PublicTableEvent | ShoeShuffled
"""Every event of a table stream."""

AnyEvent = Annotated[TableEvent, Field(discriminator="type")]

EVENT_TYPES: tuple[type[Event], ...] = get_args(TableEvent)
