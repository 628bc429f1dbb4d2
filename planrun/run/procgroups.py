"""The process groups of one run's running commands, and how an interrupt stops them.

One `ProcessGroups` per run (a top-level run and its sub-plans share it; concurrent runs in one
process, as `planrun mcp` has them, each have their own). The shell tool adds and removes its
command's group; the interrupt handler (planrun.run.interrupts) passes the signal on to every group
(`interrupt`) and, on a second signal, kills them all (`kill_all`). Both of those are called
from a signal handler: they only send signals and set plain attributes, never touch the loop.
"""

from __future__ import annotations

import contextlib
import os
import signal

__all__ = ["DEFAULT_GRACE_S", "STOP_GRACE_S", "ProcessGroups", "signal_group"]

DEFAULT_GRACE_S = 10.0
"""How long an interrupted run waits for its commands to end (`--grace`, plan `grace`)."""
STOP_GRACE_S = 0.5
"""Between SIGTERM and SIGKILL when a step is stopped for another reason (a timeout, abort)."""


def signal_group(pgid: int, sig: int) -> None:
    """Send `sig` to a process group, if it is still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_exists(pgid: int) -> bool:
    """Whether a process group has a member (a zombie counts: `killpg(pgid, 0)` answers)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # there, and someone else's
        return True
    return True


class ProcessGroups:
    """The live process groups of a run's commands (a command's group id is its pid)."""

    __slots__ = ("grace", "stop_signal", "hurried", "_live", "_told")

    def __init__(self, grace: float = DEFAULT_GRACE_S) -> None:
        self.grace = grace  # set once the plan is known: --grace, else the plan's `grace`
        self.stop_signal: int | None = None  # the signal that interrupted the run, if one did
        self.hurried = False  # a second signal: no more waiting
        self._live: set[int] = set()
        self._told: set[int] = set()  # groups the stop signal was already passed on to

    def add(self, pgid: int) -> None:
        self._live.add(pgid)

    def told(self, pgid: int) -> bool:
        """Whether the run's interrupt was passed on to this group (its end is the interrupt's)."""
        return pgid in self._told

    def discard(self, pgid: int) -> None:
        self._live.discard(pgid)
        self._told.discard(pgid)

    def interrupt(self, sig: int) -> None:
        """The run is interrupted by `sig`: pass it on to every running command's group."""
        if self.stop_signal is None:
            self.stop_signal = sig
        for pgid in list(self._live):
            self._tell(pgid)

    def kill_all(self) -> None:
        """A second signal: SIGKILL every running command's group, and wait for nothing more."""
        self.hurried = True
        for pgid in list(self._live):
            signal_group(pgid, signal.SIGKILL)

    def stopping(self, pgid: int) -> float:
        """A command of this run is being stopped: signal its group (the run's stop signal,
        unless it already got it; else SIGTERM) and return how long to wait before SIGKILL."""
        if self.hurried:
            return 0.0
        if self.stop_signal is None:
            signal_group(pgid, signal.SIGTERM)
            return STOP_GRACE_S
        self._tell(pgid)
        return self.grace

    def _tell(self, pgid: int) -> None:
        if pgid not in self._told and self.stop_signal is not None:
            self._told.add(pgid)
            signal_group(pgid, self.stop_signal)
