"""A casino's variant of blackjack as data: one ``Rules`` object per preset, never a code branch.

Every preset cites the seed rule page it comes from (``shared/seeds``); where a page is silent or
ambiguous the chosen default is written next to the field and in the README's rules reference.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from fractions import Fraction
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationInfo,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError, to_jsonable_python
from pydantic_core.core_schema import SerializerFunctionWrapHandler

from blackjack.domain.cards import is_ace, is_ten_value
from blackjack.domain.currencies import decimals, whole_unit

CARDS_PER_DECK = 52


def _as_written(value: object) -> object:
    """A float is read as the decimal it was written as: an override of ``1.15`` is 23/20, not
    the binary float just under it, whose winnings floored to the cent would pay a $20.00
    blackjack 22.99 instead of 23.00. Integers, ``"6/5"`` and ``"1.2"`` are exact already."""
    if isinstance(value, bool):  # Fraction(True) is 1: even money from a checkbox
        raise ValueError("a ratio: a number or a text such as 6/5, not true or false")
    if isinstance(value, float):
        return Fraction(repr(value))
    return value


def _terms_within_max_int(value: Fraction, info: ValidationInfo) -> Fraction:
    """A new ratio's terms are at most ``MAX_INT``: ``"1e-4300"`` read as a fraction whose
    denominator Python will not write as digits (past 4,300 of them), and the table's
    ``TableOpened`` was written with ``"<unprintable Fraction object>"`` for it, which no
    rebuild could read: the partition's every table and wallet stopped. Recorded rules read as
    they were written."""
    too_long = max(abs(value.numerator), value.denominator) > MAX_INT
    if too_long and not (info.context or {}).get("recorded"):
        raise PydanticCustomError(
            "ratio_past_max_int",
            "a ratio of whole numbers of at most {max} (2^53 - 1), such as 6/5 or 1.2",
            {"max": MAX_INT},
        )
    return value


ExactFraction = Annotated[
    Fraction, BeforeValidator(_as_written), AfterValidator(_terms_within_max_int)
]
"""A ratio of the rules: never a binary float (money is floored to the cent with it)."""
MAX_CARDS_PER_HAND = 21  # twenty-one aces is the longest hand that has not bust


class ReshuffleEveryRound(BaseModel):
    """The used cards go back into the shoe after every round ("shuffled after each hand")."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["every_round"] = "every_round"


