"""The shuffle's statistical tests (``blackjack randomness``): perfect shuffles pass, each kind
of broken shuffle is caught by the test aimed at it, bad input is refused. Every shoe here
comes from a seeded ``random.Random`` (deterministic), except the production shuffler's,
which is held to an alpha of 1e-9 so that it cannot fail by chance."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import insert

from blackjack.audit import randomness_cli
from blackjack.audit.randomness import (
    DEFAULT_ALPHA,
    NotAShoe,
    RandomnessReport,
    evaluate,
    minimum_shoes,
    render,
)
from blackjack.cli import main
from blackjack.domain import events as ev
from blackjack.domain.cards import fresh_shoe, is_ten_value
from blackjack.domain.shoe import commitment
from blackjack.messages.wire import WireEnvelope, encode
from blackjack.projections import schema
from blackjack.projections.store import ProjectionStore

Shuffler = Callable[[random.Random, int], tuple[str, ...]]
STRICT = 1e-9


def fair(rng: random.Random, decks: int) -> tuple[str, ...]:
    order = list(fresh_shoe(decks))
    rng.shuffle(order)  # Fisher-Yates, as the production shuffler
    return tuple(order)


def naive(rng: random.Random, decks: int) -> tuple[str, ...]:
    """Swap each place with any place (not only a later one): n^n ways onto n! orders."""
    order = list(fresh_shoe(decks))
    for i in range(len(order)):
        j = rng.randrange(len(order))
        order[i], order[j] = order[j], order[i]
    return tuple(order)


def cut(rng: random.Random, decks: int) -> tuple[str, ...]:
    """The fresh order cut at a random place, never shuffled."""
    order = fresh_shoe(decks)
    at = rng.randrange(len(order))
    return order[at:] + order[:at]


def tens_to_the_back(rng: random.Random, decks: int) -> tuple[str, ...]:
    """A fair shuffle, then each ten-value among the first five cards swapped with a card
    of the second half."""
    order = list(fair(rng, decks))
    for i in range(5):
        if is_ten_value(order[i]):
            j = rng.randrange(len(order) // 2, len(order))
            order[i], order[j] = order[j], order[i]
    return tuple(order)


def shoes(shuffle: Shuffler, count: int, decks: int, seed: int) -> list[tuple[str, ...]]:
    rng = random.Random(seed)
    return [shuffle(rng, decks) for _ in range(count)]


def p_values(report: RandomnessReport) -> dict[str, float]:
    return {test.name.split(" ")[0]: test.p_value for test in report.tests}


@pytest.mark.parametrize(("decks", "count"), [(1, 22), (1, 3000), (2, 500), (6, 300), (8, 200)])
def test_fair_shuffles_pass_every_test(decks: int, count: int) -> None:
    report = evaluate(shoes(fair, count, decks, seed=decks * 7919 + count), decks)
    assert report.passed, render(report)
    assert [t.name for t in report.tests] == [
        "rank at position",
        "origin x destination",
        "adjacent ranks",
        f"tracked card {fresh_shoe(decks)[-1]}",
        "ten-values at the front",
        "repeated shoes",
    ]


def test_the_production_shuffler_passes() -> None:
    for decks, count in ((1, 2000), (8, 300)):
        report = evaluate(randomness_cli.draw(count, decks), decks, STRICT)
        assert report.passed, render(report)


def test_the_naive_swap_is_caught_by_where_cards_end_up() -> None:
    """Its bias is a drift of a few tens of percent in where a card lands: visible with one
    deck and 5000 shoes, and largest for the fresh order's last card."""
    found = p_values(evaluate(shoes(naive, 5000, 1, seed=1), 1))
    assert found["tracked"] < 1e-12, found
    assert found["rank"] < DEFAULT_ALPHA, found


def test_the_naive_swap_is_caught_sooner_by_where_cards_came_from() -> None:
    """The statistics review: where each card started against where it ended catches the
    naive swap with 400 one-deck shoes (the tracked card needs about 1,300)."""
    found = p_values(evaluate(shoes(naive, 400, 1, seed=4), 1))
    assert found["origin"] < 1e-6, found


def test_a_shoe_dealt_twice_fails_the_repeats() -> None:
    """A generator seeded again the same way deals the same order: no count by place or rank
    sees it, the repeats do."""
    orders = shoes(fair, 100, 1, seed=5)
    report = evaluate([*orders, orders[17]], 1)
    assert p_values(report)["repeated"] < 1e-50 and not report.passed, render(report)


def test_a_cut_instead_of_a_shuffle_is_caught_by_adjacent_ranks() -> None:
    report = evaluate(shoes(cut, 100, 6, seed=2), 6)
    found = p_values(report)
    assert found["adjacent"] < 1e-100, render(report)
    assert not report.passed


