"""A platform's books from the events alone, as docs/kafka.md ("Money on screen") tells it to
keep them: ported from the Node.js integrator's client, which played every preset on a broker
and folded each seat's money from the amounts its events carry, checking the fold against every
`balance_after`. Here the same fold runs on the real decider (`table.apply`), seeded, with the
moves a platform's players and operator make (bets taken back, splits, doubles, insurance,
surrender, withdrawals, leaving, a void, standing a player up), and is checked after every event
against the engine's own balance."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain.evolve import evolve
from blackjack.domain.legal import legal_actions
from blackjack.domain.rejections import Rejection
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.simulation.player import SeededShuffler
from blackjack.table import apply

ROOT = Path(__file__).parents[2]
NOW = datetime(2026, 1, 1, tzinfo=UTC)

# The platform's fold, in the words of docs/kafka.md: money in, money out, by the field named.
MONEY_IN = {"FundsDeposited": "amount", "BetRefunded": "amount", "HandSettled": "payout",
            "InsuranceSettled": "payout"}  # fmt: skip
MONEY_OUT = {"FundsWithdrawn": "amount", "BetPlaced": "amount", "HandDoubled": "amount",
             "HandSplit": "amount", "InsuranceTaken": "amount"}  # fmt: skip


class Books:
    """A seat's money per player, from the events' own fields only."""

    def __init__(self) -> None:
        self.balance: dict[str, int] = {}
        self.checked = 0

    def check(self, player: str, after: int, where: str) -> None:
        self.checked += 1
        assert self.balance.get(player, 0) == after, (where, self.balance.get(player), after)

    def fold(self, data: dict[str, Any]) -> None:
        kind, player = data["type"], data.get("player_id", "")
        if kind in MONEY_IN:
            self.balance[player] = self.balance.get(player, 0) + data[MONEY_IN[kind]]
        elif kind in MONEY_OUT:
            self.balance[player] = self.balance.get(player, 0) - data[MONEY_OUT[kind]]
        elif kind == "SeatLeft":  # the whole balance is paid out: nothing stays at the table
            self.balance[player] = self.balance.get(player, 0) - data["balance_returned"]
            self.check(player, 0, kind)
        elif kind == "RoundVoided":  # each player's wagers back, less what the round paid
            for back in data["returns"]:
                who = back["player_id"]
                self.balance[who] = self.balance.get(who, 0) + back["returned"]
                self.check(who, back["balance_after"], kind)
        elif kind == "RoundSettled":
            for result in data["results"]:
                self.check(result["player_id"], result["balance_after"], kind)
        if "balance_after" in data:
            self.check(player, data["balance_after"], kind)


def _balances(state: TableState) -> dict[str, int]:
    return {pid: p.balance for pid, p in state.players.items()}


class Table:
    """One table played through ``table.apply``, every event folded into the books and into
    the engine's state one at a time."""

    def __init__(self, variant: str, seed: int) -> None:
        self.shuffle = SeededShuffler(seed)
        self.state: TableState = INITIAL_STATE
        self.books = Books()
        self.movers: set[str] = set()  # event types after which some seat's money differs
        self.seen: set[str] = set()
        self.transfers = 0
        self.do(cmd.OpenTable(variant=variant))

    def do(self, command: cmd.Command) -> bool:
        applied = apply(self.state, command, NOW, self.shuffle)
        if isinstance(applied, Rejection):
            return False
        state = self.state
        for event in applied.events:
            before = _balances(state)
            state = evolve(state, event)
            after = _balances(state)
            if any(before.get(p, 0) != after.get(p, 0) for p in {*before, *after}):
                self.movers.add(type(event).__name__)
            self.seen.add(type(event).__name__)
            self.books.fold(event.model_dump(mode="json"))
            for p in {*before, *after}:
                assert self.books.balance.get(p, 0) == after.get(p, 0), (event, p)
        assert state == applied.state
        self.state = state
        return True

    def fund(self, player: str, amount: int) -> None:
        if self.state.rules.funded_by_wallet:  # a buy-in's deposit, as the wallet sends it
            self.transfers += 1
            transfer = f"wallet:{player}/{self.transfers}"
            assert self.do(cmd.Deposit(player_id=player, amount=amount, transfer=transfer))
        else:
            assert self.do(cmd.Deposit(player_id=player, amount=amount))


