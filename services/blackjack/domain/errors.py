"""The one error of the rules engine: a log whose events contradict each other."""

from __future__ import annotations


class CorruptLog(ValueError):
    """The events contradict each other (a tampered or misordered log)."""
