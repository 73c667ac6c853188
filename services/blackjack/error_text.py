"""An error in one line for an operator: its type's name once, then what it says."""

from __future__ import annotations


def error_text(error: BaseException) -> str:
    """``Type: message``; aiokafka's errors already start with their type's name (a
    ``KafkaConnectionError`` reads ``KafkaConnectionError: Unable to bootstrap ...``), so theirs
    is kept as it is."""
    text, name = str(error), type(error).__name__
    return text if text.startswith(name) else f"{name}: {text}".rstrip(": ")


def broker_error_name(code: int) -> str:
    """A broker's error code with its name (29: ``TopicAuthorizationFailedError``: a
    principal the ACLs refuse, which a bare number did not say)."""
    from aiokafka.errors import for_code

    return f"error {code}, {for_code(code).__name__}"
