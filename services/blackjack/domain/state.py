"""The state of one table: a left fold of ``evolve`` over its events. A state handed out is
never changed, so replay, snapshots and the decider share it without copies."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Final, Literal

from blackjack.domain.hand import Total, total
from blackjack.domain.rules import Rules, stored_rules
from blackjack.domain.transfers import highest_per_wallet

HandStatus = Literal["open", "standing", "bust", "blackjack", "surrendered"]
Phase = Literal["betting", "insurance", "playing", "dealer"]
InsuranceStatus = Literal["none", "offered", "taken", "declined", "settled"]


class _Value:
    """Equality, ``repr`` and a JSON document from the names in ``_FIELDS``.

    The state classes are plain classes with explicit constructors, not pydantic models: the
    decider folds about fifteen events a round into them, and plain classes compile to native
    classes with mypyc (see docs/benchmark.md). Values from outside never reach them
    unchecked: they are built by ``evolve`` from events, or from a sealed snapshot."""

    _FIELDS: ClassVar[tuple[str, ...]] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._FIELDS)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._FIELDS)
        return f"{type(self).__name__}({fields})"

    __hash__ = None  # type: ignore[assignment]  # compared by value, never a dict key

    def to_doc(self) -> dict[str, Any]:
        """The JSON document of a snapshot (a table's holds the shoe order: seal it)."""
        return {name: _json(getattr(self, name)) for name in self._FIELDS}


def _json(value: object) -> object:
    if isinstance(value, _Value):
        return value.to_doc()
    if isinstance(value, Rules):
        return value.model_dump(mode="json")
    if isinstance(value, tuple):
        return [_json(item) for item in value]
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, dict):
        return {key: _json(item) for key, item in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


class Hand(_Value):
    """One hand of a box (a box holds two or more after a split). Never changed in place."""

    _FIELDS = ("cards", "stake", "status", "from_split", "split_aces", "doubled", "settled")

    def __init__(
        self,
        *,
        cards: tuple[str, ...] = (),
        stake: int,
        status: HandStatus = "open",
        from_split: bool = False,
        split_aces: bool = False,
        doubled: bool = False,
        settled: bool = False,
    ) -> None:
        self.cards: Final = cards
        self.stake: Final = stake
        self.status: Final[HandStatus] = status
        self.from_split: Final = from_split
        self.split_aces: Final = split_aces
        self.doubled: Final = doubled
        self.settled: Final = settled
        """Settled already (a blackjack or a surrender paid at once, a bust lost at once): the
        round's settlement only counts it."""

    @property
    def total(self) -> Total:
        return total(self.cards)

    def changed(
        self,
        *,
        cards: tuple[str, ...] | None = None,
        stake: int | None = None,
        status: HandStatus | None = None,
        doubled: bool | None = None,
        settled: bool | None = None,
    ) -> Hand:
        """A copy with the given fields changed (what play changes in a hand)."""
        return Hand(
            cards=self.cards if cards is None else cards,
            stake=self.stake if stake is None else stake,
            status=self.status if status is None else status,
            from_split=self.from_split,
            split_aces=self.split_aces,
            doubled=self.doubled if doubled is None else doubled,
            settled=self.settled if settled is None else settled,
        )

    @staticmethod
    def from_doc(doc: dict[str, Any]) -> Hand:
        return Hand(
            cards=tuple(doc["cards"]),
            stake=doc["stake"],
            status=doc["status"],
            from_split=doc["from_split"],
            split_aces=doc["split_aces"],
            doubled=doc["doubled"],
            settled=doc.get("settled", False),  # absent from snapshots of older handlers
        )


class Box(_Value):
    """A betting position. ``bet`` is the initial bet of the current round. Never changed in
    place."""

    _FIELDS = ("player_id", "bet", "hands", "insurance", "insurance_stake", "insurance_paid")

    def __init__(
        self,
        *,
        player_id: str | None = None,
        bet: int = 0,
        hands: tuple[Hand, ...] = (),
        insurance: InsuranceStatus = "none",
        insurance_stake: int = 0,
        insurance_paid: int = 0,
    ) -> None:
        self.player_id: Final = player_id
        self.bet: Final = bet
        self.hands: Final = hands
        self.insurance: Final[InsuranceStatus] = insurance
        self.insurance_stake: Final = insurance_stake
        self.insurance_paid: Final = insurance_paid  # what settled insurance returned, stake in

    def changed(
        self,
        *,
        hands: tuple[Hand, ...] | None = None,
        insurance: InsuranceStatus | None = None,
        insurance_stake: int | None = None,
        insurance_paid: int | None = None,
    ) -> Box:
        """A copy with the given fields changed (what a round changes in a box)."""
        return Box(
            player_id=self.player_id,
            bet=self.bet,
            hands=self.hands if hands is None else hands,
            insurance=self.insurance if insurance is None else insurance,
            insurance_stake=self.insurance_stake if insurance_stake is None else insurance_stake,
            insurance_paid=self.insurance_paid if insurance_paid is None else insurance_paid,
        )

    @staticmethod
    def from_doc(doc: dict[str, Any]) -> Box:
        return Box(
            player_id=doc["player_id"],
            bet=doc["bet"],
            hands=tuple(Hand.from_doc(hand) for hand in doc["hands"]),
            insurance=doc["insurance"],
            insurance_stake=doc["insurance_stake"],
            insurance_paid=doc["insurance_paid"],
        )


EMPTY_BOX: Final = Box()


class Player(_Value):
    """A seated player and the money at the table. Never changed in place."""

    _FIELDS = (
        "player_id",
        "seat",
        "balance",
        "ready",
        "passed",
        "connected",
        "last_bets",
        "sitting_out",
        "rounds_sat_out",
        "joined_round",
    )

    def __init__(
        self,
        *,
        player_id: str,
        seat: int,
        balance: int = 0,
        ready: bool = False,  # pressed Deal this round
        passed: bool = False,
        connected: bool = True,
        last_bets: tuple[tuple[int, int], ...] = (),  # (box within the seat, amount) last dealt
        sitting_out: bool = False,  # left out by the clock, no bet or Pass since: not waited for
        rounds_sat_out: int = 0,  # rounds dealt in a row while sitting out (counted only where
        # the rules stand such a player up: ``seat_released_after_rounds_sat_out``)
        joined_round: int = 0,  # the round open when the player sat down (0: none was)
    ) -> None:
        self.player_id: Final = player_id
        self.seat: Final = seat
        self.balance: Final = balance
        self.ready: Final = ready
        self.passed: Final = passed
        self.connected: Final = connected
        self.last_bets: Final = last_bets
        self.sitting_out: Final = sitting_out
        self.rounds_sat_out: Final = rounds_sat_out
        self.joined_round: Final = joined_round

    def changed(
        self,
        *,
        seat: int | None = None,
        balance: int | None = None,
        ready: bool | None = None,
        passed: bool | None = None,
        connected: bool | None = None,
        last_bets: tuple[tuple[int, int], ...] | None = None,
        sitting_out: bool | None = None,
        rounds_sat_out: int | None = None,
    ) -> Player:
        """A copy with the given fields changed (a player changes in many small ways)."""
        return Player(
            player_id=self.player_id,
            seat=self.seat if seat is None else seat,
            balance=self.balance if balance is None else balance,
            ready=self.ready if ready is None else ready,
            passed=self.passed if passed is None else passed,
            connected=self.connected if connected is None else connected,
            last_bets=self.last_bets if last_bets is None else last_bets,
            sitting_out=self.sitting_out if sitting_out is None else sitting_out,
            rounds_sat_out=self.rounds_sat_out if rounds_sat_out is None else rounds_sat_out,
            joined_round=self.joined_round,
        )

    def to_doc(self) -> dict[str, Any]:
        doc = super().to_doc()
        if not self.rounds_sat_out:  # a player who has sat out no round reads as before
            del doc["rounds_sat_out"]
        if not self.joined_round:  # nor one who sat down between rounds
            del doc["joined_round"]
        return doc

    @staticmethod
    def from_doc(doc: dict[str, Any]) -> Player:
        return Player(
            player_id=doc["player_id"],
            seat=doc["seat"],
            balance=doc["balance"],
            ready=doc["ready"],
            passed=doc["passed"],
            connected=doc["connected"],
            last_bets=tuple((offset, amount) for offset, amount in doc["last_bets"]),
            sitting_out=doc.get("sitting_out", False),  # not in older snapshots
            rounds_sat_out=doc.get("rounds_sat_out", 0),  # nor this, nor when it is 0
            joined_round=doc.get("joined_round", 0),  # nor this
        )


class Shoe(_Value):
    """The shoe in use: its order is secret until it is retired. Never changed in place."""

    _FIELDS = ("number", "order", "salt", "commitment", "position")

    def __init__(
        self, *, number: int, order: tuple[str, ...], salt: str, commitment: str, position: int = 0
    ) -> None:
        self.number: Final = number
        self.order: Final = order
        self.salt: Final = salt
        self.commitment: Final = commitment
        self.position: Final = position

    def after_card(self) -> Shoe:
        return Shoe(
            number=self.number,
            order=self.order,
            salt=self.salt,
            commitment=self.commitment,
            position=self.position + 1,
        )

    @staticmethod
    def from_doc(doc: dict[str, Any]) -> Shoe:
        return Shoe(
            number=doc["number"],
            order=tuple(doc["order"]),
            salt=doc["salt"],
            commitment=doc["commitment"],
            position=doc["position"],
        )


_DEFAULT_RULES: Final = Rules()


class TableState(_Value):
    """One table. Its fields are reassigned only by ``evolve`` on a copy it has just made (a
    draft), so a state handed out is never changed: one copy per command, not one per event.
    Every field value is itself immutable (tuples, frozensets, values) or, for ``players``,
    a dict replaced rather than changed."""

    _FIELDS = (
        "opened",
        "rules",
        "players",
        "shoe",
        "shoes_used",
        "round",
        "round_open",
        "phase",
        "boxes",
        "dealer",
        "active",
        "deadline",
        "buy_ins",
        "suspended",
        "sat_out_counted",
    )

    def __init__(
        self,
        *,
        opened: bool = False,
        rules: Rules = _DEFAULT_RULES,
        players: dict[str, Player] | None = None,
        shoe: Shoe | None = None,
        shoes_used: int = 0,
        round: int = 0,  # the number of the round open now, or of the last one
        round_open: bool = False,
        phase: Phase = "betting",
        boxes: tuple[Box, ...] = (),
        dealer: tuple[str, ...] = (),
        active: tuple[int, int] | None = None,  # (box, hand) whose turn it is
        deadline: datetime | None = None,
        buy_ins: dict[str, int] | None = None,
        suspended: bool = False,  # the operator disabled the game: no new wager or player
        sat_out_counted: bool | None = False,
    ) -> None:
        self.opened = opened
        self.rules = rules
        self.players: dict[str, Player] = {} if players is None else players
        self.shoe = shoe
        self.shoes_used = shoes_used
        self.round = round
        self.round_open = round_open
        self.phase: Phase = phase
        self.boxes = boxes
        self.dealer = dealer
        self.active = active
        self.deadline = deadline
        # Per wallet stream, the number of the last buy-in this table took or declined: a
        # deposit at or below it is never taken (see ``domain.transfers``). Replaced whole.
        self.buy_ins: dict[str, int] = {} if buy_ins is None else buy_ins
        self.suspended = suspended
        # The round in play counted one more round sat out for each player sitting out (it
        # was dealt while the table was not suspended, where the rules free such seats): what
        # a void of the round takes back. None: not known, restored from a snapshot of the
        # release before that cannot tell (``_sat_out_counted_before``); a void then keeps the
        # count, as that release did, and says so in its event.
        self.sat_out_counted = sat_out_counted

    def copy(self) -> TableState:
        """The draft ``evolve`` works on: a shallow copy, since no field value is changed in
        place (``players`` is replaced whole)."""
        return TableState(
            opened=self.opened,
            rules=self.rules,
            players=self.players,
            shoe=self.shoe,
            shoes_used=self.shoes_used,
            round=self.round,
            round_open=self.round_open,
            phase=self.phase,
            boxes=self.boxes,
            dealer=self.dealer,
            active=self.active,
            deadline=self.deadline,
            buy_ins=self.buy_ins,
            suspended=self.suspended,
            sat_out_counted=self.sat_out_counted,
        )

    def to_doc(self) -> dict[str, Any]:
        doc = super().to_doc()
        if not self.suspended:  # a snapshot of a table never suspended reads as it did before
            del doc["suspended"]
        # Nor one whose round counted as an older snapshot is read (none counted between
        # rounds, nor where no one sits out): written wherever that reading is not the value,
        # as for a round dealt that counted someone, which an older snapshot leaves unknown.
        if self.sat_out_counted == _sat_out_counted_before(doc):
            del doc["sat_out_counted"]
        return doc

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
    def round_in_play(self) -> bool:
        """A round is open with money in it: a bet placed or hands dealt, not yet settled
        (what a service interruption interrupts: ``RoundResumed``)."""
        return self.round_open and any(box.bet or box.hands for box in self.boxes)

    @property
    def hands_in_play(self) -> bool:
        """A round's hands are dealt and not yet settled."""
        return any(box.hands for box in self.boxes)

    @property
    def hole_index(self) -> int:
        """Where the hole card is among the dealer's cards in the order dealt: the first card
        under ``hole_card_first``, else the second."""
        return 0 if self.rules.hole_card_first else 1

    @property
    def upcard(self) -> str | None:
        index = 1 - self.hole_index
        return self.dealer[index] if len(self.dealer) > index else None

    @property
    def hole_card(self) -> str | None:
        index = self.hole_index
        return self.dealer[index] if len(self.dealer) > index else None

    @property
    def dealer_shown(self) -> tuple[str, ...]:
        """The dealer's cards as the players see them: the hole card left out until it is
        revealed (the dealer's phase starts with ``DealerHoleCardRevealed``)."""
        if self.phase == "dealer":
            return self.dealer
        hole = self.hole_index
        return tuple(card for index, card in enumerate(self.dealer) if index != hole)

    @staticmethod
    def from_doc(doc: dict[str, Any]) -> TableState:
        active = doc["active"]
        deadline = doc["deadline"]
        return TableState(
            opened=doc["opened"],
            rules=stored_rules(doc["rules"]),
            players={pid: Player.from_doc(p) for pid, p in doc["players"].items()},
            shoe=None if doc["shoe"] is None else Shoe.from_doc(doc["shoe"]),
            shoes_used=doc["shoes_used"],
            round=doc["round"],
            round_open=doc["round_open"],
            phase=doc["phase"],
            boxes=tuple(Box.from_doc(box) for box in doc["boxes"]),
            dealer=tuple(doc["dealer"]),
            active=None if active is None else (active[0], active[1]),
            deadline=None if deadline is None else datetime.fromisoformat(deadline),
            buy_ins=_buy_ins_of(doc),
            suspended=doc.get("suspended", False),
            sat_out_counted=doc.get("sat_out_counted", _sat_out_counted_before(doc)),
        )


def _sat_out_counted_before(doc: dict[str, Any]) -> bool | None:
    """A snapshot of a release that did not keep ``sat_out_counted``: whether its round in
    play's deal counted those who sit out. Not where the rules count no round sat out, no hand
    is dealt, no one sits out, or one who sits out has no round counted (a deal that counted
    gave each of them one; no one starts sitting out between the deal and the end of the
    round). Otherwise it cannot tell (None): dealt while the table was suspended, it counted no
    one, and the snapshot keeps no trace of when the table was suspended or resumed (one
    suspended now may have been so since before the deal or only since after it)."""
    if doc["rules"].get("seat_released_after_rounds_sat_out") is None or not any(
        box["hands"] for box in doc["boxes"]
    ):
        return False
    counts = [p.get("rounds_sat_out", 0) for p in doc["players"].values() if p.get("sitting_out")]
    if not counts or min(counts) == 0:
        return False
    return None


def _buy_ins_of(doc: dict[str, Any]) -> dict[str, int]:
    if "buy_ins" in doc:
        return {wallet: int(number) for wallet, number in doc["buy_ins"].items()}
    # A snapshot written before: it listed every buy-in reference the table had handled.
    return highest_per_wallet(doc["transfers"])


INITIAL_STATE: Final = TableState()
