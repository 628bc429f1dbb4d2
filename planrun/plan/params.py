"""`params`: the variables that are a plan's command-line interface.

A `--var` value arrives as the text typed (`GivenText`); for a declared param it is converted
to the param's type (`version=1.10` stays the string "1.10"), for any other name it is read
as YAML, as before. A run then checks choices and required params (exit 2, naming them), and
fills in the defaults under what was given. Validation checks the declarations themselves.

A default that is a text holding `${...}` is an expression, as a `just` parameter's default
is: rendered when the run starts over `env`, the given values and the params before it, then
checked against the param's type and choices like a given value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from planrun.errors import UsageError
from planrun.plan.definition import NAME_PATTERN, RESERVED_NAMES, Param, reserved

Path = tuple[str | int, ...]

_ARTICLE = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "list": "a list",
    "mapping": "a mapping",
}
CLI_ARGS = "cli_args"
"""The words after `--` of `planrun run` ([] without them): every run has it."""
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_INTEGER = re.compile(r"[+-]?[0-9]+")


class GivenText(str):
    """A `--var` value as typed: its reading depends on whether its name is a param."""

    __slots__ = ()


class ParamError(ValueError):
    """A value that is not of its param's type."""


def from_text(kind: str, text: str) -> Any:
    """`text` (a --var value) as a value of `kind` (ParamError if it is not one)."""
    if kind == "string":
        return str(text)
    stripped = text.strip()
    if kind == "integer" and _INTEGER.fullmatch(stripped):
        return int(stripped)
    if kind == "number":
        if _INTEGER.fullmatch(stripped):
            return int(stripped)
        try:
            number = float(stripped)
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            return number
    if kind == "boolean" and stripped.lower() in _TRUE | _FALSE:
        return stripped.lower() in _TRUE
    if kind in ("list", "mapping"):
        return of_type(kind, _cli_value(text), text)
    raise ParamError(f"expected {_ARTICLE[kind]}, got {text!r}")


def of_type(kind: str, value: Any, shown: Any = None) -> Any:
    """`value` when it is of `kind` (an integer is a number too), else ParamError."""
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        # finite, as `--var x=nan` is refused
        "number": (isinstance(value, int) and not isinstance(value, bool))
        or (isinstance(value, float) and math.isfinite(value)),
        "boolean": isinstance(value, bool),
        "list": isinstance(value, list),
        "mapping": isinstance(value, dict),
    }[kind]
    if not ok:
        raise ParamError(
            f"expected {_ARTICLE[kind]}, got {_quoted(value if shown is None else shown)}"
        )
    return value


def _plain(value: Any) -> str:
    """A value in a message: a string as it is, anything else as JSON (`true`, `{"a": 1}`)."""
    return value if isinstance(value, str) else _quoted(value)


def _quoted(value: Any) -> str:
    """A value in a message: a string quoted ('x'), anything else as JSON."""
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _read(params: Mapping[str, Param], name: str, value: Any) -> Any:
    param = params.get(name)
    if isinstance(value, GivenText):
        if param is None:
            return _cli_value(str(value))
        return from_text(param.type, str(value))
    return value if param is None else of_type(param.type, value)


def _cli_value(text: str) -> Any:
    """A --var value of no declared type (or a list or mapping one), read as YAML."""
    from planrun.plan.expressions import parse_cli_value

    try:
        return parse_cli_value(text)
    except ValueError as exc:  # infinity or NaN
        raise ParamError(str(exc)) from None


