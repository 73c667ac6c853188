"""``blackjack redrive`` on a real broker, as an operator runs it after a key drill gone wrong:
two handlers of one group holding different keys (one not given the rotation's new key), so
the wallet's handler signs a buy-in's ``Deposit`` under a key the table's handler does not
accept: refused, the money left the wallet and reached no table (so too a buy-in to an id no
table was opened under). With the keys put right, the command lists the stuck steps, sends
them again, the buy-in completes and the other is declined and refunded; run again, nothing
is stuck."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pytest
from prometheus_client import REGISTRY

from blackjack.bus.topics import partition_for
from blackjack.domain import commands as cmd
from blackjack.domain.wallet import BuyIn, WalletDeposit, WalletEvent, fold_wallet, wallet_stream
from blackjack.messages.sealing import ShoeSeal
from tests.integration.conftest import (
    WAIT_S,
    KafkaSpace,
    accept,
    running_handler,
    stream_events,
    wait_for_events,
)

pytestmark = [pytest.mark.integration]


async def blackjack(space: KafkaSpace, key: str, *args: str) -> tuple[int, str]:
    """The command line in its own process (this loop runs the handler it talks to)."""
    env = {**os.environ, **space.env(), "BLACKJACK_SHOE_KEY": key}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "blackjack.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode()


def signed_refused(kind: str) -> float:
    """``blackjack_signed_commands_refused_total`` of this process's handlers."""
    sample = REGISTRY.get_sample_value("blackjack_signed_commands_refused_total", {"type": kind})
    return sample or 0.0


def on(partition: int, prefix: str, partitions: int) -> str:
    """The first id ``prefix-N`` the partitioner puts on ``partition``."""
    return next(
        name for n in range(1000) if partition_for(name := f"{prefix}-{n}", partitions) == partition
    )


async def test_a_buy_in_refused_under_another_key_is_sent_again_and_completes(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=2)
    # the table's handler holds the space's key (its events are read with it), the wallet's
    # only the rotation's new one
    old, new = space.shoe_key, ShoeSeal.new_key_hex()
    refused_before = signed_refused("Deposit")
    async with (
        running_handler(space.config(shoe_key_hex=new)) as first,
        running_handler(space.config(shoe_key_hex=old)) as second,
        space.client() as client,
    ):
        # each woken by its own partitions' changes
        await second.wait_until(lambda: len(second.owned_partitions()) == 1, WAIT_S)
        await first.wait_until(lambda: len(first.owned_partitions()) == 1, WAIT_S)
        [wallet_side] = first.owned_partitions()
        [table_side] = second.owned_partitions()
        table = on(table_side, "redrive-table", space.partitions)
        player = next(
            p
            for n in range(1000)
            if partition_for(wallet_stream(p := f"eve-{n}"), space.partitions) == wallet_side
        )
        wallet = wallet_stream(player)
        await accept(
            client,
            table,
            cmd.OpenTable(variant="atlantic-city-multi"),
            cmd.SitDown(player_id=player),
        )
        await accept(client, wallet, WalletDeposit(player_id=player, amount=1_000))
        # and one to an id no table was opened under, on the same handler's partition
        nowhere = on(table_side, "never-opened", space.partitions)
        for where, amount in ((table, 300), (nowhere, 200)):
            await accept(client, wallet, BuyIn(player_id=player, table_id=where, amount=amount))
        events = await stream_events(space, wallet)
        sent, sent_nowhere = [e for e in events if e.type == "BuyInSent"]
        for buy_in, where in ((sent, table), (sent_nowhere, nowhere)):
            deposit = await client.result(f"{buy_in.event_id}.deposit", WAIT_S, stream_id=where)
            assert deposit.rejection is not None and deposit.rejection.code == "unauthorized"
    # counted for BlackjackMoneyStepRefused (once each transaction's metrics were reported)
    assert signed_refused("Deposit") - refused_before == 2
    # The keys put right: the new one current, the old one accepted (step 2 of a rotation).
    fixed = space.config(shoe_key_hex=new, accepted_shoe_keys_hex=(old,))
    async with running_handler(fixed):
        # the alert's moment: not yet 15 minutes on, the steps are in transit, and the way to
        # send a refused one at once is said (the operations review: `redrive --send` sent
        # nothing for a quarter of an hour, exit 0)
        waiting, out = await blackjack(space, new, "redrive")
        assert waiting == 0, out
        assert "In transit (answers missing for less than 0:15:00, not sent): 2" in out
        assert "--stuck-after 0 sends these too" in out
        listed, out = await blackjack(space, new, "redrive", "--stuck-after", "0")
        assert listed == 1, out
        assert "Steps stuck (no answer 0:00:00 after their cause): 2" in out
        assert f"buy-in 1 of 3.00 USD from {wallet}: its Deposit to {table}" in out
        assert f"buy-in 2 of 2.00 USD from {wallet}: its Deposit to {nowhere}" in out
        assert "Nothing sent: --send sends them again" in out
        sent_again, out = await blackjack(space, new, "redrive", "--stuck-after", "0", "--send")
        assert sent_again == 0, out
        assert f"{sent.event_id}.deposit: accepted" in out
        declined = "declined, no table is open there: its refund follows"
        assert f"{sent_nowhere.event_id}.deposit: {declined}" in out
        closed = {"BuyInCompleted", "BuyInRefunded"}
        await wait_for_events(space, wallet, lambda events: {e.type for e in events} >= closed)
        state = fold_wallet(
            e.data for e in await stream_events(space, wallet) if isinstance(e.data, WalletEvent)
        )
        assert state.balance == 700 and state.pending == ()
        table_events = [e.type for e in await stream_events(space, table)]
        assert table_events.count("FundsDeposited") == 1
        again, out = await blackjack(space, new, "redrive", "--stuck-after", "0")
        assert again == 0, out
        assert "Steps stuck (no answer 0:00:00 after their cause): 0" in out
