"""An error in one line for an operator: its type's name once, then what it says."""

from __future__ import annotations


def error_text(error: BaseException) -> str:
    """``Type: message``; aiokafka's errors already start with their type's name (a
    ``KafkaConnectionError`` reads ``KafkaConnectionError: Unable to bootstrap ...``), so theirs
    is kept as it is."""
    text, name = str(error), type(error).__name__
    return text if text.startswith(name) else f"{name}: {text}".rstrip(": ")
