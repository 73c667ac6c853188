"""GLI-19 game recall, end to end: rounds of every preset played through the real command
handler on the real broker, folded by a projection worker into SQLite and PostgreSQL, and each
round's recall from the query API compared with the events on the topic: every card in the
order the shoe dealt it (the hole card face down until revealed, then its card), every event
of the round with its time and the command that wrote it, each decision with who made it
(the player, or the server when the clock ran out on a disconnected player), each wager
(bet, insurance, split, double) and payout, each player's balance before and after, the game
cycle's id, and the player's line while the round plays (what a hand settled before the
round's end paid, as it is paid).

The rounds: a split, a double and insurance lost at the peek (mini-h17), a split round voided
(mini-h17), insurance and a bust settled at once (mini-s17), a blackjack (atlantic-city), two
players one of whom disconnects and whose hand the server stands (atlantic-city-multi), and a
blackjack paid at once, a bust settled at once and a surrender paid at once on three boxes
(surrender)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from blackjack.api.contract import PlayerRoundAnswer, PlayerRoundsAnswer, RoundAnswer
from blackjack.api.routes import query_api
from blackjack.client import BlackjackClient
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decided_by import PLAYER_DECISIONS
from blackjack.domain.wallet import BuyIn, WalletDeposit, wallet_stream
from blackjack.messages.envelope import EventEnvelope
from blackjack.projections import schema
from blackjack.projections.ids import utc
from blackjack.projections.queries import iso
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest import (
    KafkaSpace,
    QueuedShuffler,
    accept,
    accept_together,
    await_answered_events,
    command_log,
    stream_events,
    wait_for_events,
)
from tests.integration.conftest_projections import StoreFactory, data_ends, projection_worker
from tests.round_lines import LineTally

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

WAIT_S = 60.0
P = "p"


@dataclass
class Recall:
    """The API of a store a projection worker of this space folds into."""

    space: KafkaSpace
    writer: ProjectionWriter
    api: httpx.AsyncClient

    async def caught_up(self) -> None:
        await await_answered_events(self.space)
        ends = await data_ends(self.space.bootstrap, self.space.topics.events)
        await self.writer.wait_for(ends, WAIT_S)

    async def get(self, path: str) -> Any:
        answer = await self.api.get(path)
        assert answer.status_code == 200, (path, answer.text)
        return answer.json()

    async def line(self, stream: str, number: int, player_id: str) -> tuple[int, int, int]:
        await self.caught_up()
        found = await self.get(f"/v1/players/{player_id}/rounds/{stream}:{number}")
        (line,) = found["players"]
        moved = line["deposited"] - line["withdrawn"]
        assert (
            line["balance_before"] - line["wagered"] + line["paid"] + moved
            == (line["balance_after"])
        )
        return line["wagered"], line["paid"], line["net"]


@asynccontextmanager
async def recalling(space: KafkaSpace, store: ProjectionStore, kind: str) -> AsyncIterator[Recall]:
    group = f"{space.prefix}recall-{kind}"
    async with projection_worker(space.bootstrap, space.prefix, store, group=group) as writer:
        transport = httpx.ASGITransport(app=query_api(store))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
            yield Recall(space, writer, api)


async def single(client: BlackjackClient, stream: str, variant: str, balance: int) -> None:
    await accept(
        client,
        stream,
        cmd.OpenTable(variant=variant),
        cmd.SitDown(player_id=P),
        cmd.Deposit(player_id=P, amount=balance),
    )


# ---- what the recall must say, from the events -------------------------------------------


def dealt_cards(events: list[EventEnvelope]) -> dict[int, str]:
    """The card each ``CardDealt`` of the stream took from its shoe (by sequence): the shoes'
    orders (unsealed with the key), a card at a time from each shoe's start."""
    order: tuple[str, ...] = ()
    at = 0
    cards: dict[int, str] = {}
    for envelope in events:
        data = envelope.data
        if isinstance(data, ev.ShoeShuffled):
            order, at = data.order, 0
        elif isinstance(data, ev.CardDealt):
            cards[envelope.sequence] = order[at]
            at += 1
    return cards


