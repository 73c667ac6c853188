"""The answers a client keeps, by command id, and the callers waiting for them.

A client keeps the answers to its own commands (those it sent, or was asked the result of)
apart from everyone else's on the results topic, each store bounded, and hands an answer to
whoever waits for it as it is kept. No I/O: the results reader and the look-backs keep what
they read here (``AnswerBook.keep``)."""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Container
from dataclasses import dataclass
from datetime import datetime

import structlog

from blackjack.client.errors import UnreadableResult
from blackjack.messages.envelope import CommandResult

log = structlog.get_logger("blackjack.client")

KEEP_RESULTS = 100_000
"""How many command ids this client sent or was asked the result of it keeps the answers
of (and remembers the sendings of)."""
KEEP_OTHERS_RESULTS = 10_000
"""How many other command ids it keeps the answers of: other clients' commands on the results
topic, a handler's signed steps, records sent raw. They have a store of their own, so a
platform's traffic never lets go of this client's own answers: one store of 100,000 kept
everyone's, about 1.7 KB an answer (168 MB), and at 850 commands a second let go of a
client's own answer after two minutes (its ``result`` asked later timed out although the
command was taken)."""
KEEP_ANSWERS_OF_A_COMMAND = 100
"""How many answers to one command id at one stream it keeps, the first ones read: each copy
of a command is answered again, so a client sending one id in a loop grew the memory of every
client reading the results topic by an answer a copy (a million copies, about 500 MB), and a
wait on that id sorted all of them at each. One more sending of it by this client then gets
no answer it keeps (its wait runs out). At most ``KEEP_ANSWERS_OF_A_COMMAND_ANYWHERE`` over
all the streams (a stream keeps its own command ids, so copies at others count apart)."""
KEEP_ANSWERS_OF_A_COMMAND_ANYWHERE = 1_000


@dataclass(frozen=True)
class Unreadable:
    """An answer kept as received that no ``CommandResult`` could be read from."""

    command_id: str
    stream_id: str
    partition: int
    offset: int
    error: str

    def raised(self) -> UnreadableResult:
        return UnreadableResult(
            self.command_id, self.stream_id, self.partition, self.offset, self.error
        )


@dataclass(frozen=True, slots=True)
class Kept:
    """An answer kept as the JSON it came as, read again when asked for. A client keeps up to
    ``KEEP_RESULTS`` + ``KEEP_OTHERS_RESULTS`` answers, and a ``CommandResult`` held whole is
    4 times its JSON: its own 100,000 took 169 MiB, now 80 MiB
    (``tests/unit/measure_client_answers.py``)."""

    stream_id: str
    value: bytes

    def result(self) -> CommandResult:
        return CommandResult.model_validate_json(self.value)


Answer = Kept | Unreadable


def answer_of(kept: Answer) -> CommandResult:
    """The result kept, or ``UnreadableResult`` for an answer that could not be read."""
    if isinstance(kept, Unreadable):
        raise kept.raised()
    return kept.result()


def ids_in(value: bytes | None) -> tuple[str, str | None] | None:
    """The command id (and the stream id, if any) a record no ``CommandResult`` could be read
    from names, when it is a JSON object naming one."""
    try:
        doc = json.loads(value or b"")
    except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
        return None
    if not isinstance(doc, dict):
        return None
    command_id, stream_id = doc.get("command_id"), doc.get("stream_id")
    if not isinstance(command_id, str) or not command_id:
        return None
    return command_id, stream_id if isinstance(stream_id, str) else None


def of_stream(results: list[Answer], stream_id: str | None) -> list[Answer]:
    """The answers of one stream (all of them when ``stream_id`` is None)."""
    if stream_id is None:
        return list(results)
    return [result for result in results if result.stream_id == stream_id]


Position = tuple[int, int, int]
"""Where an answer was read: (generation of the results topic, partition, offset). The
generation counts the results topics the client has read (one deleted and made again is
another: its offsets start again)."""
Waiter = tuple[int, str | None, "asyncio.Future[Answer]"]
"""A ``result`` waiting: the answers it skips, the stream it takes them from (None: any) and
the future the answer goes to."""


