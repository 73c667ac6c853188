"""A certification lab's scripted scenarios at page 002's five-seat ``atlantic-city-multi``
table, played end to end against the service as the product starts it (``blackjack serve``:
the command handler, the projection worker and the query API in one process, on the real
broker, with the real CSPRNG shoe), by several players each with a client (a producer) of
their own. Each scenario checks the events and answers against the page's words, then the
round's recall and the wallet projection (the query API), and replays the table's log through
the pure engine (``verify_stream``).

The shoe is random here, so the scenarios hold whatever the cards: the players stand on every
hand and decline insurance. Scenarios that need given cards (a split, a double) are in
``test_multiplayer_certification_cards.py``, against the same handler with a queued shoe."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from blackjack.command_handler.clock import expire_command_id
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.wallet import BuyIn, WalletDeposit, wallet_stream
from tests.integration.conftest import WAIT_S, KafkaSpace, command_log, verify_stream
from tests.integration.infra import free_port
from tests.integration.multiplayer import (
    Player,
    TableWatch,
    players,
    settled,
    stand_every_turn,
    watching,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2
SLOW_CLOCK = {"turn_seconds": 60}
BLACKJACK = Path(sys.executable).parent / "blackjack"
BANKROLL = 10_000


@dataclass
class Served:
    space: KafkaSpace
    http: httpx.AsyncClient

    async def get(self, path: str, done: Any = None) -> Any:
        """The query API's answer once ``done(answer)`` holds (the read model catches up with
        the log by itself: there is no event of it to await, so the answer is asked again)."""
        async with asyncio.timeout(WAIT_S):
            while True:
                answer = await self.http.get(path)
                if answer.status_code == 200 and (done is None or done(answer.json())):
                    return answer.json()
                await asyncio.sleep(0.1)


@pytest.fixture(scope="module")
async def served(
    space: KafkaSpace, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    """``blackjack serve`` with this module's topics and a SQLite read model of its own."""
    tmp = tmp_path_factory.mktemp("served")
    port = free_port()
    env = {
        **os.environ,
        **space.env(),
        "BLACKJACK_DB_URL": f"sqlite+aiosqlite:///{tmp}/projections.db",
        "BLACKJACK_HTTP_PORT": str(port),
    }
    with (tmp / "serve.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            str(BLACKJACK), "serve", "--port", str(port), env=env, stdout=log, stderr=log
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            async with asyncio.timeout(WAIT_S * 2):
                while True:  # readiness is polled: the process has no event a test can await
                    assert process.returncode is None, (tmp / "serve.log").read_text()[-3000:]
                    try:
                        if (await http.get("/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.2)
            yield Served(space, http)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), WAIT_S)
            except TimeoutError:
                process.kill()
                await process.wait()


async def seat_and_fund(
    served: Served, seated: list[Player], watch: TableWatch, seats: list[int] | None = None
) -> None:
    """Each player sits down and buys in BANKROLL from their wallet."""
    for index, player in enumerate(seated):
        seat = index if seats is None else seats[index]
        await player.must(cmd.SitDown(player_id=player.player_id, seat=seat))
    await fund(seated, watch)


async def fund(seated: list[Player], watch: TableWatch) -> None:
    """Each player, seated, buys in BANKROLL from their wallet."""
    for player in seated:
        wallet = wallet_stream(player.player_id)
        for command in (
            WalletDeposit(player_id=player.player_id, amount=BANKROLL),
            BuyIn(player_id=player.player_id, table_id=player.table, amount=BANKROLL),
        ):
            result = await player.client.execute(wallet, command)
            assert result.status == "accepted", result.rejection
    ids = {player.player_id for player in seated}
    await watch.until(lambda es: ids <= {f.player_id for f in watch.of(ev.FundsDeposited)})


async def until_clock(moment: datetime, before: float = 0.0) -> None:
    """Wait for a moment of the wall clock: the deadlines are the subject of these scenarios,
    and nothing is written to the log before a deadline that a test could await instead."""
    delay = (moment - datetime.now(UTC)).total_seconds() - before
    if delay > 0:
        await asyncio.sleep(delay)


async def test_five_players_bet_around_the_15_s_deadline(served: Served) -> None:
    """Page 002: "If you do not bet or pass within 15 seconds ... you will be automatically
    excluded from that particular hand." p0 bets first (the clock starts), p1 bets and deals
    at once, p2 passes, p3 bets and presses nothing (she did bet: dealt in at the deadline),
    p4 bets 100 ms after the deadline: refused, nothing changes, left out."""
    space, table = served.space, "cert-deadline"
    async with (
        watching(space, table) as watch,
        players(space, table, "d0", "d1", "d2", "d3", "d4") as (p0, p1, p2, p3, p4),
    ):
        await p0.must(cmd.OpenTable(variant="atlantic-city-multi"))
        await seat_and_fund(served, [p0, p1, p2, p3, p4], watch)
        opened_at = len(watch.events)
        sent = datetime.now(UTC)
        await p0.must(cmd.PlaceBet(player_id="d0", box=0, amount=1_000))
        [opened] = await watch.until(lambda es: watch.of(ev.RoundOpened, opened_at))
        seen = datetime.now(UTC)
        deadline = opened.betting_deadline
        assert deadline is not None
        # 15 s from the bet's decision, which was made between its sending and its event's
        # arrival (however long the handler took: a bound of the wall clock, not a guess)
        assert sent + timedelta(seconds=15) <= deadline <= seen + timedelta(seconds=15)
        # within milliseconds of each other, each from its own producer
        answers = await asyncio.gather(
            p1.do(cmd.PlaceBet(player_id="d1", box=1, amount=1_000)),
            p2.do(cmd.PlaceBet(player_id="d2", box=2, amount=1_000)),
            p3.do(cmd.PlaceBet(player_id="d3", box=3, amount=2_500)),
        )
        assert [a.status for a in answers] == ["accepted"] * 3
        await p1.must(cmd.Deal(player_id="d1"))
        # "Once you have placed a bet on the table, you may choose to skip the given deal
        # (before your first card is dealt) by clicking on the "Pass" button": the bet goes back
        await p2.must(cmd.Pass(player_id="d2"))
        # shortly before the deadline: in time (the table judges a decision by when the
        # broker received it; 3 s, not 1, for a loaded machine's slow send)
        await until_clock(deadline, before=3.0)
        await p0.must(cmd.Deal(player_id="d0"))
        await until_clock(deadline)
        await asyncio.sleep(0.1)  # 100 ms late
        late = await p4.do(cmd.PlaceBet(player_id="d4", box=4, amount=1_000))
        [started] = await watch.until(lambda es: [e for e in es if e.type == "DealStarted"])
        if late.status == "accepted":
            # the clock's deal came first and the dealer's peek found a blackjack: round 1 was
            # settled at the deadline, and d4's bet opened round 2 (in time for that one)
            [first] = watch.of(ev.RoundSettled)
            assert first.dealer_blackjack, late
            [_, second] = await watch.until(
                lambda es: watch.of(ev.RoundOpened)[1:] and watch.of(ev.RoundOpened)
            )
            assert second.round == 2
            await p4.must(cmd.LeaveTable(player_id="d4"))  # the others sit round 2 out
            await watch.until(settled(2), timeout=WAIT_S + 15)
        else:
            assert late.rejection is not None
            assert late.rejection.code == "not_betting_time", late.rejection
            assert late.first_sequence is None
        assert started.data.boxes == (0, 1, 3)
        # round 1's: when the dealer's blackjack settled it at the deadline, round 2's clock
        # (d4's bet opened it) leaves the others out too
        timed_out = [
            (t.player_id, t.action, t.sits_out) for t in watch.of(ev.PlayerTimedOut) if t.round == 1
        ]
        assert timed_out == [("d3", "dealt_in", False), ("d4", "left_out", True)]
        assert [p.player_id for p in watch.of(ev.PlayerPassed) if p.round == 1] == ["d2"]
        refused = await asyncio.gather(*(stand_every_turn(p, watch, 1) for p in (p0, p1, p3)))
        assert refused == [[], [], []]
        await watch.until(settled(1))
        result = watch.of(ev.RoundSettled)[0]
        assert sorted(r.player_id for r in result.results) == ["d0", "d1", "d3"]
    await verify_stream(space, table)
    # The recall: three players in the round, who decided what, the wallets' projection.
    recall = await served.get(f"/v1/rounds/{table}:1", lambda r: r["status"] == "settled")
    wagered = {p["player_id"]: p["wagered"] for p in recall["players"]}
    assert wagered == {"d0": 1_000, "d1": 1_000, "d2": 0, "d3": 2_500}
    by = {
        (entry["event"], entry["data"].get("player_id"), entry["decided_by"])
        for entry in recall["log"]
        if entry["event"] in ("PlayerPassed", "DealRequested")
    }
    assert by == {
        ("DealRequested", "d0", "player"),
        ("DealRequested", "d1", "player"),
        ("PlayerPassed", "d2", "player"),
        ("DealRequested", "d3", "server"),  # the clock dealt her in
    }
    held = {}
    for player_id in ("d2", "d4"):
        wallet = await served.get(
            f"/v1/players/{player_id}/wallet", lambda w: w["wallet"]["in_transit"] == 0
        )
        [account] = wallet["tables"]
        assert (account["in_play"], account["wagered"]) == (0, 0)
        held[player_id] = (account["available"], wallet["wallet"]["balance"])
    assert held["d2"][0] == BANKROLL
    if late.status == "rejected":
        assert held["d4"] == held["d2"]
    else:  # d4 left the table in round 2: her chips went back to her wallet, all of them
        assert held["d4"][0] == 0 and held["d4"][1] == sum(held["d2"])
    # d2's bet was on the table and came back when she passed: her history shows the cycle
    # with nothing wagered, as the single-player tables show a cycle whose bets were taken back
    [line] = (await served.get("/v1/players/d2/rounds"))["rounds"]
    assert (line["round"], line["wagered"], line["net"]) == (1, 0, 0)
    # d0's own game-history page: the others' money and command ids are not hers to see
    mine = await served.get(f"/v1/players/d0/rounds/{table}:1")
    assert [p["player_id"] for p in mine["players"]] == ["d0"]
    for entry in mine["log"]:
        if entry["data"].get("player_id") not in (None, "d0"):
            assert entry["command_id"] is None, entry
            assert "balance_after" not in entry["data"], entry
    # d4 never had a bet in round 1: no history of it
    assert (await served.http.get(f"/v1/players/d4/rounds/{table}:1")).status_code == 404
    if late.status == "rejected":
        shown = await served.get(f"/v1/players/d4/tables/{table}")
        assert shown["you"]["sitting_out"] is True


async def test_a_joiner_waits_for_the_next_round_and_a_seat_changes_between_rounds(
    served: Served,
) -> None:
    """Page 002: "if you join a table in the middle of a hand, you must wait until the round
    is over and after that you will be able to bet on the next hand"; "You may change your
    position on the table by clicking on the desired spot between hands"."""
    space, table = served.space, "cert-join"
    async with (
        watching(space, table) as watch,
        players(space, table, "j0", "j1", "j2") as (p0, p1, late),
    ):
        # no deadline is part of this scenario: a 60 s clock, that a loaded machine's slow
        # answers cannot run out (a bet or turn taken by the server, a Pass refused)
        await p0.must(cmd.OpenTable(variant="atlantic-city-multi", overrides=SLOW_CLOCK))
        await seat_and_fund(served, [p0, p1], watch)
        for box, p in enumerate((p0, p1)):
            await p.must(cmd.PlaceBet(player_id=p.player_id, box=box, amount=1_000))
        await asyncio.gather(p0.must(cmd.Deal(player_id="j0")), p1.must(cmd.Deal(player_id="j1")))
        await watch.until(lambda es: any(e.type == "DealStarted" for e in es))
        # j2 sits down while the hand is played: seated, but no bet until the round is over
        await late.must(cmd.SitDown(player_id="j2", seat=3))
        await late.client.execute(
            wallet_stream("j2"), WalletDeposit(player_id="j2", amount=BANKROLL)
        )
        await late.client.execute(
            wallet_stream("j2"), BuyIn(player_id="j2", table_id=table, amount=BANKROLL)
        )
        before = len(watch.events)
        if not settled(1)(watch.events):
            early = await late.do(cmd.PlaceBet(player_id="j2", box=3, amount=1_000))
            assert early.rejection is not None and early.rejection.code == "not_betting_time"
            move = await p0.do(cmd.MoveSeat(player_id="j0", seat=4))
            assert move.rejection is not None and move.rejection.code == "round_in_progress"
            # j2 has no bet out, but the round is in play: a seat changes between hands only
            move = await late.do(cmd.MoveSeat(player_id="j2", seat=2))
            assert move.rejection is not None and move.rejection.code == "round_in_progress"
        await asyncio.gather(*(stand_every_turn(p, watch, 1) for p in (p0, p1)))
        # nothing of round 1 is j2's: only the buy-in's money arrived for him
        assert {
            e.type for e in watch.events[before:] if getattr(e.data, "player_id", None) == "j2"
        } <= {"FundsDeposited"}
        # the wallet accepted j2's buy-in; the table's deposit follows it (a command of its
        # own): his bet in round 2 draws on it
        await watch.until(lambda es: "j2" in {f.player_id for f in watch.of(ev.FundsDeposited)})
        # between rounds: j0 moves to seat 4, and bets on box 4 (box 0 is no longer his)
        await p0.must(cmd.MoveSeat(player_id="j0", seat=4))
        wrong = await p0.do(cmd.PlaceBet(player_id="j0", box=0, amount=1_000))
        assert wrong.rejection is not None and wrong.rejection.code == "not_your_box"
        # j0's bet opens round 2; only then is there a round for j1 to pass (sent at once
        # from their own producers, a Pass could reach the table first: not_betting_time)
        await p0.must(cmd.PlaceBet(player_id="j0", box=4, amount=1_000))
        await asyncio.gather(
            p1.must(cmd.Pass(player_id="j1")),
            late.must(cmd.PlaceBet(player_id="j2", box=3, amount=1_000)),
        )
        await asyncio.gather(late.must(cmd.Deal(player_id="j2")), p0.must(cmd.Deal(player_id="j0")))
        [_, started] = await watch.until(
            lambda es: (
                (found := [e for e in es if e.type == "DealStarted"]) and len(found) == 2 and found
            )
        )
        assert started.data.boxes == (3, 4)
        await asyncio.gather(*(stand_every_turn(p, watch, 2) for p in (p0, late)))
        await watch.until(settled(2))
    await verify_stream(space, table)
    line = await served.get("/v1/players/j2/rounds", lambda a: len(a["rounds"]) == 1)
    assert [r["round"] for r in line["rounds"]] == [2]
    shown = await served.get(f"/v1/tables/{table}", lambda t: t["current_round"] is None)
    assert {p["player_id"]: p["seat"] for p in shown["players"]} == {"j0": 4, "j1": 1, "j2": 3}
    assert (await served.http.get(f"/v1/players/j2/rounds/{table}:1")).status_code == 404
    [account] = (await served.get("/v1/players/j0/wallet"))["tables"]
    assert (account["seat"], account["rounds"], account["in_play"]) == (4, 2, 0)


async def test_a_disconnection_that_returns_the_bet_deals_the_others_at_once(
    served: Served,
) -> None:
    """The table opened with page 003's disconnection policy (``refund_bets_on_disconnect``)
    at five seats: r1 dealt, r0's connection drops before Deal. Her bet comes back and the
    round is dealt by that same Disconnect (its own events), not at the 15 s deadline."""
    space, table = served.space, "cert-refund-disconnect"
    async with (
        watching(space, table) as watch,
        players(space, table, "r0", "r1") as (p0, p1),
    ):
        await p0.must(
            cmd.OpenTable(
                variant="atlantic-city-multi", overrides={"refund_bets_on_disconnect": True}
            )
        )
        await seat_and_fund(served, [p0, p1], watch)
        await asyncio.gather(
            p0.must(cmd.PlaceBet(player_id="r0", box=0, amount=1_000)),
            p1.must(cmd.PlaceBet(player_id="r1", box=1, amount=1_000)),
        )
        await p1.must(cmd.Deal(player_id="r1"))
        gone = await p0.must(cmd.Disconnect(player_id="r0"))
        assert gone.first_sequence is not None and gone.last_sequence is not None
        span = range(gone.first_sequence, gone.last_sequence + 1)
        await watch.until(lambda es: any(e.sequence == gone.last_sequence for e in es))
        mine = [e for e in watch.events if e.sequence in span]
        kinds = [e.type for e in mine]
        assert kinds[:2] == ["PlayerDisconnected", "BetRefunded"] and "DealStarted" in kinds
        [started] = [e.data for e in mine if isinstance(e.data, ev.DealStarted)]
        assert started.boxes == (1,)
        await stand_every_turn(p1, watch, 1)
        await watch.until(settled(1))
    await verify_stream(space, table)


async def test_a_silent_player_is_played_by_the_clock_while_the_others_play(
    served: Served,
) -> None:
    """DESIGN (GLI-19): at a multi-player table the server completes the hand of a player who
    is gone under the rules and records which decisions it made for them. s0 bets and goes
    silent before Deal (no bet comes back at this table: she did bet, and is dealt in); s1
    and s2 play. When s0's turn comes the clock stands her hand; the recall says the server
    did. s0 comes back during the round and after it, and is shown what was decided."""
    space, table = served.space, "cert-silent"
    async with (
        watching(space, table) as watch,
        players(space, table, "s0", "s1", "s2") as (p0, p1, p2),
    ):
        await p0.must(cmd.OpenTable(variant="atlantic-city-multi", overrides={"turn_seconds": 3}))
        await seat_and_fund(served, [p0, p1, p2], watch)
        # s0 bets (her bet opens the round and starts its 3 s betting clock) and her
        # connection drops before Deal (her platform says so): page 002 has no disconnection
        # policy, so her bet stays and the clock deals it in at the deadline (page 003's
        # refund is that table's rule: refund_bets_on_disconnect). s1 and s2 bet and press
        # Deal before the clock runs out: sent once the broker has s0's commands (after them
        # in the log), not once the table has answered them, which on a loaded machine can
        # take longer than the clock (their Deals refused, the round dealt by the server).
        hers = await p0.send(
            cmd.PlaceBet(player_id="s0", box=0, amount=1_000), cmd.Disconnect(player_id="s0")
        )
        theirs = await asyncio.gather(
            *(
                p.send(
                    cmd.PlaceBet(player_id=p.player_id, box=box, amount=1_000),
                    cmd.Deal(player_id=p.player_id),
                )
                for box, p in ((1, p1), (2, p2))
            )
        )
        _, gone = await p0.accepted(hers)
        assert gone.first_sequence is not None
        await asyncio.gather(p1.accepted(theirs[0]), p2.accepted(theirs[1]))
        # The others play as their turns come; nothing more from s0.
        await watch.until(lambda es: any(e.type == "DealStarted" for e in es))
        assert not watch.of(ev.BetRefunded)
        others = asyncio.gather(*(stand_every_turn(p, watch, 1) for p in (p1, p2)))
        # she comes back while the round is played: her place as she may see it
        back = await p0.must(cmd.Reconnect(player_id="s0"))
        assert back.first_sequence is not None
        shown = await served.get(
            f"/v1/players/s0/tables/{table}", lambda t: t["you"]["connected"] is True
        )
        assert shown["you"]["player_id"] == "s0"
        await others
        await watch.until(settled(1))
        # The read model answers as of its place in the log (last_sequence): the round in play
        # until it has read the round's end. With 3 s clocks the round may be over before the
        # answer is read (a read model lagging on a loaded machine)
        [end] = [e.sequence for e in watch.events if isinstance(e.data, ev.RoundSettled)]
        assert (shown["current_round"] is not None) == (shown["last_sequence"] < end), shown
        timed_out = [(t.player_id, t.phase, t.action) for t in watch.of(ev.PlayerTimedOut)]
        assert timed_out[0] == ("s0", "betting", "dealt_in")
        dealer_blackjack = watch.of(ev.RoundSettled)[0].dealer_blackjack
        her_blackjack = any(
            h.player_id == "s0" and h.outcome == "blackjack" for h in watch.of(ev.HandSettled)
        )
        # no hand played when the peek finds a blackjack; none of hers, nor insurance, when
        # she was dealt one (about 1 shoe in 21: the random shoe decides)
        hers_decided = [(phase, action) for who, phase, action in timed_out if who == "s0"]
        if her_blackjack:
            assert hers_decided == [("betting", "dealt_in")], timed_out
        elif dealer_blackjack:
            assert set(hers_decided) <= {
                ("betting", "dealt_in"),
                ("insurance", "declined_insurance"),
            }, timed_out
        else:
            assert ("playing", "stood") in hers_decided or (
                "insurance",
                "declined_insurance",
            ) in hers_decided, timed_out
    await verify_stream(space, table)
    mine = await served.get(f"/v1/players/s0/rounds/{table}:1", lambda r: r["status"] == "settled")
    decisions = [
        (e["event"], e["decided_by"])
        for e in mine["log"]
        if e.get("decided_by") and e["data"].get("player_id") == "s0"
    ]
    assert ("BetPlaced", "player") in decisions and ("DealRequested", "server") in decisions
    assert all(by == "server" for kind, by in decisions if kind != "BetPlaced"), decisions
    line = await served.get("/v1/players/s0/rounds", lambda a: len(a["rounds"]) == 1)
    [round_line] = line["rounds"]
    wallet = await served.get("/v1/players/s0/wallet")
    [account] = wallet["tables"]
    assert account["available"] == round_line["balance_after"]
    assert account["in_play"] == 0 and account["wagered"] == round_line["wagered"]


async def test_two_players_racing_each_get_exactly_one_answer_in_the_tables_order(
    served: Served,
) -> None:
    """Two players' commands reach the table within milliseconds, from two producers: each
    command is answered once, the table applies them in the order of its log, and a command
    that the first one's events made illegal is refused with a reason and changes nothing."""
    space, table = served.space, "cert-race"
    async with (
        watching(space, table) as watch,
        players(space, table, "r0", "r1") as (p0, p1),
    ):
        await p0.must(cmd.OpenTable(variant="atlantic-city-multi"))
        await seat_and_fund(served, [p0, p1], watch)
        bets = await asyncio.gather(
            p0.do(cmd.PlaceBet(player_id="r0", box=0, amount=1_000)),
            p1.do(cmd.PlaceBet(player_id="r1", box=1, amount=1_000)),
        )
        assert [b.status for b in bets] == ["accepted", "accepted"]
        # exactly one RoundOpened, by whichever bet the table read first
        await watch.until(lambda es: len(watch.of(ev.BetPlaced)) == 2)
        assert len(watch.of(ev.RoundOpened)) == 1
        first = min(bets, key=lambda b: b.first_sequence or 0)
        assert first.first_sequence is not None
        opened = next(e for e in watch.events if e.type == "RoundOpened")
        assert opened.sequence == first.first_sequence
        deals = await asyncio.gather(
            p0.do(cmd.Deal(player_id="r0")), p1.do(cmd.Deal(player_id="r1"))
        )
        assert [d.status for d in deals] == ["accepted", "accepted"]
        [started] = await watch.until(lambda es: [e for e in es if e.type == "DealStarted"])
        # the second Deal dealt: its command wrote the DealStarted
        last = max(deals, key=lambda d: d.first_sequence or 0)
        assert started.causation_id == last.command_id
        await watch.until(
            lambda es: (
                settled(1)(es) or any(e.type in ("TurnStarted", "InsuranceOffered") for e in es)
            )
        )
        if not settled(1)(watch.events):
            # both press Stand on box 0 at once: r1 may not play r0's box
            raced = await asyncio.gather(
                p0.do(cmd.Stand(player_id="r0", box=0)), p1.do(cmd.Stand(player_id="r1", box=0))
            )
            assert raced[1].rejection is not None
            assert raced[1].rejection.code == "not_your_box", raced[1].rejection
            assert raced[1].first_sequence is None
        await asyncio.gather(*(stand_every_turn(p, watch, 1) for p in (p0, p1)))
        await watch.until(settled(1))
    check = await verify_stream(space, table)
    results = [c.command_id for c in await command_log(space, table)]
    assert len(results) == len(set(results)) and check.commands == len(results)


async def test_time_commands_late_early_and_out_of_order(served: Served) -> None:
    """The clock's commands are on the commands topic like any other: one for a deadline
    not reached yet does nothing (and is not remembered, so the real one still acts), the
    real one acts once, and a copy of it that arrives after the round has moved on is
    answered as the copy it is, with nothing done."""
    space, table = served.space, "cert-clock"
    async with (
        watching(space, table) as watch,
        players(space, table, "c0", "c1") as (p0, p1),
    ):
        # 10 s: the early copies must be decided before the deadline, after the bet's answer
        # and a read of RoundOpened, which a loaded machine does not promise within 3 s
        await p0.must(cmd.OpenTable(variant="atlantic-city-multi", overrides={"turn_seconds": 10}))
        await seat_and_fund(served, [p0, p1], watch)
        start = len(watch.events)
        await p0.must(cmd.PlaceBet(player_id="c0", box=0, amount=1_000))
        [opened] = await watch.until(lambda es: watch.of(ev.RoundOpened, start))
        deadline = opened.betting_deadline
        assert deadline is not None
        timer_id = expire_command_id(table, deadline)
        # both sent at once: each must be decided before the 10 s deadline
        early, anyone = await asyncio.gather(
            p1.do(cmd.ExpireTimers(), command_id=timer_id),
            p1.do(cmd.ExpireTimers()),  # a client's own id: nothing due yet
        )
        assert early.status == "accepted" and early.first_sequence is None
        assert anyone.status == "accepted" and anyone.first_sequence is None
        # the clock's own command at the deadline deals c0 in and leaves c1 out
        [started] = await watch.until(lambda es: [e for e in es if e.type == "DealStarted"])
        assert started.causation_id == timer_id
        # the betting deadline's command again, late: the copy of the one that dealt
        late = await p1.do(cmd.ExpireTimers(), command_id=timer_id)
        assert late.status == "accepted" and late.first_sequence is not None
        assert late.first_sequence <= started.sequence
        await stand_every_turn(p0, watch, 1)
        await watch.until(settled(1))
        # a client's ExpireTimers after the round wakes nothing: no deadline is set
        count = len(watch.events)
        idle = await p1.do(cmd.ExpireTimers())
        assert idle.status == "accepted" and idle.first_sequence is None
        assert len(watch.events) == count
    await verify_stream(space, table, resent=[timer_id])


async def test_racing_for_one_seat_and_a_double_click(served: Served) -> None:
    """Two players click the same free seat within milliseconds: one sits, the other is
    refused ``seat_taken`` and nothing of theirs is written. A double click on Stand, the
    hand named, is answered twice: the first stands, the copy is refused."""
    space, table = served.space, "cert-seat-race"
    async with (
        watching(space, table) as watch,
        players(space, table, "q0", "q1") as (p0, p1),
    ):
        await p0.must(cmd.OpenTable(variant="atlantic-city-multi"))
        raced = await asyncio.gather(
            p0.do(cmd.SitDown(player_id="q0", seat=2)), p1.do(cmd.SitDown(player_id="q1", seat=2))
        )
        assert sorted(r.status for r in raced) == ["accepted", "rejected"]
        [lost] = [r for r in raced if r.rejection is not None]
        assert lost.rejection is not None and lost.rejection.code == "seat_taken"
        [taken] = await watch.until(lambda es: watch.of(ev.SeatTaken))
        winner = next(r for r in raced if r.status == "accepted")
        assert taken.player_id == ("q0" if winner is raced[0] else "q1")
    check = await verify_stream(space, table)
    assert [p.seat for p in check.state.players.values()] == [2]


async def test_a_player_left_out_sits_out_until_they_bet_again(served: Served) -> None:
    """Page 002: a player who does not bet or pass in time is "excluded from that particular
    hand". The next round is dealt as soon as the others press Deal, without waiting for the
    one who sits out; their bet brings them back, and the round then waits for their Deal."""
    space, table = served.space, "cert-sit-out"
    async with (
        watching(space, table) as watch,
        players(space, table, "x0", "x1") as (p0, p1),
    ):
        await p0.must(cmd.OpenTable(variant="atlantic-city-multi", overrides={"turn_seconds": 2}))
        await seat_and_fund(served, [p0, p1], watch)
        # the 2 s clocks below: a bet and its Deal go together (must_together)
        await p0.must_together(
            cmd.PlaceBet(player_id="x0", box=0, amount=1_000), cmd.Deal(player_id="x0")
        )
        await stand_every_turn(p0, watch, 1)
        await watch.until(settled(1))
        assert next((t.player_id, t.action) for t in watch.of(ev.PlayerTimedOut)) == (
            "x1",
            "left_out",
        )
        shown = await served.get(
            f"/v1/players/x1/tables/{table}", lambda t: t["you"]["sitting_out"] is True
        )
        assert shown["you"]["available"] == BANKROLL
        # round 2: x0 alone deals at once
        _, dealt = await p0.must_together(
            cmd.PlaceBet(player_id="x0", box=0, amount=1_000), cmd.Deal(player_id="x0")
        )
        started = await watch.until(lambda es: watch.of(ev.DealStarted)[1:])
        assert started[0].boxes == (0,)
        dealt_two = [e for e in watch.events if e.type == "DealStarted"][1]
        assert dealt_two.causation_id == dealt.command_id
        await stand_every_turn(p0, watch, 2)
        await watch.until(settled(2))
        # round 3: x1 bets first and is back; x0's Deal waits for x1's. x1's bet starts the
        # 2 s clock, so the commands after it are sent once the broker has the one before (in
        # this order in the log), not once the table has answered it: three answers in a row
        # can take longer than 2 s on a loaded machine (x1's Deal refused, dealt in by the
        # clock)
        back = await p1.send(cmd.PlaceBet(player_id="x1", box=1, amount=1_000))
        x0 = await p0.send(
            cmd.PlaceBet(player_id="x0", box=0, amount=1_000), cmd.Deal(player_id="x0")
        )
        deal = await p1.send(cmd.Deal(player_id="x1"))
        await p1.accepted(back)
        _, waits = await p0.accepted(x0)
        assert waits.first_sequence == waits.last_sequence  # DealRequested alone: no deal yet
        await p1.accepted(deal)
        started = await watch.until(lambda es: watch.of(ev.DealStarted)[2:])
        assert started[0].boxes == (0, 1)
        await asyncio.gather(*(stand_every_turn(p, watch, 3) for p in (p0, p1)))
        await watch.until(settled(3))
    await verify_stream(space, table)
    shown = await served.get(
        f"/v1/players/x1/tables/{table}", lambda t: t["you"]["sitting_out"] is False
    )
    line = await served.get("/v1/players/x1/rounds", lambda a: len(a["rounds"]) == 1)
    assert [r["round"] for r in line["rounds"]] == [3]


async def test_a_player_who_sits_down_once_the_clock_runs_keeps_the_seat(served: Served) -> None:
    """A table that frees the seat of a player who sat out a round (the operator's option):
    y2 sits down after y0's bet started the betting clock, with less than the page's 15 s
    left. He is left out of that hand ("if you join a table in the middle of a hand, you must
    wait until the round is over"), not sitting out: the round dealt without him does not
    stand him up, and he bets in the next one. (Before the fix the server stood him up when
    the round was settled, his money back in his wallet, having never had his 15 s.)"""
    space, table = served.space, "cert-late-joiner"
    async with (
        watching(space, table) as watch,
        players(space, table, "y0", "y1", "y2") as (p0, p1, late),
    ):
        await p0.must(
            cmd.OpenTable(
                variant="atlantic-city-multi",
                overrides={"turn_seconds": 5, "seat_released_after_rounds_sat_out": 1},
            )
        )
        await seat_and_fund(served, [p0, p1], watch)
        # y0's bet starts the 5 s clock: y1's bet and y2's seat must be received before it
        # runs out, so each is sent once the broker has the one before (in this order in the
        # log), not once the table has answered it (answers in a row can outlast a short
        # clock on a loaded machine); y0's Deal goes with the bet, and waits for y1's
        # decision, to the deadline
        y0 = await p0.send(
            cmd.PlaceBet(player_id="y0", box=0, amount=1_000), cmd.Deal(player_id="y0")
        )
        y1 = await p1.send(cmd.PlaceBet(player_id="y1", box=1, amount=1_000))
        y2 = await late.send(cmd.SitDown(player_id="y2", seat=2))
        await asyncio.gather(p0.accepted(y0), p1.accepted(y1), late.accepted(y2))
        await fund([late], watch)
        await watch.until(lambda es: watch.of(ev.DealStarted))
        assert [(t.player_id, t.action, t.sits_out) for t in watch.of(ev.PlayerTimedOut)] == [
            ("y1", "dealt_in", False),
            ("y2", "left_out", False),
        ]
        await asyncio.gather(*(stand_every_turn(p, watch, 1) for p in (p0, p1)))
        await watch.until(settled(1))
        # round 2, opened by y2's bet on its 5 s clock: y0's and y1's decisions sent as soon
        # as the broker has y2's, not once the table has answered it
        y2 = await late.send(
            cmd.PlaceBet(player_id="y2", box=2, amount=1_000), cmd.Deal(player_id="y2")
        )
        y0, y1 = await asyncio.gather(
            p0.send(cmd.PlaceBet(player_id="y0", box=0, amount=1_000), cmd.Deal(player_id="y0")),
            p1.send(cmd.Pass(player_id="y1")),
        )
        await asyncio.gather(late.accepted(y2), p0.accepted(y0), p1.accepted(y1))
        assert not watch.of(ev.SeatLeft)
        [_, started] = await watch.until(lambda es: watch.of(ev.DealStarted)[1:] and
                                         watch.of(ev.DealStarted))  # fmt: skip
        assert started.boxes == (0, 2)
        await asyncio.gather(*(stand_every_turn(p, watch, 2) for p in (p0, late)))
        await watch.until(settled(2))
    check = await verify_stream(space, table)
    assert set(check.state.players) == {"y0", "y1", "y2"}
    shown = await served.get(f"/v1/players/y2/tables/{table}", lambda t: t["you"] is not None)
    assert shown["you"]["sitting_out"] is False


async def test_a_player_who_sits_down_once_the_clock_runs_holds_no_one_up(served: Served) -> None:
    """Page 002: "if you join a table in the middle of a hand, you must wait until the round
    is over": z2 sits down after z0's bet started the clock; z0 deals and z1 passes, and the
    round is dealt there and then (by z1's Pass), not 15 s later at the deadline, without z2,
    who is neither timed out nor sitting out. (Before the fix the round waited for z2.)"""
    space, table = served.space, "cert-joiner-no-wait"
    async with (
        watching(space, table) as watch,
        players(space, table, "z0", "z1", "z2") as (p0, p1, late),
    ):
        # dealt by z1's Pass, not at the deadline: a 60 s one, that z2's seat and buy-in, z0's
        # Deal and z1's Pass, one answer after another, cannot outlast on a loaded machine
        await p0.must(cmd.OpenTable(variant="atlantic-city-multi", overrides=SLOW_CLOCK))
        await seat_and_fund(served, [p0, p1], watch)
        await p0.must(cmd.PlaceBet(player_id="z0", box=0, amount=1_000))
        await seat_and_fund(served, [late], watch, seats=[2])
        await p0.must(cmd.Deal(player_id="z0"))
        passed = await p1.must(cmd.Pass(player_id="z1"))
        [started] = await watch.until(lambda es: [e for e in es if e.type == "DealStarted"])
        assert started.causation_id == passed.command_id
        assert started.data.boxes == (0,)
        assert not watch.of(ev.PlayerTimedOut)
        await stand_every_turn(p0, watch, 1)
        await watch.until(settled(1))
    await verify_stream(space, table)
    shown = await served.get(f"/v1/players/z2/tables/{table}", lambda t: t["you"] is not None)
    assert shown["you"]["sitting_out"] is False
