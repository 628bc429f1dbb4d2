"""Plain references (`${a.b[0]}`) are evaluated by planrun without Jinja2; every other
expression in Jinja2's sandbox. The two paths agree on every plain reference: the names it
reads, its value, and whether it fails (the plain path's message names the missing part:
`undefined name 'a.b[0]'`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planrun.plan.expressions import ExpressionError, jinja_expr, parse_expr

# Names no Jinja2 global, constant or method of a dict, list or str takes: reading one of
# those as `.name` is where the paths differ by design (Jinja2 reads `d.items` as the method,
# planrun's plain path as the key), so a plan must write `d['items']` for that key either way.
ROOTS = ["a", "b", "cc", "steps", "_u"]
KEYS = ["a", "b", "cc", "x_y", "k k", "_u", "0"]

leaf = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-2, 2) | st.text(max_size=3)
values = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner),
    max_leaves=12,
)
scopes = st.dictionaries(st.sampled_from(ROOTS), values)
identifier = st.sampled_from([k for k in KEYS if k.isidentifier()])
accessor = (
    identifier.map(lambda k: f".{k}")
    | st.integers(0, 3).map(lambda i: f"[{i}]")
    | st.sampled_from(KEYS).map(lambda k: f"['{k}']")
    | st.sampled_from(KEYS).map(lambda k: f'["{k}"]')
)
references = st.builds(
    lambda root, accessors, pad: f"{pad}{root}{''.join(accessors)}{pad}",
    st.sampled_from(ROOTS),
    st.lists(accessor, max_size=4),
    st.sampled_from(["", " "]),
)


def outcome(expr: Any, scope: dict[str, Any]) -> tuple[str, str]:
    try:
        return "value", json.dumps(expr.evaluate(scope), sort_keys=True)
    except ExpressionError:
        return "error", ""


@pytest.mark.slow  # many generated cases: the full suite runs it
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reference=references, scope=scopes)
def test_a_plain_reference_reads_the_same_through_both_paths(
    reference: str, scope: dict[str, Any]
) -> None:
    plain, jinja = parse_expr(reference), jinja_expr(reference)
    assert plain.ref is not None  # it took the plain path
    assert (plain.names, plain.step_refs, plain.steps_dynamic) == (
        jinja.names,
        jinja.step_refs,
        jinja.steps_dynamic,
    )
    assert outcome(plain, scope) == outcome(jinja, scope)


@pytest.mark.parametrize(
    ("reference", "missing"),
    [("a.x", "a.x"), ("a.b[5]", "a.b[5]"), ("nope", "nope"), ("a.b[0].z", "a.b[0].z")],
)
def test_the_plain_path_names_the_part_that_is_missing(reference: str, missing: str) -> None:
    scope = {"a": {"b": [{"c": 1}]}}
    with pytest.raises(ExpressionError) as info:
        parse_expr(reference).evaluate(scope)
    assert (info.value.message, info.value.name) == (f"undefined name '{missing}'", missing)
    with pytest.raises(ExpressionError):
        jinja_expr(reference).evaluate(scope)
