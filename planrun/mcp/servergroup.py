"""A stdio MCP server's process group: found once its session is up, stopped when it ends.

The SDK starts a stdio server in a session of its own (its process group id is its pid) and, at
the end, closes its stdin and kills that group only when the server itself is still there after
a grace. A server that leaves on end of input, as servers written with the SDK do, would leave
behind whatever it started (a helper, a language server, `npx`'s child): so planrun stops the
group after the session too.

The SDK does not tell the server's pid. planrun gives each stdio server an unlinked temporary
file of its own as stderr, which its children inherit: the server's group is that of the
processes whose fd 2 is that file, looked up once the session is up (the server leads it) and
again when it has ended (what is left of it, also after a start that was cancelled). Where
/proc cannot say (not Linux), nothing is found and nothing more is stopped than the SDK stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from planrun.run.procgroups import STOP_GRACE_S, group_exists, signal_group
from planrun.state.lock import proc_pids, proc_stat

_POLL_S = 0.02


def find_groups(stderr_fd: int) -> set[int]:
    """The process groups (but this process's own) of the live processes whose stderr is
    `stderr_fd`'s file: the server's, and any its helpers made of their own."""
    try:
        mine = os.fstat(stderr_fd)
        pids = proc_pids()
    except OSError:
        return set()
    ours = os.getpgrp()
    groups: set[int] = set()
    for pid in pids:
        try:
            theirs = os.stat(f"/proc/{pid}/fd/2")
        except OSError:
            continue  # gone, or not this user's
        if (theirs.st_dev, theirs.st_ino) != (mine.st_dev, mine.st_ino):
            continue
        fields = proc_stat(pid)
        try:
            if fields is None or fields[0] in (b"Z", b"X"):
                continue
            pgid = int(fields[2])
        except (ValueError, IndexError):
            continue
        if pgid != ours:
            groups.add(pgid)
    return groups


async def stop_groups(groups: set[int]) -> None:
    """Stop what is left of a server's process groups once its session has ended: SIGTERM, a
    short grace (STOP_GRACE_S), then SIGKILL. Nothing to do (and no wait) when they are empty.

    A group lives on in any member, so its id is not reused while something of it is left."""
    left = {g for g in groups if g != os.getpgrp() and group_exists(g)}
    if not left:
        return
    for pgid in left:
        signal_group(pgid, signal.SIGTERM)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STOP_GRACE_S
    try:
        while any(group_exists(g) for g in left) and loop.time() < deadline:
            await asyncio.sleep(_POLL_S)
    finally:  # also when the wait is cancelled: nothing of the groups outlives the session
        for pgid in left:
            with contextlib.suppress(OSError):
                signal_group(pgid, signal.SIGKILL)