def round_events(events: list[EventEnvelope], number: int) -> list[EventEnvelope]:
    """The events a round's recall holds: its own, and the table's events while it was open
    that a recall tells (money paid in or out, disconnections, seats)."""
    own = [e for e in events if isinstance(e.data, ev.RoundEvent) and e.data.round == number]
    first, last = own[0].sequence, own[-1].sequence
    return [
        e
        for e in events
        if e in own or (first < e.sequence < last and isinstance(e.data, ev.IN_A_ROUND_S_RECALL))
    ]


PLAYERS_OWN = frozenset(
    name
    for name, model in cmd.__dict__.items()
    if isinstance(model, type) and issubclass(model, cmd.PlayerCommand)
)


async def check_round(recall: Recall, stream: str, number: int) -> dict[str, Any]:
    """The round's recall against the stream's events and commands; the recall."""
    await recall.caught_up()
    events = await stream_events(recall.space, stream)
    causes = {c.command_id: c.command for c in await command_log(recall.space, stream)}
    found: dict[str, Any] = await recall.get(f"/v1/rounds/{stream}:{number}")
    RoundAnswer.model_validate(found)
    assert (found["round_id"], found["stream_id"], found["round"]) == (
        f"{stream}:{number}",
        stream,
        number,
    )
    mine = round_events(events, number)
    pairs = list(zip(found["log"], mine, strict=True))
    check_log(found, mine)
    check_cards(found, pairs, dealt_cards(events))
    check_decided_by(pairs, causes)
    check_wagers(found, mine)
    await check_lines(recall, found, mine)
    return found


def check_log(found: dict[str, Any], mine: list[EventEnvelope]) -> None:
    """Every event of the round, in order, with its time, its command and its content."""
    log = found["log"]
    assert [(x["sequence"], x["event"]) for x in log] == [(e.sequence, e.type) for e in mine]
    exclude = {"type", "version", "round"}
    for entry, envelope in zip(log, mine, strict=True):
        assert entry["at"] == iso(envelope.occurred_at)
        assert entry["command_id"] == envelope.causation_id
        assert entry["data"] == envelope.data.model_dump(mode="json", exclude=exclude)
    assert found["opened_at"] == iso(mine[0].occurred_at)
    closing = mine[-1].data
    if isinstance(closing, ev.RoundSettled | ev.RoundVoided):
        assert found["closed_at"] == iso(mine[-1].occurred_at)
        assert found["status"] == ("settled" if isinstance(closing, ev.RoundSettled) else "voided")


Pairs = list[tuple[dict[str, Any], EventEnvelope]]
"""each entry of the recall's log with the event it stands for"""


def check_cards(found: dict[str, Any], pairs: Pairs, shoe: dict[int, str]) -> None:
    """Every card in the order the shoe dealt it, to the dealer and to each hand (a split
    hand's first card the pair's); the hole card face down until revealed, and revealed by
    the round's end."""
    dealer: list[str | None] = []
    hands: dict[int, list[list[str]]] = {}
    hole_card = None
    for entry, envelope in pairs:
        data = envelope.data
        if isinstance(data, ev.CardDealt):
            card = shoe[envelope.sequence]
            assert entry["data"]["card"] == (card if data.face_up else None)
            if data.to == "dealer":
                dealer.append(card if data.face_up else None)
                hole_card = hole_card if data.face_up else card
            else:
                assert data.box is not None and data.hand is not None
                box = hands.setdefault(data.box, [])
                box.extend([] for _ in range(data.hand + 1 - len(box)))
                box[data.hand].append(card)
        elif isinstance(data, ev.HandSplit):
            pair = hands[data.box][data.hand]
            hands[data.box][data.hand : data.hand + 1] = [pair[:1], pair[1:]]
        elif isinstance(data, ev.DealerHoleCardRevealed):
            assert entry["data"]["card"] == hole_card
            dealer = [hole_card if c is None else c for c in dealer]
    assert found["dealer"]["cards"] == dealer
    if found["status"] in ("settled", "voided"):
        assert None not in dealer
    recalled = {box["box"]: [hand["cards"] for hand in box["hands"]] for box in found["boxes"]}
    assert {box: cards for box, cards in recalled.items() if cards} == hands


