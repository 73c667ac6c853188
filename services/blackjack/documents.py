"""Generated documents committed to the repository (the AsyncAPI and OpenAPI contracts): the
command that checks one is up to date, or writes it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def check_or_write(
    path: Path, write: bool, drifted: Callable[[Path], bool], writer: Callable[[Path], None]
) -> int:
    """Write the document to ``path`` with ``write``; else 1 when it is out of date."""
    if write:
        writer(path)
        print(path)
        return 0
    if drifted(path):
        print(f"out of date: {path} (run this command with --write)")
        return 1
    print(f"{path}: up to date")
    return 0
