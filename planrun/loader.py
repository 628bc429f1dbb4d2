"""Read a plan file (YAML or JSON) into plain data, keeping the source position of every key and value.

Design, in short (docs/loader.md has the user-facing rules):

* YAML in the common block-style subset is read by a small line-based reader (fast path);
  at anything outside that subset it gives up and libyaml (PyYAML's C parser) composes
  nodes, after which one walk builds plain data with our own scalar rules (JSON types
  only: no dates, no yes/no booleans, no Python objects, no unknown tags).  libyaml is
  the reference; the tests check that the fast path agrees with it.  The garbage
  collector is paused while either runs.
* JSON is parsed by ``json.loads`` (fast, exact error positions).
* Positions are found lazily: nothing position-related is built while loading.  The
  first ``Document.pos`` call re-composes the YAML text (or scans the JSON text) once and
  then walks down the requested path.  Loading stays fast and light, and only a plan
  that has something to report pays for positions.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import yaml
from yaml.error import MarkedYAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from planrun.errors import Diagnostic, PlanInvalid, UsageError
from planrun.inputfiles import NotARegularFile, read_regular_file

try:
    from yaml._yaml import CParser as _ParserBase
except ImportError:  # pragma: no cover - PyYAML built without libyaml: correct, but slower
    _ParserBase = yaml.SafeLoader  # type: ignore[misc,assignment]

__all__ = ["Document", "load_document", "load_text"]

PathPart = str | int
Position = tuple[int, int]
T = TypeVar("T")

# Nesting deeper than this is refused; no real plan comes close.  A level is a mapping or
# a list (the top-level mapping is level 1); scalars do not count.  The same rule and the
# same message hold on every path: JSON, the fast YAML reader, libyaml.
MAX_DEPTH = 200
_TOO_DEEP = f"plan is nested too deeply (more than {MAX_DEPTH} levels)"
# The fast reader leaves anything that might come near MAX_DEPTH to libyaml's path, which
# counts exactly: flow values with more brackets than this, block nesting deeper than the rest.
_FAST_MAX_FLOW = 32
_FAST_MAX_BLOCK = MAX_DEPTH - _FAST_MAX_FLOW
_JSON_EXTENSIONS = {".json"}
_YAML_EXTENSIONS = {".yaml", ".yml"}


class _Locator(Protocol):
    def pos(self, path: tuple[PathPart, ...], key: bool) -> Position: ...


@dataclass
class Document:
    """A loaded plan: its plain data and the way back to source positions."""

    file: str  # the path as the user gave it (used in diagnostics)
    data: Any  # plain Python data (dict/list/str/int/float/bool/None)
    _locator: _Locator | None = field(default=None, repr=False, compare=False)

    def pos(self, path: tuple[PathPart, ...] = (), *, key: bool = False) -> Position:
        """(line, col), both 1-based, of the value at `path`, e.g. ("steps", 3, "depends_on", 0).

        With key=True, the position of the mapping key itself (for "unknown key" errors).
        A path that does not exist falls back to its nearest existing ancestor, and the root
        (or a document built by hand) is (1, 1).
        """
        if self._locator is None:
            return (1, 1)
        return self._locator.pos(tuple(path), key)

    def diagnostic(
        self,
        path: tuple[PathPart, ...],
        message: str,
        *,
        key: bool = False,
        hint: str | None = None,
    ) -> Diagnostic:
        """An error Diagnostic positioned at `path` in this document."""
        line, col = self.pos(path, key=key)
        return Diagnostic(self.file, line, col, "error", message, hint)


# --------------------------------------------------------------------------- entry points


def load_document(path: str | os.PathLike[str]) -> Document:
    """Read and parse the plan file at `path`.

    Raises UsageError if the file does not exist, PlanInvalid for anything wrong with it.
    """
    file = os.fspath(path)
    try:
        raw = read_regular_file(file)  # a FIFO or a device is refused, never opened blocking
    except (FileNotFoundError, NotADirectoryError):
        raise UsageError(f"plan file not found: {file}") from None
    except NotARegularFile as exc:
        raise _invalid(file, 1, 1, f"{file} is {exc.kind}, not a plan file") from None
    except OSError as exc:
        raise _invalid(file, 1, 1, f"cannot read plan file: {exc.strerror or exc}") from None
    suffix = os.path.splitext(file)[1].lower()
    fmt = "json" if suffix in _JSON_EXTENSIONS else "yaml" if suffix in _YAML_EXTENSIONS else None
    return _load(_decode(raw, file), file, fmt)


def load_text(text: str | bytes, file: str = "<inline>", fmt: str | None = None) -> Document:
    """Parse plan text; `fmt` is "yaml", "json" or None to sniff (JSON if it starts with { or [)."""
    if fmt not in (None, "yaml", "json"):
        raise ValueError(f"fmt must be 'yaml', 'json' or None, not {fmt!r}")
    if isinstance(text, bytes | bytearray):
        text = _decode(bytes(text), file)
    elif text.startswith("\ufeff"):
        text = text[1:]
    return _load(text, file, fmt)


def _load(text: str, file: str, fmt: str | None) -> Document:
    if not text.strip():
        raise _invalid(file, 1, 1, "plan file is empty")
    if fmt is None:
        fmt = "json" if text.lstrip()[:1] in ("{", "[") else "yaml"
        if fmt == "json":
            # A file that merely looks like JSON may be YAML flow style ({a: 1}): if JSON
            # refuses it, give YAML a chance, and report the JSON problem if both refuse.
            try:
                return _load_json(text, file)
            except PlanInvalid as json_error:
                try:
                    return _load_yaml(text, file)
                except PlanInvalid:
                    raise json_error from None
    if fmt == "json":
        return _load_json(text, file)
    return _load_yaml(text, file)


def _invalid(file: str, line: int, col: int, message: str) -> PlanInvalid:
    return PlanInvalid([Diagnostic(file, line, col, "error", message)])


def _decode(raw: bytes, file: str) -> str:
    """UTF-8 (a BOM is allowed); anything else is an error pointing at the first bad byte."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise _invalid(
            file, 1, 1, "plan file is not UTF-8 (it looks like UTF-16); save it as UTF-8"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        offset = exc.start
        line_start = raw.rfind(b"\n", 0, offset) + 1
        line = raw.count(b"\n", 0, offset) + 1
        col = len(raw[line_start:offset].decode("utf-8", errors="replace")) + 1
        raise _invalid(
            file,
            line,
            col,
            f"plan file is not valid UTF-8: byte 0x{raw[offset]:02x} at offset {offset}",
        ) from None


def _check_top_level(data: Any, file: str, where: Callable[[], Position]) -> None:
    if isinstance(data, dict):
        return
    line, col = where()
    raise _invalid(file, line, col, f"a plan must be a mapping at the top level, got {_kind(data)}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


def _gc_paused(func: Callable[[], T]) -> T:
    """Run func with the cyclic GC paused.

    Building ~10^5 containers triggers many full collections that scan everything built
    so far; pausing makes a 10,000-step plan load 3x faster.  The data built holds no
    reference cycles, so nothing is leaked.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return func()
    finally:
        if was_enabled:
            gc.enable()


def _line_col(text: str, index: int) -> Position:
    """1-based (line, col) of character `index`, counting "\\n" as the line break."""
    index = max(0, min(index, len(text)))
    line_start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - line_start + 1


# --------------------------------------------------------------------------- JSON


def _load_json(text: str, file: str) -> Document:
    duplicates: list[bool] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) != len(pairs):
            duplicates.append(True)
        return result

    try:
        data = _gc_paused(lambda: json.loads(text, object_pairs_hook=pairs_hook))
    except json.JSONDecodeError as exc:
        raise _invalid(file, exc.lineno, exc.colno, f"invalid JSON: {exc.msg}") from None
    except RecursionError:  # json's own limit, far beyond ours: find where ours is passed
        offset = _json_too_deep_offset(text)
        raise _invalid(file, *_line_col(text, offset), _TOO_DEEP) from None
    except ValueError:  # the one other refusal: an integer of more than 4,300 digits
        raise _invalid(file, 1, 1, "invalid JSON: a number has too many digits") from None
    locator = _JsonLocator(text)
    too_deep = _too_deep_path(data) if text.count("[") + text.count("{") > MAX_DEPTH else None
    if too_deep is not None:
        raise _invalid(file, *locator.pos(too_deep, False), _TOO_DEEP)
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
    _check_top_level(data, file, lambda: locator.pos((), False))
    return Document(file, data, locator)


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
    for m in _JSON_TOKEN.finditer(text):
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
_JSON_TOKEN = re.compile(
    r'[ \t\n\r]*("[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^ \t\n\r,:{}\[\]"]+)', re.S
)


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
        match = _JSON_TOKEN.match
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


# --------------------------------------------------------------------------- YAML: composing


class _Composer(_ParserBase):  # type: ignore[valid-type,misc]
    """libyaml's composer with cheap resolver hooks, refusing deep nesting as it goes.

    The composer calls resolve/descend_resolver/ascend_resolver for every node.  `slice`
    takes up to three arguments and keeps them, so an implicit scalar's node.tag becomes
    a slice whose .step is (plain_implicit, quoted_implicit), while an explicit tag stays
    a str; the stock resolver would cost a third of the compose time.

    The depth limit is not optional: libyaml's composer recurses in C once per level, so
    a hostile "[[[[..." of ~80,000 levels overflows the C stack and kills the process,
    and deep flow nesting also makes libyaml quadratic.  Every node counts here, scalars
    too, so a scalar inside level MAX_DEPTH is depth MAX_DEPTH + 1; a collection at level
    MAX_DEPTH + 1 is then refused as the parent of its first child, or by the builder if
    it is empty (both report the collection's own position).
    """

    resolve = slice
    depth = 0

    def descend_resolver(self, parent: Any, index: Any) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH + 1:
            raise _TooDeep(parent)

    def ascend_resolver(self) -> None:
        self.depth -= 1


class _TooDeep(Exception):
    def __init__(self, node: Node) -> None:
        super().__init__("too deep")
        self.node = node


def _compose(text: str) -> Node | None:
    composer = _Composer(text)
    try:
        node: Node | None = composer.get_single_node()
        return node
    finally:
        composer.dispose()


def _compose_or_raise(text: str, file: str) -> Node | None:
    """Compose YAML text to nodes, turning every parser complaint into PlanInvalid."""
    try:
        return _compose(text)
    except MarkedYAMLError as exc:
        raise _too_deep_before(exc, text, file) or _yaml_error(exc, file) from None
    except ReaderError as exc:
        # libyaml reports a byte offset into the UTF-8 encoding.
        prefix = text.encode("utf-8", "surrogatepass")[: exc.position]
        line, col = _line_col(text, len(prefix.decode("utf-8", "ignore")))
        char = exc.character
        shown = f"#x{ord(char):04x}" if isinstance(char, str) else f"#x{char:02x}"
        raise _invalid(file, line, col, f"invalid YAML: character {shown} is not allowed") from None
    except UnicodeEncodeError as exc:
        line, col = _line_col(text, exc.start)
        bad = text[exc.start]
        raise _invalid(
            file, line, col, f"text is not valid Unicode: lone surrogate U+{ord(bad):04X}"
        ) from None
    except _TooDeep as exc:
        raise _node_error(file, exc.node, _TOO_DEEP) from None
    except yaml.YAMLError as exc:  # pragma: no cover - every libyaml error is one of the above
        raise _invalid(file, 1, 1, f"invalid YAML: {exc}") from None


def _too_deep_before(exc: MarkedYAMLError, text: str, file: str) -> PlanInvalid | None:
    """Our depth error, if the text passes MAX_DEPTH before the point libyaml refused.

    libyaml's scanner reads ahead of the composer (up to a line), and newer libyaml
    refuses deep flow nesting there with its own message and limit: composing the text
    up to the refused point finds our limit first, so the message does not depend on the
    libyaml version.
    """
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return None
    line_start = 0
    for _ in range(mark.line):
        line_start = text.find("\n", line_start) + 1
        if line_start == 0:
            return None
    try:
        _compose(text[: line_start + mark.column])
    except _TooDeep as deep:
        return _node_error(file, deep.node, _TOO_DEEP)
    except (yaml.YAMLError, UnicodeEncodeError):
        pass
    return None


def _yaml_error(exc: MarkedYAMLError, file: str) -> PlanInvalid:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    problem = exc.problem or exc.context or "cannot parse"
    context = exc.context or ""
    context_line = exc.context_mark.line + 1 if exc.context_mark is not None else None
    if problem == "but found another document":
        message = "a plan file holds one YAML document, but a second one starts here"
    elif context.startswith("found duplicate anchor"):
        message = f"invalid YAML: duplicate anchor (first at line {context_line})"
    else:
        message = f"invalid YAML: {problem}"
        if exc.problem and context and context_line is not None:
            message += f" ({context} at line {context_line})"
    return _invalid(file, line, col, message)


# --------------------------------------------------------------------------- YAML: values

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_TAG + name for name in ("str", "int", "float", "bool", "null"))
_MAP, _SEQ = _TAG + "map", _TAG + "seq"

# First characters with which a plain scalar can be anything but a string.
_MAYBE_NOT_STR = frozenset("-+.0123456789~nNtTfF")
_WORDS: dict[str, Any] = {
    "~": None,
    "null": None,
    "Null": None,
    "NULL": None,
    "true": True,
    "True": True,
    "TRUE": True,
    "false": False,
    "False": False,
    "FALSE": False,
    ".inf": float("inf"),
    ".Inf": float("inf"),
    ".INF": float("inf"),
    "+.inf": float("inf"),
    "+.Inf": float("inf"),
    "+.INF": float("inf"),
    "-.inf": float("-inf"),
    "-.Inf": float("-inf"),
    "-.INF": float("-inf"),
    ".nan": float("nan"),
    ".NaN": float("nan"),
    ".NAN": float("nan"),
}
# Numbers a la JSON, restricted to what YAML 1.1 (PyYAML's dumper) also reads as numbers,
# so text PyYAML writes always reads back unchanged: no 0x/0o/underscores/60:30, and
# floats need a dot (1.5, 1.0e+3).  Anything else is a string.
_INT_RE = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")
_FLOAT_RE = re.compile(r"(?:[-+]?[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+][0-9]+)?\Z")


def _plain(value: str) -> Any:
    """The value of an untagged plain scalar that may not be a string."""
    if not value:
        return None
    if value in _WORDS:
        return _WORDS[value]
    if _INT_RE.match(value):
        try:
            return int(value)
        except ValueError:  # more digits than Python converts: keep the text
            return value
    if _FLOAT_RE.match(value):
        return float(value)
    return value


class _BuildError(Exception):
    def __init__(self, node: Node, message: str) -> None:
        super().__init__(message)
        self.node = node
        self.message = message


class _Builder:
    """Turns a composed node tree into plain data (one walk, GC paused by the caller)."""

    def __init__(self, text: str) -> None:
        # Anchors, tags and merge keys need bookkeeping the common case can skip:
        # without '&' there are no aliases, without '!' no tags, without '<<' no merges.
        self.careful = "&" in text or "!" in text or "<<" in text
        self.active: set[int] = set()  # collections being built (alias cycles)
        self.budget = 100_000 + 2 * len(text)  # values built, against alias bombs
        self.errors: list[tuple[Node, str]] = []

    def build(self, node: Node, depth: int = 0) -> Any:
        cls = node.__class__
        if cls is ScalarNode:
            tag = node.tag
            if tag.__class__ is slice:
                value = node.value
                if tag.step[0] and (not value or value[0] in _MAYBE_NOT_STR):
                    return _plain(value)
                return value
            return self._tagged_scalar(node)
        if depth >= MAX_DEPTH:
            raise _BuildError(node, _TOO_DEEP)
        if self.careful:
            return self._careful_collection(node, depth)
        build = self.build
        depth += 1
        if cls is SequenceNode:
            return [build(item, depth) for item in node.value]
        pairs = node.value
        try:
            result = {key.value: build(value, depth) for key, value in pairs}
        except TypeError:
            self._check_keys(pairs)  # a list or mapping used as a key: say so
            raise
        if len(result) != len(pairs):
            self._check_keys(pairs)
        return result

    def _check_keys(self, pairs: list[tuple[Node, Node]]) -> None:
        """Report non-string and duplicate keys of a mapping built by the fast path."""
        seen: dict[str, Node] = {}
        for key_node, _ in pairs:
            name = _key_text(key_node)
            if name in seen:
                first = seen[name].start_mark.line + 1
                self.errors.append((key_node, f"duplicate key '{name}' (first at line {first})"))
            else:
                seen[name] = key_node

    def _careful_collection(self, node: Node, depth: int) -> Any:
        cls = node.__class__
        tag = node.tag
        expected = _SEQ if cls is SequenceNode else _MAP
        if tag.__class__ is not slice and tag != expected:
            where = "here" if tag in (_MAP, _SEQ) else "in a plan"
            raise _BuildError(node, f"YAML tag '{_short_tag(tag)}' is not allowed {where}")
        ident = id(node)
        if ident in self.active:
            raise _BuildError(node, "recursive YAML alias: this anchored node contains itself")
        self.budget -= len(node.value)
        if self.budget < 0:
            raise _BuildError(node, "YAML aliases expand to too much data")
        self.active.add(ident)
        try:
            if cls is SequenceNode:
                return [self.build(item, depth + 1) for item in node.value]
            return self._mapping(node, depth + 1)
        finally:
            self.active.discard(ident)

    def _mapping(self, node: Node, depth: int) -> dict[str, Any]:
        """The full mapping rules: string keys, no duplicates, `<<` merge keys."""
        result: dict[str, Any] = {}
        first_seen: dict[str, Node] = {}
        merges: list[Node] = []
        for key_node, value_node in node.value:
            if _is_merge_key(key_node):
                merges.append(value_node)
                continue
            name = _key_text(key_node)
            if name in first_seen:
                first = first_seen[name].start_mark.line + 1
                self.errors.append((key_node, f"duplicate key '{name}' (first at line {first})"))
                continue
            first_seen[name] = key_node
            result[name] = self.build(value_node, depth)
        for source in _merge_sources(merges):
            merged = self.build(source, depth)
            for name, value in merged.items():
                result.setdefault(name, value)
        return result

    def _tagged_scalar(self, node: Node) -> Any:
        tag, value = node.tag, node.value
        if tag == _STR:
            return value
        if tag in (_INT, _FLOAT, _BOOL, _NULL):
            result = _plain(value.strip()) if value.strip() else None
            if tag == _FLOAT and isinstance(result, int) and not isinstance(result, bool):
                result = float(result)
            wanted = {_INT: int, _FLOAT: float, _BOOL: bool, _NULL: type(None)}[tag]
            if type(result) is wanted:
                return result
            raise _BuildError(node, f"'{value}' is not a valid {_short_tag(tag)}")
        raise _BuildError(node, f"YAML tag '{_short_tag(tag)}' is not allowed in a plan")


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag


def _is_merge_key(node: Node) -> bool:
    return (
        node.__class__ is ScalarNode
        and node.value == "<<"
        and node.tag.__class__ is slice
        and bool(node.tag.step[0])
    )


def _key_text(node: Node) -> str:
    """Mapping keys are strings: a scalar key is taken as written (`1:` is the key "1")."""
    if node.__class__ is not ScalarNode:
        kind = "a list" if node.__class__ is SequenceNode else "a mapping"
        raise _BuildError(node, f"a mapping key must be a string, not {kind}")
    value: str = node.value
    return value


def _merge_sources(merges: list[Node]) -> Iterator[Node]:
    """The mappings named by `<<` keys, earliest first (earlier ones win)."""
    for value in merges:
        if value.__class__ is MappingNode:
            yield value
        elif value.__class__ is SequenceNode and all(
            item.__class__ is MappingNode for item in value.value
        ):
            yield from value.value
        else:
            raise _BuildError(value, "a merge key '<<' needs a mapping or a list of mappings")


def _mapping_entries(node: Node) -> dict[str, tuple[Node, Node]]:
    """key -> (key node, value node) of a mapping node, merges included (for positions)."""
    entries: dict[str, tuple[Node, Node]] = {}
    merges = []
    for key_node, value_node in node.value:
        if _is_merge_key(key_node):
            merges.append(value_node)
        elif key_node.__class__ is ScalarNode:
            entries.setdefault(key_node.value, (key_node, value_node))
    try:
        sources = list(_merge_sources(merges))
    except _BuildError:
        sources = []
    for source in sources:
        for name, pair in _mapping_entries(source).items():
            entries.setdefault(name, pair)
    return entries


# --------------------------------------------------------------------------- YAML: fast path

# libyaml's composer allocates two marks and a node object per scalar, which makes up
# most of the load time of a big plan.  Plans are mostly plain block YAML, so a small
# reader handles that subset directly and gives up (_Bail) at the first thing outside
# it: anchors, tags, block scalars, multi-line or escaped strings, nested flow
# collections, duplicate keys, tabs, odd indentation...  Everything it gives up on goes
# to libyaml, which is the reference: the test suite checks that both agree.


class _Bail(Exception):
    pass


_FAST_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]{0,200}):(?: +(.*))?\Z")
_FAST_SQUOTED = re.compile(r"'((?:[^']|'')*)'")
# First characters of a plain scalar the fast reader takes as is ('-' only before a digit
# or a dot, as in -1 or -.5).
_FAST_BAD_FIRST = frozenset("?:,[]{}#&*!|>'\"%@`")
_FAST_FLOW_BAD = re.compile(r"[\[\]{}\"'#:]")
_KEY, _ITEM = 0, 1


_NESTED: Any = object()  # "the value is the block node on the following lines (or null)"
_FastEntry = tuple[int, int, str | None, Any]  # (indent, _KEY | _ITEM, key, value)


def _fast_yaml(text: str) -> dict[str, Any]:
    """Plain data of block YAML in the common subset, or _Bail."""
    if (
        not text.replace("\n", "").isprintable()  # tabs, CR, controls, odd line breaks, BOMs
        or text.startswith(("---", "...", "%"))
        or "\n---" in text
        or "\n..." in text
        or "\n%" in text
    ):
        raise _Bail
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
                raise _Bail  # "- - - - ..." without end: leave it to libyaml's depth limit
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
                raise _Bail
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
        raise _Bail
    data, end = _fast_mapping(entries, 0, 0, 0)
    if end != len(entries):
        raise _Bail
    return data


# First characters of a plain scalar that is certainly a string.
_FAST_QUICK_FIRST = frozenset("abcdeghijklmopqrsuvwxyzABCDEGHIJKLMOPQRSUVWXYZ_/$(=<;^)")


def _fast_mapping(
    entries: list[_FastEntry], i: int, indent: int, depth: int
) -> tuple[dict[str, Any], int]:
    if depth >= _FAST_MAX_BLOCK:
        raise _Bail
    count = len(entries)
    result: dict[str, Any] = {}
    while i < count:
        at, kind, key, value = entries[i]
        if at != indent:
            if at < indent:
                break
            raise _Bail
        if kind != _KEY or key in result:
            raise _Bail
        i += 1
        if value is _NESTED:
            value, i = _fast_nested(entries, i, indent, depth, True)
        elif i < count and entries[i][0] > indent:
            raise _Bail  # a continuation line, or something libyaml must judge
        result[key] = value  # type: ignore[index]
    return result, i


def _fast_sequence(
    entries: list[_FastEntry], i: int, indent: int, depth: int
) -> tuple[list[Any], int]:
    if depth >= _FAST_MAX_BLOCK:
        raise _Bail
    count = len(entries)
    result: list[Any] = []
    while i < count:
        at, kind, _, value = entries[i]
        if at < indent or (at == indent and kind == _KEY):
            break  # the end, or back to the mapping this list is a value of
        if at > indent:
            raise _Bail
        i += 1
        if value is _NESTED:
            value, i = _fast_nested(entries, i, indent, depth, False)
        elif i < count and entries[i][0] > indent:
            raise _Bail
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
        raise _Bail
    count = len(lines)
    start = i
    while i < count and not lines[i].strip(" "):
        i += 1  # leading empty lines belong to the text
    if i == count:
        raise _Bail
    first = lines[i]
    block = len(first) - len(first.lstrip(" "))
    if block <= owner or any(len(lines[j]) > block for j in range(start, i)):
        raise _Bail
    while i < count:
        line = lines[i]
        if line.strip(" "):
            if len(line) - len(line.lstrip(" ")) < block:
                break
        elif len(line) > block:
            raise _Bail  # a line of spaces only, longer than the indentation
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
        raise _Bail  # YAML 1.1 reads 1e3 as a string
    return float(text)


def _fast_json_bail(text: str) -> Any:
    raise _Bail


def _fast_json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _Bail  # duplicate keys: libyaml's path reports them with positions
    return result


def _fast_inline(rest: str) -> Any:
    """The value written after "key: " or "- " on one line."""
    first = rest[0]
    if first == '"':
        close = rest.find('"', 1)
        if close < 0 or "\\" in rest[1:close]:
            raise _Bail
        _fast_tail(rest, close + 1)
        return rest[1:close]
    if first == "'":
        quoted = _FAST_SQUOTED.match(rest)
        if quoted is None:
            raise _Bail
        _fast_tail(rest, quoted.end())
        return quoted.group(1).replace("''", "'")
    if first == "[" or first == "{":
        if rest.count("[") + rest.count("{") > _FAST_MAX_FLOW:
            raise _Bail  # possibly deep: libyaml's path counts the levels exactly
        if '"' in rest and "\\u" not in rest:
            # A flow collection written as JSON (`{"host": "a.b"}`): JSON reads it as YAML
            # does, but for exponents, NaN and duplicate keys, which go to libyaml.
            with contextlib.suppress(ValueError):
                return json.loads(
                    rest.rstrip(" "),
                    parse_float=_fast_json_float,
                    parse_constant=_fast_json_bail,
                    object_pairs_hook=_fast_json_object,
                )
        close = rest.find("]" if first == "[" else "}")
        if close < 0:
            raise _Bail
        _fast_tail(rest, close + 1)
        inside = rest[1:close]
        if not inside.strip():
            return [] if first == "[" else {}
        if first == "[":
            if _FAST_FLOW_BAD.search(inside):
                raise _Bail
            return [_fast_plain(item.strip(" ")) for item in inside.split(",")]
        result: dict[str, Any] = {}
        for item in inside.split(","):
            name, sep, value = item.strip(" ").partition(": ")
            if not sep or not _FAST_KEY.match(name + ":") or name in result:
                raise _Bail
            value = value.strip(" ")
            if _FAST_FLOW_BAD.search(value):
                raise _Bail
            result[name] = _fast_plain(value)
        return result
    comment = rest.find(" #")
    if comment >= 0:
        rest = rest[:comment]
    rest = rest.rstrip(" ")
    if ": " in rest or rest.endswith(":"):
        raise _Bail
    return _fast_plain(rest)


def _fast_plain(text: str) -> Any:
    if not text:
        raise _Bail
    first = text[0]
    if first in _FAST_BAD_FIRST or (
        first == "-" and (len(text) == 1 or text[1] not in "0123456789.")
    ):
        raise _Bail
    if first in _MAYBE_NOT_STR:
        return _plain(text)
    return text


def _fast_tail(rest: str, end: int) -> None:
    """After a quoted or flow value only spaces and a comment may follow."""
    tail = rest[end:]
    if tail and (tail[0] != " " or tail.strip(" ")[:1] not in ("", "#")):
        raise _Bail


def _load_yaml(text: str, file: str) -> Document:
    data = _gc_paused(lambda: _parse_yaml(text, file))
    return Document(file, data, _YamlLocator(text))


def _parse_yaml(text: str, file: str) -> Any:
    """Compose and build; runs with the GC paused.

    The node tree (~90 MB for a 10,000-step plan) is garbage once the data is built, and
    it is freed here, before the GC is resumed: otherwise the first collection afterwards
    would walk all of it.
    """
    try:
        return _fast_yaml(text)
    except _Bail:
        pass
    root = _compose_or_raise(text, file)
    if root is None or (
        root.__class__ is ScalarNode
        and root.tag.__class__ is slice
        and root.value == ""
        and root.style == ""
    ):
        raise _invalid(file, 1, 1, "plan file is empty")
    builder = _Builder(text)
    try:
        data = builder.build(root)
    except _BuildError as exc:
        raise _node_error(file, exc.node, exc.message) from None
    except RecursionError:
        raise _invalid(file, 1, 1, _TOO_DEEP) from None
    if builder.errors:
        diagnostics = [_node_diagnostic(file, node, message) for node, message in builder.errors]
        raise PlanInvalid(sorted(diagnostics, key=lambda diag: (diag.line, diag.col)))
    root_pos = (root.start_mark.line + 1, root.start_mark.column + 1)
    del root, builder
    _check_top_level(data, file, lambda: root_pos)
    return data


def _node_diagnostic(file: str, node: Node, message: str) -> Diagnostic:
    return Diagnostic(file, node.start_mark.line + 1, node.start_mark.column + 1, "error", message)


def _node_error(file: str, node: Node, message: str) -> PlanInvalid:
    return PlanInvalid([_node_diagnostic(file, node, message)])


# A position packed in one int (line << 32 | col): ints are not tracked by the garbage
# collector, so a big position tree costs later collections almost nothing.
_Packed = int
# A compact position tree: a scalar is its packed position; a mapping is
# (position, {key: (key position, child)}); a sequence is (position, [child, ...]).
_PosTree = Any


def _pack(node: Node) -> _Packed:
    mark = node.start_mark
    return (mark.line + 1) << 32 | (mark.column + 1)


def _unpack(packed: _Packed) -> Position:
    return packed >> 32, packed & 0xFFFFFFFF


def _position_tree(node: Node, memo: dict[int, _PosTree]) -> _PosTree:
    """The positions of a node tree, without the nodes (which are far bigger)."""
    cls = node.__class__
    if cls is ScalarNode:
        return _pack(node)
    done = memo.get(id(node))  # an aliased node: same positions as where it is written
    if done is not None:
        return done
    tree: _PosTree
    if cls is SequenceNode:
        tree = (_pack(node), [_position_tree(item, memo) for item in node.value])
    else:
        entries = _mapping_entries(node)
        tree = (
            _pack(node),
            {
                name: (_pack(key_node), _position_tree(value_node, memo))
                for name, (key_node, value_node) in entries.items()
            },
        )
    memo[id(node)] = tree
    return tree


class _YamlLocator:
    """Positions in YAML text: composed again on first use into a compact position tree."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._tree: _PosTree = None  # None: not built yet; False: not available

    def _build(self) -> _PosTree:
        root = _compose(self._text)
        if root is None:
            return False
        # The memo is keyed by id(): the node tree must stay alive until it is done.
        tree = _position_tree(root, {})
        del root  # freed while the GC is still paused (see _parse_yaml)
        return tree

    def pos(self, path: tuple[PathPart, ...], key: bool) -> Position:
        if self._tree is None:
            try:
                self._tree = _gc_paused(self._build)
            except Exception:  # the text loaded, so this should not happen: search lines then
                self._tree = False
        if self._tree is False:
            return _search_keys(self._text, path)
        tree = self._tree
        found = tree if isinstance(tree, int) else tree[0]
        for i, part in enumerate(path):
            if isinstance(tree, int):
                break
            children = tree[1]
            if isinstance(children, dict) and isinstance(part, str) and part in children:
                key_pos, tree = children[part]
                if key and i == len(path) - 1:
                    found = key_pos
                    break
            elif (
                isinstance(children, list)
                and isinstance(part, int)
                and not isinstance(part, bool)
                and -len(children) <= part < len(children)
            ):
                tree = children[part]
            else:
                break
            found = tree if isinstance(tree, int) else tree[0]
        return _unpack(found)


def _search_keys(text: str, path: tuple[PathPart, ...]) -> Position:
    """A fallback position: each string key of `path` searched for as `key:` below the last.

    Used only if composing the text again for positions fails, so that diagnostics still
    point near their place rather than all at 1:1.
    """
    offset = found = 0
    for part in path:
        if not isinstance(part, str):
            continue
        match = re.compile(rf"^[ \t-]*[\"']?{re.escape(part)}[\"']?[ \t]*:", re.M).search(
            text, offset
        )
        if match is None:
            break
        found = offset = match.start() + len(match.group()) - len(match.group().lstrip(" \t-"))
    return _line_col(text, found)
