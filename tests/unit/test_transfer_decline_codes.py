"""``TransferDeclined.reason_code`` is a closed set in the contract: the codes the decider
declines a buy-in's deposit with, no other, so an integrator can switch over it from the
schema. Every release wrote one of them, so each stored event still reads."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decide import decide
from blackjack.domain.evolve import fold
from blackjack.domain.payouts import MAX_BALANCE
from blackjack.domain.rejections import DeclineCode, RejectionCode, decline_code
from blackjack.domain.rules import PRESETS
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.messages.wire import decode

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 5, 1, tzinfo=UTC)


def _multi(*events: ev.Event) -> TableState:
    return fold([ev.TableOpened(rules=PRESETS["atlantic-city-multi"]), *events])


SEATED = ev.SeatTaken(player_id="ann", seat=0)
DECLINES: dict[str, tuple[TableState, int, str]] = {
    "table_not_open": (INITIAL_STATE, 300, "USD"),
    "unauthorized": (fold([ev.TableOpened(rules=PRESETS["mini-h17"]), SEATED]), 300, "USD"),
    "not_seated": (_multi(), 300, "USD"),
    "table_suspended": (
        _multi(SEATED, ev.TableSuspended(operator="op", reason="check")),
        300,
        "USD",
    ),
    "invalid_amount": (_multi(SEATED), 0, "USD"),
    "currency_mismatch": (_multi(SEATED), 300, "EUR"),
    "balance_limit": (
        _multi(
            SEATED,
            ev.FundsDeposited(player_id="ann", amount=MAX_BALANCE, balance_after=MAX_BALANCE),
        ),
        1,
        "USD",
    ),
}


def _declined_with(state: TableState, amount: int, currency: str) -> str:
    command = cmd.Deposit(
        player_id="ann", amount=amount, currency=currency, transfer="wallet:ann/1"
    )
    events = decide(state, command, NOW)
    assert isinstance(events, list), events
    [event] = events
    assert isinstance(event, ev.TransferDeclined)
    return event.reason_code


def test_the_contract_lists_exactly_the_codes_the_decider_declines_with() -> None:
    written = {code: _declined_with(*case) for code, case in DECLINES.items()}
    assert written == {code: code for code in DECLINES}
    assert set(get_args(DeclineCode)) == set(DECLINES)
    assert set(get_args(DeclineCode)) <= set(get_args(RejectionCode))


def test_the_event_schema_names_the_codes() -> None:
    schema = json.loads((ROOT / "schemas/events/TransferDeclined.json").read_text())
    assert sorted(schema["properties"]["reason_code"]["enum"]) == sorted(DECLINES)


def test_the_docs_name_the_codes() -> None:
    text = " ".join((ROOT / "docs/kafka.md").read_text().split())
    said = re.search(r"A `TransferDeclined`'s `reason_code` is one of (.*?), and no other", text)
    assert said is not None
    assert set(re.findall(r"`([a-z_]+)`", said.group(1))) == set(DECLINES)


@pytest.mark.parametrize("code", sorted(DECLINES))
def test_a_stored_decline_of_every_code_still_reads(code: str) -> None:
    stored = {
        "event_id": "e-1",
        "type": "TransferDeclined",
        "schema_version": 1,
        "stream_id": "t-1",
        "sequence": 1,
        "occurred_at": "2026-05-01T12:00:00Z",
        "causation_id": "c-1",
        "data": {
            "type": "TransferDeclined",
            "version": 1,
            "player_id": "ann",
            "amount": 300,
            "transfer": "wallet:ann/1",
            "reason_code": code,
            "message": "-",
        },
    }
    envelope = decode(json.dumps(stored).encode())
    assert isinstance(envelope.data, ev.TransferDeclined)
    assert envelope.data.reason_code == code


def test_a_code_outside_the_set_is_no_decline() -> None:
    with pytest.raises(ValidationError, match="reason_code"):
        ev.TransferDeclined.model_validate(
            {
                "player_id": "ann",
                "amount": 1,
                "transfer": "wallet:ann/1",
                "reason_code": "insufficient_funds",
                "message": "-",
            }
        )
    with pytest.raises(ValueError, match="not a reason"):
        decline_code("insufficient_funds")