def test_tens_kept_from_the_front_are_caught_by_the_front_count() -> None:
    report = evaluate(shoes(tens_to_the_back, 500, 6, seed=3), 6)
    found = p_values(report)
    assert found["ten-values"] < 1e-9, render(report)
    assert not report.passed


@pytest.mark.parametrize(
    ("spoil", "named"),
    [
        (lambda o: tuple("AH" if c == "AS" else c for c in o), "extra ['AH'], missing ['AS']"),
        (lambda o: o[:-1], "51 cards"),
        (lambda o: (*o, "AS"), "53 cards; extra ['AS']"),
    ],
)
def test_an_order_that_is_not_a_shoe_is_refused(
    spoil: Callable[[tuple[str, ...]], tuple[str, ...]], named: str
) -> None:
    orders = shoes(fair, 30, 1, seed=4)
    orders[17] = spoil(orders[17])
    with pytest.raises(NotAShoe, match=r"order 17 is not a permutation of 1 deck") as error:
        evaluate(orders, 1)
    assert named in str(error.value)


def test_too_few_shoes_or_a_bad_alpha_are_refused() -> None:
    assert minimum_shoes(1) == 22 and minimum_shoes(8) == 3
    with pytest.raises(ValueError, match="too few: the tests need at least 22"):
        evaluate(shoes(fair, 21, 1, seed=5), 1)
    with pytest.raises(ValueError, match="alpha"):
        evaluate(shoes(fair, 30, 1, seed=5), 1, alpha=0)


# ---- the command ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--shoes", "0", "--decks", "1"],
        ["--shoes", "-5"],
        ["--shoes", "21", "--decks", "1"],
        ["--decks", "1"],
        ["--shoes", "100", "--decks", "9"],
        ["--shoes", "100", "--decks", "0"],
        ["--shoes", "100", "--alpha", "0"],
        ["--shoes", "100", "--alpha", "0.7"],
        ["--source", "store", "--shoes", "100"],
    ],
)
def test_the_command_refuses_bad_options(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["randomness", *argv]) == 2
    assert capsys.readouterr().err.startswith("blackjack randomness: --")


def test_the_command_passes_the_production_shuffler(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["randomness", "--shoes", "200", "--decks", "2", "--alpha", "1e-9"]) == 0
    out = capsys.readouterr().out
    assert "200 of 2 deck(s)" in out and out.splitlines()[-1].startswith("RANDOMNESS OK")


def test_the_command_fails_a_broken_shuffler(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(randomness_cli, "draw", lambda n, d: shoes(cut, n, d, seed=6))
    assert main(["randomness", "--shoes", "50", "--decks", "4"]) == 1
    out = capsys.readouterr().out
    assert "adjacent ranks" in out and "FAIL" in out and "RANDOMNESS FAILED" in out


def _retired(
    stream_id: str, shoe: int, order: tuple[str, ...], committed: tuple[str, ...] | None = None
) -> dict[str, object]:
    """A row of the read model's events table holding a ShoeRetired, committed to ``order``
    (or to ``committed``: a reveal that does not match its commitment)."""
    promised = commitment(order if committed is None else committed, "s")
    event = ev.ShoeRetired(shoe=shoe, commitment=promised, cards_dealt=20, order=order, salt="s")
    wire = WireEnvelope(
        event_id=f"{stream_id}-{shoe}",
        type=event.type,
        schema_version=event.version,
        stream_id=stream_id,
        sequence=shoe,
        occurred_at=datetime(2026, 5, 2, tzinfo=UTC),
        data=event,
    )
    return {
        "stream_id": stream_id,
        "sequence": shoe,
        "event_id": wire.event_id,
        "type": event.type,
        "round": None,
        "occurred_at": wire.occurred_at,
        "topic": "blackjack.events",
        "kafka_partition": 0,
        "kafka_offset": shoe,
        "envelope": encode(wire).decode(),
    }


def _store_with(
    tmp_path: Path, orders: list[tuple[str, ...]], more: list[dict[str, object]] | None = None
) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'read.db'}"

    async def fill() -> None:
        store = ProjectionStore(url)
        await store.migrate()
        rows = [_retired(f"table-{i % 3}", i + 1, order) for i, order in enumerate(orders)]
        rows += more or []
        async with store.engine.begin() as connection:
            await connection.execute(insert(schema.events), rows)
        await store.close()

    asyncio.run(fill())
    return url


