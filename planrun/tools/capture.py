"""What in-process step code prints: `sys.stdout`/`sys.stderr` routed to the running step.

A `python` step runs inside planrun, so its `print()` would land on planrun's own stdout (and
break `--output json`). The streams are replaced, once, by routers that send each write to the
capture of the step whose context the code runs in (a ContextVar: it follows `await`, tasks the
step creates and `asyncio.to_thread`), and everything else to the real stream. Writes to the
file descriptors themselves (a child process, C code) are not seen.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, TextIO

# Bounds what one step's prints may hold in memory; the rest is counted, not kept.
MAX_CAPTURE_CHARS = 1 << 20


class Capture:
    """What one step printed, in order, as (stream, text) chunks: the first `limit` characters,
    the rest counted (and said in `text`)."""

    def __init__(self, limit: int = MAX_CAPTURE_CHARS) -> None:
        self.limit = limit
        self.chunks: list[tuple[str, str]] = []
        self.size = 0
        self.dropped = 0

    def add(self, stream: str, text: str) -> None:
        room = self.limit - self.size
        if len(text) > room:
            self.dropped += len(text) - max(room, 0)
            text = text[: max(room, 0)]
        if text:
            self.chunks.append((stream, text))
            self.size += len(text)

    def text(self) -> str:
        """Everything printed, both streams interleaved as written."""
        out = "".join(text for _, text in self.chunks)
        if self.dropped:
            out += f"\n[planrun: {self.dropped} more characters of output not kept]\n"
        return out

    def lines(self) -> Iterator[tuple[str, str]]:
        """(stream, line) for each line of each stream, for `--stream`."""
        for stream in ("stdout", "stderr"):
            text = "".join(t for s, t in self.chunks if s == stream)
            yield from ((stream, line) for line in text.splitlines())


_current: ContextVar[Capture | None] = ContextVar("planrun_step_capture", default=None)


class _Router:
    """Stands in for sys.stdout / sys.stderr; writes go to the current step's capture."""

    def __init__(self, name: str, real: TextIO) -> None:
        self._name = name
        self._real = real

    def write(self, text: str) -> int:
        capture = _current.get()
        if capture is None:
            return self._real.write(text)
        capture.add(self._name, str(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if _current.get() is None:
            self._real.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, isatty, buffer...
        return getattr(self._real, name)


def _install() -> None:
    if not isinstance(sys.stdout, _Router):
        sys.stdout = _Router("stdout", sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, _Router):
        sys.stderr = _Router("stderr", sys.stderr)  # type: ignore[assignment]


@contextlib.contextmanager
def captured() -> Iterator[Capture]:
    """Capture what the code run inside prints (in this context and those copied from it)."""
    _install()
    capture = Capture()
    token = _current.set(capture)
    try:
        yield capture
    finally:
        _current.reset(token)
