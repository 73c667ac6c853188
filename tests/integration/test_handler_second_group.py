"""A handler started in another consumer group on the same topics is a second writer nothing
fences (the transactional ids are named after the group). An upgrade drill did it by mistake:
the stray handler took every partition, answered 2,592 old commands again and wrote over the
sequences of 11 streams. Each result now carries its command's offset (and each checkpoint the
position it covers), so a handler whose group is behind what the log answered refuses the
partition instead of deciding its commands again."""

from __future__ import annotations

from typing import Any

import pytest

from blackjack.bus.headers import COMMAND_OFFSET_HEADER, COMMANDS_TO_HEADER, offset_header
from blackjack.bus.topics import partition_for
from blackjack.command_handler import takeover
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from tests.integration.conftest import (
    WAIT_S,
    KafkaSpace,
    accept,
    follow_until,
    read_topic,
    running_handler,
)

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]


def tables_on_every_partition(partitions: int) -> list[str]:
    tables: dict[int, str] = {}
    number = 0
    while len(tables) < partitions:
        table = f"table-{number}"
        tables.setdefault(partition_for(table, partitions), table)
        number += 1
    return [tables[p] for p in range(partitions)]


async def test_a_handler_of_another_group_takes_no_partition_the_log_has_answered(
    space: KafkaSpace, handler: CommandHandler
) -> None:
    tables = tables_on_every_partition(space.partitions)
    async with space.client() as client:
        for table in tables:
            await accept(client, table, cmd.OpenTable(variant="mini-h17"))
            await accept(client, table, cmd.SitDown(player_id="p"))
        results = await read_topic(space, space.topics.results)
        offsets = [offset_header(r.headers, COMMAND_OFFSET_HEADER) for r in results]
        assert len(results) == 2 * len(tables) and None not in offsets
        # a stray handler in another group, on the same topics
        stray = CommandHandler(space.config(group_id=f"{space.prefix}another-group"))
        await stray.start()
        try:
            await stray.wait_until(
                lambda: (
                    len(stray.partition_states()) == space.partitions
                    and set(stray.partition_states().values()) == {"failed"}
                ),
                WAIT_S,
            )
            assert not stray.ready
            # the deployment's own handler goes on alone: one answer for a new command
            await accept(client, tables[0], cmd.Deposit(player_id="p", amount=500))
        finally:
            await stray.stop()
    after = await read_topic(space, space.topics.results)
    assert len(after) == len(results) + 1  # nothing answered twice


async def stray_refused_its_one_partition(space: KafkaSpace) -> None:
    """A handler of another group on the space's one-partition topics: it refuses the
    partition (failed), and stops."""
    stray = CommandHandler(space.config(group_id=f"{space.prefix}another-group"))
    await stray.start()
    try:
        await stray.wait_until(lambda: stray.partition_states() == {0: "failed"}, WAIT_S)
    finally:
        await stray.stop()


async def test_a_checkpoint_tells_how_far_the_commands_were_answered(kafka_space: Any) -> None:
    """A checkpoint after every batch: the rebuild reads no results after it, and the position
    the checkpoint carries is what the stray handler is refused by."""
    space: KafkaSpace = await kafka_space(partitions=1)
    async with running_handler(space.config(snapshot_every=1)):
        async with space.client() as client:
            await accept(client, "t", cmd.OpenTable(variant="mini-h17"))
        await stray_refused_its_one_partition(space)
    # (the checkpoint the answer's transaction wrote may show a moment after it: followed)
    await follow_until(
        space,
        space.topics.snapshots,
        lambda records: any(
            r.key == b"#checkpoint/0" and offset_header(r.headers, COMMANDS_TO_HEADER) == 1
            for r in records
        ),
    )
    checkpoints = [
        r for r in await read_topic(space, space.topics.snapshots) if r.key == b"#checkpoint/0"
    ]
    assert offset_header(checkpoints[-1].headers, COMMANDS_TO_HEADER) == 1


async def test_the_refusal_says_the_group_has_no_offset_and_where_to_set_it(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log line the runbook (docs/operations.md, BlackjackPartitionsNotServing) tells the
    operator to read: a group with no committed offset there (another group, or its offsets
    expired) read "has consumed only to None"; it says it has none."""
    refusals: list[str] = []

    class Recorded(takeover.AnsweredElsewhere):
        def __init__(self, message: str) -> None:
            refusals.append(message)
            super().__init__(message)

    monkeypatch.setattr(takeover, "AnsweredElsewhere", Recorded)
    space: KafkaSpace = await kafka_space(partitions=1)
    async with running_handler(space.config()), space.client() as client:
        await accept(client, "t", cmd.OpenTable(variant="mini-h17"))
    await stray_refused_its_one_partition(space)
    assert refusals
    message = refusals[0]
    assert "None" not in message
    assert "answers this partition's commands up to offset 1" in message
    assert f"the group {space.prefix}another-group has no committed offset there" in message
