"""JSON plans: json.loads for the data, and a lazy scan of the text for positions."""

from __future__ import annotations

import bisect
import json
import math
import re
from typing import Any

from planrun.errors import Diagnostic, PlanInvalid
from planrun.plan.loader._base import (
    MAX_DEPTH,
    TOO_DEEP,
    Document,
    NotJsonNumber,
    PathPart,
    Position,
    check_top_level,
    gc_paused,
    invalid,
    line_col,
)


def load_json(text: str, file: str) -> Document:
    duplicates: list[bool] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) != len(pairs):
            duplicates.append(True)
        return result

    try:
        data = gc_paused(lambda: json.loads(text, object_pairs_hook=pairs_hook))
    except json.JSONDecodeError as exc:
        raise invalid(file, exc.lineno, exc.colno, f"invalid JSON: {exc.msg}") from None
    except RecursionError:  # json's own limit, far beyond ours: find where ours is passed
        offset = _json_too_deep_offset(text)
        raise invalid(file, *line_col(text, offset), TOO_DEEP) from None
    except ValueError:  # the one other refusal: an integer of more than 4,300 digits
        raise invalid(file, 1, 1, "invalid JSON: a number has too many digits") from None
    if "\\u" in text:
        _check_surrogates(text, file)
    locator = _JsonLocator(text)
    too_deep = _too_deep_path(data) if text.count("[") + text.count("{") > MAX_DEPTH else None
    if too_deep is not None:
        raise invalid(file, *locator.pos(too_deep, False), TOO_DEEP)
    if _MAYBE_NOT_FINITE.search(text) is not None:
        _check_finite(data, text, file, locator)
    if duplicates:
        raise PlanInvalid(
            [
                Diagnostic(
                    file,
                    *locator.line_col(second),
                    "error",
                    f"duplicate key '{name}' (first at line {locator.line_col(first)[0]})",
                )
                for name, first, second in locator.duplicates()
            ]
        )
    check_top_level(data, file, lambda: locator.pos((), False))
    return Document(file, data, locator)


# What Python's reader takes for a number JSON does not have: NaN, Infinity, and a literal past
# the largest double (an exponent of 3 digits or more, or 309 digits before the point) that it
# reads as infinity. Only a text with one of these is walked.
_MAYBE_NOT_FINITE = re.compile(r"NaN|Infinity|[eE][+-]?\d{3}|\d{309}")
_NUMBER_WORD = re.compile(r"-?[0-9A-Za-z.+-]+")


def _check_finite(data: Any, text: str, file: str, locator: _JsonLocator) -> None:
    """Refuse NaN and infinity, at the value: JSON has neither, and no document could carry
    them on as JSON."""
    found = _not_finite_below(data) if data.__class__ is dict or data.__class__ is list else None
    if found is None:
        return
    line, col = locator.pos(tuple(reversed(found)), False)
    written = _NUMBER_WORD.match(text.splitlines()[line - 1], col - 1)
    word = written.group() if written is not None else repr(found)
    message = f"invalid JSON: {word} is not a JSON number (JSON has no NaN or infinity)"
    raise NotJsonNumber(invalid(file, line, col, message).diagnostics)


def _not_finite_below(value: Any) -> list[PathPart] | None:
    # Recursion is bounded by MAX_DEPTH (checked before); the path is built reversed.
    items = value.items() if value.__class__ is dict else enumerate(value)
    for key, child in items:
        if child.__class__ is float:
            if not math.isfinite(child):
                return [key]
        elif child.__class__ is dict or child.__class__ is list:
            below = _not_finite_below(child)
            if below is not None:
                below.append(key)
                return below
    return None


# An escaped backslash, a surrogate pair (one character), or half of a pair alone.
_SURROGATE_ESCAPE = re.compile(
    r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    r"|\\u([dD][89a-fA-F][0-9a-fA-F]{2})"
)


def _check_surrogates(text: str, file: str) -> None:
    """json.loads turns a lone `\\ud800` into a string no UTF-8 output can hold (YAML refuses
    it): an error at the escape, so no plan value can break printing or storing later."""
    for m in _SURROGATE_ESCAPE.finditer(text):
        if m.group(1):
            raise invalid(
                file,
                *line_col(text, m.start()),
                f"invalid JSON: \\u{m.group(1)} is half of a surrogate pair, not a character",
            )


