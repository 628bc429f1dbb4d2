"""The rules of each kind of value a plan field can be (planrun.plan.definition's `Kind`), written once and
without pydantic: planrun.plan.model makes its pydantic types from them, and planrun.plan.fastcheck
applies them itself when a plan is checked without pydantic."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from planrun.plan.definition import STEP_ID_PATTERN
from planrun.plan.durations import parse_duration


class KindRule:
    """A kind of value: `before` turns what was written into the value (or raises ValueError),
    which must then be of `type` (strictly: no bool for an int), one of `values` if given, at
    least `ge`, at least `min_length` long, hold `pattern` (searched, as pydantic's `pattern`
    is), and pass `after` (which raises ValueError). A plain class (a NamedTuple costs every
    fresh check ~1 M instructions to create): read by field only."""

    __slots__ = ("type", "before", "after", "ge", "min_length", "pattern", "values")

    def __init__(
        self,
        type: type,  # noqa: A002 - the field's name
        before: Callable[[Any], Any] | None = None,
        after: Callable[[Any], Any] | None = None,
        ge: int | None = None,
        min_length: int | None = None,
        pattern: str | None = None,
        values: tuple[Any, ...] | None = None,
    ) -> None:
        self.type = type
        self.before = before
        self.after = after
        self.ge = ge
        self.min_length = min_length
        self.pattern = pattern
        self.values = values


def not_bool(value: Any) -> Any:
    # pydantic takes `true` as 1 for an int field; `retries: true` is a mistake, not a count.
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number, got {str(value).lower()}")
    return whole(value)


def whole(value: Any) -> Any:
    # `2.0` is the number 2 to JSON (and to the schema's "integer"): taken as 2, not refused.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def step_id(value: Any) -> Any:
    """mcp-cli plans number their steps (`index: 1`, `depends_on: [1]`): a whole number is the
    id it spells."""
    if isinstance(value, bool):
        return value
    value = whole(value)
    if isinstance(value, int):
        return str(value)
    return value


def glob_check(output: bool) -> Callable[[str], str]:
    """The check of a `sources` (or, with `output`, an `outputs`) entry as written; whether
    an output stays inside the working directory depends on the step's `cwd` too, and is
    checked with it (planrun.plan.validate_places.check_placed_patterns)."""

    def check(value: str) -> str:
        # Imported here: the cache's glob checks only for a plan with cache globs.
        from planrun.cache.globs import pattern_problem

        problem = pattern_problem(value, output=False)
        if problem:
            raise ValueError(problem)
        return value

    return check


KIND_RULES: dict[str, KindRule] = {
    "step_id": KindRule(str, before=step_id, pattern=STEP_ID_PATTERN),
    "duration": KindRule(float, before=parse_duration),
    "count": KindRule(int, before=not_bool, ge=0),
    "positive_count": KindRule(int, before=not_bool, ge=1),
    # `sources` / `outputs` entries: globs relative to the working directory, `!` excludes.
    "source_glob": KindRule(str, after=glob_check(False), min_length=1),
    "output_glob": KindRule(str, after=glob_check(True), min_length=1),
    # A `foreach` string is one `${expression}` (validate.py parses it: fanout.foreach_problem).
    "foreach_expression": KindRule(str),
    "version": KindRule(int, before=not_bool, values=(1,)),
    "approval_text": KindRule(str, pattern=r"\S\s+\S"),
}
