"""Shape checks for what a state file or its journal holds, before anything uses it.

A state file is input like any other: hand-edited, truncated or written by a buggy
version, it must give one clear "corrupt" line (exit 4), never an AttributeError deep in
`status`, `graph` or `resume`. Each check raises ValueError saying what is wrong; the
state reader adds the file name.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from planrun.text import kind_of

__all__ = [
    "check_journal_entry",
    "check_revisions",
    "check_run_fields",
    "check_step_fields",
]

_STEP_TEXT = (
    "error",
    "started_at",
    "ended_at",
    "fingerprint",
    "result_variable",
    "reason",
    "detail",
    "title",
    "cache_key",
)
_RUN_TEXT = ("digest", "run_id", "reason", "error", "started_at", "ended_at")


_TEXT_TYPES = frozenset((str, type(None)))


def _text_or_null(doc: Mapping[str, Any], keys: tuple[str, ...], where: str) -> None:
    # Every step of a state file passes here as it loads: its values' types are looked at
    # in one pass first (each a str or None, as written), field by field only when one is not.
    if _TEXT_TYPES.issuperset(map(type, map(doc.get, keys))):
        return
    for key in keys:
        value = doc.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{where}{key} is {kind_of(value)}, not a string")


def _number_or_null(
    value: Any, name: str, kinds: Any = int | float, what: str = "a number"
) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
        raise ValueError(f"{name} is {kind_of(value)}, not {what}")


def check_step_fields(doc: Any, statuses: Collection[str]) -> None:
    """A step's recorded state: an object with a known status and fields of the right types."""
    if not isinstance(doc, dict):
        raise ValueError("a step state is not an object")
    status = doc.get("status", "pending")
    if not isinstance(status, str) or status not in statuses:
        raise ValueError(f"unknown step status {doc.get('status')!r}")
    attempts = doc.get("attempts", 0)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
        raise ValueError("step attempts is not a whole number")
    _text_or_null(doc, _STEP_TEXT, "step ")
    _number_or_null(doc.get("duration_s"), "step duration_s")
    if not isinstance(doc.get("result_masked", False), bool):
        raise ValueError("step result_masked is not a boolean")
    if not isinstance(doc.get("kept", False), bool):
        raise ValueError("step kept is not a boolean")
    log = doc.get("attempts_log", [])
    if not isinstance(log, list) or not all(isinstance(e, dict) for e in log):
        raise ValueError("step attempts_log is not a list of objects")


def check_run_fields(doc: Mapping[str, Any], statuses: Collection[str]) -> None:
    """The run-level fields of a snapshot (or of a journal's run changes)."""
    if "status" in doc and (not isinstance(doc["status"], str) or doc["status"] not in statuses):
        raise ValueError(f"unknown run status {doc['status']!r}")
    _text_or_null(doc, _RUN_TEXT, "")
    _number_or_null(doc.get("duration_s"), "duration_s")
    for key in ("pid", "jobs"):
        _number_or_null(doc.get(key), key, int, "a whole number")
    targets = doc.get("targets")
    if targets is not None and (
        not isinstance(targets, list) or not all(isinstance(t, str) for t in targets)
    ):
        raise ValueError("targets is not a list of step ids")


def check_revisions(revisions: Any) -> None:
    """`revisions`: a list of objects, each with an optional diff of id lists and step list."""
    if not isinstance(revisions, list):
        raise ValueError(f"revisions is {kind_of(revisions)}, not a list")
    for number, revision in enumerate(revisions, start=1):
        check_revision(revision, f"revision {number}")


def check_revision(revision: Any, where: str = "revision") -> None:
    if not isinstance(revision, dict):
        raise ValueError(f"{where} is {kind_of(revision)}, not an object")
    diff = revision.get("diff")
    if diff is not None:
        if not isinstance(diff, dict):
            raise ValueError(f"{where}: diff is {kind_of(diff)}, not an object")
        for key in ("removed", "added", "revised"):
            ids = diff.get(key)
            if ids is not None and (
                not isinstance(ids, list) or not all(isinstance(i, str | int) for i in ids)
            ):
                raise ValueError(f"{where}: diff.{key} is not a list of step ids")
    steps = revision.get("steps")
    if steps is not None and not isinstance(steps, list):
        raise ValueError(f"{where}: steps is {kind_of(steps)}, not a list")


def check_journal_entry(entry: Any, run_statuses: Collection[str]) -> None:
    """One journal line: {op: step, id, state} | {op: run, changes} | {op: revision, revision}."""
    if not isinstance(entry, dict):
        raise ValueError(f"an entry is {kind_of(entry)}, not an object")
    op = entry.get("op")
    if op == "step":
        if not isinstance(entry.get("id"), str | int) or isinstance(entry.get("id"), bool):
            raise ValueError("a step entry has no step id")
    elif op == "run":
        changes = entry.get("changes")
        if not isinstance(changes, dict):
            raise ValueError(f"run changes are {kind_of(changes)}, not an object")
        check_run_fields(changes, run_statuses)
    elif op == "revision":
        check_revision(entry.get("revision"))
    else:
        raise ValueError(f"unknown operation {op!r}")