def bind_params(
    params: Mapping[str, Param],
    given: Mapping[str, Any],
    required: bool = True,
    env: Mapping[str, str] | None = None,
    place: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """What a run starts with: the given values read for their params, then each param's
    default under them. UsageError (exit 2) for a value of the wrong type or outside the
    choices, and (when `required`) for required params without a value (all named). With
    `env`, default expressions are rendered (when not `required`, one that cannot be stays
    as written: `list`, `show`). `place`: where a value not given as a --var was written
    (`vars file F:LINE:COL`), asked for only when that value is refused."""
    out: dict[str, Any] = {}
    for name, value in given.items():
        where = f"--var {name}" if isinstance(value, GivenText) else name
        if not isinstance(value, GivenText) and place is not None:
            where = f"{place(name)}: {name}"  # at its place in the vars file, when it is there
        try:
            out[name] = _read(params, name, value)
        except ParamError as exc:
            raise UsageError(f"{where}: {exc}") from None
        choices = params[name].choices if name in params else None
        if choices is not None and out[name] not in choices:
            shown = ", ".join(_plain(c) for c in choices)
            raise UsageError(f"{where}: {_quoted(out[name])} is not one of {shown}")
    missing = [n for n, p in params.items() if p.required and n not in out]
    if missing and required:
        names = ", ".join(missing)
        hint = " ".join(f"--var {n}=..." for n in missing)
        raise UsageError(
            f"missing required param{'s' if len(missing) > 1 else ''}: {names} ({hint})"
        )
    defaults = {n: p.default for n, p in params.items() if not p.required}
    bound = {**defaults, **out}
    if env is not None and any(_is_expression(d) for n, d in defaults.items() if n not in out):
        _render_defaults(params, out, bound, env, strict=required)
    return bound


def _render_defaults(
    params: Mapping[str, Param],
    given: dict[str, Any],
    bound: dict[str, Any],
    env: Mapping[str, str],
    strict: bool,
) -> None:
    """Each default expression in `bound` rendered in file order (over `env`, the given values
    and the params before it) and checked as a given value is (UsageError when `strict`)."""
    from planrun.plan.expressions import ExpressionError, resolve

    scope: dict[str, Any] = {**given, "env": env}
    for name, param in params.items():
        if name not in given and name in bound and _is_expression(bound[name]):
            try:
                value = resolve(bound[name], scope, path=("params", name, "default"))
                of_type(param.type, value)
            except (ExpressionError, ParamError) as exc:
                if strict:
                    message = exc.message if isinstance(exc, ExpressionError) else str(exc)
                    raise UsageError(f"param '{name}': default {message}") from None
                scope[name] = bound[name]
                continue
            if strict and param.choices is not None and value not in param.choices:
                shown = ", ".join(_plain(c) for c in param.choices)
                raise UsageError(f"param '{name}': default {_quoted(value)} is not one of {shown}")
            bound[name] = value
        if name in bound:
            scope[name] = bound[name]


def param_problems(
    params: Mapping[str, Any], variables: Mapping[str, Any], given: frozenset[str] = frozenset()
) -> Iterator[tuple[Path, str]]:
    """What is wrong with the plan's `params` beyond their schema: (path, message). `given`:
    the names a default expression may read besides `env` and the params before it."""
    names = list(params)
    for index, (name, param) in enumerate(params.items()):
        at: Path = ("params", name)
        if name in variables:
            yield at, f"'{name}' is in both params and variables (a name is one or the other)"
        if name in RESERVED_NAMES:
            yield at, f"param '{name}': {reserved(name)}"
        elif not re.fullmatch(NAME_PATTERN, name):
            yield at, f"param name '{name}' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"
        yield from _declaration_problems(name, _fields(param), at)
        default = _fields(param)[1]
        if _is_expression(default):
            yield from _default_reads(name, default, names, index, given)


def _is_expression(value: Any) -> bool:
    """Whether a default is a text holding `${...}` (not only a literal `$${`)."""
    if not isinstance(value, str) or "${" not in value:
        return False
    from planrun.plan.expressions import ExpressionError, parse_template

    try:
        return parse_template(value) is not None
    except ExpressionError:
        return True  # a bad expression: said by _default_reads


def _default_reads(
    name: str, default: str, names: list[str], index: int, given: frozenset[str]
) -> Iterator[tuple[Path, str]]:
    """A default expression's syntax and names: `env`, the given ones, the params before it."""
    from planrun.plan.expressions import ExpressionError, parse_template
    from planrun.suggest import did_you_mean

    at: Path = ("params", name, "default")
    try:
        template = parse_template(default)
    except ExpressionError as exc:
        yield at, f"param '{name}': default: {exc.message}"
        return
    known = set(names[:index]) | given | {"env"}
    for expr in template.exprs if template is not None else ():
        for read in sorted(expr.names - known):
            if read in names:
                yield at, f"param '{name}': default: reads '{read}', which is declared after it"
            else:
                hint = did_you_mean(read, known - {"env"})
                yield (
                    at,
                    f"param '{name}': default: undefined name '{read}'"
                    + (f" ({hint})" if hint else ""),
                )


def _fields(param: Any) -> tuple[str, Any, list[Any] | None]:
    """(type, default, choices) of a param, validated or as written (another error in the
    plan's header leaves them unvalidated: they are still checked, where they make sense)."""
    if isinstance(param, Param):
        return param.type, param.default, param.choices
    raw = param if isinstance(param, Mapping) else {}
    kind, choices = raw.get("type", "string"), raw.get("choices")
    return (
        kind if kind in _ARTICLE else "",
        raw.get("default"),
        choices if isinstance(choices, list) else None,
    )


def _declaration_problems(
    name: str, fields: tuple[str, Any, list[Any] | None], at: Path
) -> Iterator[tuple[Path, str]]:
    kind, default, choices = fields
    if not kind:
        return  # an unknown type: the schema says so
    if choices == []:
        yield (*at, "choices"), f"param '{name}': choices: an empty list allows no value"
    for i, choice in enumerate(choices or ()):
        try:
            of_type(kind, choice)
        except ParamError as exc:
            yield (*at, "choices", i), f"param '{name}': choice {exc}"
    if default is None or _is_expression(default):
        return  # an expression is checked once rendered, when the run starts
    try:
        of_type(kind, default)
    except ParamError as exc:
        yield (*at, "default"), f"param '{name}': default {exc}"
        return
    if choices is not None and default not in choices:
        shown = ", ".join(_plain(c) for c in choices)
        yield (*at, "default"), f"param '{name}': default {_quoted(default)} is not one of {shown}"


def param_rows(params: Mapping[str, Param]) -> dict[str, dict[str, Any]]:
    """What `planrun list` shows of each param."""
    return {
        name: {
            "type": p.type,
            "default": p.default,
            "required": p.required,
            "choices": p.choices,
            "description": p.description,
        }
        for name, p in params.items()
    }


def render_params(rows: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """`list`'s lines for the params: name, type, required or default, choices, description."""
    if not rows:
        return []
    width = max(len(n) for n in rows)
    lines = ["params:"]
    for name, row in rows.items():
        parts = [row["type"]]
        if row["required"]:
            parts.append("required")
        elif row["default"] is not None:
            parts.append(f"default {json.dumps(row['default'], ensure_ascii=False)}")
        if row["choices"] is not None:
            parts.append("one of " + ", ".join(_plain(c) for c in row["choices"]))
        text = f"  {name.ljust(width)}  ({'; '.join(parts)})"
        lines.append(text + (f"  {row['description']}" if row["description"] else ""))
    return lines
