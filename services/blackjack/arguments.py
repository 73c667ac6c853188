"""Option values the command lines share (``send``, ``play``, ``loadtest``), read as argparse
types: a wrong one is refused with the option's name and exit 2, before anything starts."""

from __future__ import annotations

import argparse
import math


def wait_seconds(text: str) -> float:
    """``--timeout``: a number of seconds above 0 (``-1`` sent the command and at once said
    that no answer came; ``nan`` and ``inf`` waited for ever)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return seconds
