"""The state file's lock: one run at a time on a state file, and the lock of a dead run taken over.

`NAME.json.lock` is created with O_EXCL if missing, `flock`-ed, and the holder's pid written
into it, with the kernel (boot id) and pid namespace that pid belongs to. The flock decides whether a run holds the state, with one exception: a flock belongs
to the open file, which every process the run forks shares until it execs (each step's command,
for the instant between its fork and its exec) or for its whole life if it never execs (a
`python` step that forks, as multiprocessing does). A run killed with SIGKILL at such a moment
leaves its flock held by a process that is not a run. So a flock held while the pid in the file
is dead is stale: the lock file is removed (as the dead run's release would have) and a new one
taken. A pid is known dead only on its own host and in its own pid namespace: a lock written by
a run on another machine sharing the directory (NFS) or in another container is never taken
over, whatever its pid is here.

Removing another process's lock file is only safe if nobody is taking that same file at the same
moment, so every acquirer examines, takes and removes lock files while holding a flock on the
state's directory (the *guard*) for those few system calls. A run takes it before it starts any
step; should a process forked meanwhile (by another run in the same process) keep it, an
acquirer waits for it at most _GUARD_WAIT_S, then takes the lock as before, only without taking
a stale one over.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator

from planrun.errors import StateError
from planrun.state.files import open_regular, parent_dir

# How long an acquirer waits for the guard (held for microseconds by another acquirer): past it,
# it takes the lock without the guard, as safely as ever, but takes no stale lock over.
_GUARD_WAIT_S = 2.0
_NO_FLOCK = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EBADF, errno.EINVAL)


class StateLock:
    """The lock file `path` (`NAME.json.lock`) of one state file: `acquire`, `release`."""

    __slots__ = ("fd", "path", "state_path", "left_by")

    def __init__(self, path: str, state_path: str) -> None:
        self.path = path
        self.state_path = state_path  # named in messages
        self.fd: int | None = None
        # The holder (pid, where) named in a lock file a dead run left behind, once taken over:
        # that run did not finish, and may have left commands running (planrun/run/leftovers.py).
        self.left_by: tuple[int, str | None] | None = None

    def acquire(self) -> None:
        """Take the lock, or StateError naming the live holder's pid."""
        if self.fd is not None:
            return
        for _ in range(50):
            with _guard(parent_dir(self.path)) as guarded:
                fd = _open_lock_file(self.path)
                if fd is None:
                    continue  # released meanwhile: try to create it again
                try:
                    taken = self._take(fd, guarded)
                except BaseException:
                    os.close(fd)
                    raise
                if taken:
                    self.fd = fd
                    return
                os.close(fd)
        raise StateError(
            f"could not lock state file {self.state_path}: the lock file keeps changing"
        )

    def _take(self, fd: int, guarded: bool) -> bool:
        """Lock `fd` and write our pid: True; False if it is no longer the file at the path
        (or was a dead run's, now removed); StateError if a live run holds it."""
        if not _try_flock(fd):
            pid, where = _read_holder(fd)
            if not (guarded and where == here() and _dead(pid) and _names(self.path, fd)):
                raise StateError(
                    f"state file {self.state_path} is locked by another run (pid {pid})"
                    if pid is not None
                    else f"state file {self.state_path} is locked by another run"
                )
            # The run that wrote `pid` is gone (kill -9): the flock lives on only in a process
            # it forked. Under the guard nobody else is taking this file: remove it.
            os.unlink(self.path)
            assert pid is not None  # _dead(None) is False
            self.left_by = (pid, where)
            return False
        # The holder we raced may have unlinked the file after we opened it: a lock on an
        # unlinked inode protects nothing, so check that the path still names our inode.
        if not _names(self.path, fd):
            return False
        # A pid already written here is a run that never released the lock: it died (the
        # kernel dropped its flock). A new lock file is empty: one pread, nothing more.
        pid, where = parse_holder(os.pread(fd, 512, 0))
        if pid is not None and pid != os.getpid():
            self.left_by = (pid, where)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{here()}\n".encode(), 0)
        os.fchmod(fd, 0o600)
        return True

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        # Unlink while still holding the flock, so nobody can lock this inode and then find
        # the path removed (acquire() re-checks the inode for the same reason). Only our own
        # file: a copy of this lock in a process forked by a run killed since (its lock taken
        # over) must not remove the new holder's.
        if _names(self.path, fd):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        os.close(fd)