def _move(table: Table, player: str, rng: random.Random) -> cmd.Command | None:
    """What a player's client would send now, from the buttons the table offers."""
    state = table.state
    legal = legal_actions(state, player, NOW)
    buttons = legal.buttons()
    if not buttons:
        return None
    insure = [b for b in buttons if b.startswith("insurance:")]
    rare = [b for b in buttons if b in ("split", "double", "surrender")]
    if insure and rng.random() < 0.7:
        button = rng.choice(insure)
    else:
        button = rng.choice(rare if rare and rng.random() < 0.5 else buttons)
    name, _, arg = button.partition(":")
    rules = state.rules
    if name == "bet":
        amount = rng.choice([rules.min_bet, rules.min_bet + 1, 3 * rules.min_bet + 33, 2500])
        return cmd.PlaceBet(player_id=player, box=int(arg), amount=amount)
    if name == "remove":
        return cmd.RemoveBet(player_id=player, box=int(arg), amount=rng.choice([None, 1]))
    if name == "rebet":
        return cmd.Rebet(player_id=player, multiplier=int(arg[1:]))
    if name == "deal":
        return cmd.Deal(player_id=player)
    if name == "clear":
        return cmd.ClearBets(player_id=player)
    if name == "pass":
        return cmd.Pass(player_id=player)
    if name in ("insurance", "no_insurance"):
        answer = cmd.TakeInsurance if name == "insurance" else cmd.DeclineInsurance
        return answer(player_id=player, box=int(arg))
    assert legal.turn is not None, button  # the hand's move (at page 002's tables, also
    box, hand = legal.turn.box, legal.turn.hand  # the one that declines insurance)
    moves: dict[str, type[cmd.HandCommand]] = {"hit": cmd.Hit, "stand": cmd.Stand,
        "double": cmd.Double, "split": cmd.Split, "surrender": cmd.Surrender}  # fmt: skip
    return moves[name](player_id=player, box=box, hand=hand)


