"""What every reader shares: the Document it returns, positions, the nesting limit and
one-line errors."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from planrun.errors import Diagnostic, PlanInvalid
from planrun.text import kind_of

PathPart = str | int
Position = tuple[int, int]
T = TypeVar("T")

# Nesting deeper than this is refused; no real plan comes close.  A level is a mapping or
# a list (the top-level mapping is level 1); scalars do not count.  The same rule and the
# same message hold on every path: JSON, the fast YAML reader, libyaml.
MAX_DEPTH = 200
TOO_DEEP = f"plan is nested too deeply (more than {MAX_DEPTH} levels)"
# libyaml's node tree costs about 500 bytes a value: a 14 MB flow list took 3.3 GB.
MAX_NODES = 500_000
TOO_MANY = f"plan has too many values (more than {MAX_NODES:,})"


class NotJsonNumber(PlanInvalid):
    """A plan holds a number JSON has not (YAML's `.inf`, `.nan`; JSON's `NaN`): told apart
    so that a `--var` value holding one is refused, not kept as text."""


class _Locator(Protocol):
    def pos(self, path: tuple[PathPart, ...], key: bool) -> Position: ...


class Document:
    """A loaded plan: its plain data and the way back to source positions (`_locator`: not
    compared, not shown)."""

    __slots__ = ("file", "data", "_locator")

    def __init__(self, file: str, data: Any, _locator: _Locator | None = None) -> None:
        self.file = file  # the path as the user gave it (used in diagnostics)
        self.data = data  # plain Python data (dict/list/str/int/float/bool/None)
        self._locator = _locator

    def pos(self, path: tuple[PathPart, ...] = (), *, key: bool = False) -> Position:
        """(line, col), both 1-based, of the value at `path`, e.g. ("steps", 3, "depends_on", 0).

        With key=True, the position of the mapping key itself (for "unknown key" errors).
        A path that does not exist falls back to its nearest existing ancestor, and the root
        (or a document built by hand) is (1, 1).
        """
        if self._locator is None:
            return (1, 1)
        return self._locator.pos(tuple(path), key)


class LazyDocument(Document):
    """A Document parsed only when its data or a position is first asked for.

    A plan from the plan cache (planrun/plan/cache.py) runs without its document; a run-time
    error that points into the file (a plan variable, a dotenv entry) still says file:line:col,
    after `load` parses the same bytes the cache entry was made from.
    """

    __slots__ = ("_load", "_data")

    def __init__(self, file: str, load: Callable[[], Document]) -> None:
        self.file = file
        self._locator = None
        self._load: Callable[[], Document] | None = load
        self._data: Any = None

    def _fill(self) -> None:
        if self._load is not None:
            doc = self._load()
            self._data, self._locator, self._load = doc.data, doc._locator, None

    @property  # type: ignore[override]
    def data(self) -> Any:
        self._fill()
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        self._data, self._load = value, None

    def pos(self, path: tuple[PathPart, ...] = (), *, key: bool = False) -> Position:
        self._fill()
        return super().pos(path, key=key)


def invalid(file: str, line: int, col: int, message: str) -> PlanInvalid:
    return PlanInvalid([Diagnostic(file, line, col, "error", message)])


def utf8_text(raw: bytes, file: str, message: str) -> str:
    """`raw` as UTF-8, a leading byte-order mark dropped; else PlanInvalid at the first bad byte
    (its line and column; a column counts characters and no byte-order mark): `message`, then
    the byte and its offset in the file's bytes. The mark is dropped here, not by the
    "utf-8-sig" codec, whose error offsets would leave it out."""
    start = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    try:
        return (raw[start:] if start else raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = start + exc.start
        line_start = max(raw.rfind(b"\n", 0, offset) + 1, start)
        line = raw.count(b"\n", 0, offset) + 1
        col = len(raw[line_start:offset].decode("utf-8", errors="replace")) + 1
        raise invalid(
            file, line, col, f"{message}: byte 0x{raw[offset]:02x} at offset {offset}"
        ) from None


def check_top_level(data: Any, file: str, where: Callable[[], Position]) -> None:
    if isinstance(data, dict):
        return
    line, col = where()
    raise invalid(
        file, line, col, f"a plan must be a mapping at the top level, got {kind_of(data)}"
    )


def gc_paused(func: Callable[[], T]) -> T:
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


def line_col(text: str, index: int) -> Position:
    """1-based (line, col) of character `index`, counting "\\n" as the line break."""
    index = max(0, min(index, len(text)))
    line_start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - line_start + 1
