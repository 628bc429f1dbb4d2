"""The literal arguments of built-in tool steps, checked against the tools' input schemas.

The schemas are the ones `planrun tools` shows. Only the small part of JSON Schema they use is
understood here (type, properties, required, additionalProperties, items, minItems, minimum,
exclusiveMinimum, pattern, oneOf/anyOf), which keeps validation free of a schema library. A
value that is exactly one `${...}` can be anything until the run; one with `${...}` inside
text is a string whose content is not known yet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from planrun.plan.expressions import ExpressionError, format_path, parse_template
from planrun.suggest import closest
from planrun.text import type_name
from planrun.tools import builtin_registry

Path = tuple[str | int, ...]

_WORDS = {
    "string": "a string",
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}


class ArgProblem:
    """One thing wrong with a step's arguments; `path` starts at the step (`("args", ...)`).
    A plain class, not a NamedTuple or dataclass (a tenth of a NamedTuple's cost to create at
    import, which every fresh check pays): read by field only, never replaced, compared or
    written out."""

    __slots__ = ("path", "message", "hint", "key", "names")

    def __init__(
        self,
        path: Path,
        message: str,
        hint: str | None = None,
        key: bool = False,  # the position is the key's (an unknown argument), not the value's
        names: str | None = None,  # the argument it is missing, or the one it may have meant
    ) -> None:
        self.path = path
        self.message = message
        self.hint = hint
        self.key = key
        self.names = names


@cache
def builtin_schema(tool: str) -> dict[str, Any] | None:
    """The input schema of built-in tool `tool`, or None if it is not built in."""
    spec = builtin_registry().get(tool)
    return spec.input_schema if spec is not None else None


def check_builtin_args(tool: str, args: dict[str, Any]) -> list[ArgProblem]:
    """Problems with the literal arguments of a built-in tool step (none for other tools)."""
    schema = builtin_schema(tool)
    if schema is None:
        return []
    problems = list(_check_object(args, schema, ("args",), top=True))
    # `command:` instead of `cmd:` is one mistake: the hint says it, "missing 'cmd'" would not.
    suggested = {p.names for p in problems if p.key}
    return [p for p in problems if p.key or p.names is None or p.names not in suggested]


def _kind(value: Any) -> str:
    """The JSON Schema type of a plan's value (an integer is an `integer`)."""
    return "integer" if isinstance(value, int) and not isinstance(value, bool) else type_name(value)


def _fits(kind: str, allowed: str | list[str]) -> bool:
    names = [allowed] if isinstance(allowed, str) else allowed
    return kind in names or (kind == "integer" and "number" in names)


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)[:80]


def _check(value: Any, schema: dict[str, Any], path: Path) -> Iterator[ArgProblem]:
    templated = False
    if isinstance(value, str) and "${" in value:
        try:
            tpl = parse_template(value)
        except ExpressionError:
            return  # reported by the expression checks
        if tpl is not None and tpl.whole is not None:
            return  # any type: known only at run time
        templated = tpl is not None and any(True for _ in tpl.exprs)
    where = format_path(path)
    choices = schema.get("oneOf") or schema.get("anyOf")
    if choices:
        kind = _kind(value)
        fitting = [c for c in choices if "type" not in c or _fits(kind, c["type"])]
        if not fitting:
            words = [
                _WORDS.get(c["type"], c["type"]) for c in choices if isinstance(c["type"], str)
            ]
            yield ArgProblem(path, f"{where}: expected {' or '.join(words)}, got {_shown(value)}")
            return
        schema = fitting[0]
    allowed = schema.get("type")
    if allowed is not None and not _fits(_kind(value), allowed):
        names = [allowed] if isinstance(allowed, str) else allowed
        words = [_WORDS.get(n, n) for n in names]
        expected = ", ".join(words[:-1]) + f" or {words[-1]}" if len(words) > 1 else words[0]
        got = f"a string ({_shown(value)})" if templated else _shown(value)
        yield ArgProblem(path, f"{where}: expected {expected}, got {got}")
        return
    if isinstance(value, dict):
        yield from _check_object(value, schema, path)
    elif isinstance(value, list):
        yield from _check_array(value, schema, path)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            yield ArgProblem(path, f"{where}: expected {schema['minimum']} or more, got {value}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            bound = schema["exclusiveMinimum"]
            yield ArgProblem(path, f"{where}: expected more than {bound}, got {value}")
    elif isinstance(value, str) and not templated and not _matches(value, schema):
        yield ArgProblem(path, f"{where}: {_shown(value)} does not match '{schema['pattern']}'")


def _matches(text: str, schema: dict[str, Any]) -> bool:
    pattern = schema.get("pattern")
    return pattern is None or re.search(pattern, text) is not None


def _check_object(
    value: dict[str, Any], schema: dict[str, Any], path: Path, *, top: bool = False
) -> Iterator[ArgProblem]:
    props: dict[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for name in schema.get("required", ()):
        if name not in value:
            # At the top: `echo` without args at all is one missing argument too.
            label = "" if top else f"{format_path(path)}: "
            yield ArgProblem(path, f"{label}missing argument '{name}'", names=name)
    for name, item in value.items():
        sub = props.get(name)
        if sub is not None:
            yield from _check(item, sub, (*path, name))
        elif extra is False:
            close = closest(name, props)
            hint = f"did you mean '{close}'?" if close else f"allowed: {', '.join(props)}"
            label = "" if top else f"{format_path(path)}: "
            yield ArgProblem(
                (*path, name),
                f"{label}unknown argument '{name}'",
                hint=hint,
                key=True,
                names=close,
            )
        elif isinstance(extra, dict):
            yield from _check(item, extra, (*path, name))


def _check_array(value: list[Any], schema: dict[str, Any], path: Path) -> Iterator[ArgProblem]:
    least = schema.get("minItems")
    if least is not None and len(value) < least:
        noun = "item" if least == 1 else "items"
        yield ArgProblem(
            path, f"{format_path(path)}: expected at least {least} {noun}, got {_shown(value)}"
        )
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            yield from _check(item, items, (*path, i))
