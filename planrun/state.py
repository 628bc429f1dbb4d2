"""The run state store: turns the event stream into a durable, resumable state file.

Layout, for a state file `NAME.json`:

- `NAME.json`          the snapshot: complete, always valid JSON (one step per line), replaced
                       atomically (temp file + fsync + os.replace).
- `NAME.json.journal`  append-only JSON Lines written since that snapshot: a header line
                       `{"journal": TOKEN}` naming the snapshot it extends, then one line per
                       change, each written with a single os.write on an O_APPEND descriptor.
- `NAME.json.lock`     the pid of the run holding the state (flock-ed while held).

A change costs one small append, so a run of N steps costs O(N), not O(N^2) as rewriting
the whole file after every step would. A written line is in the kernel, so it survives a
`kill -9` of planrun; only a power loss can lose the lines appended since the last fsync
(the snapshot, fsync-ed before every replace, is never torn). The journal is folded into
the snapshot at run start, when it grows past the snapshot's size, and at `close()`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from planrun.errors import StateError
from planrun.events import Event
from planrun.instances import group_instances, parent_of
from planrun.statecheck import (
    check_journal_entry,
    check_revisions,
    check_run_fields,
    check_step_fields,
)
from planrun.statefiles import (
    check_not_special,
    check_state_dirs,
    create_temp,
    open_regular,
    read_regular,
)
from planrun.status import RUN_STATUSES, STEP_STATUSES, Status

STATE_VERSION = 1


# The journal is folded into the snapshot once it is larger than this and than the last
# snapshot: each compaction is paid for by at least as many journal bytes, so it stays linear.
COMPACT_MIN_BYTES = 4 << 20  # journal size before the first compaction during a run
REFRESH_MIN_S = 0.05  # the snapshot is at most this much (or 20 snapshot-writes) behind

_JOURNAL_SUFFIX = ".journal"
_LOCK_SUFFIX = ".lock"


@dataclass(slots=True)
class StepState:
    """What is known about one step of the run."""

    status: str = Status.PENDING
    attempts: int = 0
    result: Any = None
    error: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    fingerprint: str | None = None
    result_variable: str | None = None
    reason: str | None = None  # why it was skipped ("condition false", "upstream failed: a")
    detail: str | None = None  # failure detail (command, stderr tail)
    title: str | None = None  # the title as rendered when it last started (for reports)
    result_masked: bool = False  # a secret was masked in `result`: it is not the value

    def to_json(self) -> dict[str, Any]:
        # Shallow on purpose: dataclasses.asdict deep-copies the result, which is slow for big ones.
        return {
            "status": self.status,
            "attempts": self.attempts,
            "result": self.result,
            "error": self.error,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_s": self.duration_s,
            "fingerprint": self.fingerprint,
            "result_variable": self.result_variable,
            "reason": self.reason,
            "detail": self.detail,
            "title": self.title,
            "result_masked": self.result_masked,
        }

    @classmethod
    def from_json(cls, doc: Any) -> StepState:
        check_step_fields(doc, STEP_STATUSES)
        return cls(**{k: v for k, v in doc.items() if k in _STEP_FIELDS})


_STEP_FIELDS = frozenset(f.name for f in fields(StepState))


@dataclass(slots=True)
class RunState:
    """The whole state of a run: what the state file holds."""

    plan: str
    version: int = STATE_VERSION
    digest: str | None = None
    run_id: str | None = None
    status: str = Status.RUNNING
    reason: str | None = None
    error: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, StepState] = field(default_factory=dict)  # in plan order
    revisions: list[dict[str, Any]] = field(default_factory=list)
    pid: int | None = None
    jobs: int | None = None  # -j of the run (for the run report)


_RUN_SCALARS = (
    "version",
    "plan",
    "digest",
    "run_id",
    "status",
    "reason",
    "error",
    "started_at",
    "ended_at",
    "duration_s",
    "pid",
    "jobs",
)


def default_state_path(cwd: str, plan_name: str) -> Path:
    """`<cwd>/.planrun/state/<plan name>.json` (a name that could escape the dir is flattened)."""
    name = plan_name.replace("/", "_").replace("\\", "_").replace("\0", "_")
    if name in ("", ".", ".."):
        name = name.replace(".", "_") or "_"
    return Path(cwd) / ".planrun" / "state" / f"{name}.json"


def _json_default(value: Any) -> Any:
    # Results are meant to be JSON already; a stray object must not crash the run's bookkeeping.
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


_encode = json.JSONEncoder(separators=(",", ":"), default=_json_default).encode


_second_cache: list[Any] = [None, ""]


def _iso_ts(ts: float) -> str:
    """events.iso_ts, character for character, at a fifth of its cost (about a third of what
    handle() spent per event): the seconds part is formatted once per second."""
    frac, whole = math.modf(ts)
    micros = round(frac * 1e6)  # rounded half-even like datetime.fromtimestamp, then truncated
    sec = int(whole)
    if micros >= 1_000_000:
        sec += 1
        micros -= 1_000_000
    if sec != _second_cache[0]:
        _second_cache[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _second_cache[0] = sec
    return f"{_second_cache[1]}.{micros // 1000:03d}Z"


def _pid_alive(pid: int | None) -> bool:
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
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] not in (b"Z", b"X")
    except (OSError, ValueError):
        return True


def _write_all(fd: int, data: bytes) -> None:
    # os.write on a regular file writes everything except on a full disk or a signal; loop anyway.
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _make_dirs(directory: Path) -> None:
    """Create the state directory (and missing parents) with mode 0700: state can hold results."""
    missing: list[Path] = []
    d = directory
    while not d.exists():
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o700)


def _snapshot_bytes(state: RunState, token: str | None) -> bytes:
    """The snapshot as JSON with one step (and one revision) per line: readable, diffable, and
    written with the C encoder (json's indent= would switch to the slow pure-Python one)."""
    lines = ["{"]
    for key in _RUN_SCALARS:
        lines.append(f" {_encode(key)}: {_encode(getattr(state, key))},")
    lines.append(f' "journal": {_encode(token)},')
    lines.append(f' "variables": {_encode(state.variables)},')
    if state.revisions:
        lines.append(' "revisions": [')
        lines.append(",\n".join("  " + _encode(r) for r in state.revisions))
        lines.append(" ],")
    else:
        lines.append(' "revisions": [],')
    if state.steps:
        lines.append(' "steps": {')
        lines.append(
            ",\n".join(
                f"  {_encode(sid)}: {_encode(st.to_json())}" for sid, st in state.steps.items()
            )
        )
        lines.append(" }")
    else:
        lines.append(' "steps": {}')
    lines.append("}\n")
    return "\n".join(lines).encode()


def _bind_result(state: RunState, step: StepState) -> None:
    """Bind a step's result variable as the run's variable scope sees it (SPEC §9: ignored -> null)."""
    if step.result_variable:
        if step.status in (Status.SUCCEEDED, Status.CACHED):
            state.variables[step.result_variable] = step.result
        elif step.status == Status.IGNORED:
            state.variables[step.result_variable] = None


def _apply_step(state: RunState, step_id: str, step: StepState) -> None:
    state.steps[step_id] = step
    _bind_result(state, step)


def _apply_revision(state: RunState, revision: dict[str, Any]) -> None:
    """Apply a planner's revision: removed steps dropped, revised ones reset to pending, new ones
    added pending, in the order of the revised plan when `steps` lists all of it."""
    state.revisions.append(revision)
    diff = revision.get("diff") or {}
    for sid in diff.get("removed") or []:
        state.steps.pop(str(sid), None)
    for sid in diff.get("revised") or []:
        if str(sid) in state.steps:
            state.steps[str(sid)] = StepState()
    listed = [
        str(s["id"]) for s in revision.get("steps") or [] if isinstance(s, dict) and "id" in s
    ]
    listed += [str(a) for a in diff.get("added") or [] if str(a) not in listed]
    if not set(state.steps) <= set(listed):
        # Only the new steps were listed: the kept ones stay first, in their order.
        listed = [*state.steps, *(sid for sid in listed if sid not in state.steps)]
    state.steps = {sid: state.steps.get(sid) or StepState() for sid in listed}


def _apply_run(state: RunState, changes: dict[str, Any]) -> None:
    for key, value in changes.items():
        if key in ("status", "reason", "error", "ended_at", "duration_s"):
            setattr(state, key, value)


def _state_from_json(doc: Any, path: Path, plan_name: str) -> tuple[RunState, str | None]:
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
        steps_doc = doc.get("steps") or {}
        if not isinstance(steps_doc, dict):
            raise ValueError("steps is not an object")
        variables = doc.get("variables") or {}
        revisions = doc.get("revisions") or []
        if not isinstance(variables, dict):
            raise ValueError("variables is not an object")
        check_revisions(revisions)
        check_run_fields(doc, RUN_STATUSES)
        state = RunState(
            plan=plan,
            version=version,
            variables=variables,
            revisions=revisions,
            steps={str(sid): StepState.from_json(s) for sid, s in steps_doc.items()},
        )
        for key in _RUN_SCALARS[2:]:
            if key in doc:
                setattr(state, key, doc[key])
        if state.status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {state.status!r}")
    except (TypeError, ValueError) as exc:
        raise StateError(f"state file {path} is corrupt: {exc}") from None
    token = doc.get("journal")
    return state, token if isinstance(token, str) else None


def _replay_journal(state: RunState, data: bytes, token: str | None, journal: Path) -> None:
    """Apply the journal's complete lines; a torn last line (no newline: kill -9 mid-write) is
    dropped, a journal written for another snapshot (crash during compaction) is ignored."""
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: b"" normally, the torn fragment after a crash
    if not lines:
        return
    try:
        header = json.loads(lines[0])
    except ValueError:
        raise StateError(f"state journal {journal} is corrupt: bad header line") from None
    if not isinstance(header, dict) or token is None or header.get("journal") != token:
        return  # extends an older snapshot whose changes the current one already holds
    for number, line in enumerate(lines[1:], start=2):
        try:
            entry = json.loads(line)
            check_journal_entry(entry, RUN_STATUSES)
            op = entry["op"]
            if op == "step":
                _apply_step(state, str(entry["id"]), StepState.from_json(entry["state"]))
            elif op == "run":
                _apply_run(state, entry["changes"])
            elif op == "revision":
                _apply_revision(state, entry["revision"])
            elif op == "drop":
                state.steps.pop(str(entry["id"]), None)
            else:
                raise ValueError(f"unknown operation {op!r}")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StateError(
                f"state journal {journal} is corrupt at line {number}: {exc}"
            ) from None


def read_state(path: Path, plan_name: str, *, as_recorded: bool = False) -> RunState | None:
    """The state in `path` (snapshot + journal), None if there is none, StateError if unusable.

    A run recorded as `running` whose process no longer holds the lock (killed) is returned as
    `interrupted` unless `as_recorded`. Read-only: never creates, changes or removes a file,
    and needs no lock, so `status` can read while a run writes.
    """
    journal = path.with_name(path.name + _JOURNAL_SUFFIX)
    # A compaction may replace both files while we read. Reading the snapshot first is safe in
    # every interleaving: a journal not matching the snapshot's token is ignored, and the
    # snapshot alone is then a complete (possibly slightly older) state.
    raw = read_regular(path)  # never through a symlink, never a FIFO or device
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise StateError(f"state file {path} is corrupt (not valid JSON: {exc})") from None
    state, token = _state_from_json(doc, path, plan_name)
    data = read_regular(journal)
    if data is None:
        return state if as_recorded else mark_abandoned(state, path)
    _replay_journal(state, data, token, journal)
    return state if as_recorded else mark_abandoned(state, path)


def _lock_holder(path: Path) -> int | None:
    try:
        raw = read_regular(path.with_name(path.name + _LOCK_SUFFIX))
    except StateError:
        return None  # a planted link or FIFO names no live run
    text = (raw or b"").decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def mark_abandoned(state: RunState, path: Path) -> RunState:
    """A run still `running` whose process is gone (kill -9, power loss) was interrupted:
    show it so, with its running steps `interrupted` (SPEC §9). Changes `state` in memory only.

    The run is live while its process is alive and still named in the lock file: a pid alone
    could have been reused by an unrelated process since.
    """
    live = _pid_alive(state.pid) and _lock_holder(path) == state.pid
    if state.status == Status.RUNNING and not live:
        state.status = Status.INTERRUPTED
        state.reason = "interrupted"
        if state.error is None:
            state.error = f"planrun (pid {state.pid}) stopped without finishing the run"
        for step in state.steps.values():
            if step.status == Status.RUNNING:
                step.status = Status.INTERRUPTED
    return state


class StateStore:
    """Owns one state file for one run: lock, load, record every event, compact."""

    def __init__(
        self,
        path: Path,
        plan_name: str,
        *,
        fsync_each_change: bool = False,
        compact_min_bytes: int = COMPACT_MIN_BYTES,
    ) -> None:
        self.path = Path(path)
        self.plan_name = plan_name
        self.journal_path = self.path.with_name(self.path.name + _JOURNAL_SUFFIX)
        self.lock_path = self.path.with_name(self.path.name + _LOCK_SUFFIX)
        # fsync per change makes each change survive a power loss too, at ~0.5 ms a change
        # on ext4 (measured): 10-100x the cost of the change itself. kill -9 safety needs none.
        self._fsync_each_change = fsync_each_change
        self._compact_min_bytes = compact_min_bytes
        self._state: RunState | None = None
        self._journal_fd: int | None = None
        self._journal_bytes = 0
        self._compact_at = compact_min_bytes
        self._lock_fd: int | None = None
        self._preloaded: list[RunState | None] = []  # the state acquire() checked, for load()
        self._started: set[str] = set()  # steps started in this run
        self._mutex = threading.Lock()  # executors may emit from worker threads
        # The snapshot is refreshed soon after changes too, not only when the journal is
        # large, so that the JSON file a user (or a script) reads is close to current; the
        # refresh rate is bounded so that refreshing costs at most ~5% of the run.
        self._compacted_at = 0.0  # time.monotonic() of the last snapshot
        self._compact_cost = 0.0  # how long it took
        self._refresh_pending = False
        self._journal_header = 0

    # ----------------------------------------------------------------- reading

    def load(self) -> RunState | None:
        """The last recorded state, or None if there is none; StateError if it is unusable.

        A run left `running` by a dead process is returned as `interrupted`. Never writes.
        """
        # acquire() read it under the lock (nobody changed it since): no need to parse it twice
        state = self._preloaded.pop() if self._preloaded else read_state(self.path, self.plan_name)
        if state is not None:
            self._state = state
        return state

    @property
    def state(self) -> RunState:
        if self._state is None:
            self._state = RunState(plan=self.plan_name)
        return self._state

    # ----------------------------------------------------------------- locking

    def acquire(self) -> None:
        """Take the state file's lock, or StateError naming the live holder's pid (or saying
        why the state file cannot be written there)."""
        try:
            self._acquire()
        except OSError as exc:
            raise StateError(
                f"cannot write the state file {self.path}: {exc.strerror or exc}"
            ) from None

    def _acquire(self) -> None:
        """Take the state file's lock, or StateError naming the live holder's pid.

        flock decides: the kernel drops it when its holder dies, even by kill -9, so a lock
        file left behind by a dead run is taken over, and a pid reused by an unrelated process
        does not keep the state locked. The pid in the file is for the message.
        """
        if self._lock_fd is not None:
            return
        # A symlink, FIFO or device where the state goes is refused before anything is created.
        check_state_dirs(self.path)
        check_not_special(self.path)
        check_not_special(self.journal_path)
        _make_dirs(self.path.parent)
        for _ in range(50):
            try:
                fd = open_regular(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, own=True)
            except FileExistsError:
                try:
                    fd = open_regular(self.lock_path, os.O_RDWR, own=True)
                except FileNotFoundError:
                    continue  # released meanwhile: try to create it again
            try:
                locked = self._try_flock(fd)
            except BaseException:
                os.close(fd)
                raise
            if not locked:
                pid = self._read_holder(fd)
                os.close(fd)
                raise StateError(
                    f"state file {self.path} is locked by another run (pid {pid})"
                    if pid is not None
                    else f"state file {self.path} is locked by another run"
                )
            # The holder we raced may have unlinked the file after we opened it: a lock on an
            # unlinked inode protects nothing, so check that the path still names our inode.
            try:
                same = os.stat(self.lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            os.fchmod(fd, 0o600)
            self._lock_fd = fd
            self._check_existing()
            self._remove_temp_files()
            return
        raise StateError(f"could not lock state file {self.path}: the lock file keeps changing")

    def _check_existing(self) -> None:
        """Under the lock: a file already at the state's path must be this plan's state (a
        foreign or corrupt file, `--state config.json`, is left byte-for-byte; StateError)."""
        try:
            self._preloaded = [read_state(self.path, self.plan_name)]
        except BaseException:
            self._release_lock()
            raise

    def _try_flock(self, fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            # No flock on this filesystem: fall back to the pid's liveness.
            pid = self._read_holder(fd, wait=False)
            return pid is None or pid == os.getpid() or not _pid_alive(pid)

    @staticmethod
    def _read_holder(fd: int, *, wait: bool = True) -> int | None:
        # A holder writes its pid right after taking the lock: give it a moment.
        for _ in range(20 if wait else 1):
            text = os.pread(fd, 64, 0).decode(errors="replace").strip()
            if text.isdigit():
                return int(text)
            if wait:
                time.sleep(0.01)
        return None

    def release(self) -> None:
        """Release the lock (idempotent) without compacting: for error paths. The journal stays
        and `load()` replays it."""
        with self._mutex:
            self._close_journal(sync=True)
            self._release_lock()

    def _release_lock(self) -> None:
        if self._lock_fd is None:
            return
        fd, self._lock_fd = self._lock_fd, None
        # Unlink while still holding the flock, so nobody can lock this inode and then find
        # the path removed (acquire() re-checks the inode for the same reason).
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.lock_path)
        os.close(fd)

    def _remove_temp_files(self) -> None:
        # Leftovers of a compaction cut short by kill -9; we hold the lock, so they are not live.
        with contextlib.suppress(OSError):
            for p in self.path.parent.glob(self.path.name + ".*.tmp"):
                with contextlib.suppress(OSError):
                    p.unlink()

    def __enter__(self) -> StateStore:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- writing

    def handle(self, event: Event) -> None:
        """EventBus subscriber: apply the event and make the change durable before returning."""
        name = event.event
        if name == "step.output":
            return  # the hot path of --stream: no state in it
        with self._mutex:
            try:
                if name == "run.started":
                    self._on_run_started(event)
                elif name.startswith("step."):
                    self._on_step(event)
                elif name == "plan.diff":
                    self._on_plan_diff(event)
                elif name == "run.finished":
                    self._on_run_finished(event)
            except OSError as exc:  # disk full, directory removed: a one-line error, exit 4
                raise StateError(
                    f"cannot write state file {self.path}: {exc.strerror or exc}"
                ) from None

    def _on_run_started(self, event: Event) -> None:
        d = event.data
        previous = self._state
        if d.get("resumed") and previous is None:
            previous = self.load()
        listed = [s["id"] if isinstance(s, dict) else s for s in d.get("steps") or []]
        if d.get("resumed") and previous is not None:
            # A foreach step's instances are listed by the previous run only: kept with it.
            listed += [sid for sid in previous.steps if parent_of(sid) in set(listed)]
            steps = {str(sid): previous.steps.get(str(sid)) or StepState() for sid in listed}
            revisions = previous.revisions
        else:
            steps = {str(sid): StepState() for sid in listed}
            revisions = []
        self._started = set()
        self._state = RunState(
            plan=self.plan_name,
            digest=d.get("digest"),
            run_id=d.get("run_id"),
            status=Status.RUNNING,
            started_at=_iso_ts(event.ts),
            variables=dict(d.get("variables") or {}),
            steps=steps,
            revisions=revisions,
            pid=os.getpid(),
            jobs=d.get("jobs") if isinstance(d.get("jobs"), int) else None,
        )
        self._compact(final=False)  # the snapshot exists and is readable from the first moment

    def _on_step(self, event: Event) -> None:
        sid = event.step
        if sid is None:
            return
        d = event.data
        state = self.state
        old = state.steps.get(sid)
        name = event.event
        ts = _iso_ts(event.ts)
        if name == "step.started":
            if "instances" in d:  # a foreach step expanded: instances of an older list go
                self._drop_instances(sid, set(d["instances"]))
            self._started.add(sid)
            new = StepState(
                status=Status.RUNNING,
                attempts=int(d.get("attempt") or ((old.attempts if old else 0) + 1)),
                started_at=ts,
                fingerprint=d.get("fingerprint"),
                result_variable=old.result_variable if old else None,
                title=d.get("title") if isinstance(d.get("title"), str) else None,
            )
        elif old is None or (sid not in self._started and name != "step.resumed"):
            # Skipped, or failed/interrupted before starting in this run: nothing of an earlier
            # run's attempt (result, error, times) may show through.
            new = StepState(result_variable=old.result_variable if old else None)
        else:
            # Updated in place: the in-memory state is ours, and the line below records it whole.
            new = old
        if name != "step.started":
            if name == "step.retrying":
                new.attempts = int(d.get("attempt") or new.attempts)
                new.error = d.get("error")
            elif name == "step.succeeded":
                new.status = d.get("status") or Status.SUCCEEDED
                new.result = d.get("result")
                new.error = None
                new.detail = None
                new.result_masked = bool(d.get("result_masked"))
                self._finish(new, d, ts)
            elif name == "step.failed":
                new.status = d.get("status") or Status.FAILED
                new.result = d.get("result")
                new.error = d.get("error")
                new.detail = d.get("detail")
                new.result_masked = False
                self._finish(new, d, ts)
            elif name == "step.skipped":
                new.status = Status.SKIPPED
                new.reason = d.get("reason")
                new.error = d.get("error")
                new.ended_at = ts
            elif name == "step.interrupted":
                new.status = Status.INTERRUPTED
                self._finish(new, d, ts)
            elif name == "step.cached":
                new.status = Status.CACHED
                new.result = d.get("result")
                new.fingerprint = d.get("fingerprint")
                new.result_variable = d.get("result_variable") or new.result_variable
                new.started_at = new.ended_at = ts
                new.reason = "cached"
            elif name == "step.resumed":
                self._keep(new, d)
            else:
                return  # an event we do not record
        _apply_step(state, sid, new)
        self._append({"op": "step", "id": sid, "state": new.to_json()})

    def _drop_instances(self, sid: str, keep: set[str]) -> None:
        state = self.state
        for old in [i for i in state.steps if parent_of(i) == sid and i not in keep]:
            del state.steps[old]
            self._append({"op": "drop", "id": old})

    @staticmethod
    def _keep(step: StepState, d: dict[str, Any]) -> None:
        """A step kept from the previous run: as it was recorded there."""
        step.status = d.get("status") or Status.SUCCEEDED
        step.result = d.get("result")
        step.error = d.get("error")
        step.result_masked = bool(d.get("result_masked"))
        step.reason = d.get("reason") or "unchanged since last run"
        for key in ("attempts", "duration_s", "fingerprint", "result_variable"):
            if d.get(key) is not None:
                setattr(step, key, d[key])

    @staticmethod
    def _finish(step: StepState, d: dict[str, Any], ts: str) -> None:
        step.ended_at = ts
        if "attempts" in d:
            step.attempts = int(d["attempts"])
        if "duration_s" in d:
            step.duration_s = d["duration_s"]
        if d.get("fingerprint") is not None:
            step.fingerprint = d["fingerprint"]
        if d.get("result_variable") is not None:
            step.result_variable = d["result_variable"]

    def _on_plan_diff(self, event: Event) -> None:
        d = event.data
        revision = {
            "revision": d.get("revision", len(self.state.revisions) + 1),
            "diff": {
                "removed": list(d.get("removed") or []),
                "added": list(d.get("added") or []),
                "revised": list(d.get("revised") or []),
            },
            "error": d.get("error"),
            "steps": list(d.get("steps") or []),
        }
        _apply_revision(self.state, revision)
        self._append({"op": "revision", "revision": revision})

    def _on_run_finished(self, event: Event) -> None:
        d = event.data
        changes = {
            "status": d.get("status"),
            "reason": d.get("reason"),
            "error": d.get("error"),
            "ended_at": _iso_ts(event.ts),
            "duration_s": d.get("duration_s"),
        }
        _apply_run(self.state, changes)
        self._append({"op": "run", "changes": changes})

    def _append(self, entry: dict[str, Any]) -> None:
        if self._journal_fd is None:
            self._compact(final=False)  # no journal yet (events before run.started)
        assert self._journal_fd is not None
        line = _encode(entry).encode() + b"\n"
        # One write call on an O_APPEND fd: the line is in the kernel when this returns.
        try:
            _write_all(self._journal_fd, line)
        except OSError:
            # Cut off a partial line (disk full), or later lines would follow a torn one.
            with contextlib.suppress(OSError):
                os.ftruncate(self._journal_fd, self._journal_bytes)
            raise
        if self._fsync_each_change:
            os.fsync(self._journal_fd)
        self._journal_bytes += len(line)
        if self._journal_bytes >= self._compact_at:
            self._compact(final=False)
        else:
            self._refresh_soon()

    def _refresh_soon(self) -> None:
        """Rewrite the snapshot now if the last one is old enough, else once that time comes."""
        wait = self._compacted_at + max(REFRESH_MIN_S, 20 * self._compact_cost) - time.monotonic()
        if wait <= 0:
            self._compact(final=False)
            return
        if self._refresh_pending:
            return
        try:
            import asyncio

            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not in a run's event loop: the journal alone keeps the change
        self._refresh_pending = True
        loop.call_later(wait, self._scheduled_refresh)

    def _scheduled_refresh(self) -> None:
        with self._mutex:
            self._refresh_pending = False
            if self._journal_fd is not None and self._journal_bytes > self._journal_header:
                with contextlib.suppress(OSError):  # the journal still holds every change
                    self._compact(final=False)

    def _compact(self, *, final: bool) -> None:
        """Write the full snapshot atomically, then start a fresh journal (or none if final)."""
        started = time.monotonic()
        state = self.state
        token = None if final else os.urandom(8).hex()
        data = _snapshot_bytes(state, token)
        _make_dirs(self.path.parent)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        fd = create_temp(tmp)
        try:
            os.fchmod(fd, 0o600)
            _write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)
        # Crash after this replace but before the journal's: the old journal's token no longer
        # matches the snapshot, so it is ignored, and the new snapshot already holds its lines.
        os.replace(tmp, self.path)
        self._close_journal()
        if final:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.journal_path)
        else:
            jtmp = self.journal_path.with_name(f"{self.journal_path.name}.{os.getpid()}.tmp")
            jfd = create_temp(jtmp, os.O_APPEND)
            os.fchmod(jfd, 0o600)
            header = _encode({"journal": token, "plan": state.plan}).encode() + b"\n"
            _write_all(jfd, header)
            os.replace(jtmp, self.journal_path)
            self._journal_fd = jfd
            self._journal_bytes = self._journal_header = len(header)
            # the journal may grow to twice the snapshot: compaction cost stays linear overall
            self._compact_at = max(self._compact_min_bytes, 2 * len(data))
        _fsync_dir(self.path.parent)
        self._compacted_at = time.monotonic()
        self._compact_cost = self._compacted_at - started

    def _close_journal(self, *, sync: bool = False) -> None:
        if self._journal_fd is not None:
            fd, self._journal_fd = self._journal_fd, None
            if sync:  # the journal outlives us (error path): make it survive a power loss too
                with contextlib.suppress(OSError):
                    os.fsync(fd)
            os.close(fd)

    def close(self) -> None:
        """Fold everything into the snapshot, remove the journal, release the lock. Idempotent."""
        with self._mutex:
            try:
                # Only the writer compacts: a store that merely loaded must not write.
                if self._journal_fd is not None:
                    self._compact(final=True)
            except OSError as exc:  # the journal is intact: load() still sees every change
                raise StateError(
                    f"cannot write state file {self.path}: {exc.strerror or exc}"
                ) from None
            finally:
                self._close_journal()
                self._release_lock()


