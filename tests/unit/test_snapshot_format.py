"""A snapshot an older handler would misread is one it refuses: the state of a suspended
table is written as format 2 (an older handler reads format 1 only, and its state reader
skips the ``suspended`` key it does not know, so it would take bets there again)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.streams import Stream
from blackjack.domain import commands as cmd
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import Rules
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.scenario import build_shoe
from blackjack.table import apply

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def shuffled(rules: Rules) -> cmd.ShuffleShoe:
    return cmd.ShuffleShoe(order=build_shoe(rules.decks, []), salt="snapshot-format-salt")


class PreviousReleaseSealedSnapshot(BaseModel):
    """``SealedSnapshot`` as the release before suspending reads it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal[1] = 1
    stream_id: str
    sequence: int
    sealed: str


def table(*commands: cmd.Command) -> TableState:
    state = INITIAL_STATE
    for command in (cmd.OpenTable(variant="mini-h17"), *commands):
        result = apply(state, command, NOW, shuffled)
        assert not isinstance(result, Rejection), result
        state = result.state
    return state


@pytest.mark.parametrize("resumed", [False, True])
def test_a_suspended_table_s_snapshot_is_one_an_older_handler_refuses(resumed: bool) -> None:
    codec = SnapshotCodec(os.urandom(32))
    steps: list[cmd.Command] = [cmd.SuspendTable(operator="ops", reason="maintenance")]
    if resumed:
        steps.append(cmd.ResumeTable(operator="ops"))
    state = table(cmd.SitDown(player_id="ann"), *steps)
    raw = codec.encode(Stream(stream_id="t-1", state=state, sequence=4))
    assert json.loads(raw)["format"] == (1 if resumed else 2)
    assert codec.decode(raw).state == state
    if resumed:  # read by an older handler as it was written before suspending existed
        PreviousReleaseSealedSnapshot.model_validate_json(raw)
    else:
        with pytest.raises(ValidationError):
            PreviousReleaseSealedSnapshot.model_validate_json(raw)
