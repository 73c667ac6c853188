"""The handler's processor as the unit tests build it: one partition of ``unit.`` topics, a
fresh shoe key, and the test signing key."""

from __future__ import annotations

from blackjack.bus.topics import Topics
from blackjack.command_handler.processor import Processor
from blackjack.command_handler.signing import CommandSigner
from blackjack.messages.sealing import ShoeSeal
from blackjack.rng import csprng_shuffle
from blackjack.table import Shuffler

TOPICS = Topics("unit.")
SIGNER = CommandSigner(b"k" * 32)


def new_processor(*, dedup_window: int = 100, shuffler: Shuffler = csprng_shuffle) -> Processor:
    return Processor(
        topics=TOPICS,
        partitions=1,
        seal=ShoeSeal.from_hex(ShoeSeal.new_key_hex()),
        signer=SIGNER,
        source="/test",
        shuffler=shuffler,
        dedup_window=dedup_window,
    )
