"""What each counterpart adds to a stream's sealed snapshot (docs/operations.md, the
``BlackjackSnapshotNearSizeLimit`` alert): a wallet keeps one number per table that ever
cashed out to it, a table one per wallet that ever bought in there.

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_counterpart_bytes [--tables 1000]

One wallet buys in at ``--tables`` atlantic-city-multi tables (uuids for ids) in turn and
cashes each out again (``test_handler_signed_replay.Harness``: the service's processor, signed steps
forwarded as the handlers forward them); the wallet's sealed snapshot is measured after a
tenth of them and after all, and the difference divided by the tables between. Printed:
bytes a counterpart, and how many fit in half of the snapshots' limit (where the alert fires).
"""

from __future__ import annotations

import argparse
import random
import uuid

from blackjack.bus.topics import SNAPSHOT_MAX_BYTES
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.domain import commands as cmd
from blackjack.domain.wallet import BuyIn, WalletDeposit
from tests.unit.test_handler_signed_replay import PLAYER, WALLET, Harness, steps


def cash_out_of(h: Harness, table: str) -> None:
    """The wallet buys in at a new table, and the player withdraws it back to the wallet."""
    h.send(table, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(table, cmd.SitDown(player_id=PLAYER))
    [deposit] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=table, amount=10)))
    [confirm] = steps(h.forward(deposit))
    h.forward(confirm)
    [cash_out] = steps(h.send(table, cmd.Withdraw(player_id=PLAYER, amount=10)))
    h.forward(cash_out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000)
    tables = parser.parse_args().tables
    h, codec = Harness(), SnapshotCodec(b"s" * 32)
    h.send(WALLET, WalletDeposit(player_id=PLAYER, amount=1_000))
    sizes, ids = [], random.Random(7)
    for number in range(tables):
        cash_out_of(h, str(uuid.UUID(int=ids.getrandbits(128))))  # ids that do not compress
        if number + 1 in (tables // 10, tables):
            sizes.append(len(codec.encode(h.store.streams[WALLET])))
    assert len(h.wallet().cashed_out) == tables
    per_counterpart = (sizes[1] - sizes[0]) / (tables - tables // 10)
    print(
        f"{per_counterpart:.1f} bytes a counterpart in a sealed snapshot; half the limit "
        f"({SNAPSHOT_MAX_BYTES // 2:,} bytes) holds {SNAPSHOT_MAX_BYTES / 2 / per_counterpart:,.0f}"
    )


if __name__ == "__main__":
    main()
