"""Fixtures every kind of test may ask for, and the settings every property runs under."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import HealthCheck, settings

# The whole suite runs as one process on a loaded 2-core machine: a property's example that
# takes 250 ms because another process had the CPU is not a failure. Hypothesis's deadline
# (200 ms an example by default) and its too-slow health check measure the machine, not the
# code, so neither is applied; how many examples each property runs is left as it is.
settings.register_profile(
    "loaded-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("loaded-machine")


@pytest.fixture
def logging_left_as_it_was() -> Iterator[None]:
    """A command that gets as far as configuring the logs must not leave them pointing at this
    test's captured output: a later test's log line would write to a closed file."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()
