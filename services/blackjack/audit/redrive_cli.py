"""``blackjack redrive [--send]``: the money steps stuck between wallets and shared tables
(``audit.redrive``), listed, and with ``--send`` sent again.

Exit codes: 0 nothing stuck, or every step sent again was taken (answered ``accepted``, or a
deposit to an id no table was opened under declined ``table_not_open``); 1 steps are
stuck (listed, not sent without ``--send``), one sent again was refused or not answered in
time, or the log has another finding of the audit's transfers (nothing is sent then: run
``blackjack audit``); 2 bad input (no shoe key: the steps are signed with it), an event
this release cannot read, or the broker not reached or lost (run it again: a step sent twice
moves nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from aiokafka.errors import KafkaError

from blackjack.audit.transfers import STUCK_AFTER
from blackjack.bus.settings import BOOTSTRAP_HELP, KafkaSettings
from blackjack.bus.topics import Topics
from blackjack.configuration import ConfigurationError
from blackjack.error_text import error_text

if TYPE_CHECKING:
    from blackjack.audit.redrive import Redrive
    from blackjack.command_handler.keys import ShoeKeys

OK, STUCK, BAD_INPUT = 0, 1, 2
ANSWER_S = 30.0
"""How long each step sent again may wait for its answer (a running handler answers in
milliseconds; a partition being taken over, in a minute at most)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    redrive = sub.add_parser(
        "redrive",
        help="list the money steps between wallets and shared tables that the logs show stuck "
        "(a step its receiver refused: signed under a key it does not accept); --send sends "
        "them again, signed under BLACKJACK_SHOE_KEY's current key",
    )
    redrive.add_argument(
        "--send", action="store_true", help="send them again and wait for their answers"
    )
    redrive.add_argument(
        "--stuck-after",
        type=_minutes,
        default=STUCK_AFTER,
        metavar="MINUTES",
        help="a step is stuck when its answer is missing this long after its cause (default "
        f"{int(STUCK_AFTER.total_seconds()) // 60}, the audit's); one that is not yet is counted "
        "in transit",
    )
    redrive.add_argument("--bootstrap", help=BOOTSTRAP_HELP)
    redrive.add_argument(
        "--topic-prefix", help="topic name prefix (default: BLACKJACK_TOPIC_PREFIX, else none)"
    )
    redrive.set_defaults(handler=_redrive)


def _minutes(text: str) -> timedelta:
    try:
        minutes = float(text)
    except ValueError:
        minutes = -1.0
    if not 0 <= minutes <= 7 * 24 * 60:
        raise argparse.ArgumentTypeError(f"minutes from 0 to 10080, not {text!r}")
    return timedelta(minutes=minutes)


def _redrive(args: argparse.Namespace) -> int:
    from blackjack.command_handler.keys import load_shoe_keys

    try:
        keys = load_shoe_keys(os.environ, create=False)
        kafka = KafkaSettings.from_env(os.environ)
    except ConfigurationError as error:
        print(
            f"blackjack redrive: {error} (the steps are signed as the handlers sign them)",
            file=sys.stderr,
        )
        return BAD_INPUT
    if args.bootstrap:
        kafka = replace(kafka, bootstrap=args.bootstrap)
    if args.topic_prefix is not None:
        kafka = replace(kafka, topic_prefix=args.topic_prefix)
    try:
        return asyncio.run(_run(kafka, keys, args.stuck_after, send=args.send))
    except (KafkaError, OSError, TimeoutError) as error:  # no broker, or lost on the way
        print(
            f"blackjack redrive: Kafka at {kafka.bootstrap}: {error_text(error)} "
            "(the topics under the prefix and the BLACKJACK_KAFKA_* security settings must be "
            "the service's); a step not answered above may not have been sent: run it again "
            "(a step sent twice moves nothing)",
            file=sys.stderr,
        )
        return BAD_INPUT


async def _run(kafka: KafkaSettings, keys: ShoeKeys, stuck_after: timedelta, *, send: bool) -> int:
    from blackjack.audit import redrive
    from blackjack.command_handler.signing import COMMANDS_PURPOSE, CommandSigner
    from blackjack.projections.rebuild import topic_partitions

    topics = Topics(kafka.topic_prefix)
    now = datetime.now(UTC)  # what a missing answer's wait counts to, and the steps' sent_at
    try:
        log, reconciled = await redrive.read_movements(
            kafka.bootstrap,
            topics.events,
            stuck_after=stuck_after,
            now=now,
            security=kafka.security,
        )
    except redrive.UnreadableLog as error:
        print(
            f"blackjack redrive: an event this release cannot read, nothing sent: {error}",
            file=sys.stderr,
        )
        return BAD_INPUT
    print(
        f"Read {topics.events}: {log.events} events"
        + (f", {log.copies} copies counted once" if log.copies else "")
        + (
            f", {log.stepped_over} records not the service's stepped over"
            if log.stepped_over
            else ""
        )
    )
    partitions = len(await topic_partitions(kafka.bootstrap, topics.commands, kafka.security))
    writer = redrive.StepWriter(
        CommandSigner(*keys.verifying(COMMANDS_PURPOSE)), topics, partitions
    )
    steps = redrive.plan(reconciled, writer, now)
    print(f"Steps stuck (no answer {stuck_after} after their cause): {len(steps)}")
    for step in steps:
        print(f"  {step.describe()}")
    if reconciled.in_transit:
        print(
            f"In transit (answers missing for less than {stuck_after}, not sent): "
            f"{reconciled.in_transit}\n  (a step its receiver refused, as "
            "BlackjackMoneyStepRefused says, is no less stuck: --stuck-after 0 sends these "
            "too, and a copy of one only slow moves nothing twice)"
        )
    others = [f for f in reconciled.findings if all(f is not s.finding for s in reconciled.stuck)]
    if others:
        print(
            f"\nOther findings of the transfers ({len(others)}): nothing sent; run blackjack audit"
        )
        for finding in others:
            print(f"  {finding}")
        return STUCK
    if not steps:
        return OK
    if not send:
        print("\nNothing sent: --send sends them again")
        return STUCK
    return await _send(kafka, topics, steps)


async def _send(kafka: KafkaSettings, topics: Topics, steps: list[Redrive]) -> int:
    from blackjack.audit.redrive import SOURCE
    from blackjack.client import BlackjackClient

    refused = 0
    print()
    async with BlackjackClient(
        kafka.bootstrap, topics, source=SOURCE, security=kafka.security
    ) as client:
        for step in steps:
            record = step.record
            await client.send_raw(record.key, record.value, record.headers)
            try:
                result = await client.result(step.command_id, ANSWER_S, stream_id=step.stream_id)
            except TimeoutError:  # (AnswerLost too: deleted unread)
                print(f"  {step.command_id}: no answer within {ANSWER_S:.0f} s")
                refused += 1
                continue
            rejection = result.rejection
            if result.status == "accepted":
                print(f"  {step.command_id}: accepted")
            elif rejection is not None and rejection.code == "table_not_open":
                # a buy-in sent to an id no table was opened under: declined in its
                # partition's stream of such declines, and its refund follows
                print(f"  {step.command_id}: declined, no table is open there: its refund follows")
            else:
                refused += 1
                why = "" if rejection is None else f" {rejection.code}: {rejection.message}"
                print(f"  {step.command_id}: {result.status}{why}")
    return STUCK if refused else OK
