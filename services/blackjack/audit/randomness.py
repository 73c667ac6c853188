"""Statistical tests of shoe orders: is the shuffle unbiased? (GLI-19 asks a lab to check.)

Pure: a list of shoe orders in, a report out. Counting is exact (integers, and the chi-square
sums in fractions); floats appear only for the statistics handed to ``scipy.stats``.

Every order is a uniformly random permutation of ``fresh_shoe(decks)`` under the null
hypothesis. The cards within one shoe are drawn without replacement, so the counts of one
shoe are hypergeometric rather than multinomial: their covariance is the multinomial one
(with both margins of the table fixed) times ``N / (N - 1)`` for a shoe of ``N`` cards. The
Pearson statistics are scaled back by ``(N - 1) / N`` (the tracked card: ``(N - 1) / (N - D)``)
so that they follow their chi-square distributions; without it a perfect shuffle of one deck
would fail about twice as often as ``alpha`` says.

The tests, each aimed at a kind of broken shuffle:

* rank at position: positions in bins of consecutive places x 13 ranks (a shuffle whose
  permutation is biased, such as swapping each card with any position instead of Fisher-Yates);
* origin x destination: where each card started in the fresh order against where it ended
  up (the most sensitive to a permutation biased by position: the naive swap, an off-by-one
  Fisher-Yates);
* adjacent ranks: the rank of each card against the next one's (a cut or a riffle that leaves
  runs of the fresh order together);
* tracked card: where the last card of the fresh order ends up (the naive swap's bias is
  largest for it; the first card ends up exactly uniform there);
* ten-values at the front: how many of the first cards dealt are worth ten (a shoe stacked for
  or against the dealer where it matters);
* repeated shoes: the same order twice (a generator seeded again the same way).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import ceil, exp, expm1, lgamma

from blackjack.domain.cards import RANKS, fresh_shoe, is_ten_value

DEFAULT_ALPHA = 0.001
"""Per test. A lab runs this again and again (every new batch of production shoes); at 0.001
five tests a run fail by chance about once in 200 runs, rather than one run in 4 at 0.05,
and a real bias still fails by many orders of magnitude once there are enough shoes."""

MIN_EXPECTED = 5
"""The usual floor for a chi-square approximation: bins are merged until every cell's expected
count reaches it."""

FRONT_CARDS = 26
"""The first half-deck: the cards of the first two or three rounds at a full table, dealt
from every shoe whatever its penetration."""

POSITION_BINS = 52
"""At most one bin a place of a one-deck shoe: more, narrower bins of a bigger shoe add cells
with small expected counts, whose heavy tail fails a perfect shuffle more often than alpha."""

TRACKED_BINS = 13
"""At most this many position bins for the tracked card: a biased shuffle moves a card by a
drift over the shoe, which a few wide bins catch with fewer degrees of freedom."""

ORIGIN_BINS = 13
"""Bins of where a card started (4 places of a deck each) and where it ended up: 144
degrees of freedom, every cell expecting 4 x decks per shoe."""

_RANK_INDEX = {rank: index for index, rank in enumerate(RANKS)}
_KINDS = len(RANKS)


class NotAShoe(ValueError):
    """An order that is not a permutation of the decks' cards: nothing to test."""


@dataclass(frozen=True)
class TestResult:
    name: str
    how: str
    """the binning or the counted cards, in a few words"""
    statistic: float
    df: int
    p_value: float
    alpha: float

    @property
    def passed(self) -> bool:
        return self.p_value >= self.alpha


@dataclass(frozen=True)
class RandomnessReport:
    decks: int
    shoes: int
    alpha: float
    tests: tuple[TestResult, ...]

    @property
    def passed(self) -> bool:
        return all(test.passed for test in self.tests)