def _between_rounds(table: Table, players: list[str], rng: random.Random) -> None:
    """The platform's and the operator's moves while no hand is in play."""
    for seat, player in enumerate(players):
        if player not in table.state.players:
            assert table.do(cmd.SitDown(player_id=player, seat=seat))
            table.fund(player, 20_000)
        balance = table.state.players[player].balance
        if balance < 5_000:
            table.fund(player, 10_000)
        elif rng.random() < 0.2:
            table.do(cmd.Withdraw(player_id=player, amount=rng.randint(1, balance // 4)))
        if rng.random() < 0.1:
            table.do(cmd.LeaveTable(player_id=player))
        elif rng.random() < 0.05:
            table.do(cmd.StandUpPlayer(player_id=player, operator="ops", reason="excluded"))


ROUNDS = 400  # enough for the random players to meet every money move, a split included
VARIANTS = ["mini-h17", "mini-s17", "atlantic-city", "atlantic-city-multi", "surrender"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_platform_s_books_from_the_events_alone_match_every_balance(variant: str) -> None:
    rng = random.Random(f"books-{variant}")
    players = ["alice", "bob"] if variant == "atlantic-city-multi" else ["alice"]
    table = Table(variant, seed=7)
    for _round in range(ROUNDS):
        _between_rounds(table, players, rng)
        for _ in range(60):  # until this round is settled, voided or cancelled
            movers = [p for p in players if legal_actions(table.state, p, NOW).buttons()]
            if not movers:
                break
            player = rng.choice(movers)
            move = _move(table, player, rng)
            if move is not None:
                table.do(move)
            if table.state.rules.void_on_malfunction and rng.random() < 0.01:
                round_no = table.state.round
                table.do(cmd.VoidRound(round=round_no, operator="ops", reason="malfunction"))
            if not table.state.round_in_play and "deal" not in {
                b for p in players for b in legal_actions(table.state, p, NOW).buttons()
            }:
                break
    assert table.books.checked > 300
    # every kind of money move was met
    wanted = {"BetPlaced", "HandSettled", "FundsDeposited", "FundsWithdrawn", "SeatLeft",
              "HandDoubled", "HandSplit", "BetRefunded"}  # fmt: skip
    if table.state.rules.void_on_malfunction:
        wanted |= {"RoundVoided"}
    if table.state.rules.insurance:
        wanted |= {"InsuranceTaken", "InsuranceSettled"}
    assert wanted <= table.seen, sorted(wanted - table.seen)
    # and every event type that moved a seat's money is one the docs name where they say
    # what a client reads the balance from, and how a platform folds its books
    said = _named("Every event that moves a player's money at a table")
    assert table.movers <= said, sorted(table.movers - said)
    folded = _named("A platform's books from the events alone")
    assert {*MONEY_IN, *MONEY_OUT, "SeatLeft", "RoundVoided"} <= folded


def _named(sentence: str) -> set[str]:
    """The event types a sentence of docs/kafka.md's "Money on screen" names."""
    text = (ROOT / "docs" / "kafka.md").read_text()
    start = text.index("**Money on screen.**")
    paragraph = text[start : text.index("\n\n", start)].replace("\n", " ")
    assert sentence in paragraph, sentence
    begin = paragraph.index(sentence)
    end = re.compile(r"\.(\s|$)").search(paragraph, begin)
    assert end is not None
    return set(re.findall(r"`([A-Z][A-Za-z]+)`", paragraph[begin : end.start()]))


def test_a_platform_s_books_of_a_wallet_from_its_events_alone() -> None:
    # The wallet's side of the same rule: every event that moves its money carries the
    # wallet's balance_after, and folding the amounts (docs/kafka.md) meets each of them.
    from blackjack.domain.wallet import (
        INITIAL_WALLET,
        BuyIn,
        CashOut,
        ConfirmBuyIn,
        RefundBuyIn,
        WalletCommand,
        WalletDeposit,
        WalletWithdraw,
        decide_wallet,
        evolve_wallet,
    )

    signs = {"WalletDeposited": 1, "WalletWithdrawn": -1, "BuyInSent": -1, "BuyInRefunded": 1,
             "CashOutReceived": 1, "BuyInCompleted": 0}  # fmt: skip
    said = _named("a wallet's events carry the wallet's")
    assert {k for k, sign in signs.items() if sign} <= said
    rng = random.Random("wallet-books")
    state, folded, checked, sequence = INITIAL_WALLET, 0, 0, 0
    for n in range(400):
        transfers = [p.transfer for p in state.pending]
        choices: list[WalletCommand] = [
            WalletDeposit(player_id="p", amount=rng.randint(1, 50_000)),
            WalletWithdraw(player_id="p", amount=rng.randint(1, 20_000)),
            BuyIn(player_id="p", table_id=f"t{n % 3}", amount=rng.randint(1, 20_000)),
        ]
        if transfers:
            transfer = rng.choice(transfers)
            choices.append(ConfirmBuyIn(player_id="p", transfer=transfer))
            choices.append(RefundBuyIn(player_id="p", transfer=transfer, reason="not_seated"))
        sequence += 1
        paid = rng.randint(1, 9_000)
        choices.append(CashOut(player_id="p", table_id="t0", amount=paid, table_sequence=sequence))
        decided = decide_wallet(state, rng.choice(choices))
        if isinstance(decided, Rejection):
            continue
        for event in decided:
            state = evolve_wallet(state, event)
            data = event.model_dump(mode="json")
            folded += signs[data["type"]] * data["amount"]
            if "balance_after" in data:
                checked += 1
                assert folded == data["balance_after"], data
            else:
                assert signs[data["type"]] == 0, data
            assert folded == state.balance
    assert checked > 200
