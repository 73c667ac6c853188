"""``made(Model, values, names)``: a pydantic model built from values the decider has already
checked, without validating them again. ``blackjack.domain.facts`` (generated from the
models) calls it with every field in declaration order."""

from __future__ import annotations

from typing import Any, Final, TypeVar

from pydantic import BaseModel

_Model = TypeVar("_Model", bound=BaseModel)


# The slot setters of BaseModel, looked up once: a simulated round builds about sixteen models.
_new: Final = object.__new__
_set_dict: Final = object.__setattr__
_set_fields_set: Final = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra: Final = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private: Final = BaseModel.__dict__["__pydantic_private__"].__set__


def made(cls: type[_Model], values: dict[str, Any], names: set[str]) -> _Model:
    """What ``cls(**values)`` builds, without validation (it was about 7 % of a simulated
    round). ``values`` holds every field in declaration order, the order ``model_dump``
    follows, so the model equals, dumps and serializes exactly like the validated one.
    ``names`` (every field of ``cls``) is shared as each instance's ``model_fields_set``:
    the decider decides every field, and pydantic copies that set before it changes one.
    Types and constraints are not checked here, so anything read from outside (the event log,
    commands) goes through pydantic as before."""
    model = _new(cls)
    _set_dict(model, "__dict__", values)
    _set_fields_set(model, names)
    _set_extra(model, None)
    _set_private(model, None)
    return model
