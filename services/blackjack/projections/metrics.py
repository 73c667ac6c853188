"""The projection worker's Prometheus series: events folded, redeliveries and duplicates, batches
rolled back, the rounds closed and the money wagered and paid per game, each partition's
position and lag, whether the read model's database answers (``STORE_UP``), whether
another store in the group folds partitions this one misses (``SPLIT_PARTITIONS``), and the
money in transit between wallets and tables (``IN_TRANSIT``)."""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Gauge

from blackjack.domain.rules import PRESETS
from blackjack.observability.roles import claim
from blackjack.projections.health import FoldHealth
from blackjack.projections.split import Behind
from blackjack.projections.transit import InTransit
from blackjack.projections.writer import BatchResult

EVENTS_FOLDED = Counter(
    "blackjack_projection_events_total", "Events folded into the read model", ["type"]
)
REDELIVERED = Counter(
    "blackjack_projection_redelivered_total",
    "Records skipped because the read model already holds them (a redelivery after a crash)",
)
DUPLICATES = Counter(
    "blackjack_projection_duplicate_events_total",
    "The same event (stream, sequence, id) met again at a later offset",
)
FAILED_BATCHES = Counter(
    "blackjack_projection_failed_batches_total",
    "Batches rolled back (then folded again partition by partition; a failing one is rewound "
    "to retry)",
)
UNREADABLE = Counter(
    "blackjack_projection_unreadable_records_total",
    "Records stepped over, not folded, because a header name of theirs is not UTF-8 (none of "
    "the service's records has one: who may write to the events topic?); each is named in an "
    "error log",
)
ROUNDS_CLOSED = Counter(
    "blackjack_rounds_closed_total",
    "Rounds settled, or cancelled (closed with no box dealt, every bet returned: no player "
    "ready when betting closed, or an operator closing an interrupted round before its deal), "
    "or voided (an operator voided the round for a malfunction: every wager returned), as "
    "folded into the read model, by game and currency",
    ["variant", "currency", "outcome"],
)
WAGERED = Counter(
    "blackjack_wagered_minor_units_total",
    "Money staked in the rounds settled (initial bets, doubles, splits, insurance), in minor "
    "units of the currency (exact up to 2^53 per series, as Prometheus keeps floats)",
    ["variant", "currency"],
)
PAID = Counter(
    "blackjack_paid_minor_units_total",
    "Money paid out in the rounds settled (stakes returned with wins and pushes included), "
    "in minor units; 1 - paid / wagered over a window is the hold",
    ["variant", "currency"],
)
POSITION = Gauge(
    "blackjack_projection_position",
    "Next offset to fold in, as stored with the read model",
    ["topic", "partition"],
)
LAG = Gauge(
    "blackjack_projection_lag",
    "Offsets from where the worker reads on (past what it has folded or is folding, and the "
    "transaction markers after it) to the partition's last stable offset, after every batch "
    "and every LAG_EVERY_SECONDS from the broker, so that it grows while nothing is fetched "
    "(0 when caught up)",
    ["topic", "partition"],
)

STORE_UP = Gauge(
    "blackjack_projection_store_up",
    "1 while the read model's database answers this worker; 0 from a failure to reach it "
    "(down, starting, refusing connections, read-only, timing out) until it answers again",
)

SPLIT_PARTITIONS = Gauge(
    "blackjack_projection_split_partitions",
    "Partitions other workers of the consumer group fold whose group offset has been past "
    "this worker's store for SPLIT_AFTER_S: another store in the group, which this one misses "
    "(0 when the group's workers share one store)",
)
SPLIT_MISSING = Gauge(
    "blackjack_projection_split_missing_offsets",
    "For each of those partitions, offsets the group has committed past this worker's store; "
    "present only while reported",
    ["topic", "partition"],
)
IN_TRANSIT = Gauge(
    "blackjack_money_in_transit_minor_units",
    "Money on its way between wallets and tables, as the read model holds it, by direction "
    "(to_table: buy-ins no table has confirmed or refunded yet; to_wallet: payouts of tables a "
    "wallet funds that the wallet has not received) and by each currency a wallet holds (0 "
    "when none), read once a minute: the same in every worker of a store, as of its last read",
    ["direction", "currency"],
)
IN_TRANSIT_WALLETS = Gauge(
    "blackjack_money_in_transit_wallets",
    "Wallets with money on its way from them (to_table) or to them (to_wallet), by currency "
    "(0 when none)",
    ["direction", "currency"],
)
IN_TRANSIT_SINCE = Gauge(
    "blackjack_money_in_transit_since_timestamp_seconds",
    "The earliest time money in transit has waited since (Unix time): a pending buy-in's "
    "sending (to_table); at least since, the last payout to the player of a table whose payout "
    "the wallet has not received (to_wallet); present only while some is in transit",
    ["direction", "currency"],
)
claim("projections", globals())  # served by the processes that run a projection worker only


