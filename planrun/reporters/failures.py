"""Report files (`--events`, `--junit`) that could not be written during or after a run.

A full disk must not turn into an internal error nor stop the run half-way with its state
left `running`: a reporter that cannot write remembers why and stops writing, the run and its
state are finished as usual, and the command then prints one line per file and exits 1 (see
docs/reporters.md, "Write errors").
"""

from __future__ import annotations

import threading

__all__ = ["report_failed", "take_failures"]

_lock = threading.Lock()
_failed: list[str] = []


def report_failed(path: object, exc: OSError) -> None:
    """Remember that the report at `path` could not be written."""
    with _lock:
        _failed.append(f"cannot write {path}: {exc.strerror or exc}")


def take_failures() -> list[str]:
    """The write failures remembered since the last call (and forget them)."""
    with _lock:
        failed = list(_failed)
        _failed.clear()
    return failed