class ReshuffleAtPenetration(BaseModel):
    """Reshuffle before the next round once this fraction of the shoe has been dealt."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["penetration"] = "penetration"
    used: ExactFraction = Field(description="fraction of the shoe dealt that triggers a reshuffle")


ReshufflePolicy = Annotated[
    ReshuffleEveryRound | ReshuffleAtPenetration, Field(discriminator="kind")
]

DoubleOn = Literal["any_two", "totals"]
SplitBy = Literal["value", "rank"]


DEFAULT_CURRENCY = "USD"

MAX_INT: Final = 2**53 - 1
"""The largest integer a command's field holds (and the least, negated), and a rules
document's amounts: every JSON reader holds it exactly (JavaScript's
``Number.MAX_SAFE_INTEGER``: a double holds no larger integer exactly), and so do the read
model's 64-bit columns (2^63 - 1). A number past it (a round of 10^23 to void, a maximum bet of
10^30) is malformed at validation, which the schemas in schemas/ say (``maximum``), instead of
reaching the decider as a number no reader of the log could hold."""

RECORDED: Final = {"recorded": True}
"""The validation context of rules the log, a snapshot or the read model holds: a table an
older release opened (before ``Rules`` bounded its amounts) still reads, as it was opened."""


def _amount_within_max_int(value: int, info: ValidationInfo) -> int:
    if value > MAX_INT and not (info.context or {}).get("recorded"):
        raise PydanticCustomError(
            "amount_past_max_int",
            "at most {max} minor units (2^53 - 1: a larger number is not exact in JSON)",
            {"max": MAX_INT},
        )
    return value


Amount = Annotated[
    StrictInt,
    Field(ge=1, json_schema_extra={"maximum": MAX_INT}),
    AfterValidator(_amount_within_max_int),
]
"""An amount of the rules in minor units: positive, at most ``MAX_INT`` (a rules document or
an override past it is malformed; ``RECORDED`` rules read as they were written)."""

MAX_BET: Final = 10**12
"""The largest table maximum a rule override may set: 10,000,000,000.00 in a two-decimal
currency. It bounds what winnings add to a balance in a round (27 x the maximum at most: three
boxes of four doubled hands, and insurance), so that no balance nears the read model's 64-bit
columns (a table opened with a maximum of 10^30 once won its player past 2^63 in 14 rounds, and
no read model could fold the payout). Checked when a table is opened, not in ``Rules``: a table
an older version opened with more still reads."""

MAX_ROUNDS_SAT_OUT: Final = 1000
"""The most rounds a player may sit out before a ``seat_released_after_rounds_sat_out`` table
stands them up: at the pace of a shared table's clock a thousand rounds are hours; an operator
who wants a seat never freed says None."""

Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="an ISO 4217 code")]
"""The currency of a table's or a wallet's money (amounts are its minor units)."""


def _no_default(schema: dict[str, Any]) -> None:
    """A term whose absence from a rules document means its preset's (``Rules._preset_terms``)
    has no one default: a reader filling in the schema's default would read mini-h17 wrong."""
    schema.pop("default", None)


PRESET_TERMS: Final = (
    "void_on_malfunction",
    "move_declines_insurance",
    "surrender_paid_at_once",
    "bust_settled_at_once",
)
"""Yes/no options added after tables were opened, whose preset's value was on its page from
the start, written in a rules document only where they are not the preset's: a document
without one (a preset's table, or one an earlier release opened) reads with its preset's
value, so the presets' documents and fingerprints are those of the release before."""


def _preset_term(name: object, term: str) -> bool:
    """The value of ``term`` (one of ``PRESET_TERMS``) in the preset of that name (false for a
    table of none): what a rules document without the option reads as. (While the presets
    are being made, none is known yet: each names its own.)"""
    preset = globals().get("PRESETS", {}).get(name)
    return preset is not None and bool(getattr(preset, term))


def doubles_on_total(totals: frozenset[int] | None, ace_low: bool, total: int, soft: bool) -> bool:
    """Whether a first-two-card hand of best ``total`` may double where the table doubles on
    ``totals`` (None: on any two cards); ``ace_low``: a soft hand also on its total with the
    ace counted one (``Rules.double_totals_ace_low``). The decider's and the solver's rule."""
    if totals is None or total in totals:
        return True
    return soft and ace_low and total - 10 in totals


