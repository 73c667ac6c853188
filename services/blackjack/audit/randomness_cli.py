"""``blackjack randomness``: the statistical tests of ``audit.randomness`` on shoes drawn now
from the production shuffler, or on the orders that ``ShoeRetired`` revealed in the log.

A revealed order is tested only if it is the one committed to when the shoe was shuffled
(``sha256(salt:order)`` equals the ``commitment`` its ``ShoeRetired`` repeats, as the audit
checks against the ``ShoeShuffled``): an order that does not match proves nothing about the
cards dealt, so it is counted, named and left out, and the verdict is a failure.

Exit codes, as ``replay`` and ``audit``: 0 every test passed; 1 a test failed, or a revealed
order does not match its commitment; 2 bad input (a bad option, an order that is not a shoe, a
store or topic it cannot read); 3 nothing failed but not everything could be tested (a deck
count with too few shoes, or no shoes).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import defaultdict
from collections.abc import Sequence

from aiokafka.errors import KafkaError
from sqlalchemy.exc import SQLAlchemyError

from blackjack.audit.randomness import (
    DEFAULT_ALPHA,
    NotAShoe,
    evaluate,
    minimum_shoes,
    render,
)
from blackjack.domain.events import ShoeRetired
from blackjack.domain.shoe import commitment
from blackjack.error_text import error_text
from blackjack.projection_worker.cli import add_store_options, settings_from
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections.revision import SchemaMismatch

OK, FAILED, BAD_INPUT, UNTESTED = 0, 1, 2, 3
MAX_DECKS = 8  # as the rules allow
READ_TOPIC_TIMEOUT_S = 3600.0  # the whole events topic, from its start
Order = tuple[str, ...]
Retired = tuple[str, ShoeRetired]  # the table's stream id, and its shoe's reveal


def draw(shoes: int, decks: int) -> list[Order]:
    """``shoes`` orders from the production shuffler, exactly as a table draws them."""
    from blackjack.domain.rules import Rules
    from blackjack.rng import csprng_shuffle

    # The shuffler reads only the deck count. model_copy skips the rules' check that a round
    # cannot run out of cards (about dealing, not shuffling), which one deck would fail.
    rules = Rules().model_copy(update={"decks": decks})
    return [csprng_shuffle(rules).order for _ in range(shoes)]


async def revealed_in_store(settings: ProjectionSettings) -> list[Retired]:
    """Every retired shoe in the read model's events table."""
    from sqlalchemy import select

    from blackjack.messages.wire import decode
    from blackjack.projections import schema
    from blackjack.projections.revision import check_schema_to_read
    from blackjack.projections.store import ProjectionStore

    e = schema.events
    query = (
        select(e.c.envelope).where(e.c.type == "ShoeRetired").order_by(e.c.stream_id, e.c.sequence)
    )
    store = ProjectionStore(settings.db_url, existing=True)
    try:
        async with store.reading() as connection:
            command = "blackjack randomness --source store"
            await check_schema_to_read(connection, store.url, command)
            texts = list((await connection.execute(query)).scalars())
    finally:
        await store.close()
    wires = [decode(text.encode()) for text in texts]
    return [(wire.stream_id, wire.data) for wire in wires if isinstance(wire.data, ShoeRetired)]


async def revealed_in_topic(settings: ProjectionSettings) -> list[Retired]:
    """Every retired shoe on the events topic, each event once."""
    from blackjack.messages.wire import decode
    from blackjack.projections.rebuild import read_topic
    from blackjack.projections.writer import Record

    found: dict[tuple[str, int], Retired] = {}

    def keep(records: list[Record]) -> None:
        for record in records:
            if b"ShoeRetired" not in record.value:  # decode only the few that can be one
                continue
            wire = decode(record.value)
            if isinstance(wire.data, ShoeRetired):
                found[(wire.stream_id, wire.sequence)] = (wire.stream_id, wire.data)

    await read_topic(
        settings.bootstrap,
        settings.events_topic,
        keep,
        security=settings.security,
        timeout=READ_TOPIC_TIMEOUT_S,
    )
    return [found[key] for key in sorted(found)]


def by_decks(orders: Sequence[Order]) -> dict[int, list[Order]]:
    """Orders grouped by deck count; a length that is no whole number of decks is refused."""
    groups: dict[int, list[Order]] = defaultdict(list)
    for order in orders:
        decks, rest = divmod(len(order), 52)
        if rest or not decks:
            raise NotAShoe(f"an order of {len(order)} cards is no whole number of decks")
        groups[decks].append(order)
    return dict(sorted(groups.items()))


def _bad(message: str) -> int:
    print(f"blackjack randomness: {message}", file=sys.stderr)
    return BAD_INPUT


def _check_options(args: argparse.Namespace) -> str | None:
    """What is wrong with the options, or None."""
    if not 0 < args.alpha < 0.5:
        return f"--alpha must be between 0 and 0.5, not {args.alpha}"
    if args.decks is not None and not 1 <= args.decks <= MAX_DECKS:
        return f"--decks must be 1 to {MAX_DECKS}, not {args.decks}"
    if args.source != "shuffler":
        return None if args.shoes is None else "--shoes is for --source shuffler only"
    decks = args.decks or MAX_DECKS
    if args.shoes is None:
        return "--shoes N is needed to draw shoes from the shuffler"
    if args.shoes < minimum_shoes(decks):
        return (
            f"--shoes must be at least {minimum_shoes(decks)} for {decks} deck(s), not {args.shoes}"
        )
    return None


