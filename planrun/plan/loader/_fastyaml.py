"""The fast reader for the common block-style YAML subset; it gives up (Bail) on the rest."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
from typing import Any

from planrun.plan.loader._base import MAX_DEPTH, MAX_NODES
from planrun.plan.loader._scalars import MAYBE_NOT_STR, NotFinite, plain_value

# The fast reader leaves anything that might come near MAX_DEPTH to libyaml's path, which
# counts exactly: flow values with more brackets than this, block nesting deeper than the rest.
_FAST_MAX_FLOW = 32
_FAST_MAX_BLOCK = MAX_DEPTH - _FAST_MAX_FLOW


# --------------------------------------------------------------------------- YAML: fast path

# libyaml's composer allocates two marks and a node object per scalar, which makes up
# most of the load time of a big plan.  Plans are mostly plain block YAML, so a small
# reader handles that subset directly and gives up (Bail) at the first thing outside
# it: anchors, tags, block scalars, multi-line or escaped strings, nested flow
# collections, duplicate keys, tabs, odd indentation...  Everything it gives up on goes
# to libyaml, which is the reference: the test suite checks that both agree.


class Bail(Exception):
    pass


_FAST_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]{0,200}):(?: +(.*))?\Z")
_FAST_DQUOTED = re.compile(r'"([^"\\]*)"')
# Compiled at their first use (re's cache), not at import: many plans hold no single-quoted
# value and no plain value in a flow collection, and a compile costs ~60-200 µs.
_FAST_SQUOTED = r"'((?:[^']|'')*)'"
# First characters of a plain scalar the fast reader takes as is ('-' only before a digit
# or a dot, as in -1 or -.5).
_FAST_BAD_FIRST = frozenset("?:,[]{}#&*!|>'\"%@`")
_FAST_FLOW_BAD = r"[\[\]{}\"'#:]"
_KEY, _ITEM = 0, 1


_NESTED: Any = object()  # "the value is the block node on the following lines (or null)"
_FastEntry = tuple[int, int, str | None, Any]  # (indent, _KEY | _ITEM, key, value)


def fast_yaml(text: str) -> dict[str, Any]:
    """Plain data of block YAML in the common subset, or Bail."""
    if (
        not text.replace("\n", "").isprintable()  # tabs, CR, controls, odd line breaks, BOMs
        or text.startswith(("---", "...", "%"))
        or "\n---" in text
        or "\n..." in text
        or "\n%" in text
        # Possibly more values than MAX_NODES (a value takes a line or a comma at least):
        # libyaml's path counts them exactly, and refuses too many.
        or text.count("\n") + text.count(",") > MAX_NODES
    ):
        raise Bail
    entries: list[_FastEntry] = []
    append = entries.append
    key_match = _FAST_KEY.match
    quick_first = _FAST_QUICK_FIRST
    lines = text.split("\n")
    count = len(lines)
    i = 0
    while i < count:
        line = lines[i]
        i += 1
        body = line.lstrip(" ")
        if not body or body[0] == "#":
            continue
        indent = len(line) - len(body)
        value: Any
        # "- - key: value" holds several nodes on one line: an item whose value is the
        # node that starts further right, at that node's column.
        while body[0] == "-" and (len(body) == 1 or body[1] == " "):
            if indent > 1000:
                raise Bail  # "- - - - ..." without end: leave it to libyaml's depth limit
            rest = body[1:].lstrip(" ")
            if not rest or rest[0] == "#":
                append((indent, _ITEM, None, _NESTED))
                break
            if key_match(rest) is None and not (
                rest[0] == "-" and (len(rest) == 1 or rest[1] == " ")
            ):
                if rest[0] == "|":
                    value, i = _fast_literal(rest, lines, i, indent)
                else:
                    value = _fast_inline(rest)
                append((indent, _ITEM, None, value))
                break
            append((indent, _ITEM, None, _NESTED))
            indent += len(body) - len(rest)
            body = rest
        else:
            found = key_match(body)
            if found is None:
                raise Bail
            key, rest = found.groups()
            if not rest or rest[0] == "#":
                value = _NESTED
            elif (
                rest[0] in quick_first
                and rest[-1] not in " :"
                and " #" not in rest
                and ": " not in rest
            ):
                value = rest  # a plain string, by far the most common value
            elif rest[0] == "|":
                value, i = _fast_literal(rest, lines, i, indent)
            else:
                value = _fast_inline(rest)
            append((indent, _KEY, key, value))
    if not entries or entries[0][0] != 0 or entries[0][1] != _KEY:
        raise Bail
    data, end = _fast_mapping(entries, 0, 0, 0)
    if end != len(entries):
        raise Bail
    return data


# First characters of a plain scalar that is certainly a string.
_FAST_QUICK_FIRST = frozenset("abcdeghijklmopqrsuvwxyzABCDEGHIJKLMOPQRSUVWXYZ_/$(=<;^)")


def _fast_mapping(
    entries: list[_FastEntry], i: int, indent: int, depth: int
) -> tuple[dict[str, Any], int]:
    if depth >= _FAST_MAX_BLOCK:
        raise Bail
    count = len(entries)
    result: dict[str, Any] = {}
    while i < count:
        at, kind, key, value = entries[i]
        if at != indent:
            if at < indent:
                break
            raise Bail
        if kind != _KEY or key in result:
            raise Bail
        i += 1
        if value is _NESTED:
            value, i = _fast_nested(entries, i, indent, depth, True)
        elif i < count and entries[i][0] > indent:
            raise Bail  # a continuation line, or something libyaml must judge
        result[key] = value  # type: ignore[index]
    return result, i


def _fast_sequence(
    entries: list[_FastEntry], i: int, indent: int, depth: int
) -> tuple[list[Any], int]:
    if depth >= _FAST_MAX_BLOCK:
        raise Bail
    count = len(entries)
    result: list[Any] = []
    while i < count:
        at, kind, _, value = entries[i]
        if at < indent or (at == indent and kind == _KEY):
            break  # the end, or back to the mapping this list is a value of
        if at > indent:
            raise Bail
        i += 1
        if value is _NESTED:
            value, i = _fast_nested(entries, i, indent, depth, False)
        elif i < count and entries[i][0] > indent:
            raise Bail
        result.append(value)
    return result, i


def _fast_nested(
    entries: list[_FastEntry], i: int, indent: int, depth: int, in_mapping: bool
) -> tuple[Any, int]:
    """The block node below a "key:" or "-" that has nothing after it on its line."""
    if i < len(entries):
        at, kind = entries[i][0], entries[i][1]
        if at > indent:
            if kind == _KEY:
                return _fast_mapping(entries, i, at, depth + 1)
            return _fast_sequence(entries, i, at, depth + 1)
        if at == indent and kind == _ITEM and in_mapping:
            return _fast_sequence(entries, i, at, depth + 1)  # "key:\n- item" at one indent
    return None, i


def _fast_literal(header: str, lines: list[str], i: int, owner: int) -> tuple[str, int]:
    """A literal block scalar ("|" or "|-") whose text starts at lines[i]; (value, next i).

    Only the plain forms: no indentation indicator, no "+" (keep) chomping, and the
    text must start on a line of its own, indented deeper than its key or item.
    """
    chomp = header[:2] if header[:2] == "|-" else "|"
    after = header[len(chomp) :]
    if after and not after.startswith(" #") and after.strip(" "):
        raise Bail
    count = len(lines)
    start = i
    while i < count and not lines[i].strip(" "):
        i += 1  # leading empty lines belong to the text
    if i == count:
        raise Bail
    first = lines[i]
    block = len(first) - len(first.lstrip(" "))
    if block <= owner or any(len(lines[j]) > block for j in range(start, i)):
        raise Bail
    while i < count:
        line = lines[i]
        if line.strip(" "):
            if len(line) - len(line.lstrip(" ")) < block:
                break
        elif len(line) > block:
            raise Bail  # a line of spaces only, longer than the indentation
        i += 1
    end = i
    while end > start and not lines[end - 1].strip(" "):
        end -= 1  # trailing empty lines are chomped
    text = "\n".join(line[block:] for line in lines[start:end])
    if chomp == "|" and end < count:  # clip: keep the last line break, if there is one
        text += "\n"
    return text, i


def _fast_json_float(text: str) -> float:
    if "e" in text or "E" in text:
        raise Bail  # YAML 1.1 reads 1e3 as a string
    number = float(text)
    if math.isinf(number):
        raise Bail  # 400 digits: libyaml's path refuses it at its position
    return number


def _fast_json_bail(text: str) -> Any:
    raise Bail


def _fast_json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise Bail  # duplicate keys: libyaml's path reports them with positions
    return result


@functools.cache
def _json_flow() -> json.JSONDecoder:
    """The decoder of JSON-style flow values, made once (`json.loads` with these options
    makes a decoder and its scanner at every call)."""
    return json.JSONDecoder(
        parse_float=_fast_json_float,
        parse_constant=_fast_json_bail,
        object_pairs_hook=_fast_json_object,
    )


def _fast_inline(rest: str) -> Any:
    """The value written after "key: " or "- " on one line."""
    first = rest[0]
    if first == '"':
        close = rest.find('"', 1)
        if close < 0 or "\\" in rest[1:close]:
            raise Bail
        _fast_tail(rest, close + 1)
        return rest[1:close]
    if first == "'":
        quoted = re.match(_FAST_SQUOTED, rest)
        if quoted is None:
            raise Bail
        _fast_tail(rest, quoted.end())
        return quoted.group(1).replace("''", "'")
    if first == "[" or first == "{":
        if rest.count("[") + rest.count("{") > _FAST_MAX_FLOW:
            raise Bail  # possibly deep: libyaml's path counts the levels exactly
        if '"' in rest and "\\u" not in rest and (first == "[" or rest[1:].lstrip(" ")[:1] == '"'):
            # A flow collection written as JSON (`{"host": "a.b"}`): JSON reads it as YAML
            # does, but for exponents, NaN and duplicate keys, which go to libyaml. (A mapping
            # whose first key is plain, `{cmd: "true"}`, is no JSON: not tried.)
            with contextlib.suppress(ValueError):
                return _json_flow().decode(rest.rstrip(" "))
        close = rest.find("]" if first == "[" else "}")
        if close < 0:
            raise Bail
        _fast_tail(rest, close + 1)
        inside = rest[1:close]
        if not inside.strip():
            return [] if first == "[" else {}
        if first == "[":
            return [_fast_flow_value(item.strip(" ")) for item in inside.split(",")]
        result: dict[str, Any] = {}
        for item in inside.split(","):
            name, sep, value = item.strip(" ").partition(": ")
            if not sep or not _FAST_KEY.match(name + ":") or name in result:
                raise Bail
            result[name] = _fast_flow_value(value.strip(" "))
        return result
    comment = rest.find(" #")
    if comment >= 0:
        rest = rest[:comment]
    rest = rest.rstrip(" ")
    if ": " in rest or rest.endswith(":"):
        raise Bail
    return _fast_plain(rest)


def _fast_flow_value(text: str) -> Any:
    """An entry of a one-line flow collection: a plain scalar, or a double-quoted string
    without escapes, commas or quotes in it (`{cmd: "true"}`), which is its text as written."""
    quoted = _FAST_DQUOTED.fullmatch(text)
    if quoted is not None:
        return quoted.group(1)
    if re.search(_FAST_FLOW_BAD, text):
        raise Bail
    return _fast_plain(text)


def _fast_plain(text: str) -> Any:
    if not text:
        raise Bail
    first = text[0]
    if first in _FAST_BAD_FIRST or (
        first == "-" and (len(text) == 1 or text[1] not in "0123456789.")
    ):
        raise Bail
    if first in MAYBE_NOT_STR:
        try:
            return plain_value(text)
        except NotFinite:
            raise Bail from None  # libyaml's path refuses it at its position
    return text


def _fast_tail(rest: str, end: int) -> None:
    """After a quoted or flow value only spaces and a comment may follow."""
    tail = rest[end:]
    if tail and (tail[0] != " " or tail.strip(" ")[:1] not in ("", "#")):
        raise Bail