@contextlib.contextmanager
def _guard(directory: str) -> Iterator[bool]:
    """Hold the directory's flock for the block; yields whether it is held (a filesystem
    without flock, or an acquirer that keeps it longer than _GUARD_WAIT_S: not held)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield False
        return
    try:
        yield _flock_within(fd, _GUARD_WAIT_S)
    finally:
        os.close(fd)  # drops the flock


def _flock_within(fd: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    pause = 0.0005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)  # another acquirer holds it for a few syscalls
            pause = min(pause * 2, 0.02)
        except OSError as exc:
            if exc.errno in _NO_FLOCK:
                return False
            raise


def _open_lock_file(path: str) -> int | None:
    """The lock file, created if missing; None if it disappeared between two opens."""
    try:
        return open_regular(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, own=True)
    except FileExistsError:
        try:
            return open_regular(path, os.O_RDWR, own=True)
        except FileNotFoundError:
            return None


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
            raise
        # No flock on this filesystem: fall back to the pid's liveness (here only).
        pid, where = _read_holder(fd, wait=False)
        return pid is None or pid == os.getpid() or (where == here() and not pid_alive(pid))


def _read_holder(fd: int, *, wait: bool = True) -> tuple[int | None, str | None]:
    # A holder writes them right after taking the lock: give it a moment.
    for _ in range(20 if wait else 1):
        pid, where = parse_holder(os.pread(fd, 512, 0))
        if pid is not None:
            return pid, where
        if wait:
            time.sleep(0.01)
    return None, None


def parse_holder(raw: bytes) -> tuple[int | None, str | None]:
    """A lock file's holder: its pid and where it runs (host and pid namespace), as far as
    written (None for what is missing)."""
    lines = raw.decode(errors="replace").split("\n")
    if not lines[0].strip().isdigit():
        return None, None
    where = lines[1].strip() if len(lines) > 2 else None  # only a whole second line
    return int(lines[0]), where


_WHERE: list[str] = []


def here() -> str:
    """This kernel and pid namespace: where a pid written into a lock file means this process.

    The kernel is told by its boot id (random at every boot, the same in every container on
    it; host names can repeat across machines), else by the host name."""
    if not _WHERE:
        try:
            with open("/proc/sys/kernel/random/boot_id", "rb") as f:
                kernel = f.read(64).decode("ascii", "replace").strip()
        except OSError:
            kernel = os.uname().nodename
        try:
            namespace = os.readlink("/proc/self/ns/pid")
        except OSError:
            namespace = "-"
        _WHERE.append(f"{kernel} {namespace}")
    return _WHERE[0]


def _dead(pid: int | None) -> bool:
    """Whether `pid`, a lock's recorded holder, is known to be dead (not us, not alive, or a
    zombie); unknown (None) is not dead."""
    return pid is not None and pid != os.getpid() and not pid_alive(pid)


def _names(path: str, fd: int) -> bool:
    """Whether `path` still names the file open as `fd`."""
    try:
        named, opened = os.stat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def pid_alive(pid: int | None) -> bool:
    """Whether `pid` is a live process of this host and pid namespace (a zombie is not)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    # A killed process stays a zombie until its parent reaps it, and kill(pid, 0) still
    # succeeds on one (a planrun orphaned in a container whose init never reaps): not alive.
    fields = proc_stat(pid)
    return fields is None or fields[0] not in (b"Z", b"X")


def proc_stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...: field N
    of proc(5) is item N - 3); None where there is none to read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read(4096)
        return raw[raw.rindex(b")") + 2 :].split()  # the name may hold spaces and ')'
    except (OSError, ValueError):
        return None


def proc_pids() -> list[int]:
    """Every process id /proc lists; OSError where there is no /proc to read."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def live_stat(pid: int) -> tuple[int, int] | None:
    """(process group, start time) of a live process; None if it is gone or a zombie."""
    fields = proc_stat(pid)
    try:
        if fields is None or fields[0] in (b"Z", b"X"):
            return None
        return int(fields[2]), int(fields[19])  # pgrp (field 5), starttime (field 22)
    except (ValueError, IndexError):
        return None