def _orders(args: argparse.Namespace) -> tuple[list[Order], list[str]]:
    """The orders to test, and the shoes left out as not matching their commitment."""
    if args.source == "shuffler":
        return draw(args.shoes, args.decks or MAX_DECKS), []
    settings = settings_from(args)
    source = revealed_in_topic if args.source == "kafka" else revealed_in_store
    return committed(asyncio.run(source(settings)))


def committed(revealed: Sequence[Retired]) -> tuple[list[Order], list[str]]:
    """The orders that match their commitment, and the shoes (``stream shoe N``) that do not."""
    orders: list[Order] = []
    unmatched: list[str] = []
    for stream_id, shoe in revealed:
        if commitment(shoe.order, shoe.salt) == shoe.commitment:
            orders.append(shoe.order)
        else:
            unmatched.append(f"{stream_id} shoe {shoe.shoe}")
    return orders, unmatched


def _randomness(args: argparse.Namespace) -> int:
    problem = _check_options(args)
    if problem:
        return _bad(problem)
    started = time.monotonic()
    try:
        orders, unmatched = _orders(args)
    except SchemaMismatch as error:  # the store at another revision (``revealed_in_store``)
        return _bad(str(error))
    # a store or topic missing or down, unmigrated, an envelope it cannot decode, no driver
    except (
        OSError,
        TimeoutError,
        LookupError,
        ValueError,
        ImportError,
        SQLAlchemyError,
        KafkaError,
    ) as error:
        # not a verdict on the shuffle: exit 1 must mean that a test failed
        problem = error_text(error)
        return _bad(f"cannot read the shoes from the {args.source}: {problem}")
    try:
        groups = by_decks(orders)
    except NotAShoe as error:
        return _bad(str(error))
    if args.decks is not None:
        groups = {d: found for d, found in groups.items() if d == args.decks}
    origin = (
        "drawn from blackjack.rng.csprng_shuffle"
        if args.source == "shuffler"
        else (f"revealed by ShoeRetired ({args.source})")
    )
    found = ", ".join(f"{len(g)} of {d} deck(s)" for d, g in groups.items()) or "none"
    print(f"Shoes {origin}: {found}")
    if unmatched:
        named = ", ".join(unmatched[:10]) + (", ..." if len(unmatched) > 10 else "")
        print(
            f"{len(unmatched)} revealed order(s) do not match the commitment published when "
            f"the shoe was shuffled, left out (they prove nothing of the cards dealt; "
            f"`blackjack audit` reports them): {named}"
        )
    codes = [_test_group(group, decks, args.alpha) for decks, group in groups.items()]
    if not codes:
        codes = [UNTESTED]
    if unmatched:
        codes.append(FAILED)
    # a failed test first: a bad order in one deck count must not hide it in another
    code = FAILED if FAILED in codes else BAD_INPUT if BAD_INPUT in codes else max(codes)
    verdict = {OK: "RANDOMNESS OK", FAILED: "RANDOMNESS FAILED", UNTESTED: "RANDOMNESS NOT TESTED"}
    print(f"{verdict.get(code, 'RANDOMNESS NOT TESTED')} ({time.monotonic() - started:.1f} s)")
    return code


def _test_group(orders: list[Order], decks: int, alpha: float) -> int:
    print()
    if len(orders) < minimum_shoes(decks):
        print(
            f"{len(orders)} shoe(s) of {decks} deck(s): too few, at least "
            f"{minimum_shoes(decks)} are needed: not tested"
        )
        return UNTESTED
    try:
        report = evaluate(orders, decks, alpha)
    except NotAShoe as error:
        return _bad(str(error))
    print(render(report))
    return OK if report.passed else FAILED


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "randomness",
        help="statistical tests of the shuffle (rank by position, origin x destination, "
        "adjacent ranks, a tracked card, ten-values at the front, repeated shoes) on fresh "
        "shoes or the revealed ones",
    )
    parser.add_argument(
        "--source",
        choices=("shuffler", "store", "kafka"),
        default="shuffler",
        help="draw --shoes from the production shuffler (default), or test the orders "
        "revealed by ShoeRetired in the read-model store or on the events topic",
    )
    parser.add_argument("--shoes", type=int, help="how many shoes to draw (--source shuffler)")
    parser.add_argument(
        "--decks",
        type=int,
        help=f"decks per shoe (default {MAX_DECKS}; with store or kafka: test only this count)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=DEFAULT_ALPHA,
        help=f"significance level of each test (default {DEFAULT_ALPHA}: run on batch after "
        "batch, five tests at 0.05 would fail a perfect shuffle one run in 4)",
    )
    add_store_options(parser, reads_the_broker=True)  # --source kafka
    parser.set_defaults(handler=_randomness)