def test_a_revealed_order_that_is_not_the_one_committed_to_fails_and_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reveal proves the cards dealt only if it matches the commitment published at the
    shuffle: one that does not is named, left out of the statistics, and fails the verdict,
    even though the orders tested pass."""
    orders = shoes(fair, 40, 2, seed=7)
    swapped = (orders[0][1], orders[0][0], *orders[0][2:])
    forged = _retired("table-9", 99, swapped, committed=orders[0])
    url = _store_with(tmp_path, orders, [forged])
    argv = ["randomness", "--source", "store", "--db-url", url, "--alpha", "1e-9"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "Shoes revealed by ShoeRetired (store): 40 of 2 deck(s)" in out
    assert "1 revealed order(s) do not match the commitment" in out and "table-9 shoe 99" in out
    assert "RANDOMNESS FAILED" in out


def test_the_command_tests_the_shoes_revealed_in_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Grouped by deck count; a count with too few shoes is reported as not tested (exit 3),
    or left out with --decks."""
    url = _store_with(tmp_path, shoes(fair, 40, 2, seed=7) + shoes(fair, 5, 1, seed=8))
    assert main(["randomness", "--source", "store", "--db-url", url]) == 3
    out = capsys.readouterr().out
    assert "Shoes revealed by ShoeRetired (store): 5 of 1 deck(s), 40 of 2 deck(s)" in out
    assert "5 shoe(s) of 1 deck(s): too few, at least 22 are needed: not tested" in out
    assert "40 shoes of 2 deck(s) (104 cards)" in out
    argv = ["randomness", "--source", "store", "--db-url", url, "--decks", "2", "--alpha", "1e-9"]
    assert main(argv) == 0


def test_a_store_it_cannot_read_is_no_failed_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The diff review: an unreachable or unmigrated store exited 1, which says that a test
    of the shuffle failed."""
    for url in (
        f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}",  # never migrated: no events table
        "postgresql+asyncpg://nobody:x@127.0.0.1:1/none",  # nothing listens
    ):
        assert main(["randomness", "--source", "store", "--db-url", url]) == 2
        assert "cannot read the shoes from the store" in capsys.readouterr().err


def test_the_command_refuses_a_revealed_order_that_is_not_a_shoe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orders = shoes(fair, 30, 1, seed=9)
    orders[3] = ("AS", *orders[3][1:]) if orders[3][0] != "AS" else ("KC", *orders[3][1:])
    url = _store_with(tmp_path, orders)
    assert main(["randomness", "--source", "store", "--db-url", url]) == 2
    assert "is not a permutation of 1 deck(s)" in capsys.readouterr().err


def test_the_command_reads_each_revealed_shoe_on_the_topic_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What --source kafka hands to the tests, without a broker: every ShoeRetired on the
    events topic once (a record read twice is one shoe), nothing else."""
    from blackjack.domain.wallet import WalletDeposited, wallet_stream
    from blackjack.projections import rebuild
    from blackjack.projections.writer import Record

    deposited = WalletDeposited(player_id="wendy", amount=500, balance_after=500)
    other = WireEnvelope(
        event_id="w-1",
        type=deposited.type,
        schema_version=deposited.version,
        stream_id=wallet_stream("wendy"),
        sequence=1,
        occurred_at=datetime(2026, 5, 2, tzinfo=UTC),
        data=deposited,
    )
    values = [encode(other)]
    for i, order in enumerate(shoes(fair, 30, 3, seed=10)):
        values.append(str(_retired("table-1", i + 1, order)["envelope"]).encode())
    values.append(values[5])  # delivered again

    async def read_topic(
        bootstrap: str, topic: str, keep: Callable[..., object], **_: object
    ) -> None:
        keep([Record(topic, 0, offset, value) for offset, value in enumerate(values)])

    monkeypatch.setattr(rebuild, "read_topic", read_topic)
    assert main(["randomness", "--source", "kafka", "--alpha", "1e-9"]) == 0
    out = capsys.readouterr().out
    assert "Shoes revealed by ShoeRetired (kafka): 30 of 3 deck(s)" in out


def test_a_perfect_shuffle_fails_each_test_about_as_often_as_alpha_says() -> None:
    """The without-replacement corrections keep the tests honest: 200 seeded runs of 40
    one-deck shoes, each test rejected at 5 % in 2-9 % of them (10 of 200 expected)."""
    runs = [evaluate(shoes(fair, 40, 1, seed), 1, alpha=0.05) for seed in range(200)]
    for name in [test.name for test in runs[0].tests if test.df]:  # not the repeats
        rejected = sum(not t.passed for run in runs for t in run.tests if t.name == name)
        assert 4 <= rejected <= 18, (name, rejected)


def test_a_topic_that_is_not_there_is_no_failed_test(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second review: a missing events topic (``UnknownTopic``, a LookupError) still
    ended in a traceback and exit 1, which says that a test of the shuffle failed."""
    from blackjack.projections import rebuild

    async def read_topic(bootstrap: str, topic: str, *_: object, **__: object) -> None:
        raise rebuild.UnknownTopic(f"no topic {topic} on {bootstrap}")

    monkeypatch.setattr(rebuild, "read_topic", read_topic)
    assert main(["randomness", "--source", "kafka"]) == 2
    assert "cannot read the shoes from the kafka: UnknownTopic" in capsys.readouterr().err
