"""``/readyz`` of a handler in a rebalance: between the revocation of its partitions and the
next assignment it holds none, and every one of none was rebuilt, so it said ready (review of
session 34). It is not ready until the group has assigned the partitions again."""

from __future__ import annotations

from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.messages.sealing import ShoeSeal
from tests.unit.test_handler_takeover_revoked import TP, Consumer


async def test_a_handler_in_a_rebalance_is_not_ready_until_it_is_assigned_again() -> None:
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    handler._consumer = Consumer()
    await handler._revoke(set())  # the first join: nothing held yet
    assert not handler.ready
    handler._assign({TP})
    assert not handler.ready  # rebuilding
    handler._partitions[TP.partition].status = "ready"
    assert handler.ready
    await handler._revoke({TP})  # a rebalance begins: another instance joined
    assert handler.partition_states() == {}
    assert not handler.ready  # before: ready, holding nothing
    handler._assign(set())  # more instances than partitions: this one holds none
    assert handler.ready
    handler._consumer = None  # (nothing of Kafka's to close here)
    await handler.stop()  # hands its partitions over: not ready from the start of the stop
    assert not handler.ready
