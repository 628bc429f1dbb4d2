"""Stop the commands a killed run left running, before a run that takes over its state starts
any step again.

Every shell step's command starts with `PLANRUN_RUN_ID` (its run's id, as the state records it)
and `PLANRUN_STEP_ID` (its row in the state) in its environment, and its children inherit
them. A step's command runs in its own session, so after `kill -9` of planrun it lives on;
the next run that takes over the state (planrun/state/lock.py knows the previous owner died,
here) finds it by that marker in /proc/PID/environ and stops its process group: SIGTERM, a
short grace, SIGKILL, then a bounded wait until it is gone.

A pid can be reused, so a process is stopped only when everything agrees: it belongs to this
user and to this pid namespace, its environment names exactly the dead run's id (random, 48
bits, checked to be such an id: the state file is hostile input) and a step that run had
running; it is not this process or one of its ancestors; and it is still the same process
(pid and start time) at the moment its group is signalled. Linux only: elsewhere, nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Collection
from typing import NamedTuple

from planrun.errors import one_line
from planrun.run.procgroups import STOP_GRACE_S
from planrun.state.lock import here, live_stat, proc_pids, proc_stat
from planrun.tools.shell import RUN_ENV, STEP_ENV

_GONE_WAIT_S = 2.0  # after SIGKILL: only a process stuck in the kernel (D state) takes longer
_ENVIRON_MAX = 1 << 20  # bytes of a process's environment read, at most
_SHOWN = 5  # leftovers named in the line, at most
_HEX = frozenset("0123456789abcdef")


class Leftover(NamedTuple):
    """A process group a dead run left running: its id (its first command's pid), the step it
    ran for, and the marked processes found in it, as (pid, start time)."""

    pgid: int
    step: str
    members: tuple[tuple[int, int], ...]


def valid_run_id(value: object) -> bool:
    """Whether `value` is a run id planrun makes (12 to 64 lowercase hex digits): anything
    else read from a state file matches nothing."""
    return isinstance(value, str) and 12 <= len(value) <= 64 and set(value) <= _HEX


def stop_left_running(
    run_id: object, steps: Collection[str], write: Callable[[str], object] | None = None
) -> list[Leftover]:
    """Stop what the dead run `run_id` left running of `steps` (the steps its state shows
    running), saying so in one line on stderr; returns the groups stopped."""
    if not valid_run_id(run_id) or not steps or not os.path.isdir("/proc/self"):
        return []
    assert isinstance(run_id, str)
    found = find_leftovers(run_id, steps)
    if not found:
        return []
    still = stop_groups(found)
    out = write or sys.stderr.write
    stopped = [g for g in found if g not in still]
    if stopped:
        out(_line("stopped", stopped) + "\n")
    if still:
        out(_line("could not stop", still) + "\n")
    return stopped


def _line(verb: str, groups: list[Leftover]) -> str:
    n = len(groups)
    named = "; ".join(f"step {one_line(g.step[:100])}, pid {g.pgid}" for g in groups[:_SHOWN])
    more = f"; and {n - _SHOWN} more" if n > _SHOWN else ""
    what = "command" if n == 1 else "commands"
    return f"planrun: {verb} {n} {what} left running by the interrupted run ({named}{more})"


# ---------------------------------------------------------------------------------- finding


def find_leftovers(run_id: str, steps: Collection[str]) -> list[Leftover]:
    """The process groups of this user's processes marked with `run_id` and one of `steps`."""
    needle = f"\0{RUN_ENV}={run_id}\0".encode()
    namespace = here().rsplit(" ", 1)[-1]
    uid = os.getuid()
    mine = _ancestors()
    theirs = _groups_of(mine)
    groups: dict[int, list[tuple[int, int]]] = {}
    step_of: dict[int, str] = {}
    try:
        pids = proc_pids()
    except OSError:
        pids = []
    for pid in pids:
        if pid in mine or not _owned_by(pid, uid):
            continue
        environ = _environ(pid)
        if environ is None or needle not in environ:
            continue
        step = _value(environ, STEP_ENV)
        if step is None or not _ran(step, steps) or _namespace(pid) != namespace:
            continue
        stat = live_stat(pid)
        if stat is None or stat[0] in theirs:
            continue
        pgid, start = stat
        groups.setdefault(pgid, []).append((pid, start))
        if pgid not in step_of or pid == pgid:
            step_of[pgid] = step  # the group's first command names it best
    return [Leftover(g, step_of[g], tuple(m)) for g, m in sorted(groups.items())]


def _ran(step: str, steps: Collection[str]) -> bool:
    """Whether `step` (a row id: a sub-plan's steps are PARENT/CHILD) is, or is inside, one of
    the steps the dead run had running."""
    parts = step.split("/")
    return any("/".join(parts[:i]) in steps for i in range(1, len(parts) + 1))


def _owned_by(pid: int, uid: int) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == uid
    except OSError:
        return False


def _environ(pid: int) -> bytes | None:
    """The start of the process's environment, with a NUL in front so every entry is
    NUL-delimited on both sides; None if it cannot be read (gone, not ours)."""
    try:
        fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    chunks = [b"\0"]
    size = 0
    try:
        while size < _ENVIRON_MAX:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data if data.endswith(b"\0") else data + b"\0"


def _value(environ: bytes, name: str) -> str | None:
    key = f"\0{name}=".encode()
    start = environ.find(key)
    if start < 0:
        return None
    start += len(key)
    return environ[start : environ.index(b"\0", start)].decode("utf-8", "replace")


def _namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _ancestors() -> set[int]:
    """This process and its ancestors: never a leftover, whatever their environment says
    (a planrun started by a step of a run with the same id)."""
    seen = {os.getpid()}
    pid = os.getppid()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        fields = proc_stat(pid)
        try:
            pid = int(fields[1]) if fields is not None else 0  # ppid (field 4)
        except (ValueError, IndexError):
            break
    return seen


def _groups_of(pids: set[int]) -> set[int]:
    groups = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(pid))
    return groups


# ---------------------------------------------------------------------------------- stopping


def stop_groups(groups: list[Leftover]) -> list[Leftover]:
    """SIGTERM each group, SIGKILL what is left after the grace, wait until they are gone
    (bounded); returns the groups still there."""
    for group in groups:
        _signal(group, signal.SIGTERM)
    left = _wait_gone(groups, STOP_GRACE_S)
    for group in left:
        _signal(group, signal.SIGKILL)
    return _wait_gone(left, _GONE_WAIT_S)


def _signal(group: Leftover, sig: int) -> None:
    """Signal the group only while one of its marked processes is still the one found: then
    the group id is still that group's, whatever pids were reused meanwhile."""
    if any(_same(member) for member in group.members):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group.pgid, sig)


def _same(member: tuple[int, int]) -> bool:
    pid, start = member
    stat = live_stat(pid)
    return stat is not None and stat[1] == start


def _wait_gone(groups: list[Leftover], seconds: float) -> list[Leftover]:
    deadline = time.monotonic() + seconds
    pause = 0.001
    while True:
        left = [g for g in groups if any(_same(m) for m in g.members)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(pause)  # a condition, polled: the processes are dying
        pause = min(pause * 2, 0.02)