def check_decided_by(pairs: Pairs, causes: dict[str, Any]) -> None:
    """Who made each decision: the player by a command of theirs, else the server."""
    for entry, envelope in pairs:
        owner = entry["data"].get("player_id")
        if entry["event"] not in PLAYER_DECISIONS or owner is None:
            continue
        cause = causes.get(envelope.causation_id or "")
        by_player = (
            cause is not None
            and type(cause).__name__ in PLAYERS_OWN
            and getattr(cause, "player_id", None) == owner
        )
        assert entry["decided_by"] == ("player" if by_player else "server"), entry


def check_wagers(found: dict[str, Any], mine: list[EventEnvelope]) -> None:
    """Each wager and payout on its box, hand and insurance."""
    boxes = {box["box"]: box for box in found["boxes"]}
    for envelope in mine:
        data = envelope.data
        if isinstance(data, ev.HandSettled):
            hand = boxes[data.box]["hands"][data.hand]
            got = (hand["stake"], hand["outcome"], hand["payout"])
            assert got == (data.stake, data.outcome, data.payout)
        elif isinstance(data, ev.InsuranceSettled):
            insurance = boxes[data.box]["insurance"]
            got = (insurance["stake"], insurance["won"], insurance["payout"])
            assert got == (data.stake, data.won, data.payout)
        elif isinstance(data, ev.DealStarted):
            for index in data.boxes:
                bets = [
                    e.data.box_total
                    for e in mine
                    if isinstance(e.data, ev.BetPlaced) and e.data.box == index
                ]
                assert boxes[index]["bet"] == bets[-1]
        elif isinstance(data, ev.HandDoubled):
            assert boxes[data.box]["hands"][data.hand]["doubled"]
        elif isinstance(data, ev.HandSplit):
            assert all(h["split"] for h in boxes[data.box]["hands"])


async def check_lines(recall: Recall, found: dict[str, Any], mine: list[EventEnvelope]) -> None:
    """Each player's line: the balance before the first wager and after the round, the
    round's result; the player's own view of the round and betting history say the same."""
    number, stream = found["round"], found["stream_id"]
    tally = LineTally()
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    for envelope in mine:
        data = envelope.data
        tally.add(data)
        if isinstance(data, ev.BetPlaced):
            before.setdefault(data.player_id, data.balance_after + data.amount)
        balance = getattr(data, "balance_after", None)
        if isinstance(balance, int) and isinstance(data, ev.RoundEvent):
            after[getattr(data, "player_id", "")] = balance
        for item in getattr(data, "results", ()) or getattr(data, "returns", ()):
            after[item.player_id] = item.balance_after
    lines = {line["player_id"]: line for line in found["players"]}
    assert set(lines) == set(before)
    for player_id, line in lines.items():
        assert line["balance_before"] == before[player_id]
        assert line["balance_after"] == after[player_id]
        assert (line["wagered"], line["paid"], line["net"]) == tally.line(number, player_id)
        started = next(
            e.occurred_at
            for e in mine
            if isinstance(e.data, ev.BetPlaced) and e.data.player_id == player_id
        )
        assert utc(started) == utc(_moment(line["started_at"]))
        theirs = await recall.get(f"/v1/players/{player_id}/rounds/{stream}:{number}")
        PlayerRoundAnswer.model_validate(theirs)
        assert theirs["players"] == [line]
        history = await recall.get(f"/v1/players/{player_id}/rounds?limit=100")
        PlayerRoundsAnswer.model_validate(history)
        (listed,) = [r for r in history["rounds"] if r["round_id"] == f"{stream}:{number}"]
        keys = ("balance_before", "balance_after", "wagered", "paid", "net")
        assert {k: listed[k] for k in keys} == {k: line[k] for k in keys}


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def stored_line(
    store: ProjectionStore, stream: str, player_id: str, write: tuple[int, int, int] | None = None
) -> tuple[int, int, int]:
    """The (wagered, paid, net) the store holds in the player's line of round 1; ``write``
    writes those first."""
    rp = schema.round_players
    where = (rp.c.stream_id == stream, rp.c.round == 1, rp.c.player_id == player_id)
    if write is not None:
        async with store.writing() as connection:
            values = dict(zip(("wagered", "paid", "net"), write, strict=True))
            await connection.execute(update(rp).where(*where).values(**values))
    async with store.reading() as connection:
        row = (await connection.execute(select(rp).where(*where))).one()
    return row.wagered, row.paid, row.net


