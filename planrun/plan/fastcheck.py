"""A plan's data checked without pydantic, by the tables written from planrun.plan.definition
(planrun/plan/tables.py) and the kinds' rules (planrun.plan.kinds).

For data that is plainly valid it gives the object validation (planrun.plan.model) would give; for
anything else, None: then pydantic decides and words what is wrong. It accepts less than
pydantic (an alias such as a step's `index`, a text a pattern must hold that is not printable
ASCII, a number beyond 64 bits) and never more: tests/test_fastcheck.py holds the two to the same
objects and verdicts. Importing pydantic and building the models costs a run whose plan is not
in the plan cache (a fresh checkout) about 500 M instructions; this costs a few.
"""

from __future__ import annotations

import functools
import re
from typing import Any, TypeVar

from planrun.plan import definition as plan
from planrun.plan.data import PlanNode, written_table
from planrun.plan.kinds import KIND_RULES, KindRule

N = TypeVar("N", bound=PlanNode)

# Keys whose meaning is one of planrun.plan.model's object rules (an alias): left to pydantic.
_ALIASES = {"Step": "index", "Plan": "id"}
_INT_LIMIT = 1 << 63


class _Undecided(Exception):
    """Not plainly valid: pydantic decides."""


def load(cls: type[N], data: Any) -> N | None:
    """The plan object for `data` when it is plainly valid; None when pydantic must decide."""
    try:
        made: N = _node(cls.__name__, data)
    except (_Undecided, ValueError, TypeError):
        return None
    return made


def _node(name: str, data: Any) -> Any:
    if type(data) is not dict or _ALIASES.get(name, "") in data:
        raise _Undecided
    if name == "Step":
        data = plan.with_run_tool(data)
    cls = getattr(plan, name)
    keys = _keys(cls)
    if keys is None:  # planrun/plan/definition.py changed since the tables were written
        raise _Undecided
    kwargs = {}
    for key, value in data.items():  # the keys written, not every field of the class
        row = keys.get(key)
        if row is None:  # an unknown key
            raise _Undecided
        kwargs[row[0]] = _value(row[1], value)
    made = cls(**kwargs)  # a required key missing: TypeError
    if name == "ServerEntry" and plan.server_problem(made.command, made.url):
        raise _Undecided
    if name == "Replan" and plan.replan_problem(made.command, made.tool):
        raise _Undecided
    return made


@functools.cache
def _keys(cls: type) -> dict[str, tuple[str, Any]] | None:
    """key -> (attribute, check) of a plan class, from its written table (None: no table)."""
    table = written_table(cls)
    return None if table is None else {key: (a, check) for a, key, *_, check in table}


def _value(check: Any, value: Any) -> Any:  # noqa: C901 - one branch per kind of check
    tag = check[0]
    if tag == "any":
        return value
    if tag == "kind":
        return _kind(KIND_RULES[check[1]], value)
    if tag == "union":
        for member in check[1]:
            try:
                return _value(member, value)
            except (_Undecided, ValueError, TypeError):
                continue
        raise _Undecided
    if tag == "none":
        _expect(value is None)
    elif tag == "str":
        _expect(type(value) is str)
        if len(check) > 1:
            _pattern(check[1], value)
    elif tag == "bool":
        _expect(type(value) is bool)
    elif tag == "int":
        _expect(type(value) is int and abs(value) < _INT_LIMIT)
    elif tag == "float":
        _expect(type(value) is float or (type(value) is int and abs(value) < _INT_LIMIT))
        return float(value)
    elif tag == "lit":
        _expect(any(type(value) is type(v) and value == v for v in check[1]))
    elif tag == "enum":
        _expect(type(value) is str)
        return getattr(plan, check[1])(value)
    elif tag == "node":
        return _node(check[1], value)
    elif tag == "list":
        _expect(type(value) is list)
        return [_value(check[1], v) for v in value]
    elif tag == "dict":
        _expect(type(value) is dict and all(type(k) is str for k in value))
        return {k: _value(check[1], v) for k, v in value.items()}
    else:
        raise _Undecided
    return value


def _kind(rule: KindRule, value: Any) -> Any:
    if rule.before is not None:
        value = rule.before(value)
    if rule.type is float and type(value) is int:
        value = float(value)
    _expect(type(value) is rule.type)
    if rule.type is int:
        _expect(abs(value) < _INT_LIMIT)
    if rule.values is not None:
        _expect(value in rule.values)
    if rule.ge is not None:
        _expect(value >= rule.ge)
    if rule.min_length is not None:
        _expect(len(value) >= rule.min_length)
    if rule.pattern is not None:
        _pattern(rule.pattern, value)
    if rule.after is not None:
        value = rule.after(value)
    return value


def _pattern(pattern: str, text: str) -> None:
    # Searched, as pydantic's `pattern` is. Only printable ASCII is decided here: Python's and
    # pydantic's regular expressions read `$` before a final newline and some Unicode spaces
    # differently.
    _expect(text.isascii() and text.isprintable() and re.search(pattern, text) is not None)


def _expect(ok: bool) -> None:
    if not ok:
        raise _Undecided


__all__ = ["load"]
