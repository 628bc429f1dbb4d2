"""Writes planrun/plan/tables.py, the tables of the plan's classes derived from planrun.plan.definition:
`python -m planrun.plan.tables_write` after changing planrun/plan/definition.py
(tests/test_runtime_plan.py fails while the written tables differ from what this derives).

Each class gets one row per field: its attribute, its key in the data, how it is dumped
(planrun.plan.data's PLAIN...LIST_NODES), the name of its nested class, and how it is checked
(planrun.plan.fastcheck), all worked out from the fields' evaluated annotations, which is what costs
a run about 8 ms when it is done at start-up instead of here.
"""

from __future__ import annotations

import dataclasses
import os
import pprint
import sys
import typing
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from planrun.plan import definition as plan
from planrun.plan.data import Kind, PlanNode, Spec, derive_rows, written_fields

CLASSES = (
    plan.Plan,
    plan.Step,
    plan.Param,
    plan.ServerEntry,
    plan.Defaults,
    plan.Limits,
    plan.Policy,
    plan.Replan,
    plan.ExecutorConfig,
)
# Spec keywords that change nothing a value may be (the schema's words, the key's name); any
# other keyword is a rule the checker must learn before the tables can be written.
_DESCRIPTIVE = {"description", "alias", "json_schema_extra"}
_UnionType = type(int | None)

HEADER = '''"""Generated from planrun/plan/definition.py by `python -m planrun.plan.tables_write`: do not edit.

Per class of planrun.plan.definition, per field: (attribute, key, dump kind, nested class, check); and the
fields they were written from (planrun.plan.data uses the tables only while those are the same).
"""

# fmt: off
'''


def check_spec(hint: Any) -> Any:
    """How planrun.plan.fastcheck checks a value of this (evaluated) annotation, as plain data."""
    origin = get_origin(hint)
    if origin is Annotated:
        kinds = [m.name for m in hint.__metadata__ if isinstance(m, Kind)]
        if kinds:
            return ("kind", kinds[0])
        spec = check_spec(hint.__origin__)
        for meta in hint.__metadata__:
            if isinstance(meta, Spec):
                unknown = set(meta.kwargs) - _DESCRIPTIVE - {"pattern"}
                if unknown:
                    raise ValueError(f"planrun.plan.fastcheck does not know Spec({unknown})")
                if "pattern" in meta.kwargs:
                    spec = _with_pattern(spec, meta.kwargs["pattern"])
        return spec
    if hint is Any:
        return ("any",)
    if hint is type(None):
        return ("none",)
    if hint in (str, bool, int, float):
        return (hint.__name__,)
    if isinstance(hint, type) and issubclass(hint, PlanNode):
        return ("node", hint.__name__)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return ("enum", hint.__name__)
    args = get_args(hint)
    if origin is Literal:
        return ("lit", args)
    if origin in (Union, _UnionType):
        return ("union", tuple(check_spec(a) for a in args))
    if origin is list:
        return ("list", check_spec(args[0]))
    if origin is dict and args[0] is str:
        return ("dict", check_spec(args[1]))
    raise ValueError(f"planrun.plan.fastcheck cannot check {hint!r}")


def _with_pattern(spec: Any, pattern: str) -> Any:
    if spec == ("str",):
        return ("str", pattern)
    if spec[0] == "union":
        return ("union", tuple(_with_pattern(s, pattern) for s in spec[1]))
    return spec


def tables() -> dict[str, tuple[tuple[str, str, int, str | None, Any], ...]]:
    """Every class's rows, derived now from planrun.plan.definition."""
    out = {}
    for cls in CLASSES:
        hints = typing.get_type_hints(cls, include_extras=True)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        out[cls.__name__] = tuple(
            (name, key, kind, sub and sub.__name__, check_spec(hints[fields[name].name]))
            for name, key, kind, sub, _ in derive_rows(cls)
        )
    return out


def field_texts() -> dict[str, tuple[tuple[str, str], ...]]:
    """Every class's fields as written (their annotations' text): what the tables are for."""
    return {cls.__name__: written_fields(cls) for cls in CLASSES}


def source() -> str:
    """The text of planrun/plan/tables.py."""
    body = pprint.pformat(tables(), width=100, sort_dicts=False)
    fields = pprint.pformat(field_texts(), width=100, sort_dicts=False)
    return f"{HEADER}TABLES = {body}\n\nFIELDS = {fields}\n"


def main() -> None:
    path = os.path.join(os.path.dirname(plan.__file__), "tables.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(source())
    sys.stdout.write(f"wrote {path}\n")


if __name__ == "__main__":
    main()