def _too_deep_path(data: Any) -> tuple[PathPart, ...] | None:
    """The path of the first mapping or list nested deeper than MAX_DEPTH, if any."""
    found = _too_deep_below(data, 1)
    return None if found is None else tuple(reversed(found))


def _too_deep_below(value: Any, level: int) -> list[PathPart] | None:
    # Recursion is bounded by MAX_DEPTH; the path is built (reversed) only when found.
    if level > MAX_DEPTH:
        return []
    items = value.items() if value.__class__ is dict else enumerate(value)
    for key, child in items:
        if child.__class__ is dict or child.__class__ is list:
            found = _too_deep_below(child, level + 1)
            if found is not None:
                found.append(key)
                return found
    return None


def _json_too_deep_offset(text: str) -> int:
    """Offset of the first '[' or '{' that opens level MAX_DEPTH + 1 (strings skipped)."""
    depth = 0
    for m in re.finditer(_JSON_TOKEN, text):
        token = m.group(1)
        if token in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                return m.start(1)
        elif token in ("]", "}"):
            depth -= 1
    return 0


# One JSON token after optional whitespace.  The text has already been accepted by
# json.loads, so this only has to split valid JSON, not judge it.
# (compiled on first use, by re's cache: start-up time)
_JSON_TOKEN = r'(?s)[ \t\n\r]*("[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^ \t\n\r,:{}\[\]"]+)'


class _JObject:
    __slots__ = ("start", "entries")

    def __init__(self, start: int) -> None:
        self.start = start
        self.entries: dict[str, tuple[int, _JNode]] = {}  # key -> (key offset, value)


class _JArray:
    __slots__ = ("start", "items")

    def __init__(self, start: int) -> None:
        self.start = start
        self.items: list[_JNode] = []


_JNode = _JObject | _JArray | int  # an int is the offset of a scalar


class _JsonLocator:
    """Positions in JSON text: one scan into a light offset tree, on first use."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._root: _JNode | None = None
        self._dups: list[tuple[str, int, int]] = []
        self._line_starts: list[int] | None = None

    def _scan(self) -> _JNode:
        if self._root is not None:
            return self._root
        text = self._text
        stack: list[_JObject | _JArray] = []
        pending_key: tuple[str, int] | None = None
        root: _JNode | None = None
        match = re.compile(_JSON_TOKEN).match
        index = 0
        end = len(text)
        while index < end:
            m = match(text, index)
            if m is None:  # only trailing whitespace left
                break
            index = m.end()
            start = m.start(1)
            token = m.group(1)
            char = token[0]
            if char in ",:":
                continue
            if char in "}]":
                stack.pop()
                continue
            container = stack[-1] if stack else None
            if isinstance(container, _JObject) and pending_key is None:
                name = json.loads(token) if "\\" in token else token[1:-1]
                pending_key = (name, start)
                continue
            node: _JNode
            if char == "{":
                node = _JObject(start)
            elif char == "[":
                node = _JArray(start)
            else:
                node = start
            if container is None:
                root = node
            elif isinstance(container, _JArray):
                container.items.append(node)
            else:
                assert pending_key is not None
                name, key_start = pending_key
                pending_key = None
                previous = container.entries.get(name)
                if previous is not None:
                    self._dups.append((name, previous[0], key_start))
                else:
                    container.entries[name] = (key_start, node)
            if char in "{[":
                stack.append(node)  # type: ignore[arg-type]
        self._root = root if root is not None else 0
        return self._root

    def duplicates(self) -> list[tuple[str, int, int]]:
        """(key, offset of first, offset of second) for every repeated key, in text order."""
        self._scan()
        return sorted(self._dups, key=lambda dup: dup[2])

    def line_col(self, offset: int) -> Position:
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self._text)]
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def pos(self, path: tuple[PathPart, ...], key: bool) -> Position:
        node = self._scan()
        offset = _start(node)
        for i, part in enumerate(path):
            if isinstance(node, _JObject) and isinstance(part, str) and part in node.entries:
                key_offset, node = node.entries[part]
                if key and i == len(path) - 1:
                    return self.line_col(key_offset)
            elif (
                isinstance(node, _JArray)
                and isinstance(part, int)
                and not isinstance(part, bool)
                and -len(node.items) <= part < len(node.items)
            ):
                node = node.items[part]
            else:
                break
            offset = _start(node)
        return self.line_col(offset)


def _start(node: _JNode) -> int:
    return node if isinstance(node, int) else node.start
