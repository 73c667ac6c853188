"""The soak behind ``test_projection_fold_equivalence``: bigger logs, many random splittings,
the service's projection writer against the writer of 6ea4ece (``fold_equivalence``), on SQLite
and, given ``--pg``, on PostgreSQL; every splitting's two dumps compared byte for byte:

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_fold_equivalence \\
        [--pg URL] [--logs 3] [--rounds 8] [--shared 3] [--splittings 20] [--seed 1]

Each log is ``fold_equivalence.mixed_log`` at another seed (``--rounds`` rounds at each of
``--shared`` shared tables and two single-player ones, the odd tables), some of them with
redelivered events and spread over three partitions. Prints one line a splitting (its batch
sizes, whether the writers refused alike, whether the dumps are equal) and exits 1 at the
first difference, with the first line that differs.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
from pathlib import Path

from tests.integration import fold_equivalence as fe
from tests.integration.conftest_projections import on_server
from tests.integration.measure_read_model import new_store as scratch_store


async def main(
    pg: str | None, *, logs: int, rounds: int, shared: int, splittings: int, seed: int
) -> int:
    rng = random.Random(seed)
    kinds = ["sqlite"] + (["postgresql"] if pg else [])
    made: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for number in range(logs):
                log = fe.mixed_log(rounds, seed=seed + number, shared=shared)
                if number % 2:
                    log = fe.redelivered(log, 0.05, seed=number)
                if number % 3 == 2:
                    log = fe.partitioned(log, 3)
                print(f"log {number}: {len(log)} events", flush=True)
                for _ in range(splittings):
                    sizes = [
                        rng.choice([1, 2, 3, 7, 37, 120, 500]) for _ in range(rng.randint(1, 4))
                    ]
                    records = log[: 150 if min(sizes) < 4 else len(log)]
                    for kind in kinds:
                        old_store = await scratch_store(pg, Path(tmp), kind, made, bounded=False)
                        new_store = await scratch_store(pg, Path(tmp), kind, made, bounded=False)
                        try:
                            old_error, new_error, old, new = await fe.compare(
                                old_store, new_store, fe.batches(records, sizes)
                            )
                        finally:
                            await old_store.close()
                            await new_store.close()
                        same = old == new and old_error == new_error
                        print(
                            f"  {kind:10} {sizes}: refused alike {old_error == new_error}, "
                            f"dumps equal {old == new}",
                            flush=True,
                        )
                        if not same:
                            print(f"    former: {old_error}\n    batch:  {new_error}")
                            print(f"    first difference: {fe.first_difference(old, new)}")
                            return 1
        finally:
            for name in made:
                assert pg is not None
                await on_server(pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", help="a PostgreSQL server's URL (postgresql+asyncpg://...)")
    parser.add_argument("--logs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--shared", type=int, default=3)
    parser.add_argument("--splittings", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sys.exit(
        asyncio.run(
            main(
                args.pg,
                logs=args.logs,
                rounds=args.rounds,
                shared=args.shared,
                splittings=args.splittings,
                seed=args.seed,
            )
        )
    )
