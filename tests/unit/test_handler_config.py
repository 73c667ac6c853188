"""The handler's settings from the environment, and the bounds they are checked against."""

from __future__ import annotations

import pytest

from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.configuration import ConfigurationError
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


def test_the_shoe_seal_version_is_two_unless_a_rolling_upgrade_asks_for_one() -> None:
    """During the rolling upgrade to handlers that seal with the derived shoe key, the new
    ones seal as before (BLACKJACK_SHOE_SEAL_VERSION=1), so an older handler that takes a
    partition over can still open its shoe; then the setting goes."""
    assert HandlerConfig.from_env({"BLACKJACK_SHOE_KEY": KEY}).shoe_seal_version == 2
    during = HandlerConfig.from_env({"BLACKJACK_SHOE_KEY": KEY, "BLACKJACK_SHOE_SEAL_VERSION": "1"})
    assert during.shoe_seal_version == 1
    sealed = CommandHandler(during)._seal.seal("t", 1, ("AS",), "salt")
    assert not sealed.startswith("2.")
    assert ShoeSeal.from_hex(KEY).unseal("t", 1, sealed) == (("AS",), "salt")
    with pytest.raises(ConfigurationError, match="BLACKJACK_SHOE_SEAL_VERSION"):
        HandlerConfig.from_env({"BLACKJACK_SHOE_KEY": KEY, "BLACKJACK_SHOE_SEAL_VERSION": "3"})


def test_the_platform_money_bound_and_sent_at_rule_come_from_the_environment() -> None:
    default = HandlerConfig.from_env({"BLACKJACK_SHOE_KEY": KEY})
    assert (default.money_ids_max, default.money_sent_at) == (10_000, "optional")
    env = {
        "BLACKJACK_SHOE_KEY": KEY,
        "BLACKJACK_MONEY_IDS_MAX": "500",
        "BLACKJACK_MONEY_SENT_AT": " Required ",
    }
    config = HandlerConfig.from_env(env)
    assert (config.money_ids_max, config.money_sent_at) == (500, "required")
    with pytest.raises(ConfigurationError, match="BLACKJACK_MONEY_SENT_AT"):
        HandlerConfig.from_env({**env, "BLACKJACK_MONEY_SENT_AT": "always"})
    with pytest.raises(ConfigurationError, match="BLACKJACK_MONEY_IDS_MAX"):
        HandlerConfig.from_env({**env, "BLACKJACK_MONEY_IDS_MAX": "0"})
    # half of it is the buy-ins' (platform_money.buy_in_share): 1 would leave them none
    with pytest.raises(ConfigurationError, match="at least 2"):
        HandlerConfig.from_env({**env, "BLACKJACK_MONEY_IDS_MAX": "1"})
    # and the handler's processor decides with them
    handler = CommandHandler(config)
    assert handler.processor.money_ids_max == 500 and handler.processor.money_sent_at_required
