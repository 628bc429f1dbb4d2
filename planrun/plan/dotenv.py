"""Plan-level `dotenv:` files: KEY=VALUE lines read into the environment of a run's steps."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from planrun.errors import Diagnostic, PlanInvalid
from planrun.inputfiles import NotARegularFile, read_regular_file
from planrun.plan.loader import invalid, utf8_text

MAX_DOTENV_BYTES = 1 << 20  # a dotenv file is a handful of settings, never megabytes
_KEY = r"[A-Za-z_][A-Za-z0-9_]*"  # compiled on first use (re's cache), not at import
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "$"}


class DotenvEntry(NamedTuple):
    """One `dotenv:` item: the path as written (without `?`), whether optional, its position."""

    path: str
    optional: bool
    line: int
    col: int


class _LineError(Exception):
    def __init__(self, col: int, message: str) -> None:
        super().__init__(message)
        self.col = col
        self.message = message


def parse_dotenv(text: str, file: str) -> dict[str, str]:
    """The KEY=VALUE pairs of a dotenv text; PlanInvalid with file:line:col for a bad line.

    Lines: blank, `# comment`, `[export ]KEY=VALUE`. VALUE is unquoted (trimmed, ` #` starts a
    comment), 'single-quoted' (literal) or "double-quoted" (\\n \\t \\r \\" \\\\ \\$ escapes).
    Nothing is expanded: `$X` stays `$X`.
    """
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if "\0" in line:  # no environment can hold one
            raise invalid(file, number, line.index("\0") + 1, "dotenv: a NUL character")
        try:
            pair = _parse_line(line)
        except _LineError as exc:
            raise invalid(file, number, exc.col, f"dotenv: {exc.message}") from None
        if pair is not None:
            out[pair[0]] = pair[1]
    return out


def _parse_line(line: str) -> tuple[str, str] | None:
    body = line.lstrip()
    if not body or body.startswith("#"):
        return None
    col = len(line) - len(body) + 1
    if body.startswith("export") and body[6:7] in (" ", "\t"):
        rest = body[6:].lstrip()
        col += len(body) - len(rest)
        body = rest
    key_match = re.match(_KEY, body)
    if key_match is None:
        raise _LineError(col, "expected KEY=VALUE with KEY made of letters, digits and _")
    key = key_match.group()
    after = body[len(key) :]
    stripped = after.lstrip(" \t")
    eq_col = col + len(key) + len(after) - len(stripped)
    if not stripped.startswith("="):
        raise _LineError(eq_col, f"expected '=' after {key}")
    raw = stripped[1:]
    value_col = eq_col + 1 + len(raw) - len(raw.lstrip(" \t"))
    return key, _value(raw.strip(" \t"), value_col)


def _value(raw: str, col: int) -> str:
    if raw[:1] == "'":
        end = raw.find("'", 1)
        if end < 0:
            raise _LineError(col, "unterminated single-quoted value")
        _only_comment(raw[end + 1 :], col + end + 1)
        return raw[1:end]
    if raw[:1] == '"':
        chars: list[str] = []
        i = 1
        while i < len(raw):
            c = raw[i]
            if c == "\\" and i + 1 < len(raw):
                chars.append(_ESCAPES.get(raw[i + 1], "\\" + raw[i + 1]))
                i += 2
                continue
            if c == '"':
                _only_comment(raw[i + 1 :], col + i + 1)
                return "".join(chars)
            chars.append(c)
            i += 1
        raise _LineError(col, "unterminated double-quoted value")
    for i, c in enumerate(raw):
        if c == "#" and i > 0 and raw[i - 1] in " \t":
            return raw[:i].rstrip(" \t")
    return raw


def _only_comment(rest: str, col: int) -> None:
    tail = rest.lstrip(" \t")
    if tail and not tail.startswith("#"):
        raise _LineError(col + len(rest) - len(tail), "unexpected text after the quoted value")


def dotenv_entries(doc: Any, items: list[str]) -> list[DotenvEntry]:
    """The plan's `dotenv:` items with their positions in the plan file."""
    out = []
    for i, item in enumerate(items):
        line, col = doc.pos(("dotenv", i))
        optional = item.endswith("?")
        out.append(DotenvEntry(item[:-1] if optional else item, optional, line, col))
    return out


def read_dotenv_file(entry: DotenvEntry, cwd: str, plan_file: str) -> dict[str, str] | None:
    """One file's pairs; None if it is optional and missing; PlanInvalid for a problem."""

    def problem(message: str) -> PlanInvalid:
        return invalid(plan_file, entry.line, entry.col, message)

    path = entry.path if os.path.isabs(entry.path) else os.path.join(cwd, entry.path)
    try:  # a FIFO or a device would block or never end: refused, never opened to block
        raw = read_regular_file(path, MAX_DOTENV_BYTES)
    except FileNotFoundError:
        if entry.optional:
            return None
        raise problem(
            f"dotenv file not found: {entry.path} (end the name with '?' to make it optional)"
        ) from None
    except NotARegularFile:
        raise problem(f"dotenv file {entry.path} is not a regular file") from None
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise problem(
                f"dotenv file {entry.path} is larger than {MAX_DOTENV_BYTES >> 20} MiB"
            ) from None
        raise problem(f"cannot read dotenv file {entry.path}: {exc.strerror}") from None
    return dotenv_pairs(raw, entry.path)


def dotenv_pairs(raw: bytes, file: str) -> dict[str, str]:
    """The KEY=VALUE pairs of a dotenv file's bytes (a plan's `dotenv:` file, an MCP server's
    `envFile`); PlanInvalid at file:line:col for a byte that is not UTF-8, a NUL or a bad line."""
    return parse_dotenv(utf8_text(raw, file, "dotenv: not valid UTF-8"), file)


def rendered_names(
    doc: Any, items: list[str], variables: Mapping[str, Any], env: Mapping[str, str]
) -> list[str]:
    """The `dotenv:` file names with their `${...}` rendered (variables and `env`, as known
    before any step runs); PlanInvalid at the name that cannot be rendered."""
    if not any("${" in item for item in items):
        return items
    from planrun.plan.expressions import ExpressionError, resolve, to_text

    scope = {**variables, "env": dict(env)}
    out = []
    for i, item in enumerate(items):
        try:
            out.append(to_text(resolve(item, scope, path=("dotenv", i))))
        except ExpressionError as exc:
            line, col = doc.pos(("dotenv", i))
            raise invalid(doc.file, line, col, exc.message) from None
    return out


def load_dotenv(doc: Any, items: list[str], cwd: str) -> dict[str, str]:
    """All of the plan's dotenv files merged, later files winning (the process env is not applied)."""
    merged: dict[str, str] = {}
    for entry in dotenv_entries(doc, items):
        pairs = read_dotenv_file(entry, cwd, doc.file)
        if pairs:
            merged.update(pairs)
    return merged


def dotenv_problems(
    checked: Any, cwd: str, variables: Mapping[str, Any] | None = None
) -> list[Diagnostic]:
    """For `validate`: what reading a checked plan's dotenv files would fail on, if anything."""
    plan = checked.plan
    if plan is None or not plan.dotenv:
        return []
    try:
        given = {**plan.variables, **(variables or {})}
        names = rendered_names(checked.doc, plan.dotenv, given, os.environ)
        load_dotenv(checked.doc, names, cwd)
    except PlanInvalid as exc:
        return list(exc.diagnostics)
    return []


def step_environment(dotenv: dict[str, str], process_env: dict[str, str]) -> dict[str, str]:
    """The environment steps see: dotenv values under the process environment (which wins)."""
    return {**dotenv, **process_env}
