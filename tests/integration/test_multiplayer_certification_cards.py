"""Certification scenarios that need given cards (a pair, a double), against the command
handler on the real broker with a queued shoe; each player has a client of their own. The
scenarios on the random shoe, against ``blackjack serve``, are in
``test_multiplayer_certification.py``."""

from __future__ import annotations

import asyncio

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.wallet import BuyIn, WalletDeposit, wallet_stream
from tests.integration.conftest import KafkaSpace, QueuedShuffler, verify_stream
from tests.integration.multiplayer import Player, TableWatch, players, settled, watching

pytestmark = pytest.mark.integration

PARTITIONS = 2


async def buy_in(player: Player, watch: TableWatch, amount: int, deposit: int = 0) -> None:
    wallet = wallet_stream(player.player_id)
    if deposit:
        result = await player.client.execute(
            wallet, WalletDeposit(player_id=player.player_id, amount=deposit)
        )
        assert result.status == "accepted", result.rejection
    count = len(watch.of(ev.FundsDeposited))
    result = await player.client.execute(
        wallet, BuyIn(player_id=player.player_id, table_id=player.table, amount=amount)
    )
    assert result.status == "accepted", result.rejection
    await watch.until(lambda es: len(watch.of(ev.FundsDeposited)) > count)


async def test_three_boxes_at_surrender_split_double_and_surrender_on_different_boxes(
    space: KafkaSpace, shuffler: QueuedShuffler, handler: object
) -> None:
    """Page 003: "You may bet on up to three hands"; a split pair is "split into two separate
    hands. One card is dealt from the shoe to each of two hands"; "You can surrender only
    after the Dealer checks for Blackjack", on the first two cards; "Upon Surrender you
    receive half of your initial bet back". Box 0: 8 8 split, 8 3 doubled to 21, 8 9 (no
    surrender on a split hand); box 1: T 6 surrendered; box 2: T 9 stood; the dealer T up,
    7 in the hole (checked: no blackjack)."""
    table = "cert-three-boxes"
    shuffler.queue(["8S", "TS", "TD", "TH", "8H", "6S", "9S", "7S", "3C", "9C", "TC"])
    async with watching(space, table) as watch, players(space, table, "sam") as (sam,):
        await sam.must(cmd.OpenTable(variant="surrender"))
        await sam.must(cmd.SitDown(player_id="sam"))
        await sam.must(cmd.Deposit(player_id="sam", amount=5_000))
        for box in (0, 1, 2):
            await sam.must(cmd.PlaceBet(player_id="sam", box=box, amount=1_000))
        await sam.must(cmd.Deal(player_id="sam"))
        await sam.must(cmd.Split(player_id="sam", box=0))
        await sam.must(cmd.Double(player_id="sam", box=0, hand=0))
        split_surrender = await sam.do(cmd.Surrender(player_id="sam", box=0, hand=1))
        assert split_surrender.rejection is not None
        assert split_surrender.rejection.code == "cannot_surrender"
        await sam.must(cmd.Stand(player_id="sam", box=0, hand=1))
        # all the money is on the table: box 1's turn offers no double
        await watch.until(lambda es: any(t.box == 1 for t in watch.of(ev.TurnStarted)))
        [turn] = [t for t in watch.of(ev.TurnStarted) if t.box == 1]
        assert turn.actions == ("hit", "stand", "surrender")
        surrendered = await sam.must(cmd.Surrender(player_id="sam", box=1))
        assert surrendered.first_sequence is not None
        await sam.must(cmd.Stand(player_id="sam", box=2))
        await watch.until(settled(1))
        hands = {
            (h.box, h.hand): (h.outcome, h.total, h.stake, h.payout)
            for h in watch.of(ev.HandSettled)
        }
        assert hands == {
            (0, 0): ("win", 21, 2_000, 4_000),
            (0, 1): ("push", 17, 1_000, 1_000),
            (1, 0): ("surrender", 16, 1_000, 500),
            (2, 0): ("win", 19, 1_000, 2_000),
        }
        # the surrender's half was paid at once, before box 2 played
        settled_box_1 = next(h for h in watch.of(ev.HandSettled) if h.box == 1)
        assert settled_box_1.balance_after == 500
        [result] = watch.of(ev.RoundSettled)[0].results
        assert (result.wagered, result.paid, result.balance_after) == (5_000, 7_500, 7_500)
    check = await verify_stream(space, table)
    assert check.state.players["sam"].balance == 7_500


async def test_a_shared_table_balance_that_cannot_cover_a_double_until_a_buy_in_mid_turn(
    space: KafkaSpace, shuffler: QueuedShuffler, handler: object
) -> None:
    """Page 002's table with two players: ann has all her table money on the bet (her wallet
    has more): her 5 6 is offered no double, a Double is refused and changes nothing. She
    buys in from her wallet during her turn: the turn is offered again with double, and her
    Double is taken. Ben, with money, doubles his 5 6 too."""
    table = "cert-double-cover"
    # ann 5 6, ben 5 6, the dealer 9 up, 8 in the hole; ann's double T, ben's double 9
    shuffler.queue(["5S", "5H", "9S", "6S", "6H", "8S", "TC", "9D"])
    async with watching(space, table) as watch, players(space, table, "ann", "ben") as (ann, ben):
        await ann.must(cmd.OpenTable(variant="atlantic-city-multi", overrides={"turn_seconds": 30}))
        await ann.must(cmd.SitDown(player_id="ann", seat=0))
        await ben.must(cmd.SitDown(player_id="ben", seat=1))
        await buy_in(ann, watch, 1_000, deposit=5_000)
        await buy_in(ben, watch, 5_000, deposit=5_000)
        await asyncio.gather(
            ann.must(cmd.PlaceBet(player_id="ann", box=0, amount=1_000)),
            ben.must(cmd.PlaceBet(player_id="ben", box=1, amount=1_000)),
        )
        await asyncio.gather(
            ann.must(cmd.Deal(player_id="ann")), ben.must(cmd.Deal(player_id="ben"))
        )
        [turn] = await watch.until(lambda es: watch.of(ev.TurnStarted))
        assert (turn.player_id, turn.actions) == ("ann", ("hit", "stand"))
        count = len(watch.events)
        refused = await ann.do(cmd.Double(player_id="ann", box=0))
        assert refused.rejection is not None and refused.rejection.code == "insufficient_funds"
        assert refused.first_sequence is None
        await buy_in(ann, watch, 1_000)
        offered = await watch.until(
            lambda es: [t for t in watch.of(ev.TurnStarted, count) if t.player_id == "ann"]
        )
        assert offered[-1].actions == ("hit", "stand", "double")
        await ann.must(cmd.Double(player_id="ann", box=0))
        await ben.must(cmd.Double(player_id="ben", box=1))
        await watch.until(settled(1))
        hands = {
            h.player_id: (h.outcome, h.total, h.stake, h.payout) for h in watch.of(ev.HandSettled)
        }
        assert hands == {"ann": ("win", 21, 2_000, 4_000), "ben": ("win", 20, 2_000, 4_000)}
    check = await verify_stream(space, table)
    assert check.state.players["ann"].balance == 4_000
    assert check.state.players["ben"].balance == 7_000