def transit_read(found: list[InTransit]) -> None:
    """Export the money in transit the read model holds now (``transit.py``): a currency
    with none left shows 0, and no time."""
    for gone in _TRANSIT_SERIES - {(t.direction, t.currency) for t in found}:
        IN_TRANSIT.labels(*gone).set(0)
        IN_TRANSIT_WALLETS.labels(*gone).set(0)
        _drop(IN_TRANSIT_SINCE, gone)
    for transit in found:
        series = (transit.direction, transit.currency)
        _TRANSIT_SERIES.add(series)
        IN_TRANSIT.labels(*series).set(transit.amount)
        IN_TRANSIT_WALLETS.labels(*series).set(transit.wallets)
        if transit.oldest is not None:
            IN_TRANSIT_SINCE.labels(*series).set(transit.oldest.timestamp())
        else:
            _drop(IN_TRANSIT_SINCE, series)


def transit_unread() -> None:
    """The store could not be read for a while, or the watch stopped: no series rather than
    old ones. (The series are the process's: two workers in one process, as in tests, share
    them, and the other's next read brings them back.)"""
    for series in _TRANSIT_SERIES:
        for gauge in (IN_TRANSIT, IN_TRANSIT_WALLETS, IN_TRANSIT_SINCE):
            _drop(gauge, series)
    _TRANSIT_SERIES.clear()


def _drop(gauge: Gauge, labels: tuple[str, ...]) -> None:
    with contextlib.suppress(KeyError):  # not exported (yet, or any more)
        gauge.remove(*labels)


_TRANSIT_SERIES: set[tuple[str, str]] = set()
"""The directions and currencies exported so far (their series stay, at 0 once none is in
transit)."""


def group_checked(health: FoldHealth, reported: list[Behind], others: int = 0) -> None:
    """One comparison with the group's offsets made: export and report what it found."""
    was = {b.position for b in health.split}
    SPLIT_PARTITIONS.set(len(reported))
    for behind in reported:
        SPLIT_MISSING.labels(behind.topic, str(behind.partition)).set(behind.missing)
    for topic, partition in was - {b.position for b in reported}:
        SPLIT_MISSING.remove(topic, str(partition))
    health.group_checked(reported, others)


def store_failed(health: FoldHealth, error: BaseException) -> None:
    STORE_UP.set(0)
    health.store_failed(error)


def store_answered(health: FoldHealth) -> None:
    STORE_UP.set(1)
    health.store_answered()


def count_games_from_zero() -> None:
    """Each preset's game series exist at 0 from the start: ``increase()`` over a window
    misses the first value of a series born at it, so a worker's first round of a game after
    a restart (the finance drill: an operator's close, the only round of its game that day)
    would not show on the dashboard. A table opened in another currency adds its series
    with its first round."""
    for rules in PRESETS.values():
        labels = (rules.name, rules.currency)
        for outcome in ("settled", "cancelled", "voided"):
            ROUNDS_CLOSED.labels(*labels, outcome)
        WAGERED.labels(*labels)
        PAID.labels(*labels)


def count_folded(result: BatchResult) -> None:
    """The batch's figures, once its transaction has committed."""
    for kind, count in result.types.items():
        EVENTS_FOLDED.labels(kind).inc(count)
    REDELIVERED.inc(result.skipped)
    DUPLICATES.inc(result.duplicates)
    UNREADABLE.inc(len(result.unreadable))
    for (variant, currency), game in result.games.items():
        ROUNDS_CLOSED.labels(variant, currency, "settled").inc(game.rounds)
        ROUNDS_CLOSED.labels(variant, currency, "cancelled").inc(game.cancelled)
        ROUNDS_CLOSED.labels(variant, currency, "voided").inc(game.voided)
        WAGERED.labels(variant, currency).inc(game.wagered)
        PAID.labels(variant, currency).inc(game.paid)