class Rules(BaseModel):
    """Everything that differs between the casinos' blackjack variants."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "custom"
    currency: Currency = DEFAULT_CURRENCY

    # The shoe
    decks: StrictInt = Field(8, ge=1, le=8)
    reshuffle: ReshufflePolicy = ReshuffleEveryRound()

    # The dealer
    dealer_hits_soft_17: StrictBool = False
    peek_on_ace: StrictBool = True
    peek_on_ten: StrictBool = True
    hole_card_first: StrictBool = Field(
        False,
        description=(
            "the dealer's first card is the face-down hole card and the second the upcard "
            "(page 001: 'The first of the dealer's cards is placed face down'); otherwise the "
            "first card is the upcard and the second the hole card"
        ),
    )

    peek_on_ace_only_if_insured: StrictBool = Field(
        False,
        exclude_if=lambda only: not only,
        description=(
            "the dealer checks her ace for blackjack only when a box of the round took "
            "insurance (page 001: 'If you accept Insurance, the dealer will check ('peek') "
            "at their hole card'); otherwise the hands are played and a blackjack she turns "
            "over at the end takes every bet on the box. False in every preset: page 001 also "
            "offers insurance 'before the dealer views the hole card', a view that does not "
            "wait on the players. Needs peek_on_ace and insurance; written only when true"
        ),
    )

    # Player options
    insurance: StrictBool = True
    late_surrender: StrictBool = False
    double_on: DoubleOn = "any_two"
    double_totals: frozenset[StrictInt] = frozenset()
    double_totals_ace_low: StrictBool = Field(
        False,
        exclude_if=lambda low: not low,
        description=(
            "a soft hand may also double when its total with the ace counted one is one of "
            "double_totals: A-8 doubles as a 9 (page 001: the ace is '1 or 11 ... You, the "
            "player, decide the value of the card'); otherwise a hand doubles on its best "
            "total, the one shown, and A-8 is a 19. False in every preset. Needs "
            "double_on='totals'; written only when true"
        ),
    )
    double_after_split: StrictBool = True
    max_splits: StrictInt = Field(1, ge=0, le=3)
    split_by: SplitBy = "value"
    split_aces_one_card: StrictBool = True

    # Payouts, in whole minor units
    blackjack_pays: ExactFraction = Field(
        Fraction(3, 2), description="what a natural wins per unit bet: from 1 (even) to 2"
    )
    blackjack_win_rounded_down_to: StrictInt = Field(
        1,
        ge=1,
        le=10_000,
        description=(
            "the blackjack winnings are cut to a multiple of this, in minor units (100 = no "
            "cents in a currency of two decimals); at most one whole unit of the table's "
            "currency, checked when a table opens"
        ),
    )
    insurance_pays: Literal[2] = 2  # every page: insurance "pays 2:1"
    blackjack_paid_at_once: StrictBool = Field(
        False,
        description="a player's blackjack is paid as soon as the dealer is known not to have one "
        "(after the peek), before any hand is played, instead of when the round settles",
    )
    surrender_paid_at_once: StrictBool = Field(
        False,
        description=(
            "a surrendered hand is settled when it is surrendered: half its bet is back on "
            "the balance at once (it pays for a double or a split on another box) while the "
            "round goes on for the other hands, instead of when the round settles; page 003: "
            "'Upon Surrender you receive half of your initial bet back and the game round is "
            "over'. Written only where it is not the preset's term: absent from a rules "
            "document, it is the preset's (surrender: true; every other preset: false), so "
            "the schema states no default"
        ),
        json_schema_extra=_no_default,
    )
    bust_settled_at_once: StrictBool = Field(
        False,
        description=(
            "a hand that busts is settled as lost when it busts (its HandSettled, outcome "
            "bust, comes at once: the hand is out of play while the player's other hands are "
            "played), instead of when the round settles; page 003: 'If your hand busts (its "
            "total exceeds 21), this hand loses and is removed from the table', page 001: 'If "
            "you bust, a message will be displayed alongside your cards and you immediately "
            "lose the game, plus your bet'. Written only where it is not the preset's term: "
            "absent from a rules document, it is the preset's (mini-s17 and surrender: true; "
            "every other preset: false), so the schema states no default"
        ),
        json_schema_extra=_no_default,
    )

    # Betting
    min_bet: Amount = 100
    max_bet: Amount = 50_000
    boxes_per_seat: StrictInt = Field(1, ge=1, le=3)
    rebet_multipliers: frozenset[StrictInt] = frozenset({1})
    rebet_deals: StrictBool = False

    # The table and its clock
    seats: StrictInt = Field(1, ge=1, le=7)
    turn_seconds: StrictInt | None = Field(None, ge=1, le=600)
    refund_bets_on_disconnect: StrictBool = False
    interrupted_round_days: StrictInt | None = Field(
        None,
        ge=1,
        le=3650,
        description=(
            "days a round may wait on its players before the operator may close it "
            "(CloseInterruptedRound: bets not dealt go back, the server stands every hand "
            "left, the dealer plays); page 003: 'After a 30 days period we reserve the right "
            "to manage all interrupted games'. None: never"
        ),
    )

    seat_released_after_rounds_sat_out: StrictInt | None = Field(
        None,
        ge=1,
        le=MAX_ROUNDS_SAT_OUT,
        exclude_if=lambda rounds: rounds is None,
        description=(
            "a shared table stands up a player who has sat out this many rounds in a row "
            "(left out by the betting clock, no bet or Pass since) at the end of the last of "
            "them, as LeaveTable would: their money goes back to their wallet and the seat is "
            "free. None: never (every preset: the pages are silent). Only a table of several "
            "seats sits a player out; a single-seat table refuses it"
        ),
    )

    void_on_malfunction: StrictBool = Field(
        False,
        description=(
            "the operator may void the round in play for a malfunction (VoidRound): every "
            "wager of the round goes back to its player and nothing the round paid stands; "
            "page 000: 'Malfunctions voids all pays and plays'. False: no one may void a round "
            "(the other pages are silent). Written only where it is not the preset's term: "
            "absent from a rules document, it is the preset's (mini-h17: true; every other "
            "preset: false), so the schema states no default"
        ),
        json_schema_extra=_no_default,
    )

    move_declines_insurance: StrictBool = Field(
        False,
        description=(
            "while insurance is offered, a move on a box whose insurance is undecided (Hit, "
            "Stand, Double, Split, Surrender where the table has it) declines that box's "
            "insurance and, once the peek finds no dealer blackjack, is played; page 002: 'If "
            "you do not wish to take insurance, you may simply click on one of the other "
            "buttons (hit, double down, stand, etc.)'. False: only DeclineInsurance declines "
            "(page 003 asks Yes or No; pages 000 and 001 have insurance decided before the "
            "dealer checks and the moves after it). Written only where it is not the "
            "preset's term: absent from a rules document, it is the preset's (atlantic-city "
            "and atlantic-city-multi: true; every other preset: false), so the schema states "
            "no default"
        ),
        json_schema_extra=_no_default,
    )

    # Messages
    break_even_message: StrictBool = False

    @property
    def funded_by_wallet(self) -> bool:
        """A table several players share (page 002's multi-player table): money comes to it
        only from each player's wallet, as a buy-in, and goes back there; a single-player
        table is funded by the platform's Deposit."""
        return self.seats > 1

    @model_validator(mode="before")
    @classmethod
    def _preset_terms(cls, data: Any) -> Any:
        """A rules document without one of ``PRESET_TERMS`` has its preset's (see
        ``_without_preset_terms``): written so, or by a release before the option existed,
        whose tables had their page's clause from the start (mini-h17's page 000 voids on a
        malfunction; page 002 declines insurance by a move; page 003 pays half back "upon
        Surrender"; pages 001 and 003 lose a bust at once)."""
        if isinstance(data, dict) and any(term not in data for term in PRESET_TERMS):
            name = data.get("name")
            missing = {t: _preset_term(name, t) for t in PRESET_TERMS if t not in data}
            return {**data, **missing}
        return data

    @model_serializer(mode="wrap")
    def _without_preset_terms(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Each of ``PRESET_TERMS`` is written only where it is not the preset's: a table
        playing its preset's terms has the document it had before the option existed, so a
        handler of that release still reads its snapshots (a rollback) and its rule set keeps
        its fingerprint."""
        doc: dict[str, Any] = handler(self)
        for term in PRESET_TERMS:
            if getattr(self, term) == _preset_term(self.name, term):
                doc.pop(term, None)
        return doc

    @model_validator(mode="after")
    def _consistent(self) -> Rules:
        if self.min_bet > self.max_bet:
            raise ValueError("min_bet is above max_bet")
        if self.peek_on_ace_only_if_insured and not (self.peek_on_ace and self.insurance):
            raise ValueError("peek_on_ace_only_if_insured needs peek_on_ace and insurance")
        if self.double_on == "totals" and not self.double_totals:
            raise ValueError("double_on='totals' needs double_totals")
        if self.double_totals_ace_low and self.double_on != "totals":
            raise ValueError("double_totals_ace_low needs double_on='totals'")
        # Payouts bounded, so that no override can pay a negative or an absurd amount.
        if not 1 <= self.blackjack_pays <= 2:
            raise ValueError("blackjack_pays must be between 1 (even money) and 2")
        if any(not 4 <= t <= 21 for t in self.double_totals):
            raise ValueError("double_totals are hand totals from 4 to 21")
        if isinstance(self.reshuffle, ReshuffleAtPenetration) and not 0 < self.reshuffle.used < 1:
            raise ValueError("reshuffle.used must be a fraction between 0 and 1")
        if self.cards_left_at_reshuffle < self.max_cards_in_round:
            raise ValueError("the shoe could run out of cards within one round")
        if not self.rebet_multipliers or not self.rebet_multipliers <= {1, 2, 3, 4}:
            raise ValueError("rebet_multipliers are whole multiples from 1 to 4")
        return self

    def peeks_under(self, upcard: str, insured: bool) -> bool:
        """Whether the dealer checks her hole card for blackjack under this upcard before the
        hands are played; ``insured``: a box of the round took insurance."""
        if is_ace(upcard):
            return self.peek_on_ace and (insured or not self.peek_on_ace_only_if_insured)
        return is_ten_value(upcard) and self.peek_on_ten

    def doubles_on(self, total: int, soft: bool) -> bool:
        """Whether a first-two-card hand of this best ``total`` may double (``soft``: an ace
        is counted eleven in it)."""
        any_two = self.double_on == "any_two"
        totals = None if any_two else self.double_totals
        return doubles_on_total(totals, self.double_totals_ace_low, total, soft)

    @property
    def peeks_on_ace_uninsured(self) -> bool:
        """Whether the dealer checks an ace when no one insured (the basic-strategy player
        never insures: the game the strategy and the RTP are computed for)."""
        return self.peeks_under("AS", insured=False)

    @property
    def shoe_size(self) -> int:
        return self.decks * CARDS_PER_DECK

    @property
    def boxes(self) -> int:
        return self.seats * self.boxes_per_seat

    @property
    def max_cards_in_round(self) -> int:
        hands = self.boxes * (self.max_splits + 1)
        return (hands + 1) * MAX_CARDS_PER_HAND

    @property
    def cards_left_at_reshuffle(self) -> int:
        """The fewest cards a round can start with under this reshuffle policy."""
        if isinstance(self.reshuffle, ReshuffleAtPenetration):
            used = self.reshuffle.used
            # The cut comes at the first round end where dealt >= used * shoe; the round that
            # crosses it starts just below the cut.
            return self.shoe_size - int(used * self.shoe_size)
        return self.shoe_size

    def with_overrides(self, overrides: dict[str, object]) -> Rules:
        """A copy with some fields changed, validated like a fresh object."""
        return Rules.model_validate({**self.model_dump(), **overrides})


_NO_PRESET_TERMS: Final = Rules()
"""The terms of a table not opened from a preset, where an option's default is its term."""


def currency_refusal(base: Rules, overrides: Mapping[str, object], rules: Rules) -> str | None:
    """Why ``rules`` (``base`` with ``overrides``) cannot open a table in its currency, if
    they cannot: their amounts are minor units, so a preset's $1 minimum (100) reads as 100
    yen, and its blackjack win without cents (100) drops up to 99 yen. A currency with
    other decimals than the preset's must state each amount of the preset anew, and no
    blackjack win is cut to more than one whole unit. Checked when a table opens (a table
    opened before still reads), and by the math commands' ``--overrides``."""
    if decimals(rules.currency) != decimals(base.currency):
        in_minor_units = ["min_bet", "max_bet"]
        if base.blackjack_win_rounded_down_to != 1:
            in_minor_units.append("blackjack_win_rounded_down_to")
        unstated = [name for name in in_minor_units if name not in overrides]
        if unstated:
            return (
                f"currency: {rules.currency} has {decimals(rules.currency)} decimals and "
                f"{base.name}'s {base.currency} {decimals(base.currency)}: state "
                f"{', '.join(unstated)} in {rules.currency}'s minor units"
            )
    unit = whole_unit(rules.currency)
    if rules.blackjack_win_rounded_down_to > unit:
        return (
            f"blackjack_win_rounded_down_to: at most {unit} minor units (one whole "
            f"{rules.currency}), not {rules.blackjack_win_rounded_down_to}"
        )
    return None


PRESETS: dict[str, Rules] = {
    # 000: "Eight decks", "shuffled after 20% of the cards", "draws a card on soft 17",
    # "One split", double after split, late surrender after the peek, $1-$500 initial bet,
    # SAME BET / DOUBLE BET, "Break Even", "Malfunctions voids all pays and plays".
    "mini-h17": Rules(
        name="mini-h17",
        decks=8,
        reshuffle=ReshuffleAtPenetration(used=Fraction(1, 5)),
        dealer_hits_soft_17=True,
        late_surrender=True,
        max_splits=1,
        split_by="value",
        min_bet=100,
        max_bet=50_000,
        rebet_multipliers=frozenset({1, 2}),
        rebet_deals=True,
        break_even_message=True,
        void_on_malfunction=True,
    ),
    # 001: "The dealer must stand a soft 17", double "with a total value of 9, 10 or 11"
    # (operator may redefine), double after split, split once by value, no surrender,
    # REBET / REBET X 2 deal at once. The page names no deck count: 8, like its twin 000.
    # "The first of the dealer's cards is placed face down (the 'hole' card), the second is
    # placed face up (the 'upcard')": the hole card is dealt first. The dealer views the hole
    # card after insurance is offered on an ace ("you are given the option to accept Insurance
    # before the dealer views the hole card"), never on a ten: "If the dealer has a Blackjack
    # and the player has a total of 21 with more than two cards, the dealer wins" can only
    # happen when she has not checked. "If you bust, ... you immediately lose the game, plus
    # your bet": a bust is settled as lost when it busts.
    "mini-s17": Rules(
        name="mini-s17",
        decks=8,
        reshuffle=ReshuffleEveryRound(),
        hole_card_first=True,
        peek_on_ten=False,
        late_surrender=False,
        double_on="totals",
        double_totals=frozenset({9, 10, 11}),
        max_splits=1,
        split_by="value",
        rebet_multipliers=frozenset({1, 2}),
        rebet_deals=True,
        bust_settled_at_once=True,
    ),
    # 002 first part: "8 52-card decks", "re-shuffled after each hand", S17, DAS, no resplit,
    # no surrender, one card to split aces, split on the same "denomination" (rank),
    # 3:2 with "the cents part will not be paid out". "If you do not wish to take insurance, you
    # may simply click on one of the other buttons (hit, double down, stand, etc.)".
    "atlantic-city": Rules(
        name="atlantic-city",
        decks=8,
        reshuffle=ReshuffleEveryRound(),
        max_splits=1,
        split_by="rank",
        blackjack_win_rounded_down_to=100,
        move_declines_insurance=True,
    ),
    # 002 second part: the same rules at "five players" with a shoe "re-shuffled after
    # approximately one-third", 15 seconds to bet or pass.
    "atlantic-city-multi": Rules(
        name="atlantic-city-multi",
        decks=8,
        reshuffle=ReshuffleAtPenetration(used=Fraction(1, 3)),
        max_splits=1,
        split_by="rank",
        blackjack_win_rounded_down_to=100,
        seats=5,
        turn_seconds=15,
        move_declines_insurance=True,
    ),
    # 003: "4 decks", "shuffled after every round", "up to three hands", "The Dealer stands on
    # 17", peek on 10/A with insurance first, late surrender, split once by value, Repeat
    # places (does not deal), bets returned on a disconnection before Deal, "If you are dealt
    # Blackjack, you are immediately paid 1.5 times the placed bet", "Upon Surrender you
    # receive half of your initial bet back and the game round is over", "If your hand busts
    # ... this hand loses and is removed from the table", "After a 30 days period we reserve
    # the right to manage all interrupted games".
    "surrender": Rules(
        name="surrender",
        decks=4,
        reshuffle=ReshuffleEveryRound(),
        late_surrender=True,
        max_splits=1,
        split_by="value",
        boxes_per_seat=3,
        refund_bets_on_disconnect=True,
        blackjack_paid_at_once=True,
        surrender_paid_at_once=True,
        bust_settled_at_once=True,
        interrupted_round_days=30,
    ),
}


LATER_TERMS: Final = ("interrupted_round_days",)
"""Options added to ``Rules`` after tables were opened, whose preset's value was on its page
from the start, and which a document always names since: one without it was written before
the option existed. (``PRESET_TERMS`` are named only where they are not the preset's:
``Rules`` itself reads them.)"""


def with_later_terms(doc: dict[str, Any]) -> dict[str, Any]:
    """A rules document written before one of ``LATER_TERMS`` existed (a table an earlier
    release opened) reads with its preset's value: the term was on the preset's page from the
    start (page 003's 30 days), only the earlier release did not carry it. A table not opened
    from a preset reads with the option's default. A document that names the option keeps
    it."""
    missing = [term for term in LATER_TERMS if term not in doc]
    if not missing:
        return doc
    opened_from = PRESETS.get(doc.get("name", ""), _NO_PRESET_TERMS)
    return {**doc, **{term: getattr(opened_from, term) for term in missing}}


def preset_term(doc: dict[str, Any], term: str) -> bool:
    """One of ``PRESET_TERMS`` as a table's rules document reads (absent: its preset's),
    for a reader of the document that does not validate all of it (the terminal's prompt)."""
    return bool(doc.get(term, _preset_term(doc.get("name"), term)))


def stored_rules(doc: dict[str, Any]) -> Rules:
    """A table's rules as a snapshot, the read model or an older release stored them."""
    return Rules.model_validate(with_later_terms(doc), context=RECORDED)


def every_term(doc: dict[str, Any]) -> dict[str, Any]:
    """A table's stored rules document with every term written out, in the order of
    ``Rules``, as it reads them: the terms a document leaves out (``PRESET_TERMS`` where they
    are the preset's, an option off, one added since it was written) included, for a reader
    that takes the document as it is (the query API's table), to whom an absent term would
    read as no value or the schema's default."""
    rules = stored_rules(doc)
    written = rules.model_dump(mode="json")
    return {
        name: written[name] if name in written else to_jsonable_python(getattr(rules, name))
        for name in Rules.model_fields
    }


FINGERPRINT_LENGTH: Final = 16


def fingerprint(rules: Rules | dict[str, Any]) -> str:
    """A rule set's name in the game report: the first 16 hex digits of the SHA-256 of its
    document as canonical JSON (keys sorted, no spaces). Equal rules, equal fingerprint,
    whichever release stored them and in what key order; a document that is not valid rules
    (read as it is) has one too. It changes when ``Rules`` gains or renames a field."""
    doc = rules.model_dump(mode="json") if isinstance(rules, Rules) else rules
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_LENGTH]


def preset(name: str) -> Rules:
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown variant {name!r}; known: {', '.join(sorted(PRESETS))}") from None
