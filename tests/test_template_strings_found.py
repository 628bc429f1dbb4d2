"""Every string holding `${` inside a value is found with its path, in document order (a
depth-first walk: a mapping's keys and a list's items in order), whatever else it holds."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from planrun.plan.expressions import template_strings

texts = st.sampled_from(["", "plain", "${a}", "x ${b.c} y", "$", "{", "${"])
leaf = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-1, 1) | texts
values = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from("abcd"), inner),
    max_leaves=20,
)


def walked(value: Any, path: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    """The same, written recursively: the reference."""
    if isinstance(value, str):
        return [(path, value)] if "${" in value else []
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in walked(v, (*path, k))]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in walked(v, (*path, i))]
    return []


def test_nested_strings_come_with_their_paths_in_order() -> None:
    value = {"a": ["x", "${a}", {"b": "${c}", "d": [1, "${e}"]}], "f": "${g}", "h": 2}
    assert template_strings(value, ("args",)) == [
        (("args", "a", 1), "${a}"),
        (("args", "a", 2, "b"), "${c}"),
        (("args", "a", 2, "d", 1), "${e}"),
        (("args", "f"), "${g}"),
    ]
    assert template_strings("${x}", ("cwd",)) == [(("cwd",), "${x}")]
    assert template_strings(["plain", 3, None]) == []


@given(values)
def test_any_value_is_walked_as_the_recursive_reference_walks_it(value: Any) -> None:
    assert template_strings(value, ("p",)) == walked(value, ("p",))
