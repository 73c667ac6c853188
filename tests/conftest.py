"""Fixtures every kind of test may ask for."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog


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
