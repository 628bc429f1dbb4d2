"""Which files a foreach instance owns when its step's instances share an `outputs` glob.

`foreach: [p1, p2, p3]` with `outputs: ["dist/*.txt"]`: every instance's pattern matches every
instance's file. Stored as a plain step stores (all that its patterns match), p3's entry would
hold p1's file as it was when p3 ran, and p3's next hit would put that old copy back over a
rebuilt `dist/p1.txt`, run after run. So, for instances whose step's `outputs` do not depend
on the element (no `${item}` or `${index}` in them):

- An instance stores only the files it produced: those that changed (size, mtime, inode,
  ctime) between its start and its end, and that no sibling restored, verified or produced
  earlier in this run. A file that also changed while a sibling that is still running was
  running could be that sibling's: neither stores it (it is left as the run made it).
- A hit does not write a file that a sibling produced, restored or verified in this run, nor
  one that changed since a still-running sibling started: it restores only the rest.

Instances whose rendered `outputs` differ (`dist/${item}.txt`) each own what their patterns
match and store it all, as a plain step does. Safe to use from the run's worker threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from planrun.cache.globs import FileStat
from planrun.cache.outputs import stat_key

Snapshot = dict[str, tuple[int, ...]]


class _Fan:
    __slots__ = ("claimed", "running")

    def __init__(self) -> None:
        self.claimed: dict[str, str] = {}  # path -> the instance that produced, restored it
        self.running: dict[str, Snapshot] = {}  # instance -> its outputs when it started


class Siblings:
    """The instances of the run's foreach steps that share an `outputs` glob."""

    def __init__(self) -> None:
        self._fans: dict[str, _Fan] = {}
        self._lock = threading.Lock()

    def started(self, parent: str, iid: str, before: Snapshot) -> None:
        """Instance `iid` of `parent` runs (a miss); `before`: what its outputs matched then."""
        with self._lock:
            self._fans.setdefault(parent, _Fan()).running[iid] = before

    def not_running(self, parent: str, iid: str) -> None:
        """`iid` was taken for a run but is a hit after all (from the remote cache)."""
        with self._lock:
            self._fans.setdefault(parent, _Fan()).running.pop(iid, None)

    def keeper(self, parent: str, iid: str, now: Snapshot) -> Callable[[FileStat], bool]:
        """The test of which matched files `iid` stores, now that it has ended; `now`: what its
        outputs match at its end (taken after its command ended).

        One step under the lock: `iid` stops counting as running and every file it changed is
        claimed for it (so that no sibling stores it, nor a sibling's hit writes over it). A
        sibling deciding later sees these claims; one deciding earlier made its own, or saw
        `iid` running. Decided lazily, file by file, a sibling ending in between would see
        neither (`iid` no longer running, its files not yet claimed) and store them."""
        with self._lock:
            fan = self._fans.setdefault(parent, _Fan())
            before = fan.running.pop(iid, {})
            mine: Snapshot = {}
            for path, stat in now.items():
                if before.get(path) == stat:
                    continue  # not changed by this run
                if fan.claimed.setdefault(path, iid) != iid:
                    continue  # a sibling's this run
                if any(s.get(path) != stat for s in fan.running.values()):
                    continue  # changed while a running sibling was running: stored by neither
                mine[path] = stat

        def keep(f: FileStat) -> bool:
            return mine.get(f.path) == stat_key(f)  # (changed since: not as it was decided)

        return keep

    def writable(self, parent: str, iid: str, cwd: str, path: str) -> bool:
        """Whether a hit of `iid` may write `path` (no sibling produced, restored or verified
        it in this run, and no running sibling may be writing it); if so it is claimed for `iid`."""
        with self._lock:
            fan = self._fans.setdefault(parent, _Fan())
            if fan.claimed.get(path, iid) != iid or any(
                _changed(cwd, path, s) for s in fan.running.values()
            ):
                return False  # (a running sibling's file stays unclaimed: it may store it)
            fan.claimed[path] = iid
            return True

    def claim(self, parent: str, iid: str, paths: list[str]) -> None:
        """A hit of `iid` found these files in place as its entry has them."""
        with self._lock:
            fan = self._fans.setdefault(parent, _Fan())
            for path in paths:
                fan.claimed.setdefault(path, iid)


def _changed(cwd: str, path: str, before: Snapshot) -> bool:
    """Whether `path` differs from `before` (a running sibling's start): it may be writing it."""
    try:
        st = os.stat(os.path.join(cwd, path))
    except OSError:
        return path in before
    return before.get(path) != (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
