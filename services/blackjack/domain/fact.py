"""``fact(Event, **fields)``: an event built from values the decider has already checked,
without pydantic validating them again."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

_Model = TypeVar("_Model", bound=BaseModel)


# The slot setters of BaseModel, looked up once: ``fact`` runs about 15 times per round.
_new = object.__new__
_set_dict = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


_REQUIRED = object()


_Template = tuple[dict[str, Any], frozenset[str]]
_TEMPLATES: dict[type[BaseModel], _Template] = {}


def _fact_template(cls: type[BaseModel]) -> _Template:
    """Every field in declaration order (the order ``model_dump`` follows), with its default
    or ``_REQUIRED``; and the names that have no default."""
    template: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if field.default_factory is not None:
            raise TypeError(f"fact() does not call default factories ({cls.__name__}.{name})")
        template[name] = _REQUIRED if field.is_required() else field.default
    required = frozenset(name for name, value in template.items() if value is _REQUIRED)
    _TEMPLATES[cls] = template, required
    return template, required


def fact(cls: type[_Model], **fields: Any) -> _Model:
    """``cls(**fields)`` without validation, for the events the decider builds from values it
    has already checked (validating each one was about 7 % of a simulated round). The result
    equals, dumps and serializes exactly like the validated model: defaults filled in, fields
    in declaration order, ``model_fields_set`` the names given. Missing or unknown names are
    still refused; types and constraints are not checked, so anything read from outside (the
    event log, commands) goes through pydantic as before."""
    template, required = _TEMPLATES.get(cls) or _fact_template(cls)
    values = {**template, **fields}
    if len(values) != len(template) or not required <= fields.keys():
        unknown = sorted(fields.keys() - template.keys())
        missing = sorted(required - fields.keys())
        raise TypeError(f"{cls.__name__}: unknown fields {unknown}, missing fields {missing}")
    model = _new(cls)
    _set_dict(model, "__dict__", values)
    _set_fields_set(model, set(fields))
    _set_extra(model, None)
    _set_private(model, None)
    return model
