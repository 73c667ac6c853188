"""A full round of every preset through the real broker, checked event by event.

Each round runs through a handler with a queued shoe, so the cards are known. The test then
checks the events twice: against the facts the seed promises (named below), and, every event,
against the pure engine replayed from the commands, the recorded clock and the recorded shoe
(``verify_stream``): none lost, none twice, none extra, each with its envelope.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from blackjack.client import BlackjackClient
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.wallet import BuyIn, WalletDeposit, wallet_stream
from tests.integration.conftest import (
    KafkaSpace,
    QueuedShuffler,
    accept,
    accept_together,
    await_answered_events,
    read_topic,
    types_of,
    verify_stream,
    wait_for_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

SCHEMAS = Path(__file__).parents[2] / "schemas"


async def table_with_player(
    client: BlackjackClient, stream: str, variant: str, balance: int
) -> None:
    await accept(
        client,
        stream,
        cmd.OpenTable(variant=variant),
        cmd.SitDown(player_id="p"),
        cmd.Deposit(player_id="p", amount=balance),
    )


def settled(events: list[Any]) -> list[ev.HandSettled]:
    return [e.data for e in events if isinstance(e.data, ev.HandSettled)]


async def test_mini_h17_dealer_hits_soft_17_and_a_double_wins_twice(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    # player 9 2, dealer 6 up and A in the hole: soft 17, which this dealer hits.
    shuffler.queue(["9S", "6S", "2S", "AH", "TS", "5H", "TH"])
    await table_with_player(client, "h17-1", "mini-h17", 10_000)
    await accept(
        client,
        "h17-1",
        cmd.PlaceBet(player_id="p", box=0, amount=1000),
        cmd.Deal(player_id="p"),
        cmd.Double(player_id="p", box=0),
    )
    check = await verify_stream(space, "h17-1")
    cards = [
        e.data.card
        for e in check.events
        if isinstance(e.data, ev.CardDealt | ev.DealerHoleCardRevealed)
    ]
    assert cards[-3:] == ["AH", "5H", "TH"]  # 17 soft: hit, hit
    [hand] = settled(check.events)
    assert (hand.outcome, hand.stake, hand.payout, hand.balance_after) == (
        "win",
        2000,
        4000,
        12_000,
    )
    assert types_of(check.events)[-1] == "RoundSettled"


async def test_mini_s17_doubles_on_ten_and_stands_on_soft_17(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    # player 6 4 = 10 (double allowed on 9, 10, 11) draws a 9; dealer 7 up / A in the hole =
    # soft 18 stands. mini-s17 deals the dealer's hole card first and the upcard second.
    shuffler.queue(["6S", "AH", "4S", "7S", "9S"])
    await table_with_player(client, "s17-1", "mini-s17", 5_000)
    await accept(
        client,
        "s17-1",
        cmd.PlaceBet(player_id="p", box=0, amount=500),
        cmd.Deal(player_id="p"),
        cmd.Double(player_id="p", box=0),
    )
    check = await verify_stream(space, "s17-1")
    [hand] = settled(check.events)
    assert (hand.outcome, hand.total, hand.payout) == ("win", 19, 2000)
    dealer = next(e.data for e in check.events if isinstance(e.data, ev.RoundSettled))
    assert dealer.dealer_total == 18
    # Reshuffled after every round: the next shoe is already drawn and the last one revealed.
    retired = next(e.data for e in check.events if isinstance(e.data, ev.ShoeRetired))
    assert retired.cards_dealt == 5
    digest = hashlib.sha256(f"{retired.salt}:{''.join(retired.order)}".encode()).hexdigest()
    assert digest == retired.commitment


async def test_atlantic_city_five_dollar_blackjack_pays_seven(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    shuffler.queue(["AS", "9S", "KS", "7H"])
    await table_with_player(client, "ac-1", "atlantic-city", 5_000)
    await accept(
        client,
        "ac-1",
        cmd.PlaceBet(player_id="p", box=0, amount=500),
        cmd.Deal(player_id="p"),
    )
    check = await verify_stream(space, "ac-1")
    [hand] = settled(check.events)
    assert (hand.outcome, hand.stake, hand.payout) == ("blackjack", 500, 1200)
    assert hand.balance_after == 5_700


async def test_a_suspended_table_completes_its_round_and_refuses_new_bets_until_resumed(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    shuffler.queue(["TS", "7S", "9S", "TD"])  # 19 against 17
    await table_with_player(client, "ac-s", "atlantic-city", 5_000)
    await accept(
        client,
        "ac-s",
        cmd.PlaceBet(player_id="p", box=0, amount=500),
        cmd.SuspendTable(operator="ops-1", reason="maintenance"),
        cmd.Deal(player_id="p"),
        cmd.Stand(player_id="p", box=0),
    )
    refused = await client.execute("ac-s", cmd.PlaceBet(player_id="p", box=0, amount=500))
    assert refused.status == "rejected" and refused.rejection is not None
    assert refused.rejection.code == "table_suspended"
    await accept(
        client,
        "ac-s",
        cmd.ResumeTable(operator="ops-1"),
        cmd.PlaceBet(player_id="p", box=0, amount=500),
    )
    check = await verify_stream(space, "ac-s")
    [hand] = settled(check.events)
    assert (hand.outcome, hand.balance_after) == ("win", 5_500)
    kinds = types_of(check.events)
    assert kinds.index("TableSuspended") < kinds.index("DealStarted")
    assert kinds[-3:] == ["TableResumed", "RoundOpened", "BetPlaced"]


async def test_a_mini_h17_round_voided_for_a_malfunction_returns_every_wager(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    """Page 000: "Malfunctions voids all pays and plays". A split round voided through the
    broker: the stakes of both hands back, no settlement, and the next round plays on."""
    shuffler.queue(["8S", "6H", "8D", "TD", "3C", "2C", "9D"])  # 8,8 against the dealer's 6
    await table_with_player(client, "h17-v", "mini-h17", 10_000)
    await accept(
        client,
        "h17-v",
        cmd.PlaceBet(player_id="p", box=0, amount=1_000),
        cmd.Deal(player_id="p"),
        cmd.Split(player_id="p", box=0),
    )
    wrong = await client.execute(
        "h17-v", cmd.VoidRound(round=2, operator="ops-1", reason="card reader fault")
    )
    assert wrong.rejection is not None and wrong.rejection.code == "round_not_in_play"
    await accept(
        client,
        "h17-v",
        cmd.VoidRound(round=1, operator="ops-1", reason="card reader fault"),
        cmd.PlaceBet(player_id="p", box=0, amount=500),
    )
    check = await verify_stream(space, "h17-v")
    kinds = types_of(check.events)
    assert kinds[-4:] == ["DealerHoleCardRevealed", "RoundVoided", "RoundOpened", "BetPlaced"]
    assert "HandSettled" not in kinds and "RoundSettled" not in kinds
    [voided] = [e.data for e in check.events if isinstance(e.data, ev.RoundVoided)]
    [back] = voided.returns
    assert (back.wagered, back.returned, back.balance_after) == (2_000, 2_000, 10_000)


async def test_surrender_two_boxes_one_surrendered_after_the_peek(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    # boxes 0 and 1, dealer T up (peeks, no blackjack) and 8 in the hole.
    shuffler.queue(["TS", "TH", "TD", "6S", "9S", "8S"])
    await table_with_player(client, "sur-1", "surrender", 10_000)
    await accept(
        client,
        "sur-1",
        cmd.PlaceBet(player_id="p", box=0, amount=1000),
        cmd.PlaceBet(player_id="p", box=1, amount=1000),
        cmd.Deal(player_id="p"),
        cmd.Surrender(player_id="p", box=0),
        cmd.Stand(player_id="p", box=1),
    )
    check = await verify_stream(space, "sur-1")
    assert "DealerPeeked" in types_of(check.events)
    outcomes = [(h.box, h.outcome, h.payout) for h in settled(check.events)]
    assert outcomes == [(0, "surrender", 500), (1, "win", 2000)]
    assert check.state.players["p"].balance == 10_500


async def test_atlantic_city_multi_two_players_funded_from_their_wallets(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    table = "acm-1"
    # alice (box 0) T 9, dealer 7 up and T in the hole.
    shuffler.queue(["TS", "7S", "9S", "TH"])
    await accept(client, table, cmd.OpenTable(variant="atlantic-city-multi"))
    for player, seat, money, buy_in in (("alice", 0, 10_000, 3_000), ("bob", 1, 5_000, 2_000)):
        await accept(client, table, cmd.SitDown(player_id=player, seat=seat))
        await accept(
            client,
            wallet_stream(player),
            WalletDeposit(player_id=player, amount=money),
            BuyIn(player_id=player, table_id=table, amount=buy_in),
        )
    # The buy-ins arrive as table Deposits caused by the wallets' BuyInSent events.
    await wait_for_events(space, table, lambda es: sum(e.type == "FundsDeposited" for e in es) == 2)
    await accept(
        client,
        table,
        cmd.PlaceBet(player_id="alice", box=0, amount=500),
        cmd.PlaceBet(player_id="bob", box=1, amount=500),
        cmd.Deal(player_id="alice"),
        cmd.Pass(player_id="bob"),
        cmd.Stand(player_id="alice", box=0),
        cmd.LeaveTable(player_id="alice"),
        cmd.LeaveTable(player_id="bob"),
    )
    for player, expected in (("alice", 10_500), ("bob", 5_000)):
        events = await wait_for_events(
            space, wallet_stream(player), lambda es: any(e.type == "CashOutReceived" for e in es)
        )
        assert types_of(events) == [
            "WalletDeposited",
            "BuyInSent",
            "BuyInCompleted",
            "CashOutReceived",
        ]
        check = await verify_stream(space, wallet_stream(player))
        assert check.state.balance == expected and check.state.pending == ()
    check = await verify_stream(space, table)
    [hand] = settled(check.events)
    assert (hand.player_id, hand.outcome, hand.payout) == ("alice", "win", 1000)
    refunds = [e.data for e in check.events if isinstance(e.data, ev.BetRefunded)]
    assert [(r.player_id, r.reason) for r in refunds] == [("bob", "passed")]
    left = [
        (e.data.player_id, e.data.balance_returned)
        for e in check.events
        if isinstance(e.data, ev.SeatLeft)
    ]
    assert left == [("alice", 3_500), ("bob", 2_000)]


async def test_events_carry_cloudevents_headers_and_a_sealed_shoe(
    space: KafkaSpace, client: BlackjackClient
) -> None:
    await table_with_player(client, "headers-1", "atlantic-city", 1_000)
    records = [r for r in await read_topic(space, space.topics.events) if r.key == b"headers-1"]
    assert records
    for record in records:
        headers = dict(record.headers)
        assert headers["ce_specversion"] == b"1.0"
        assert headers["ce_source"] == b"/blackjack/command-handler"
        assert headers["ce_type"].startswith(b"blackjack.")
        assert headers["ce_subject"] == b"headers-1"
        assert {"ce_id", "ce_time", "ce_causationid", "ce_correlationid"} <= set(headers)
    shuffled = next(
        r for r in records if dict(r.headers)["ce_type"] == b"blackjack.ShoeShuffled.v1"
    )
    assert b'"order"' not in shuffled.value and b'"salt"' not in shuffled.value
    assert b'"sealed"' in shuffled.value and b'"commitment"' in shuffled.value
    results = [r for r in await read_topic(space, space.topics.results) if r.key == b"headers-1"]
    assert all(dict(r.headers)["ce_type"] == b"blackjack.CommandResult.v1" for r in results)


async def test_every_record_on_the_wire_is_what_the_published_contract_says(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    """Every command, event and result on the module's topics (with the module's other tests:
    doubles, surrender, blackjacks, buy-ins and cash-outs through the wallets; and this test's
    own split, a hand the clock stands, a refusal, an unsigned service-only command and a
    keyless malformed message): its body against the JSON Schema in ``schemas/`` (formats
    included), its headers and key against the AsyncAPI document's (an integrator's review
    validated a capture by hand; this keeps it so)."""
    shuffler.queue(["8S", "TS", "8H", "TD", "3C", "9D"])  # 8 8 against a ten: a split
    await table_with_player(client, "contract-1", "mini-h17", 5_000)
    await accept(
        client,
        "contract-1",
        cmd.PlaceBet(player_id="p", box=0, amount=1000),
        cmd.Deal(player_id="p"),
        cmd.Split(player_id="p", box=0),
    )
    refusals = [
        await client.execute("contract-1", cmd.Hit(player_id="nobody", box=0)),
        await client.execute("contract-1", cmd.ShuffleShoe(order=("AS",), salt="s" * 16)),
    ]
    assert [r.rejection.code for r in refusals if r.rejection] == ["not_seated", "unauthorized"]
    bad = {"command_id": "keyless-1", "stream_id": "contract-1", "command": {"type": "Hit"}}
    await client.send_raw(None, json.dumps(bad).encode())
    assert (await client.result("keyless-1")).status == "rejected"
    # the clock: a one-second turn left to run out
    shuffler.queue(["9S", "7S", "8H", "TD"])
    await accept(
        client, "contract-2", cmd.OpenTable(variant="atlantic-city", overrides={"turn_seconds": 1})
    )
    await accept_together(  # the bet's 1 s betting clock: its Deal received with it
        client,
        "contract-2",
        cmd.SitDown(player_id="p"),
        cmd.Deposit(player_id="p", amount=5_000),
        cmd.PlaceBet(player_id="p", box=0, amount=1000),
        cmd.Deal(player_id="p"),
    )
    await wait_for_events(
        space, "contract-2", lambda seen: any(isinstance(e.data, ev.RoundSettled) for e in seen)
    )
    # a buy-in to an id no table was opened under: declined in `#declined/<partition>`
    await accept(
        client,
        wallet_stream("nowhere-buyer"),
        WalletDeposit(player_id="nowhere-buyer", amount=1_000),
        BuyIn(player_id="nowhere-buyer", table_id="contract-nowhere", amount=400),
    )
    await wait_for_events(
        space,
        wallet_stream("nowhere-buyer"),
        lambda seen: any(e.type == "BuyInRefunded" for e in seen),
    )

    document = json.loads((SCHEMAS / "asyncapi.json").read_text())
    messages = document["components"]["messages"]
    checked: dict[str, int] = {}
    transfers: list[tuple[dict[str, Any], int]] = []
    for topic, body_schema, message in (
        (space.topics.commands, "command-envelope.json", "commands:SubscribeMessage"),
        (space.topics.events, "event-envelope.json", "events:Message"),
        (space.topics.results, "command-result.json", "command-results:Message"),
    ):
        body = validator(json.loads((SCHEMAS / body_schema).read_text()))
        headers = validator(messages[message]["headers"])
        services = validator(messages["service-commands:Message"]["headers"])
        key = validator(messages[message]["bindings"]["kafka"]["key"])
        for record in await read_topic(space, topic):
            where = f"{topic}[{record.partition}]@{record.offset}"
            texts = {name: value.decode() for name, value in record.headers}
            document = json.loads(record.value)
            if topic == space.topics.commands and document.get("command_id") == "keyless-1":
                continue  # the malformed message itself (its answer is checked)
            for check, value in (
                (body, document),
                (headers, texts),
                (key, (record.key or b"").decode()),
            ):
                problems = [e.message for e in check.iter_errors(value)]
                assert problems == [], (where, problems)
            if (
                topic == space.topics.commands
                and texts.get("ce_source") == "/blackjack/command-handler"
            ):
                assert [e.message for e in services.iter_errors(texts)] == [], where
                if "bj_transfer" in texts:  # what docs/kafka.md's Headers say it is
                    transfers.append((document, int(texts["bj_transfer"])))
            kind = texts.get("ce_type", "?")
            checked[kind] = checked.get(kind, 0) + 1
    # bj_transfer: a buy-in's Deposit the wallet's transfer number, a CashOut the sequence of
    # the table event (named by its id, `<event id>.cashout`) that paid the money out
    await await_answered_events(space)
    events = {
        (e := json.loads(r.value))["event_id"]: e
        for r in await read_topic(space, space.topics.events)
    }
    kinds = {step["command"]["type"] for step, _ in transfers}
    assert kinds == {"Deposit", "CashOut"}, kinds
    for step, transfer in transfers:
        cause = events[step["command_id"].rpartition(".")[0]]
        if step["command"]["type"] == "Deposit":
            assert (cause["type"], cause["data"]["transfer"]) == ("BuyInSent", transfer), step
        else:
            assert cause["type"] in {"SeatLeft", "FundsWithdrawn"}, step
            assert (cause["stream_id"], cause["sequence"]) == (
                step["command"]["table_id"],
                transfer,
            ), step
    for kind in (
        "blackjack.HandSplit.v1",
        "blackjack.PlayerTimedOut.v2",
        "blackjack.command.ExpireTimers",
        "blackjack.CommandResult.v1",
        "blackjack.TransferDeclined.v1",
        "blackjack.BuyInRefunded.v1",
    ):
        assert checked.get(kind), (kind, sorted(checked))


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
