"""The handler's settings from the environment, and the bounds they are checked against."""

from __future__ import annotations

import pytest

from blackjack.command_handler.config import HandlerConfig
from blackjack.messages.sealing import ShoeSeal

KEY = ShoeSeal.new_key_hex()


def test_the_quiet_checkpoint_delay_comes_from_the_environment() -> None:
    assert HandlerConfig(shoe_key_hex=KEY).checkpoint_after_s == 3600.0
    env = {"BLACKJACK_SHOE_KEY": KEY, "BLACKJACK_CHECKPOINT_AFTER_S": "90"}
    assert HandlerConfig.from_env(env).checkpoint_after_s == 90.0


@pytest.mark.parametrize("seconds", [0.0, -1.0, 7 * 24 * 3600.0])
def test_a_quiet_checkpoint_must_come_before_the_results_expire(seconds: float) -> None:
    """The results topic keeps answers for 7 days: a checkpoint later than that could leave a
    rebuild without the answers of the commands after the one before it."""
    with pytest.raises(ValueError, match="checkpoint_after_s"):
        HandlerConfig(shoe_key_hex=KEY, checkpoint_after_s=seconds)
