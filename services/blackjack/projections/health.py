"""Whether a projection worker is making progress, and the metrics behind it.

A batch that fails is rolled back and retried every few seconds, forever: the worker never
skips a record (``batches.py``). A record that fails every time (a poison event: one the fold
refuses, or one that breaks it) cannot be cured by retrying, so once the same record of a
partition has failed ``stuck_after`` times in a row the worker reports that partition stuck,
names the record (topic, partition, offset) on ``/readyz`` with a reason code and how long
(``/readyz`` needs no token: never the error's text, which is in its log), and
exports the offset (alert ``BlackjackProjectionStuck``), until the partition folds past it or
is taken away by a rebalance.

It stays ready all the same: the query API it serves reads the shared read model, which is
as stale for the stuck partition whichever worker answers, so taking the pod out of service
would only take away the rest of the read model too (with every worker stuck, say on an event
type released before the workers that fold it, the whole query API).

Another store in its consumer group (``split.py``) is the opposite case, and the worker is
not ready then: its store misses the partitions the other store's workers fold, while the
workers that fold them answer them right; staleness is not shared but particular to this
store, and its answers would be wrong with nothing to tell (a rolling update that brings
the wrong database URL stops at its first pod instead of replacing every good one).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

import structlog
from prometheus_client import Gauge
from sqlalchemy.exc import SQLAlchemyError

from blackjack.bus.codecs import CodecMissing
from blackjack.configuration import ConfigurationError
from blackjack.error_text import error_text
from blackjack.observability.roles import claim
from blackjack.projections.other_log import StoreOfAnotherLog
from blackjack.projections.revision import SchemaMismatch
from blackjack.projections.split import Behind
from blackjack.projections.store import is_lock_wait
from blackjack.projections.views import ProjectionError
from blackjack.projections.writer import Position, Record

log = structlog.get_logger("blackjack.projections")

CONSECUTIVE_FAILURES = Gauge(
    "blackjack_projection_consecutive_failures",
    "Failed attempts in a row to fold the record a partition is stopped at (0 once past it)",
    ["topic", "partition"],
)
STUCK_OFFSET = Gauge(
    "blackjack_projection_stuck_offset",
    "Offset of the record a partition has failed to fold stuck_after times in a row; "
    "present only while the worker is stuck there",
    ["topic", "partition"],
)

SCHEMA_MISMATCH = Gauge(
    "blackjack_projection_schema_mismatch",
    "1 from the moment this worker found the read model at another schema revision than its "
    "code's (expected) until it exits (it stops folding at once: revision.py)",
    ["expected", "found", "direction"],
)
SCHEMA_REVISION = Gauge(
    "blackjack_projection_schema_revision_info",
    "The read model's schema revision this worker's code folds into (its alembic head): two "
    "values among a deployment's workers are two releases folding at once",
    ["revision"],
)
claim("projections", globals())  # served by the processes that run a projection worker only

DEFAULT_STUCK_AFTER = 10
"""Failed attempts in a row at the same record after which a partition is reported stuck
(about 20 s of retries; ``BLACKJACK_PROJECTION_STUCK_AFTER``)."""
ERROR_CHARS = 500  # enough to recognise the error; the log has the traceback
"""the error text kept for the log lines (``describe``); never served: ``/readyz`` needs no
token and the text can quote a record's data or a statement's SQL parameters, so it answers a
reason code (``reason_code``) and how long instead (``public``)"""


def reason_code(error: BaseException) -> str:
    """What ``/readyz`` says of an error, without its text: ``fold_refused`` (the fold refuses
    the record: not an event, or one that contradicts the read model), ``database_error``
    (the database refused the batch's statements) or ``fold_error`` (anything else: a bug)."""
    if isinstance(error, ProjectionError):
        return "fold_refused"
    if isinstance(error, SQLAlchemyError):
        return "database_error"
    return "fold_error"


def _seconds_since(when: datetime) -> int:
    return max(0, int((_now() - when).total_seconds()))


REPEAT_LOG_EVERY = 30
"""A failure retried every ``RETRY_SECONDS`` logs its first occurrence with the trace, then
one short line every this many in a row (once a minute), not a trace every 2 s."""


@dataclass(frozen=True, slots=True)
class StoreOutage:
    """The read model's database stopped answering this worker."""

    since: datetime
    failures: int
    error: str
    last: datetime
    """the newest failure: while batches keep failing it stays recent"""
    error_type: str = ""

    def describe(self) -> dict[str, Any]:
        """For the log: with the error's text."""
        return {**asdict(self), "since": self.since.isoformat(), "last": self.last.isoformat()}

    def public(self) -> dict[str, Any]:
        """For ``/readyz``: no error text (a driver's message can quote SQL parameters)."""
        return {
            "since": self.since.isoformat(),
            "unreachable_for_s": _seconds_since(self.since),
            "failures": self.failures,
            "last": self.last.isoformat(),
            "reason": "store_unreachable",
            "error_type": self.error_type,
        }


@dataclass(frozen=True, slots=True)
class Failure:
    """The record a partition keeps failing at."""

    topic: str
    partition: int
    offset: int
    failures: int
    since: datetime
    """the first failed attempt at this record"""
    error: str
    reason: str = "fold_error"
    """``reason_code`` of the error"""
    error_type: str = ""

    def describe(self) -> dict[str, Any]:
        """For the log: with the error's text."""
        return {**asdict(self), "since": self.since.isoformat()}

    def public(self) -> dict[str, Any]:
        """For ``/readyz``, which needs no token: the record, the reason code and how long it
        has failed, no error text (it can quote the record's data or SQL parameters)."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "failures": self.failures,
            "since": self.since.isoformat(),
            "stuck_for_s": _seconds_since(self.since),
            "reason": self.reason,
            "error_type": self.error_type,
        }


class FoldHealth:
    def __init__(self, stuck_after: int = DEFAULT_STUCK_AFTER, starting: bool = False) -> None:
        if stuck_after < 1:
            raise ValueError("stuck_after must be at least 1")
        self.stuck_after = stuck_after
        self.starting = starting
        """the worker has not migrated its store and joined its group yet"""
        self.store_ready = not starting
        """its store is migrated: the query API answers (from what is folded, as it does
        while Kafka is away later), though the worker may still wait for Kafka"""
        self.waiting_for: str | None = None
        """the step of its start it waits on (``/healthz``), while ``starting``"""
        self._failing: dict[Position, Failure] = {}
        self._change = asyncio.Event()
        self.store_outage: StoreOutage | None = None
        self.mismatch: SchemaMismatch | None = None
        """the store is at another schema revision: the worker stops (``stopped``)"""
        self.fatal: ConfigurationError | None = None
        """what stops the worker (``stopped``): ``mismatch``, a record batch it cannot
        decompress (``CodecMissing``, ``reader_failed``), or a store folded from another log
        (``StoreOfAnotherLog``, ``log_mismatched``)"""
        self.fatal_reason: str | None = None
        """its reason code on ``/readyz``: ``schema_mismatch``, ``codec_missing``,
        ``store_of_another_log``"""
        self._mismatched = asyncio.Event()
        self.split: list[Behind] = []
        """partitions other workers of the group fold past this store (``split.py``): its
        query API answers them stale; not ready while any"""
        self.store_name = ""
        """the store's URL without its password, to tell the stores of a split apart"""
        self.group_checks = 0
        """comparisons with the group's offsets made so far"""
        self.others_compared = 0
        """partitions other workers own, compared at the last of them"""

    def group_checked(self, reported: list[Behind], others: int = 0) -> None:
        """One comparison of the store's positions with the group's offsets, over ``others``
        partitions other workers own: ``reported``, those behind for ``SPLIT_AFTER_S``
        (none: as it should be)."""
        self.group_checks += 1
        self.others_compared = others
        before, self.split = self.split, list(reported)
        if reported and [b.position for b in reported] != [b.position for b in before]:
            log.error(
                "another store in the consumer group: this store misses partitions other "
                "workers fold; its query API answers them stale (not ready)",
                store=self.store_name,
                partitions=[b.describe() for b in reported],
            )
        elif reported and self.group_checks % REPEAT_LOG_EVERY == 0:
            log.warning(
                "still another store in the consumer group",
                store=self.store_name,
                partitions=[b.describe() for b in reported],
            )
        elif before and not reported:
            log.info("the consumer group's offsets no longer pass this store")
        self._changed()

    def schema_mismatched(self, error: SchemaMismatch) -> None:
        """A fold found the store at another schema revision than this code's: nothing of it
        was written; the worker folds nothing more and stops (``run_worker``)."""
        if self.mismatch is None and self.fatal is None:
            self.mismatch = self.fatal = error
            self.fatal_reason = "schema_mismatch"
            error.logged = True  # below
            found = ",".join(error.found) or "none"
            SCHEMA_MISMATCH.labels(error.expected, found, error.direction).set(1)
            log.critical(
                "read model schema mismatch; the worker stops",
                expected=error.expected,
                found=found,
                direction=error.direction,
                error=str(error),
            )
        self._mismatched.set()
        self._changed()

    def reader_failed(self, error: CodecMissing) -> None:
        """The worker's consumer met a record batch it cannot decompress: nothing of it can
        be folded, on any fetch; the worker stops (``run_worker``: exit 2; ``blackjack serve``:
        exit 1), not ready meanwhile (``codec_missing``), instead of fetching it for good."""
        if self.fatal is None:
            self.fatal = error
            self.fatal_reason = "codec_missing"
            error.logged = True  # below
            log.critical(
                "a record batch cannot be decompressed; the worker stops", error=str(error)
            )
        self._mismatched.set()
        self._changed()

    def log_mismatched(self, error: StoreOfAnotherLog) -> None:
        """The store's positions lie past the end of partitions the worker was given: it was
        folded from another log (``other_log``). Nothing of them was sought or folded; the
        worker stops (``run_worker``: exit 2; ``blackjack serve``: exit 1), not ready
        meanwhile (``store_of_another_log``)."""
        if self.fatal is None:
            self.fatal = error
            self.fatal_reason = "store_of_another_log"
            error.logged = True  # below
            log.critical(
                "the read model was folded from another log: its positions lie past the end "
                "of the topic's partitions; the worker stops, nothing folded",
                store=self.store_name,
                partitions=[found.fields() for found in error.past],
            )
        self._mismatched.set()
        self._changed()

    async def stopped(self) -> ConfigurationError:
        """Once an error stops the worker (a schema mismatch, a codec missing): the error."""
        await self._mismatched.wait()
        assert self.fatal is not None
        return self.fatal

    def store_failed(self, error: BaseException) -> None:
        """The database failed this worker (not a record: ``failed`` is for those). Logged with
        its trace the first time, then a short line every ``REPEAT_LOG_EVERY`` failures."""
        reason = error_text(error)[:ERROR_CHARS]
        last = self.store_outage
        if last is None:
            self.store_outage = StoreOutage(_now(), 1, reason, _now(), type(error).__name__)
            if is_lock_wait(error):
                log.error(
                    "read model locked by another session (another worker in the middle of a "
                    "fold, frozen perhaps, or a lock taken by hand); folding waits for it",
                    exc_info=error,
                )
            else:
                log.error("read model unreachable; folding waits for it", exc_info=error)
        else:
            self.store_outage = replace(
                last,
                failures=last.failures + 1,
                error=reason,
                last=_now(),
                error_type=type(error).__name__,
            )
            if self.store_outage.failures % REPEAT_LOG_EVERY == 0:
                log.warning("read model still unreachable", **self.store_outage.describe())
        self._changed()

    def store_quiet_for(self, seconds: float) -> bool:
        """An outage whose last failure is older than ``seconds``: nothing has tried the
        store since (no batch came), so only a probe can tell whether it is back."""
        outage = self.store_outage
        return outage is not None and (_now() - outage.last).total_seconds() >= seconds

    def store_migrated(self) -> None:
        self.store_ready = True
        self._changed()

    def started(self) -> None:
        self.starting, self.store_ready, self.waiting_for = False, True, None
        self._changed()

    def store_answered(self) -> None:
        """A batch committed (or a probe wrote): the database takes writes again. A read that
        succeeds says nothing: a read-only database answers reads."""
        if self.store_outage is not None:
            log.info("read model reachable again", **self.store_outage.describe())
            self.store_outage = None
            self._changed()

    def failed(self, records: Sequence[Record], at: Record | None, error: BaseException) -> None:
        """A batch of ``records`` was rolled back. ``at`` is the record whose fold raised; when
        unknown (the database failed, say), each partition's first record of the batch."""
        if at is None:
            firsts: dict[Position, Record] = {}
            for record in records:
                if record.position not in firsts or record.offset < firsts[record.position].offset:
                    firsts[record.position] = record
            targets = list(firsts.values())
        else:
            targets = [at]
        reason = error_text(error)[:ERROR_CHARS]
        code, kind = reason_code(error), type(error).__name__
        for record in targets:
            key = record.position
            last = self._failing.get(key)
            if last is not None and last.offset == record.offset:
                failure = replace(
                    last, failures=last.failures + 1, error=reason, reason=code, error_type=kind
                )
            else:
                if last is not None:  # failing elsewhere now (e.g. a database error moved)
                    self._clear([key])
                failure = Failure(
                    record.topic, record.partition, record.offset, 1, _now(), reason, code, kind
                )
            self._failing[key] = failure
            labels = (failure.topic, str(failure.partition))
            CONSECUTIVE_FAILURES.labels(*labels).set(failure.failures)
            if failure.failures == self.stuck_after:
                STUCK_OFFSET.labels(*labels).set(failure.offset)
                log.error("projection worker stuck", **failure.describe())
        self._changed()

    def folded(self, positions: Mapping[Position, int]) -> None:
        """A batch committed: these partitions' stored positions now (a failure behind one of
        them is over)."""
        passed = [
            key
            for key, offset in positions.items()
            if key in self._failing and offset > self._failing[key].offset
        ]
        for key in passed:
            failure = self._failing[key]
            if failure.failures >= self.stuck_after:
                log.info(
                    "projection worker moved past the record it was stuck at", **failure.describe()
                )
        self._clear(passed)

    def forget(self, positions: Iterable[Position]) -> None:
        """Partitions revoked: whoever takes them reports on them."""
        self._clear([key for key in positions if key in self._failing])

    def failures_of(self, position: Position) -> int:
        """Failed attempts in a row at the record this partition is stopped at (0: none)."""
        failure = self._failing.get(position)
        return 0 if failure is None else failure.failures

    @property
    def failing(self) -> list[Failure]:
        return sorted(self._failing.values(), key=lambda f: (f.topic, f.partition))

    @property
    def stuck(self) -> list[Failure]:
        return [f for f in self.failing if f.failures >= self.stuck_after]

    @property
    def folding(self) -> bool:
        """No partition is stuck (some may be retrying a record)."""
        return not self.stuck

    def status(self) -> dict[str, Any]:
        """What ``/readyz`` answers of the projections, to anyone (it needs no token): each
        failure's reason code and how long, never an error's text, which the log has."""
        outage = self.store_outage
        if self.fatal_reason is not None:
            status = self.fatal_reason
        elif self.starting:
            status = "connecting" if self.store_ready else "starting"
        elif self.split:
            status = "split_store"
        elif self.stuck:
            status = "stuck"
        else:
            status = "waiting_for_store" if outage else "folding"
        return {
            "status": status,
            # which way, not the message (revision ids, what to run): the log line has it
            **(
                {}
                if self.mismatch is None
                else {"schema_mismatch": f"store_{self.mismatch.direction}"}
            ),
            "store": {"status": "ok"}
            if outage is None
            else {"status": "unreachable", **outage.public()},
            **({} if not self.split else {"split_store": self._split_detail()}),
            "stuck_after": self.stuck_after,
            "stuck": [f.public() for f in self.stuck],
            "failing": [f.public() for f in self.failing],
        }

    def _split_detail(self) -> dict[str, Any]:
        """A reason code and the partitions, never the store's name: ``/readyz`` needs no
        token, and the URL (its password hidden) names the database's host, port, user and
        database, which the ``another store in the consumer group`` log line has."""
        return {
            "reason": "another_store_in_group",
            "partitions": [b.describe() for b in self.split],
            "action": "give every worker of the group the same BLACKJACK_DB_URL (or a group "
            "of its own: BLACKJACK_PROJECTION_GROUP) and restart the odd one; "
            "docs/operations.md, 'Another store in the projection group'",
        }

    async def wait_until(self, condition: Callable[[], bool], timeout: float) -> None:
        """Wait, without polling, until ``condition`` holds after some failure or recovery."""
        async with asyncio.timeout(timeout):
            while True:
                change = self._change
                if condition():
                    return
                await change.wait()

    def _clear(self, keys: Iterable[Position]) -> None:
        keys = list(keys)
        for key in keys:
            failure = self._failing.pop(key)
            labels = (failure.topic, str(failure.partition))
            CONSECUTIVE_FAILURES.labels(*labels).set(0)
            if failure.failures >= self.stuck_after:
                STUCK_OFFSET.remove(*labels)
        if keys:
            self._changed()

    def _changed(self) -> None:
        change, self._change = self._change, asyncio.Event()
        change.set()


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


# ---- the probes of a worker that serves HTTP (``blackjack projections run --http``) ----------

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"


def probes(health: FoldHealth, fallback: ASGIApp) -> ASGIApp:
    """``/healthz`` (200 while the process answers: ``starting`` with the step it waits on,
    then ``ok``, as ``serve`` says) and ``/readyz`` (200 once its query API answers, with the
    records it is failing or stuck at, and ``connecting`` while it still waits for Kafka;
    503 while its store is not migrated yet, say because the database is down; 503 while
    another store in its group folds partitions this one misses); every other request goes
    to ``fallback``."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path == HEALTH_PATH:
            alive = {"status": "starting", "waiting_for": health.waiting_for}
            await _json(send, 200, alive if health.starting else {"status": "ok"})
        elif path == READY_PATH:
            if health.fatal_reason is not None:  # stopping: another release's store, a codec
                status, code = health.fatal_reason, 503
            elif health.split:  # answers wrong data: out of the query API's service
                status, code = "split_store", 503
            else:
                status, code = ("ready", 200) if health.store_ready else ("starting", 503)
            await _json(send, code, {"status": status, "projections": health.status()})
        else:
            await fallback(scope, receive, send)

    return app


async def _json(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
