"""``command_handler.key_check``: the key ids of the shoes a log's records hold, and none
from a record that is not a readable shoe (a review of the change: a null header value, a
value that is not JSON, one without the shoe's fields or a tombstone raised, and every
handler's start failed on that one record)."""

from __future__ import annotations

import pytest

from blackjack.command_handler.key_check import NotTheDeploymentsKey, _key_id
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import encode
from tests.integration.conftest_projections import Script, to_wire

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
SHUFFLED = [("ce_type", b"blackjack.ShoeShuffled.v1")]
SHUFFLE = next(
    w for w in to_wire(Script("mini-h17", [[]]).envelopes, SEAL) if w.type == "ShoeShuffled"
)
"""a shoe as the handler writes it on the events topic"""


def shoe(sealed: str) -> bytes:
    """The record of ``SHUFFLE`` with ``sealed`` as its sealed order."""
    data = SHUFFLE.data.model_copy(update={"sealed": sealed})
    return encode(SHUFFLE.model_copy(update={"data": data}))


def test_a_shoe_sealed_under_a_key_gives_that_key_s_id() -> None:
    assert _key_id(SHUFFLED, encode(SHUFFLE)) == SEAL.key_id
    # the record the cases below spoil one way each reads as a shoe of that key id
    assert _key_id(SHUFFLED, shoe("2.abcdef01.x")) == "abcdef01"
    sealed = SEAL.seal("t-1", 1, ("AS", "KD"), "salt")
    assert (
        ShoeSeal.key_id_of(sealed)
        == SEAL.key_id
        != ShoeSeal.from_hex(ShoeSeal.new_key_hex()).key_id
    )


@pytest.mark.parametrize(
    ("headers", "value"),
    [
        ([("ce_type", None)], shoe("2.abcdef01.x")),  # a null header value
        ([("ce_type", b"blackjack.CardDealt.v1")], shoe("2.abcdef01.x")),  # another event
        ([], shoe("2.abcdef01.x")),  # no ce_type: not the service's record
        (SHUFFLED, b"not JSON"),
        (SHUFFLED, b'{"data": {}}'),
        (SHUFFLED, None),  # a tombstone
        (SHUFFLED, b'{"data": {"sealed": 7}}'),
        (SHUFFLED, shoe("c2VhbGVk")),  # sealed before key ids: no evidence either way
    ],
)
def test_a_record_that_is_not_a_readable_shoe_gives_none(
    headers: list[tuple[str, bytes | None]], value: bytes | None
) -> None:
    assert _key_id(headers, value) is None


def test_the_refusal_names_the_key_ids_found_and_this_key_s() -> None:
    refused = NotTheDeploymentsKey("p.blackjack.events", {"abcdef01": 2}, SEAL.key_id)
    assert refused.exit_code == 2
    assert str(refused).startswith(
        "the shoe key is not this deployment's: the last shoes on p.blackjack.events are "
        "sealed under key id abcdef01 (in 2 partition(s)), none under this handler's key "
        f"id(s) ({SEAL.key_id})"
    )