def minimum_shoes(decks: int) -> int:
    """The fewest shoes every test can be run on with its expected counts at the floor."""
    size, copies = 52 * decks, 4 * decks
    fewest = 1
    # adjacent ranks: the smallest cell, a rank followed by the same rank
    while fewest * copies * (copies - 1) < MIN_EXPECTED * (size - 1):
        fewest += 1
    # origin x destination: 4 x decks cards of a starting bin, 4 x decks places of a bin
    while fewest * 16 * decks * decks < MIN_EXPECTED * size:
        fewest += 1
    # rank at position and tracked card: at least two bins each
    while fewest * (size // 2) < MIN_EXPECTED * _KINDS or fewest * decks < 2 * MIN_EXPECTED:
        fewest += 1
    return fewest


def evaluate(
    orders: Sequence[Sequence[str]], decks: int, alpha: float = DEFAULT_ALPHA
) -> RandomnessReport:
    """Every test on ``orders``, each a permutation of ``fresh_shoe(decks)``; raises
    ``NotAShoe`` on an order that is not one, ``ValueError`` on too few orders."""
    if decks < 1:
        raise ValueError(f"decks must be at least 1, not {decks}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
    check_orders(orders, decks)
    if len(orders) < minimum_shoes(decks):
        raise ValueError(
            f"{len(orders)} shoe(s) of {decks} deck(s) are too few: the tests need at least "
            f"{minimum_shoes(decks)}"
        )
    ranks = [[_RANK_INDEX[card[0]] for card in order] for order in orders]
    origin = _origins(decks)
    origins = [[origin[card] for card in order] for order in orders]
    return RandomnessReport(
        decks=decks,
        shoes=len(orders),
        alpha=alpha,
        tests=(
            rank_at_position(ranks, alpha),
            origin_destination(origins, alpha),
            adjacent_ranks(ranks, alpha),
            tracked_card(orders, decks, alpha),
            front_ten_values(orders, decks, alpha),
            repeated_shoes(orders, decks, alpha),
        ),
    )


def _origins(decks: int) -> dict[str, int]:
    """Each card's origin bin: its place in a deck of the fresh order (every deck of
    ``fresh_shoe`` is in the same order), in 13 bins of 4."""
    one_deck = fresh_shoe(decks)[:52]
    return {card: place * ORIGIN_BINS // 52 for place, card in enumerate(one_deck)}


def check_orders(orders: Sequence[Sequence[str]], decks: int) -> None:
    expected = Counter(fresh_shoe(decks))
    for index, order in enumerate(orders):
        if len(order) != len(fresh_shoe(decks)) or Counter(order) != expected:
            raise NotAShoe(
                f"order {index} is not a permutation of {decks} deck(s): {_diff(order, expected)}"
            )


def _diff(order: Sequence[str], expected: Counter[str]) -> str:
    found = Counter(order)
    extra, missing = sorted((found - expected).elements()), sorted((expected - found).elements())
    return f"{len(order)} cards; extra {extra[:5] or 'none'}, missing {missing[:5] or 'none'}"


def rank_at_position(ranks: Sequence[Sequence[int]], alpha: float) -> TestResult:
    """Positions grouped in consecutive bins x 13 ranks; every rank is 1/13 of each bin."""
    shoes, size = len(ranks), len(ranks[0])
    widest = ceil(MIN_EXPECTED * _KINDS / shoes)  # expected shoes * width / 13 >= 5
    bins = _bins(size, min(POSITION_BINS, size // widest))
    statistic = _groups_by_place(ranks, _KINDS, bins)
    return _result(
        "rank at position",
        f"{len(bins)} bins of {_widths(bins)} place(s) x 13 ranks",
        statistic,
        (len(bins) - 1) * (_KINDS - 1),
        alpha,
    )


def origin_destination(origins: Sequence[Sequence[int]], alpha: float) -> TestResult:
    """Where each card started in the fresh order (its place in its deck, 13 bins of 4)
    against where it ended up (13 bins of consecutive places). A permutation biased by
    position (the naive swap, an off-by-one Fisher-Yates) moves cards from where they were:
    with one deck this needs about 170 shoes to catch the naive swap where the tracked
    card needs about 1,300 (the copies of a card in a bigger shoe start in different places
    and their drifts partly cancel, as for the tracked card)."""
    size = len(origins[0])
    statistic = _groups_by_place(origins, ORIGIN_BINS, _bins(size, ORIGIN_BINS))
    return _result(
        "origin x destination",
        f"13 bins of 4 places in a deck x 13 bins of {size // ORIGIN_BINS} places",
        statistic,
        (ORIGIN_BINS - 1) ** 2,
        alpha,
    )


def _groups_by_place(groups: Sequence[Sequence[int]], kinds: int, bins: list[int]) -> Fraction:
    """Pearson's statistic of (bin of the place) x (group of the card in it), ``kinds`` groups
    of equal size, scaled by (N - 1) / N: within a shoe both margins are fixed and the
    counts are hypergeometric (a random bijection of cards to places)."""
    shoes, size = len(groups), len(groups[0])
    counts = [[0] * kinds for _ in range(len(bins))]
    where = [b for b, width in enumerate(bins) for _ in range(width)]
    for shoe in groups:
        for position, group in enumerate(shoe):
            counts[where[position]][group] += 1
    statistic = sum(
        (
            _pearson(row, [Fraction(shoes * width, kinds)] * kinds)
            for row, width in zip(counts, bins, strict=True)
        ),
        Fraction(0),
    )
    return statistic * Fraction(size - 1, size)


def adjacent_ranks(ranks: Sequence[Sequence[int]], alpha: float) -> TestResult:
    """Rank of each card x rank of the next, the last card followed by the first (so each
    shoe's table has both margins fixed). Not a test of independence: drawn without
    replacement, a rank follows itself less often than it follows another, and the expected
    counts say so exactly. Within a shoe the table's symmetric part (a then b, plus b then a)
    has the covariance of a multinomial, its antisymmetric part N/(N-2) times it; weighting
    each part by its own variance gives a statistic with 144 degrees of freedom exactly
    (Pearson's sum averages 78 + 66 N/(N-2), 146.6 for one deck: no single factor makes
    both parts right)."""
    shoes, size = len(ranks), len(ranks[0])
    copies = size // _KINDS
    counts = [[0] * _KINDS for _ in range(_KINDS)]
    for shoe in ranks:
        previous = shoe[-1]
        for rank in shoe:
            counts[previous][rank] += 1
            previous = rank
    # per shoe: size pairs, each (a, b) with probability copies * (copies - [a == b]) / (N (N-1))
    other = Fraction(shoes * copies * copies, size - 1)
    same = Fraction(shoes * copies * (copies - 1), size - 1)
    d = [[counts[a][b] - (same if a == b else other) for b in range(_KINDS)] for a in range(_KINDS)]
    antisymmetric = Fraction(size - 2, size)
    statistic = sum((d[a][a] ** 2 / same for a in range(_KINDS)), Fraction(0)) + sum(
        (
            ((d[a][b] + d[b][a]) ** 2 + antisymmetric * (d[a][b] - d[b][a]) ** 2) / (2 * other)
            for a in range(_KINDS)
            for b in range(a + 1, _KINDS)
        ),
        Fraction(0),
    )
    return _result(
        "adjacent ranks",
        "13 x 13 ranks of each card and the next, circular",
        statistic,
        (_KINDS - 1) ** 2,
        alpha,
    )


def tracked_card(orders: Sequence[Sequence[str]], decks: int, alpha: float) -> TestResult:
    """Where the copies of the fresh order's last card end up: uniform over the places."""
    card = fresh_shoe(decks)[-1]
    shoes, size = len(orders), len(orders[0])
    widest = ceil(MIN_EXPECTED * size / (shoes * decks))  # expected shoes*decks*width/N >= 5
    bins = _bins(size, min(TRACKED_BINS, size // widest))
    where = [b for b, width in enumerate(bins) for _ in range(width)]
    counts = [0] * len(bins)
    for order in orders:
        for position, code in enumerate(order):
            if code == card:
                counts[where[position]] += 1
    expected = [Fraction(shoes * decks * width, size) for width in bins]
    return _result(
        f"tracked card {card}",
        f"{len(bins)} bins of {_widths(bins)} place(s), {decks} cop{'y' if decks == 1 else 'ies'}",
        _pearson(counts, expected) * Fraction(size - 1, size - decks),
        len(bins) - 1,
        alpha,
    )


def front_ten_values(orders: Sequence[Sequence[str]], decks: int, alpha: float) -> TestResult:
    """Ten-values among the first cards of every shoe against the hypergeometric mean and
    variance: (sum - mean)^2 / variance, chi-square with one degree of freedom (two-sided)."""
    shoes, size = len(orders), len(orders[0])
    tens, front = 16 * decks, min(FRONT_CARDS, size // 2)
    found = sum(1 for order in orders for card in order[:front] if is_ten_value(card))
    mean = Fraction(shoes * front * tens, size)
    variance = mean * Fraction(size - tens, size) * Fraction(size - front, size - 1)
    return _result(
        "ten-values at the front",
        f"{found} in the first {front} cards of {shoes} shoes, expected {float(mean):.1f}",
        (found - mean) ** 2 / variance,
        1,
        alpha,
    )


def repeated_shoes(orders: Sequence[Sequence[str]], decks: int, alpha: float) -> TestResult:
    """The same order twice: a generator reseeded the same way (a restart, a copied seed).
    Among the N! / (D!)^52 orders of a shoe a fair shuffle repeats one with a probability
    of about shoes^2 / 2 divided by that number, nil in practice: any repeat fails."""
    repeats = len(orders) - len({tuple(order) for order in orders})
    pairs = len(orders) * (len(orders) - 1) / 2
    log_orders = lgamma(52 * decks + 1) - 52 * lgamma(decks + 1)
    # P(at least one repeat) ~ 1 - exp(-pairs / orders), as a float: 0 once it underflows
    chance = -expm1(-pairs * exp(-log_orders)) if repeats else 1.0
    return TestResult(
        "repeated shoes", f"{repeats} order(s) seen before", float(repeats), 0, chance, alpha
    )


def _bins(size: int, count: int) -> list[int]:
    """``size`` consecutive places in ``count`` bins as even as can be."""
    count = max(1, min(count, size))
    return [size // count + (1 if b < size % count else 0) for b in range(count)]


def _widths(bins: Sequence[int]) -> str:
    return str(bins[0]) if min(bins) == max(bins) else f"{min(bins)}-{max(bins)}"


def _pearson(observed: Sequence[int], expected: Sequence[Fraction]) -> Fraction:
    return sum(((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True)), Fraction(0))


def _result(name: str, how: str, statistic: Fraction, df: int, alpha: float) -> TestResult:
    # Imported here: scipy takes about a second to import, which every `blackjack` process
    # (a handler's restart included) would pay for a command it does not run.
    from scipy import stats

    value = float(statistic)
    return TestResult(name, how, value, df, float(stats.chi2.sf(value, df)), alpha)


def render(report: RandomnessReport) -> str:
    """A readable table, one test a line."""
    lines = [
        f"{report.shoes} shoes of {report.decks} deck(s) ({52 * report.decks} cards), "
        f"alpha {report.alpha:g} per test",
        f"  {'test':<24} {'statistic':>10} {'df':>5} {'p-value':>10}  result  binning",
    ]
    for test in report.tests:
        verdict = "pass" if test.passed else "FAIL"
        lines.append(
            f"  {test.name:<24} {test.statistic:>10.2f} {test.df:>5} {test.p_value:>10.3g}  "
            f"{verdict:<6}  {test.how}"
        )
    return "\n".join(lines)
