"""``blackjack audit`` of a live store whose workers lag on some partitions: money between a
wallet and a shared table that arrived on one side before its cause on the other was folded
is lag, not a violation, but only as much of it as the transfers matched one by one found
waiting on a lagging partition; a lag elsewhere excuses nothing."""

from __future__ import annotations

import pytest

from blackjack.audit.audit import AuditReport, run_audit
from blackjack.audit.conservation import conservation
from blackjack.bus.topics import partition_for
from blackjack.domain import wallet as wl
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import WireEnvelope
from blackjack.projections.rebuild import rebuild
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import (
    PARTITIONS,
    EventsTopic,
    StoreFactory,
    placed,
    play_tables,
    publish,
    to_wire,
)

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

SINGLE, SHARED = "t-1", "t-2"  # partitions 1 and 0 of 3


async def audited(
    topic: EventsTopic,
    stores: StoreFactory,
    seal: ShoeSeal,
    wires: list[WireEnvelope],
    behind: dict[int, int],
) -> AuditReport:
    """The audit of a live store folded to the end of every partition but ``behind``'s, each
    that many records short of its end."""
    ends = await publish(topic, wires)
    stop = {(name, p): end - behind.get(p, 0) for (name, p), end in ends.items()}
    live, scratch = await stores.store(), await stores.store()
    await rebuild(ProjectionWriter(live), topic.bootstrap, topic.name, stop=stop)
    return await run_audit(live, scratch, topic.bootstrap, topic.name, seal)


async def test_a_live_store_with_only_the_shared_table_s_partition_folded_passes_as_lag(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """The table's partition folded to its end, its players' wallets' partitions not yet:
    the buy-ins the table received left wallets whose events are past the live positions.
    Before, the audit of that consistent store failed ("shared tables received ... more than
    the wallet sent"); the crossing is lag, and the same store is a violation to a check that
    is told nothing lags."""
    wires = to_wire(
        play_tables([("t-2", "atlantic-city-multi")], rounds=4, seed=5).envelopes, shoe_seal
    )
    table = partition_for("t-2", PARTITIONS)
    wallets = {partition_for(w.stream_id, PARTITIONS) for w in wires if w.stream_id != "t-2"}
    assert wallets and table not in wallets
    ends = await publish(events_topic, wires)
    stop = {(topic, p): (end if p == table else 0) for (topic, p), end in ends.items()}
    live, scratch = await stores.store(), await stores.store()
    await rebuild(ProjectionWriter(live), events_topic.bootstrap, events_topic.name, stop=stop)
    async with live.reading() as connection:
        violations, _ = await conservation(connection)
    assert violations and all("more than the wallet sent" in v for v in violations)

    report = await run_audit(live, scratch, events_topic.bootstrap, events_topic.name, shoe_seal)
    assert report.ok, report.render()
    assert report.violations == [] and len(report.crossing) == len(violations)
    assert "(lag, the other side not folded yet) t-2-p" in report.render()
    assert "AUDIT PASSED up to the live store's positions" in report.render()


def with_cash_out(
    wires: list[WireEnvelope], player: str, table_id: str, table_sequence: int | None
) -> list[WireEnvelope]:
    """The log with a cash-out of 100.00 from ``table_id`` forged at the end of the player's
    wallet, its balance and its place's id as the handler would write them."""
    wallet = [w for w in wires if w.stream_id == wl.wallet_stream(player)]
    balance = wl.fold_wallet([w.data for w in wallet]).balance  # type: ignore[misc]
    received = wl.CashOutReceived(
        player_id=player,
        table_id=table_id,
        amount=10_000,
        balance_after=balance + 10_000,
        table_sequence=table_sequence,
    )
    forged = placed(
        wallet[-1],
        wallet[-1].sequence + 1,
        data=received,
        type="CashOutReceived",
        schema_version=received.version,
    )
    return [*wires, forged]


@pytest.mark.parametrize(
    "forged",
    [
        # a single-player table pays no wallet, whether its partition lags or not
        (SINGLE, 999, "cash-out from t-1, a single-player table"),
        # one naming no table event (as a release before wrote them) is matched by the
        # totals only: the lag of a partition elsewhere does not explain it
        (SHARED, None, "the wallet received 100.00 more than the tables paid out"),
    ],
)
async def test_a_forged_cash_out_is_not_excused_by_a_lag_elsewhere(
    events_topic: EventsTopic,
    stores: StoreFactory,
    shoe_seal: ShoeSeal,
    forged: tuple[str, int | None, str],
) -> None:
    """A tamper review: 100.00 forged into a wallet passed as lag ("AUDIT PASSED up to the
    live store's positions") while any one partition had a record not folded, the forged
    event itself below the positions."""
    table_id, table_sequence, found = forged
    log = play_tables([(SINGLE, "mini-h17"), (SHARED, "atlantic-city-multi")], rounds=4, seed=5)
    wires = with_cash_out(to_wire(log.envelopes, shoe_seal), "t-2-p0", table_id, table_sequence)
    lagging = partition_for(SINGLE, PARTITIONS)
    assert partition_for(wl.wallet_stream("t-2-p0"), PARTITIONS) != lagging
    report = await audited(events_topic, stores, shoe_seal, wires, {lagging: 1})
    assert sum(report.pending.values()) == 1
    told = report.render()
    assert not report.ok and found in told, told
    assert "AUDIT FAILED" in told