def has(kind: str) -> Callable[[list[EventEnvelope]], bool]:
    return lambda seen: any(e.type == kind for e in seen)


# ---- the rounds ---------------------------------------------------------------------------


async def test_mini_h17_a_split_a_double_and_insurance_lost_at_the_peek(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient, stores: StoreFactory
) -> None:
    stream = f"recall-h17-{stores.kind}"
    # 8 8 against an ace (a 7 in the hole): insured, no blackjack at the peek; split, the
    # first 8 draws a 3 and doubles to 21, the second draws a ten and stands on 18.
    shuffler.queue(["8H", "AS", "8D", "7C", "3S", "TD", "TH"])
    async with recalling(space, await stores.store(), stores.kind) as recall:
        await single(client, stream, "mini-h17", 10_000)
        await accept(
            client,
            stream,
            cmd.PlaceBet(player_id=P, box=0, amount=1000),
            cmd.Deal(player_id=P),
            cmd.TakeInsurance(player_id=P, box=0),
        )
        assert await recall.line(stream, 1, P) == (1500, 0, -500)  # lost at the peek
        await accept(
            client,
            stream,
            cmd.Split(player_id=P, box=0),
            cmd.Double(player_id=P, box=0),
            cmd.Stand(player_id=P, box=0),
        )
        found = await check_round(recall, stream, 1)
        (line,) = found["players"]
        # 21 doubled wins 4000, 18 pushes the dealer's soft 18: 1000 back
        assert (line["wagered"], line["paid"], line["net"]) == (3500, 5000, 1500)
        assert (line["balance_before"], line["balance_after"]) == (10_000, 11_500)


async def test_mini_h17_a_split_round_voided(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient, stores: StoreFactory
) -> None:
    stream = f"recall-h17v-{stores.kind}"
    shuffler.queue(["8S", "6H", "8D", "TD", "3C", "2C", "9D"])  # 8 8 against the dealer's 6
    async with recalling(space, await stores.store(), stores.kind) as recall:
        await single(client, stream, "mini-h17", 10_000)
        await accept(
            client,
            stream,
            cmd.PlaceBet(player_id=P, box=0, amount=1_000),
            cmd.Deal(player_id=P),
            cmd.Split(player_id=P, box=0),
            cmd.VoidRound(round=1, operator="ops-1", reason="card reader fault"),
        )
        found = await check_round(recall, stream, 1)
        (line,) = found["players"]
        assert (line["wagered"], line["paid"], line["net"]) == (2_000, 2_000, 0)
        assert (line["balance_before"], line["balance_after"]) == (10_000, 10_000)
        assert all(h["voided"] for b in found["boxes"] for h in b["hands"])


async def test_mini_s17_insurance_and_a_bust_settled_at_once(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient, stores: StoreFactory
) -> None:
    stream = f"recall-s17-{stores.kind}"
    # mini-s17 deals the hole card first: T 6 against a 9 in the hole and an ace up; insured
    # and lost at the peek; T 6 hits a ten, busts and is settled at once.
    shuffler.queue(["TH", "9C", "6D", "AS", "TC"])
    async with recalling(space, await stores.store(), stores.kind) as recall:
        await single(client, stream, "mini-s17", 5_000)
        await accept(
            client,
            stream,
            cmd.PlaceBet(player_id=P, box=0, amount=1000),
            cmd.Deal(player_id=P),
            cmd.TakeInsurance(player_id=P, box=0),
        )
        assert await recall.line(stream, 1, P) == (1500, 0, -500)
        await accept(client, stream, cmd.Hit(player_id=P, box=0))
        found = await check_round(recall, stream, 1)
        (line,) = found["players"]
        assert (line["wagered"], line["paid"], line["net"]) == (1500, 0, -1500)


async def test_atlantic_city_a_blackjack(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient, stores: StoreFactory
) -> None:
    stream = f"recall-ac-{stores.kind}"
    shuffler.queue(["AS", "9S", "KS", "7H"])
    async with recalling(space, await stores.store(), stores.kind) as recall:
        await single(client, stream, "atlantic-city", 5_000)
        await accept(
            client, stream, cmd.PlaceBet(player_id=P, box=0, amount=500), cmd.Deal(player_id=P)
        )
        found = await check_round(recall, stream, 1)
        (line,) = found["players"]
        assert (line["wagered"], line["paid"], line["balance_after"]) == (500, 1200, 5_700)


