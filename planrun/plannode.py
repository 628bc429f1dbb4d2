"""What every part of the runtime plan (planrun.plan) shares: frozen, compared by value, and
dumped exactly as pydantic's JSON mode dumps the validated model."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from planrun.record import FrozenRecord, replace


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


# How to_dict writes a field: as it is (a scalar), copied (a list or dict of strings), as a
# free-form value, as a nested runtime object, or as a mapping of those.
PLAIN, COPY, ANY, NODE, NODES, LIST_NODES, ENUM = range(7)


class PlanNode(FrozenRecord):
    """Any part of a plan: a frozen record (compared by value, hashable, copied with `replace`)
    whose to_dict / from_dict are driven by a per-class field table."""

    __slots__ = ()
    # (attribute, key in the dumped data, how to dump it); filled in by _table below.
    _TABLE: ClassVar[tuple[tuple[str, str, int], ...]] = ()
    _DEFAULTS: ClassVar[dict[str, Any]] = {}

    def to_dict(self, exclude_defaults: bool = False, *, exact: bool = False) -> dict[str, Any]:
        """JSON-compatible data, equal to pydantic's `model_dump(mode="json", exclude_defaults=...)`
        of the equivalent planrun.model object (fields in the same order, `as` for `as_`).

        pydantic writes infinity and NaN as null; `exact` keeps them (Python's json writes and
        reads them), so that from_dict gives back the same plan: the dump to store a plan in."""
        out: dict[str, Any] = {}
        defaults = self._DEFAULTS
        for name, key, kind in self._TABLE:
            value = getattr(self, name)
            if exclude_defaults and name in defaults and value == defaults[name]:
                continue
            if value is None or kind == PLAIN:
                out[key] = value
            elif kind == COPY:
                out[key] = value.copy()
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
        their defaults. Nothing is checked: the data must have passed planrun.model."""
        return cls(**cls._kwargs(data))

    @classmethod
    def _kwargs(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        return dict(data)


def table(
    cls: type[PlanNode],
    kinds: Mapping[str, int],
    keys: Mapping[str, str] | None = None,
    required: tuple[str, ...] = (),
) -> None:
    """Record each field's key and dump kind, and the defaults exclude_defaults compares with
    (what an object made of the `required` fields alone holds)."""
    names = cls._FIELDS
    cls._TABLE = tuple((n, (keys or {}).get(n, n), kinds.get(n, PLAIN)) for n in names)
    bare = cls(**dict.fromkeys(required, ""))
    cls._DEFAULTS = {n: getattr(bare, n) for n in names if n not in required}


__all__ = ["ANY", "COPY", "ENUM", "LIST_NODES", "NODE", "NODES", "PlanNode", "replace", "table"]
