"""How the console words a run: symbols, the summary's order and failure blocks."""

from __future__ import annotations

# Lazy import (inside a function), for start-up time: shlex only for a failed run's hint.
import os
from typing import Any

from planrun.run.events import PlanDiff
from planrun.status import STEP_STATUSES, Status
from planrun.text import shell_word

TERMINAL = STEP_STATUSES - {Status.PENDING, Status.RUNNING}  # a step's statuses once it ended
# kind -> (unicode symbol, ascii fallback, ANSI colour)
_SYMBOLS = {
    "start": ("▶", ">", "36"),
    "ok": ("✓", "+", "32"),
    "fail": ("✗", "x", "31;1"),
    "ignored": ("!", "!", "33"),
    "retry": ("↻", "~", "33"),
    "skip": ("⊘", "-", "2"),
    "stop": ("■", "#", "35"),
    "kept": ("✓", "=", "2"),
    "diff": ("✎", "*", "36"),
    "note": ("·", ".", "2"),
    "warn": ("!", "!", "33;1"),
}
_BAR = "│"


def failure_body(output: str | None, detail: str | None) -> str:
    """A failed step's output and its detail, without printing the stderr tail twice.

    A shell failure's detail is `$ command` plus the last lines of stderr, and its output is
    stdout + stderr: then show the command, then the output. Otherwise the detail comes first.
    """
    if not detail:
        return (output or "").rstrip("\n")
    if not output:
        return detail.rstrip("\n")
    lines = detail.rstrip("\n").split("\n")
    for k in range(len(lines) + 1):
        rest = "\n".join(lines[k:]).strip()
        if not rest or rest in output:
            return "\n".join([*lines[:k], output.rstrip("\n")])
    raise AssertionError("unreachable: an empty rest always matches")


def is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def wants_color(terminal: bool) -> bool:
    """NO_COLOR turns colour off, FORCE_COLOR on; otherwise colour at a terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return terminal


def symbols(encoding: str | None, color: bool) -> tuple[str, dict[str, str]]:
    """The bar and the symbol of each kind of line: unicode when the stream can encode it,
    with ANSI colours when `color`."""
    try:
        ("".join(s[0] for s in _SYMBOLS.values()) + _BAR).encode(encoding or "utf-8")
        unicode_ok = True
    except (UnicodeEncodeError, LookupError):
        unicode_ok = False
    sym = {}
    for kind, (uni, ascii_, ansi) in _SYMBOLS.items():
        symbol = uni if unicode_ok else ascii_
        sym[kind] = f"\x1b[{ansi}m{symbol}\x1b[0m" if color else symbol
    return (_BAR if unicode_ok else "|"), sym


def failed_and_stopped(errors: dict[str, str], statuses: dict[str, str], mark: str) -> str:
    """The summary's lists of failed steps (with their error) and interrupted steps."""
    out = ""
    if errors:
        out += "failed steps:\n"
        out += "".join(
            f"  {mark} {step_id}: {error}\n"
            for step_id, error in errors.items()
            if statuses.get(step_id) == "failed"
        )
    stopped = [s for s, st in statuses.items() if st in ("interrupted", "running")]
    if stopped:
        out += f"interrupted steps: {', '.join(stopped)}\n"
    return out


def resume_command(hint: str) -> str:
    """A full command as given, or `planrun resume PLAN` for a plan path."""
    if hint.startswith("planrun "):
        return hint
    return f"planrun resume {shell_word(hint)}"


def diff_words(event: PlanDiff, color: bool) -> tuple[str, str]:
    """A plan.diff event as ("plan revised (revision N)", "removed -a; added +b; revised ~c"):
    removed struck through, added highlighted (-id / +id / ~id without colour)."""
    marks = {"removed": ("9;31", "-"), "added": ("1;32", "+"), "revised": ("33", "~")}

    def mark(key: str, step_id: str) -> str:
        ansi, sign = marks[key]
        return f"\x1b[{ansi}m{step_id}\x1b[0m" if color else f"{sign}{step_id}"

    changes = [
        f"{key} {', '.join(mark(key, str(i)) for i in ids)}"
        for key, ids in (
            ("removed", event.removed),
            ("added", event.added),
            ("revised", event.revised),
        )
        if ids
    ]
    revision = event.revision
    head = f"plan revised (revision {revision})" if revision is not None else "plan revised"
    return head, "; ".join(changes) or "no changes"
