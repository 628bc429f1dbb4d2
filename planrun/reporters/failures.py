"""Report files (`--events`, `--junit`) that could not be written during or after a run.

A full disk must not turn into an internal error nor stop the run half-way with its state
left `running`: a reporter that cannot write remembers why in its run's `WriteFailures` and
stops writing, the run and its state are finished as usual, and the command then prints one
line per file and exits 1 (see docs/reporters.md, "Write errors"). Each run has its own
record (`RunRequest.report_failures`): runs in one process never see each other's.
"""

from __future__ import annotations

import threading

__all__ = ["WriteFailures"]


class WriteFailures:
    """The report files of one run that could not be written (reporters may write from any
    thread)."""

    __slots__ = ("_lock", "_failed")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failed: list[str] = []

    __hash__ = None  # type: ignore[assignment]  # mutable: equal by what it holds

    def __eq__(self, other: object) -> bool:  # a RunRequest compares its fields
        if not isinstance(other, WriteFailures):
            return NotImplemented
        return self._failed == other._failed

    def add(self, path: object, exc: OSError) -> None:
        """Remember that the report at `path` could not be written."""
        with self._lock:
            self._failed.append(f"cannot write {path}: {exc.strerror or exc}")

    def take(self) -> list[str]:
        """The write failures remembered since the last call (and forget them)."""
        with self._lock:
            failed = list(self._failed)
            self._failed.clear()
        return failed