class AnswerBook:
    """The answers a client keeps and who waits for them. ``sent``: the command ids the client
    sent (its sendings, kept by the client), whose answers are its own to keep."""

    def __init__(self, sent: Container[str]) -> None:
        self._sent = sent
        self.results: OrderedDict[str, dict[Position, Answer]] = OrderedDict()
        """Per command id this client sent or was asked the result of (``wanted``), the
        answers received, by their ``Position``: an answer read twice (by the reader and by a
        look-back) is kept once; one that could not be read as an ``Unreadable``."""
        self.others: OrderedDict[str, dict[Position, Answer]] = OrderedDict()
        """The same for the other command ids, the last ``KEEP_OTHERS_RESULTS``: moved to
        ``results`` once asked for."""
        self.too_many: OrderedDict[str, None] = OrderedDict()
        """the last command ids answered past ``KEEP_ANSWERS_OF_A_COMMAND`` (logged once)"""
        self.asked: OrderedDict[str, set[tuple[str, datetime | None]]] = OrderedDict()
        """The command ids ``result`` was asked for in this run (the last ``KEEP_RESULTS``),
        each with the (stream, since) it was looked back for from: their answers are kept
        with those of the commands this client sent from then on. Another ``since`` is looked
        back for again (one named without its ``sent_at`` was read from the reader's start
        only)."""
        self.waiters: dict[str, list[Waiter]] = {}
        self.executing: dict[str, int] = {}
        """The command ids an ``execute`` is sending again now: their answers kept are not
        let go of before its ``result`` waits (its ``skip`` counts them)."""

    def new_run(self) -> None:
        """A start: what was looked back for is looked back for again, up to where this run's
        reader reads."""
        self.asked = OrderedDict()

    def results_for(self, command_id: str, stream_id: str | None = None) -> list[CommandResult]:
        """Every result kept for a command id, or only those of ``stream_id`` (an answer that
        could not be read is not among them)."""
        answers = of_stream(self.answers(command_id), stream_id)
        return [answer.result() for answer in answers if isinstance(answer, Kept)]

    def ask(self, command_id: str) -> None:
        """``command_id``'s answers kept with this client's own from now on (``asked``),
        those kept with the others' already moved there."""
        self.asked.setdefault(command_id, set())
        self.asked.move_to_end(command_id)
        while len(self.asked) > KEEP_RESULTS:
            self.asked.popitem(last=False)
        self.own(command_id)

    def own(self, command_id: str) -> None:
        """The answers to ``command_id`` kept with the others' moved to this client's own,
        which keep them as their newest: a command sent again, or asked for, is not the next
        let go of (its answers counted by ``execute``'s ``skip`` would go with it)."""
        received = self.others.pop(command_id, None)
        if received is not None:
            self.results.setdefault(command_id, {}).update(received)
        if command_id in self.results:
            self.results.move_to_end(command_id)
        self._let_go_of_own()

    def _let_go_of_own(self) -> None:
        """The oldest of this client's own answers let go of beyond ``KEEP_RESULTS``, but
        not those of a command a caller waits for, or ``execute`` sends again (kept as the
        newest). One asked for is no longer noted as looked back for: asked again, it is
        looked back for again."""
        for _ in range(len(self.results) - KEEP_RESULTS):
            command_id, received = self.results.popitem(last=False)
            if command_id in self.waiters or command_id in self.executing:
                self.results[command_id] = received
            else:
                self.asked.pop(command_id, None)

    def wanted(self, command_id: str) -> bool:
        """Whether the answers to ``command_id`` are this client's own to keep: to a command
        it sent, or one it was asked the result of (``asked``, or waited for now)."""
        return command_id in self._sent or command_id in self.asked or command_id in self.waiters

    def answers(self, command_id: str) -> list[Answer]:
        # (in one store but where this client's own let go of a sending it remembered)
        received = {**self.others.get(command_id, {}), **self.results.get(command_id, {})}
        return [received[position] for position in sorted(received)]

    def keep(self, command_id: str, answer: Answer, position: Position) -> bool:
        """Keep an answer (once: False if it was kept already), with this client's own
        (``wanted``) or the others', and hand it to whoever waits for it."""
        own = self.wanted(command_id)
        store = self.results if own else self.others
        held = [kept.get(command_id, {}) for kept in (self.results, self.others)]
        if any(position in answers for answers in held):
            return False
        at_its_stream = sum(
            1 for answers in held for kept in answers.values() if kept.stream_id == answer.stream_id
        )
        if (
            at_its_stream >= KEEP_ANSWERS_OF_A_COMMAND
            or sum(map(len, held)) >= KEEP_ANSWERS_OF_A_COMMAND_ANYWHERE
        ):
            if command_id not in self.too_many:
                self.too_many[command_id] = None
                while len(self.too_many) > KEEP_ANSWERS_OF_A_COMMAND:
                    self.too_many.popitem(last=False)
                log.warning(
                    "answers to one command id past what a client keeps: the later ones "
                    "are not kept (a client sending it again and again?)",
                    command_id=command_id,
                    kept=KEEP_ANSWERS_OF_A_COMMAND,
                )
            return False
        store.setdefault(command_id, {})[position] = answer
        store.move_to_end(command_id)
        if own:
            self._let_go_of_own()
        while len(self.others) > KEEP_OTHERS_RESULTS:
            self.others.popitem(last=False)
        waiters = self.waiters.get(command_id, [])
        answers = self.answers(command_id) if waiters else []
        for skip, stream_id, future in waiters:
            mine = of_stream(answers, stream_id)
            if len(mine) > skip and not future.done():
                future.set_result(mine[skip])
        return True

    def fail_waiters(self, failure: BaseException) -> None:
        """Every caller waiting gets ``failure`` at once."""
        for waiters in self.waiters.values():
            for _, _, future in waiters:
                if not future.done():
                    future.set_exception(failure)