async def test_surrender_a_blackjack_a_bust_and_a_surrender_each_settled_at_once(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient, stores: StoreFactory
) -> None:
    stream = f"recall-sur-{stores.kind}"
    # boxes 0, 1, 2, the upcard, again, the hole card: A K a blackjack (paid at once), T 5
    # hits a ten and busts, T 6 surrendered; the dealer's 9 up, 8 in the hole.
    shuffler.queue(["AS", "TH", "TD", "9C", "KS", "5D", "6H", "8C", "TC"])
    store = await stores.store()
    async with recalling(space, store, stores.kind) as recall:
        await single(client, stream, "surrender", 10_000)
        await accept(
            client,
            stream,
            *(cmd.PlaceBet(player_id=P, box=box, amount=1000) for box in range(3)),
            cmd.Deal(player_id=P),
        )
        assert await recall.line(stream, 1, P) == (3000, 2500, 1500)  # the blackjack paid
        # The line as a release before stored it while the round played (no stake, nothing
        # paid): the query API reads the open round's money from its record all the same,
        # and the round's next event writes it into the line.
        await stored_line(store, stream, P, (0, 0, 0))
        assert await recall.line(stream, 1, P) == (3000, 2500, 1500)
        await accept(client, stream, cmd.Hit(player_id=P, box=1))
        assert await recall.line(stream, 1, P) == (3000, 2500, 500)  # and the bust lost
        assert await stored_line(store, stream, P) == (3000, 2500, 500)
        await accept(client, stream, cmd.Surrender(player_id=P, box=2))
        found = await check_round(recall, stream, 1)
        (line,) = found["players"]
        assert (line["wagered"], line["paid"], line["net"]) == (3000, 3000, 0)
        outcomes = [h["outcome"] for b in found["boxes"] for h in b["hands"]]
        assert outcomes == ["blackjack", "bust", "surrender"]


async def test_atlantic_city_multi_the_server_stands_for_a_disconnected_player(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient, stores: StoreFactory
) -> None:
    stream = f"recall-acm-{stores.kind}"
    # alice (box 0) T 9, bob (box 1) T 7, the dealer's 7 up and a ten in the hole.
    shuffler.queue(["TS", "TD", "7S", "9S", "7D", "TH"])
    async with recalling(space, await stores.store(), stores.kind) as recall:
        # bob's turn runs out 5 s after alice has stood (the clock of the bets and of each
        # turn)
        rules = {"turn_seconds": 5}
        await accept(client, stream, cmd.OpenTable(variant="atlantic-city-multi", overrides=rules))
        for seat, player in enumerate(("alice", "bob")):
            await accept(client, stream, cmd.SitDown(player_id=player, seat=seat))
            await accept(
                client,
                wallet_stream(player),
                WalletDeposit(player_id=player, amount=5_000),
                BuyIn(player_id=player, table_id=stream, amount=2_000),
            )
        deposited = lambda es: sum(e.type == "FundsDeposited" for e in es) == 2  # noqa: E731
        await wait_for_events(space, stream, deposited)
        # pipelined: on a loaded machine six answers in a row outlast the 5 s clock (bob's
        # Deal or alice's Stand refused as late); sent in one go, the broker has them all
        # within milliseconds of the first bet, and the table judges each by its receipt
        await accept_together(
            client,
            stream,
            cmd.PlaceBet(player_id="alice", box=0, amount=500),
            cmd.PlaceBet(player_id="bob", box=1, amount=500),
            cmd.Deal(player_id="alice"),
            cmd.Deal(player_id="bob"),
            cmd.Disconnect(player_id="bob"),
            cmd.Stand(player_id="alice", box=0),
        )
        await wait_for_events(space, stream, has("RoundSettled"))
        found = await check_round(recall, stream, 1)
        decided = {
            (x["event"], x["data"].get("player_id")): x["decided_by"]
            for x in found["log"]
            if x["decided_by"] is not None
        }
        assert decided[("PlayerStood", "bob")] == "server"
        assert decided[("PlayerStood", "alice")] == "player"
        assert "PlayerDisconnected" in [x["event"] for x in found["log"]]