# --------------------------------------------------------------------- reports


def status_document(state: RunState) -> dict[str, Any]:
    """The run document, as `run --output json` prints it: {plan, status, reason, duration_s,
    error, steps, variables} (plus `revisions` after a replan)."""
    doc: dict[str, Any] = {
        "plan": state.plan,
        "status": state.status,
        "reason": state.reason,
        "duration_s": state.duration_s,
        "error": state.error,
        "steps": [
            {
                "id": sid,
                "status": st.status,
                "attempts": st.attempts,
                "duration_s": st.duration_s,
                "result": st.result,
                "error": st.error,
            }
            for sid, st in _in_tree_order(state.steps)
        ],
        "variables": state.variables,
    }
    if state.revisions:
        doc["revisions"] = state.revisions
    return doc


def _in_tree_order(steps: dict[str, StepState]) -> list[tuple[str, StepState]]:
    """The plan's steps, each followed by its sub-plan's steps (PARENT/CHILD ids) and its
    foreach instances (ID[N], in index order)."""
    from planrun.substeps import tree_order

    return [(sid, steps[sid]) for sid in group_instances(tree_order(steps))]


def format_duration(seconds: float | None) -> str:
    """0.42s, 12.3s, 2m03s, 1h02m; "-" when unknown."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _first_line(text: str | None, width: int = 80) -> str:
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def render_status_text(state: RunState) -> str:
    """A plain-text table: the run's status line, then one row per step."""
    head = f"plan {state.plan}: {state.status}"
    if state.reason:
        head += f" ({state.reason})"
    head += f", {format_duration(state.duration_s)}"
    if state.started_at:
        head += f", started {state.started_at}"
    lines = [head]
    if state.error:
        lines.append(f"error: {_first_line(state.error, 200)}")
    counts: dict[str, int] = {}
    for st in state.steps.values():
        counts[st.status] = counts.get(st.status, 0) + 1
    if counts:
        lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    rows = [("STEP", "STATUS", "ATTEMPTS", "DURATION", "ERROR")]
    for sid, st in _in_tree_order(state.steps):
        note = _first_line(st.error) or (st.reason or "")
        rows.append((sid, st.status, str(st.attempts), format_duration(st.duration_s), note))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines.append("")
    for r in rows:
        cells = [r[i].ljust(widths[i]) for i in range(4)] + [r[4]]
        lines.append("  ".join(cells).rstrip())
    if state.revisions:
        lines.append("")
        for rev in state.revisions:
            diff = rev.get("diff") or {}
            parts = [
                f"{k} {', '.join(map(str, diff.get(k) or []))}"
                for k in ("removed", "added", "revised")
                if diff.get(k)
            ]
            lines.append(f"revision {rev.get('revision')}: " + ("; ".join(parts) or "no change"))
    return "\n".join(lines) + "\n"
