"""``BLACKJACK_PROJECTION_FATAL_LINGER_S``: how long a worker stopping on a fault serves its
metrics first (``run_worker``; tests/integration/test_projection_startup.py runs it)."""

from __future__ import annotations

import pytest

from blackjack.configuration import ConfigurationError
from blackjack.projection_worker.settings import DEFAULT_FATAL_LINGER_S, ProjectionSettings


def test_the_linger_is_two_scrapes_by_default_none_at_0_and_never_negative() -> None:
    assert ProjectionSettings.from_env({}).fatal_linger_s == DEFAULT_FATAL_LINGER_S == 30
    zero = {"BLACKJACK_PROJECTION_FATAL_LINGER_S": "0"}
    assert ProjectionSettings.from_env(zero).fatal_linger_s == 0
    for wrong in ("-1", "soon", "1.5"):
        with pytest.raises(ConfigurationError, match="BLACKJACK_PROJECTION_FATAL_LINGER_S"):
            ProjectionSettings.from_env({"BLACKJACK_PROJECTION_FATAL_LINGER_S": wrong})
