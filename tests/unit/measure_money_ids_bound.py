"""How large a stream's snapshot gets with the platform money ids it keeps at its bound
(``BLACKJACK_MONEY_IDS_MAX``, ``domain.platform_money``), and how many ids would pass the
snapshots' 4 MiB limit without it (docs/kafka.md, "Idempotency").

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_money_ids_bound [--ids 10000]

One wallet, through the service's processor (``test_platform_money.Harness``, the default
window of 1,000 answers), takes ``--ids`` platform money commands within the retention, of
three kinds: deposits under uuid ids (accepted), withdrawals under uuid ids (refused
``insufficient_funds``, kept with their code), and withdrawals under ids of the longest kind
(128 random characters, refused). Each line: the sealed snapshot's bytes, its bytes an id
against the same stream without its ids, how many such ids the 4 MiB limit would hold, and
whether the bound refused the next one (``money_ids_full``).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import string
import uuid
from collections.abc import Callable
from datetime import timedelta

from blackjack.bus.topics import SNAPSHOT_MAX_BYTES
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.domain.wallet import WalletWithdraw
from tests.unit.processor_harness import new_processor
from tests.unit.test_platform_money import PLAYER, START, WALLET, Harness, code, deposit

ALPHABET = string.ascii_letters + string.digits + "-_.:"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", type=int, default=10_000)
    count = parser.parse_args().ids
    codec, rng = SnapshotCodec(b"s" * 32), random.Random(7)
    kinds: dict[str, tuple[Callable[[], str], bool]] = {
        "deposits, uuid ids (accepted)": (lambda: str(uuid.UUID(int=rng.getrandbits(128))), True),
        "withdrawals, uuid ids (refused)": (
            lambda: str(uuid.UUID(int=rng.getrandbits(128))),
            False,
        ),
        "withdrawals, 128-character ids (refused)": (
            lambda: "".join(rng.choice(ALPHABET) for _ in range(128)),
            False,
        ),
    }
    for kind, (new_id, take) in kinds.items():
        h = Harness()
        h.processor = new_processor(dedup_window=1000)  # the default window, full
        h.processor.money_ids_max = count
        if not take:
            h.send(WALLET, deposit(1), "first")  # the wallet, so that withdrawals are refused
        for number in range(count - (0 if take else 1)):
            h.now = START + timedelta(seconds=number)  # one a second: all within 7 days
            command = deposit(1) if take else WalletWithdraw(player_id=PLAYER, amount=10**9)
            h.send(WALLET, command, new_id(), sent_at=h.now)
        stream = h.store.streams[WALLET]
        assert len(stream.money) == count
        with_ids = codec.encode(stream)
        without = codec.encode(dataclasses.replace(stream, money={}, money_refused={}))
        per_id = (len(with_ids) - len(without)) / count
        fits = (SNAPSHOT_MAX_BYTES - len(without)) / per_id
        refused = code(h.send(WALLET, deposit(1), new_id(), sent_at=h.now))
        print(
            f"{kind}: {count:,} ids kept, sealed {len(with_ids):,} bytes "
            f"({len(with_ids) / SNAPSHOT_MAX_BYTES:.0%} of the {SNAPSHOT_MAX_BYTES:,} limit), "
            f"{len(without):,} without them ({per_id:.1f} bytes an id); the limit would hold "
            f"{fits:,.0f} such ids; the next one: {refused}"
        )


if __name__ == "__main__":
    main()
