"""Settings read from the environment: the one error they raise when one is missing or wrong.

The command line answers it with a line naming the variable (exit 2), not a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


class ConfigurationError(ValueError):
    """A setting from the environment is missing or cannot be used."""

    exit_code: int = 2
    """what the command line exits with"""
    logged: bool = False
    """said already in the service's log, by a critical line of its own (``cli.log_fatal``
    adds none)"""


def env_value(env: Mapping[str, str], name: str, convert: Callable[[str], T], default: T) -> T:
    """``env[name]`` converted, ``default`` when unset or blank; naming ``name`` when wrong."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        return convert(text)
    except ValueError:
        raise ConfigurationError(f"{name} cannot be {text!r}") from None


def positive_int(text: str) -> int:
    """A whole number of at least 1 (``ValueError`` otherwise), for ``env_value``."""
    number = int(text)
    if number < 1:
        raise ValueError(f"{number} is not positive")
    return number


def whole_number(text: str) -> int:
    """A whole number of at least 0 (``ValueError`` otherwise), for ``env_value``."""
    number = int(text)
    if number < 0:
        raise ValueError(f"{number} is negative")
    return number
