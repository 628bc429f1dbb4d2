"""The plan's dataclasses (planrun.plan.definition) as JSON data and back: one dump and one load for every
class, derived from its fields, and the metadata markers its annotations carry.

A class's table (key, how to dump, default, nested class per field) is worked out from
`dataclasses.fields` and its evaluated annotations on first use, once per class and process.
Nothing here imports pydantic; the dump equals pydantic's `model_dump(mode="json")` of the
validated plan (tests/test_runtime_plan.py pins the state's plan digests it gives).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any, ClassVar, Self


class Spec:
    """What the schema says of a field beyond its type: pydantic.Field's keywords (a
    description, a pattern, an alias, json_schema_extra), read by planrun.plan.model only. An
    `alias` is also the field's key in the dumped data."""

    __slots__ = ("kwargs",)

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"Spec({self.kwargs!r})"


class Kind:
    """A kind of value with planrun's own rules (planrun.plan.model's KINDS validates and describes
    each); to the run path it is its plain type."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Kind({self.name!r})"


# How a field is dumped: as it is (a scalar), as free-form JSON data (a list or a mapping, a
# union), an enum's value, a nested node, a mapping of nodes, or a list of nodes.
PLAIN, ANY, ENUM, NODE, NODES, LIST_NODES = range(6)

# (attribute, key in the data, how it is dumped, nested class or None, default)
Row = tuple[str, str, int, Any, Any]


class PlanNode:
    """Any part of a plan (a frozen, slotted dataclass of planrun.plan.definition)."""

    __slots__ = ()
    _rows: ClassVar[dict[type, tuple[Row, ...]]] = {}

    def to_dict(self, exclude_defaults: bool = False, *, exact: bool = False) -> dict[str, Any]:
        """JSON-compatible data, equal to pydantic's `model_dump(mode="json",
        exclude_defaults=...)` of the validated plan (fields in order, `as` for `as_`).

        pydantic writes infinity and NaN as null; `exact` keeps them (Python's json writes and
        reads them), so that from_dict gives back the same plan: the dump to store a plan in."""
        out: dict[str, Any] = {}
        for name, key, kind, _, default in rows(type(self)):
            value = getattr(self, name)
            if exclude_defaults and value == default:
                continue
            if value is None or kind == PLAIN:
                out[key] = value
            elif kind == ANY:
                out[key] = _json_value(value, exact)
            elif kind == ENUM:
                out[key] = value.value  # a plain str, as pydantic's JSON mode gives
            elif kind == NODE:
                out[key] = value.to_dict(exclude_defaults, exact=exact)
            elif kind == NODES:
                out[key] = {k: v.to_dict(exclude_defaults, exact=exact) for k, v in value.items()}
            else:
                out[key] = [v.to_dict(exclude_defaults, exact=exact) for v in value]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The object for validated data (to_dict's output, or model_dump's); missing keys take
        their defaults, an unknown key is a TypeError. Nothing else is checked: the data must
        have passed planrun.plan.model."""
        kwargs: dict[str, Any] = {}
        for name, key, kind, sub, _ in rows(cls):
            if key not in data:
                continue
            value = data[key]
            if value is None or kind <= ANY:
                kwargs[name] = value
            elif kind in (NODE, ENUM):
                kwargs[name] = sub(value) if kind == ENUM else sub.from_dict(value)
            elif kind == NODES:
                kwargs[name] = {k: sub.from_dict(v) for k, v in value.items()}
            else:
                kwargs[name] = [sub.from_dict(v) for v in value]
        if len(kwargs) != len(data):
            unknown = sorted(set(data) - {row[1] for row in rows(cls)})
            raise TypeError(f"{cls.__name__}: unknown keys {unknown}")
        return cls(**kwargs)


def rows(cls: type) -> tuple[Row, ...]:
    """The dump-and-load table of a plan class (built once): from planrun/plan/tables.py,
    written ahead of time from the fields, for planrun.plan.definition's classes; else derived now."""
    found = PlanNode._rows.get(cls)
    if found is None:
        found = _written_rows(cls) or derive_rows(cls)
        PlanNode._rows[cls] = found
    return found


def derive_rows(cls: type) -> tuple[Row, ...]:
    """The table worked out from the fields and their evaluated annotations (~8 ms at first)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return tuple(_row(f, hints[f.name]) for f in dataclasses.fields(cls) if f.init)


def _written_rows(cls: type) -> tuple[Row, ...] | None:
    written = written_table(cls)
    if written is None:
        return None
    module = sys.modules[cls.__module__]
    defaults = {f.name: _default(f) for f in dataclasses.fields(cls) if f.init}
    return tuple(
        (name, key, kind, sub and getattr(module, sub), defaults[name])
        for name, key, kind, sub, _ in written
    )


def written_table(cls: type) -> tuple[tuple[str, str, int, str | None, Any], ...] | None:
    """The rows planrun/plan/tables.py holds for a class of planrun.plan.definition (with how each field is
    checked), if they were written from its fields as they are now; else None (a field
    added or changed since: derived at first use then, and validated by pydantic)."""
    if cls.__module__ != "planrun.plan.definition":
        return None
    from planrun.plan.tables import FIELDS, TABLES

    name = cls.__name__
    if name not in _CURRENT:
        _CURRENT[name] = FIELDS.get(name) == written_fields(cls)
    return TABLES[name] if _CURRENT[name] else None


_CURRENT: dict[str, bool] = {}


def written_fields(cls: type) -> tuple[tuple[str, str], ...]:
    """A plan class's fields and their annotations as written (text)."""
    return tuple((f.name, str(f.type)) for f in dataclasses.fields(cls) if f.init)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default  # a required field's is MISSING, equal to no value


def _row(f: dataclasses.Field[Any], hint: Any) -> Row:
    key = f.name
    for meta in getattr(hint, "__metadata__", ()):
        if isinstance(meta, Spec):
            key = meta.kwargs.get("alias", key)
    kind, sub = _kind(hint)
    return f.name, key, kind, sub, _default(f)


def _kind(hint: Any) -> tuple[int, Any]:
    """How a field of this (evaluated) type is dumped, and its nested class."""
    hint = _bare(hint)
    args = [_bare(a) for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, _UnionType) and len(args) == 1:
        hint = args[0]  # `X | None` is dumped as X is
        args = [_bare(a) for a in typing.get_args(hint)]
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and issubclass(hint, PlanNode):
        return NODE, hint
    if isinstance(hint, type) and issubclass(hint, Enum):
        return ENUM, hint
    if origin is list and isinstance(args[0], type) and issubclass(args[0], PlanNode):
        return LIST_NODES, args[0]
    if origin is dict and isinstance(args[1], type) and issubclass(args[1], PlanNode):
        return NODES, args[1]
    if origin in (list, dict, typing.Union, _UnionType):
        return ANY, None  # copied; infinity and NaN in it are null in JSON mode
    return PLAIN, None


def _bare(hint: Any) -> Any:
    """The type without its Annotated metadata."""
    return hint.__origin__ if typing.get_origin(hint) is typing.Annotated else hint


_UnionType = type(int | None)


def _json_value(value: Any, exact: bool) -> Any:
    """A free-form value (args, variables, foreach) as pydantic's JSON mode dumps it: a copy,
    with infinity and NaN (YAML's `.inf`, `.nan`) as null (kept when `exact`) and every key a
    string."""
    if isinstance(value, dict):
        return {
            k if isinstance(k, str) else _json_key(k): _json_value(v, exact)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_json_value(v, exact) for v in value]
    if isinstance(value, float) and not exact and not math.isfinite(value):
        return None
    return value


def _json_key(key: Any) -> str:
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    return str(key)


__all__ = ["Kind", "PlanNode", "Spec", "derive_rows", "rows", "written_fields", "written_table"]
