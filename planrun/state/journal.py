"""The bytes on disk: the snapshot and the journal written, read back and replayed."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from planrun.errors import StateError
from planrun.state.check import (
    check_journal_entry,
    check_revisions,
    check_run_fields,
)
from planrun.state.files import path_text, read_regular
from planrun.state.lock import here, parse_holder, pid_alive
from planrun.state.model import (
    JOURNAL_SUFFIX,
    LOCK_SUFFIX,
    RUN_SCALARS,
    STATE_VERSION,
    RunState,
    StepState,
    encode_step,
)
from planrun.state.reduce import apply
from planrun.status import RUN_STATUSES, Status
from planrun.text import kind_of
from planrun.untrusted_json import loads


def write_all(fd: int, data: bytes) -> None:
    # os.write on a regular file writes everything except on a full disk or a signal; loop anyway.
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def fsync_dir(directory: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def make_dirs(directory: str) -> None:
    """Create the state directory (and missing parents) with mode 0700: state can hold results."""
    missing: list[str] = []
    d = directory
    while not os.path.exists(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d or not parent:
            break
        d = parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o700)


def snapshot_bytes(
    state: RunState,
    token: str | None,
    encoded: dict[str, str] | None = None,
    held: int | None = None,
) -> bytes:
    """The snapshot as JSON with one step (and one revision) per line: readable, diffable, and
    written with the C encoder (json's indent= would switch to the slow pure-Python one).

    `encoded`: each step's line in the "steps" object (`  "id": {...}`) already made (by the
    journal lines of the run), used as it is; the lines made here are added to it.
    `held`: how many bytes of the journal named `token` the state already holds (a refresh,
    which keeps that journal); None for a snapshot that starts a journal of its own."""
    encoded = {} if encoded is None else encoded
    lines = ["{"]
    for key in RUN_SCALARS:
        lines.append(f" {encode_step(key)}: {encode_step(getattr(state, key))},")
    lines.append(f' "journal": {encode_step(token)},')
    if held is not None:
        lines.append(f' "journal_held": {held},')
    lines.append(f' "variables": {encode_step(state.variables)},')
    if state.revisions:
        lines.append(' "revisions": [')
        lines.append(",\n".join("  " + encode_step(r) for r in state.revisions))
        lines.append(" ],")
    else:
        lines.append(' "revisions": [],')
    if state.steps:
        lines.append(' "steps": {')
        for sid, st in state.steps.items():
            if sid not in encoded:
                encoded[sid] = f"  {encode_step(sid)}: {encode_step(st.to_json())}"
        lines.append(",\n".join(map(encoded.__getitem__, state.steps)))
        lines.append(" }")
    else:
        lines.append(' "steps": {}')
    lines.append("}\n")
    return "\n".join(lines).encode()


def _state_from_json(
    doc: Any, path: str, plan_name: str
) -> tuple[RunState, str | None, int | None]:
    if not isinstance(doc, dict):
        raise StateError(f"state file {path} is corrupt: not a JSON object")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StateError(f"state file {path} is corrupt: no valid format version")
    if version > STATE_VERSION:
        raise StateError(
            f"state file {path} has format version {version}, newer than this planrun reads "
            f"({STATE_VERSION}); upgrade planrun or remove the file"
        )
    plan = doc.get("plan")
    if plan != plan_name:
        raise StateError(f"state file {path} belongs to plan {plan!r}, not {plan_name!r}")
    try:
        # Absent is empty; present, each has the one type the snapshot writes ([] or null
        # where an object belongs is as corrupt as a string).
        steps_doc = doc.get("steps", {})
        if not isinstance(steps_doc, dict):
            raise ValueError(f"steps is {kind_of(steps_doc)}, not an object")
        variables = doc.get("variables", {})
        revisions = doc.get("revisions", [])
        if not isinstance(variables, dict):
            raise ValueError(f"variables is {kind_of(variables)}, not an object")
        check_revisions(revisions)
        check_run_fields(doc, RUN_STATUSES)
        state = RunState(
            plan=plan,
            version=version,
            variables=variables,
            revisions=revisions,
            steps={str(sid): StepState.from_json(s) for sid, s in steps_doc.items()},
        )
        for key in RUN_SCALARS[2:]:
            if key in doc:
                setattr(state, key, doc[key])
        if state.status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {state.status!r}")
    except (TypeError, ValueError) as exc:
        raise StateError(f"state file {path} is corrupt: {exc}") from None
    token = doc.get("journal")
    held = doc.get("journal_held")
    if held is not None and (type(held) is not int or held < 0):
        raise StateError(f"state file {path} is corrupt: journal_held is not a byte count")
    return state, token if isinstance(token, str) else None, held


def _replay_journal(
    state: RunState, data: bytes, token: str | None, held: int | None, journal: str
) -> None:
    """Apply the journal's complete lines that the snapshot does not hold yet (`held`: how many
    of its bytes it does); a torn last line (no newline: kill -9 mid-write) is dropped, a
    journal written for another snapshot (crash during compaction) is ignored."""
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: b"" normally, the torn fragment after a crash
    if not lines:
        return
    try:
        header = loads(lines[0])
    except ValueError:
        raise StateError(f"state journal {journal} is corrupt: bad header line") from None
    if not isinstance(header, dict) or token is None or header.get("journal") != token:
        return  # extends an older snapshot whose changes the current one already holds
    first = 2
    if held is not None and held > len(lines[0]) + 1:
        # A refreshed snapshot holds the lines before byte `held`: they start after it. (Held
        # bytes the journal lacks were lost with a power cut: the snapshot has them all.)
        if held > len(data):
            return
        if data[held - 1 : held] != b"\n":
            raise StateError(
                f"state journal {journal} is corrupt: the snapshot holds {held} bytes of it, "
                "which do not end with a line"
            )
        first = data.count(b"\n", 0, held) + 1
    for number, line in enumerate(lines[first - 1 :], start=first):
        try:
            entry = loads(line)
            check_journal_entry(entry, RUN_STATUSES)
            apply(state, entry)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StateError(
                f"state journal {journal} is corrupt at line {number}: {exc}"
            ) from None


def no_state(
    name: str, path: str, plan_file: str, first: str, unreadable: str | None
) -> StateError:
    """The error of a query for a plan with no state at `path` (exit 4): `first` says how to
    make one; `unreadable`, why `plan_file` gave no name (its stem stood in for it)."""
    where = f"no state for plan '{name}' at {path}"
    if unreadable is not None:  # its state is kept under the name the file no longer gives
        return StateError(
            f"{where}: {plan_file} does not parse ({unreadable}), so its name is the file's"
        )
    return StateError(f"{where}: run it first with {first}")


def read_state(
    path: str | os.PathLike[str], plan_name: str, *, as_recorded: bool = False
) -> RunState | None:
    """The state in `path` (snapshot + journal), None if there is none, StateError if unusable.

    A run recorded as `running` whose process no longer holds the lock (killed) is returned as
    `interrupted` unless `as_recorded`. Read-only: never creates, changes or removes a file,
    and needs no lock, so `status` can read while a run writes.
    """
    path = path_text(path)
    journal = path + JOURNAL_SUFFIX
    # A compaction may replace both files while we read. Reading the snapshot first is safe in
    # every interleaving: a journal not matching the snapshot's token is ignored, and the
    # snapshot alone is then a complete (possibly slightly older) state.
    raw = read_regular(path)  # never through a symlink, never a FIFO or device
    if raw is None:
        return None
    try:
        doc = loads(raw)
    except ValueError as exc:
        raise StateError(f"state file {path} is corrupt (not valid JSON: {exc})") from None
    state, token, held = _state_from_json(doc, path, plan_name)
    data = read_regular(journal)
    if data is not None:
        _replay_journal(state, data, token, held, journal)
    return state if as_recorded else mark_abandoned(state, path)


def _lock_holder(path: str) -> tuple[int | None, str | None]:
    try:
        raw = read_regular(path + LOCK_SUFFIX)
    except StateError:
        return None, None  # a planted link or FIFO names no live run
    return parse_holder(raw or b"")


def mark_abandoned(state: RunState, path: str | os.PathLike[str]) -> RunState:
    """A run still `running` whose process is gone (kill -9, power loss) was interrupted:
    show it so, with its running steps `interrupted`. Changes `state` in memory only.

    The run is live while its process is alive and still named in the lock file: a pid alone
    could have been reused by an unrelated process since. A lock written on another host or in
    another pid namespace names a pid this process cannot check: that run counts as live.
    """
    pid, where = _lock_holder(path_text(path))
    if pid is not None and pid == state.pid and where is not None and where != here():
        return state
    live = pid_alive(state.pid) and pid == state.pid
    if state.status == Status.RUNNING and not live:
        state.status = Status.INTERRUPTED
        state.reason = "interrupted"
        if state.error is None:
            state.error = f"planrun (pid {state.pid}) stopped without finishing the run"
        for step in state.steps.values():
            if step.status == Status.RUNNING:  # as a live run records it: stopped, no error
                step.status, step.error = Status.INTERRUPTED, None
    return state
