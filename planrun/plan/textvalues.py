"""Values turned into text inside expressions read as JSON, never as Python reprs.

`'%s' % steps` or `'{}'.format(d)` would otherwise print `{'a': None, 'b': True}`: what a
template shows of a mapping, a list, null or a boolean is its JSON text (`{"a": null, "b":
true}`), the same as a non-string value interpolated into a string.
"""

from __future__ import annotations

import json
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any

__all__ = ["as_text", "as_text_arg", "percent_format"]


def as_text(value: Any) -> str:
    """`value` as text the way a template shows it (`~`, `string`, `join`): a string as it
    is, anything else as JSON (`null`, `true`, `{"k": 1}`)."""
    if isinstance(value, str):
        return value
    shown = as_text_arg(value)
    return shown if isinstance(shown, str) else json.dumps(shown)


def as_text_arg(value: Any) -> Any:
    """`value` as a formatting argument: strings and numbers as they are, the rest as JSON."""
    if isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    try:
        return json.dumps(_plain(value), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _plain(value: Any) -> Any:
    # Read-only views (the sandbox's) are mappings and sequences, not dicts and lists.
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | range | Iterator | KeysView | ValuesView | ItemsView):
        return [_plain(v) for v in value]  # a filter's generator is bounded (sandbox.py)
    return value


def percent_format(fmt: str, right: Any) -> str:
    """`fmt % right` with every argument shown by `as_text_arg`."""
    if isinstance(right, tuple):
        return fmt % tuple(as_text_arg(v) for v in right)
    if isinstance(right, Mapping) and "%(" in fmt:
        return fmt % {k: as_text_arg(v) for k, v in right.items()}
    return fmt % (as_text_arg(right),)
