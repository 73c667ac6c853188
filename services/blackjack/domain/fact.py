"""``fact(Event, **fields)``: an event built from values the decider has already checked,
without pydantic validating them again."""

from __future__ import annotations

from typing import Any, Final, TypeVar

from pydantic import BaseModel

_Model = TypeVar("_Model", bound=BaseModel)


# The slot setters of BaseModel, looked up once: ``fact`` runs about 15 times per round.
_new: Final = object.__new__
_set_dict: Final = object.__setattr__
_set_fields_set: Final = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra: Final = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private: Final = BaseModel.__dict__["__pydantic_private__"].__set__


# A required field no call gave (the source check in tests/unit/test_fact.py prevents that):
# an event holding it fails to serialize.
_REQUIRED: Final = object()


# Per event class: every field in declaration order (the order ``model_dump`` follows) with
# its default or ``_REQUIRED``; and the set of all field names, shared as every fact's
# ``model_fields_set`` (pydantic copies that set before it changes one, in ``model_copy``).
_Template = tuple[dict[str, Any], set[str]]
_TEMPLATES: Final[dict[type[BaseModel], _Template]] = {}


def _fact_template(cls: type[BaseModel]) -> _Template:
    template: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if field.default_factory is not None:
            raise TypeError(f"fact() does not call default factories ({cls.__name__}.{name})")
        template[name] = _REQUIRED if field.is_required() else field.default
    _TEMPLATES[cls] = template, set(template)
    return _TEMPLATES[cls]


def fact(cls: type[_Model], **fields: Any) -> _Model:
    """``cls(**fields)`` without validation, for the events the decider builds from values it
    has already checked (validating each one was about 7 % of a simulated round). The result
    equals, dumps and serializes exactly like the validated model, defaults filled in and
    fields in declaration order; ``model_fields_set`` is every field (the decider decides
    them all). An unknown name is refused here. Which names each call gives is checked before
    it runs instead: ``tests/unit/test_fact.py`` reads every ``fact`` call in the source and
    refuses one that misses a required field (checking it here on every call cost 6 % of a
    simulated round). Types and constraints are not checked, so anything read from outside
    (the event log, commands) goes through pydantic as before."""
    template, names = _TEMPLATES.get(cls) or _fact_template(cls)
    values = {**template, **fields}
    if len(values) != len(template):
        unknown = sorted(fields.keys() - template.keys())
        raise TypeError(f"{cls.__name__}: unknown fields {unknown}")
    model = _new(cls)
    _set_dict(model, "__dict__", values)
    _set_fields_set(model, names)
    _set_extra(model, None)
    _set_private(model, None)
    return model
