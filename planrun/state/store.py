"""The state store: locks one state file and records every event of a run in it."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: asyncio only for a snapshot scheduled in a
# running loop.
import contextlib
import os
import threading
import time
from typing import Any

from planrun.errors import StateError
from planrun.plan.instances import parent_of
from planrun.run.events import (
    PlanDiff,
    RunEvent,
    RunFinished,
    RunStarted,
    StepEvent,
    StepOutput,
    StepResumed,
    StepStarted,
)
from planrun.run.runtree import STEP_SEPARATOR
from planrun.state.files import (
    check_not_special,
    check_state_dirs,
    create_temp,
    parent_dir,
    path_text,
)
from planrun.state.journal import (
    fsync_dir,
    make_dirs,
    read_state,
    snapshot_bytes,
    write_all,
)
from planrun.state.lock import StateLock, here
from planrun.state.model import (
    COMPACT_MIN_BYTES,
    JOURNAL_SUFFIX,
    LOCK_SUFFIX,
    REFRESH_MIN_S,
    RunState,
    StepState,
    encode_step,
    state_time,
)
from planrun.state.reduce import (
    apply_revision,
    apply_run,
    apply_step,
    apply_step_event,
)
from planrun.status import Status


class StateStore:
    """Owns one state file for one run: lock, load, record every event, compact."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        plan_name: str,
        *,
        fsync_each_change: bool = False,
        compact_min_bytes: int = COMPACT_MIN_BYTES,
    ) -> None:
        self.path = path_text(path)
        self.plan_name = plan_name
        self.journal_path = self.path + JOURNAL_SUFFIX
        self.lock_path = self.path + LOCK_SUFFIX
        self._lock = StateLock(self.lock_path, self.path)
        # fsync per change makes each change survive a power loss too, at ~0.5 ms a change
        # on ext4 (measured): 10-100x the cost of the change itself. kill -9 safety needs none.
        self._fsync_each_change = fsync_each_change
        self._compact_min_bytes = compact_min_bytes
        self._state: RunState | None = None
        # Each step's JSON as last written, reused by the snapshots: a snapshot encodes only
        # the steps no journal line has encoded yet. Every change to a step goes through
        # _on_step (which sets it), _drop_instances or a revision (which drop it).
        self._encoded: dict[str, str] = {}
        self._journal_fd: int | None = None
        self._journal_bytes = 0
        self._compact_at = compact_min_bytes
        self._preloaded: list[RunState | None] = []  # the state acquire() checked, for load()
        self._started: set[str] = set()  # steps started in this run
        # On resume, foreach instances listed again, shown pending until an event of this run
        # says what they are: their previous records, for a kept one (planrun.run.foreach)
        self._held: dict[str, StepState] = {}
        self._mutex = threading.Lock()  # executors may emit from worker threads
        # The snapshot is refreshed soon after changes too, not only when the journal is
        # large, so that the JSON file a user (or a script) reads is close to current; the
        # refresh rate is bounded so that refreshing costs at most ~5% of the run. A refresh
        # keeps the journal (the snapshot says how many of its bytes it holds) and is written
        # by a thread of its own, so that an fsync on a busy disk never holds up the run.
        self._compacted_at = 0.0  # time.monotonic() of the last snapshot
        self._compact_cost = 0.0  # how long it took
        self._refresh_pending = False
        self._refresher: threading.Thread | None = None  # the refresh being written, if any
        self._token: str | None = None  # the journal's
        self._snapshot_holds = 0  # journal bytes the latest snapshot holds

    # ----------------------------------------------------------------- reading

    def load(self) -> RunState | None:
        """The last recorded state, or None if there is none; StateError if it is unusable.

        A run left `running` by a dead process is returned as `interrupted`. Never writes.
        """
        # acquire() read it under the lock (nobody changed it since): no need to parse it twice
        state = self._preloaded.pop() if self._preloaded else read_state(self.path, self.plan_name)
        if state is not None:
            self._state = state
            self._encoded = {}
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
        """Take the lock (planrun/state/lock.py), then check what is already at the path."""
        if self._lock.fd is not None:
            return
        # A symlink, FIFO or device where the state goes is refused before anything is created.
        check_state_dirs(self.path)
        check_not_special(self.path)
        check_not_special(self.journal_path)
        make_dirs(parent_dir(self.path))
        self._lock.acquire()
        self._check_existing()
        self._remove_temp_files()

    def _check_existing(self) -> None:
        """Under the lock: a file already at the state's path must be this plan's state (a
        foreign or corrupt file, `--state config.json`, is left byte-for-byte; StateError)."""
        try:
            self._preloaded = [read_state(self.path, self.plan_name)]
        except BaseException:
            self._lock.release()
            raise

    def left_running(self) -> tuple[str | None, frozenset[str]] | None:
        """After `acquire()` took over the lock of a run that died on this host without
        finishing: that run's id (as recorded: unchecked) and the steps it had running, whose
        commands may still be running. None when there was no such run (the usual case)."""
        holder = self._lock.left_by
        state = self._preloaded[0] if self._preloaded else self._state
        if holder is None or state is None or holder[1] != here():
            return None
        running = (Status.RUNNING, Status.INTERRUPTED)  # read_state shows a dead run's running
        steps = frozenset(sid for sid, st in state.steps.items() if st.status in running)
        return (state.run_id, steps) if steps else None

    def release(self) -> None:
        """Release the lock (idempotent) without compacting: for error paths. The journal stays
        and `load()` replays it."""
        with self._mutex:
            self._close_journal(sync=True)
            self._await_refresh()  # no rename may land once another run holds the lock
            self._lock.release()

    def _remove_temp_files(self) -> None:
        # Leftovers of a compaction cut short by kill -9; we hold the lock, so they are not live.
        directory, name = os.path.split(self.path)
        with contextlib.suppress(OSError):
            for entry in os.listdir(directory or "."):
                if (
                    entry.startswith(f"{name}.")
                    and entry.endswith(".tmp")
                    and len(entry) > len(name) + 4
                ):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(directory, entry))

    # ----------------------------------------------------------------- writing

    def handle(self, event: RunEvent) -> None:
        """EventBus subscriber: apply the event and make the change durable before returning."""
        if isinstance(event, StepOutput):
            return  # the hot path of --stream: no state in it
        with self._mutex:
            try:
                match event:
                    case RunStarted():
                        self._on_run_started(event)
                    case PlanDiff():
                        self._on_plan_diff(event)
                    case RunFinished():
                        self._on_run_finished(event)
                    case _:
                        self._on_step(event)
            except OSError as exc:  # disk full, directory removed: a one-line error, exit 4
                raise StateError(
                    f"cannot write state file {self.path}: {exc.strerror or exc}"
                ) from None

    def _on_run_started(self, event: RunStarted) -> None:
        previous = self._state
        if event.resumed and previous is None:
            previous = self.load()
        listed = [s["id"] if isinstance(s, dict) else s for s in event.steps or []]
        if event.resumed and previous is not None:
            # A foreach step's instances are listed by the previous run only: kept with it.
            listed += [sid for sid in previous.steps if parent_of(sid) in set(listed)]
            # A step this run runs again starts `pending`, as the run's own document has it (one
            # an abort keeps from starting must not show the previous run's `failed`). Instances
            # keep their records until their step expands: a resume interrupted before that
            # must still let the next one keep those that succeeded.
            kept = event.kept
            again = set() if not isinstance(kept, list) else set(listed) - set(kept)
            steps = {
                str(sid): StepState()
                if sid in again and parent_of(sid) is None
                else previous.steps.get(str(sid)) or StepState()
                for sid in listed
            }
            revisions = previous.revisions
        else:
            steps = {str(sid): StepState() for sid in listed}
            revisions = []
        self._started = set()
        # A sub-plan's steps (PARENT/CHILD) are not listed: their records are held as an
        # instance's are, for a resume that keeps them (its `plan` step kept whole, or the
        # sub-plan resumed) to take back, times included.
        self._held = (
            {sid: st for sid, st in previous.steps.items() if STEP_SEPARATOR in sid}
            if event.resumed and previous is not None
            else {}
        )
        self._encoded = {}
        self._state = RunState(
            plan=self.plan_name,
            digest=event.digest,
            run_id=event.run_id,
            status=Status.RUNNING,
            started_at=state_time(event.ts),
            variables=dict(event.variables or {}),
            steps=steps,
            revisions=revisions,
            pid=os.getpid(),
            jobs=event.jobs if isinstance(event.jobs, int) else None,
            targets=event.targets if isinstance(event.targets, list) else None,
        )
        self._compact(final=False)  # the snapshot exists and is readable from the first moment

    def _on_step(self, event: StepEvent) -> None:
        sid = event.step
        state = self.state
        old = self._held.pop(sid, None) or state.steps.get(sid)
        ts = state_time(event.ts)
        if isinstance(event, StepStarted):
            new = self._started_step(event, old, ts)
        elif old is None or (sid not in self._started and not isinstance(event, StepResumed)):
            # Skipped, or failed/interrupted before starting in this run: nothing of an earlier
            # run's attempt (result, error, times) may show through.
            new = StepState(result_variable=old.result_variable if old else None)
        else:
            # Updated in place: the in-memory state is ours, and the line below records it whole.
            new = old
        title = getattr(event, "title", None)
        if isinstance(title, str):  # as rendered for this event (a cached step's too)
            new.title = title
        if not isinstance(event, StepStarted) and not apply_step_event(new, event, ts):
            return  # an event we do not record
        apply_step(state, sid, new)
        # what encode_step({"op": "step", "id": sid, "state": ...}) writes, the id and the
        # state encoded once for this line and the snapshots to come
        eid, encoded = encode_step(sid), encode_step(new.to_json())
        self._encoded[sid] = f"  {eid}: {encoded}"
        self._append_line(f'{{"op":"step","id":{eid},"state":{encoded}}}')

    def _started_step(self, event: StepStarted, old: StepState | None, ts: str) -> StepState:
        sid = event.step
        if event.instances is not None:  # a foreach step expanded: instances of an older list go
            self._drop_instances(sid, set(event.instances))
            self._list_instances(sid, [str(i) for i in event.instances])
        self._started.add(sid)
        return StepState(
            status=Status.RUNNING,
            attempts=int(event.attempt or ((old.attempts if old else 0) + 1)),
            started_at=ts,
            fingerprint=event.fingerprint,
            result_variable=old.result_variable if old else None,
            title=event.title if isinstance(event.title, str) else None,
            # a retry's attempts go on one log; a new run's first attempt starts a new one
            attempts_log=old.attempts_log if old and int(event.attempt or 1) > 1 else [],
        )

    def _list_instances(self, sid: str, ids: list[str]) -> None:
        """A foreach step's instances, pending until each starts (one that never does, as
        after an abort under -j 1, stays pending), listed right after their step; the
        snapshot holds them, the journal gets each one's line when it changes."""
        steps = self.state.steps
        for iid in ids:
            previous = steps.get(iid)
            if previous is None:
                steps[iid] = StepState()
            elif iid not in self._started:
                # recorded by the previous run: pending in this one until it is kept
                # (step.resumed, which takes this record back) or starts; an abort may come first
                self._held[iid] = previous
                self._encoded.pop(iid, None)
                steps[iid] = StepState()
        self._place_after(sid, ids)

    def _place_after(self, sid: str, ids: list[str]) -> None:
        """`ids` moved right after step `sid` in the state's order (once per expansion)."""
        steps = self.state.steps
        if sid not in steps:
            return
        order = list(steps)
        at = order.index(sid) + 1
        if order[at : at + len(ids)] == ids:
            return
        moved = set(ids)
        rest = [k for k in order if k not in moved]
        at = rest.index(sid) + 1
        placed = {k: steps[k] for k in [*rest[:at], *ids, *rest[at:]]}
        steps.clear()
        steps.update(placed)

    def _drop(self, ids: list[str]) -> None:
        """Steps (of this state) gone from the run: removed, and a journal line each."""
        for sid in ids:
            del self.state.steps[sid]
            self._encoded.pop(sid, None)
            self._append({"op": "drop", "id": sid})

    def _drop_instances(self, sid: str, keep: set[str]) -> None:
        self._drop([i for i in self.state.steps if parent_of(i) == sid and i not in keep])

    def _on_plan_diff(self, event: PlanDiff) -> None:
        if event.step is not None:  # a sub-plan's (planrun.run.parent): no revision of this plan
            self._drop([str(s) for s in event.removed or [] if str(s) in self.state.steps])
            return
        revision = {
            "revision": len(self.state.revisions) + 1 if event.revision is None else event.revision,
            "diff": {k: list(getattr(event, k) or []) for k in ("removed", "added", "revised")},
            "error": event.error,
            "steps": list(event.steps or []),
        }
        apply_revision(self.state, revision)
        self._encoded.clear()
        self._append({"op": "revision", "revision": revision})

    def _on_run_finished(self, event: RunFinished) -> None:
        changes = {
            "status": event.status,
            "reason": event.reason,
            "error": event.error,
            "ended_at": state_time(event.ts),
            "duration_s": event.duration_s,
        }
        apply_run(self.state, changes)
        self._append({"op": "run", "changes": changes})

    def _append(self, entry: dict[str, Any]) -> None:
        self._append_line(encode_step(entry))

    def _append_line(self, text: str) -> None:
        if self._journal_fd is None:
            self._compact(final=False)  # no journal yet (events before run.started)
        assert self._journal_fd is not None
        line = text.encode() + b"\n"
        # One write call on an O_APPEND fd: the line is in the kernel when this returns.
        try:
            write_all(self._journal_fd, line)
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
        """Refresh the snapshot now if the last one is old enough (and written), else once that
        time comes."""
        wait = self._compacted_at + max(REFRESH_MIN_S, 20 * self._compact_cost) - time.monotonic()
        if wait <= 0 and not self._refreshing():
            self._refresh()
            return
        wait = max(wait, REFRESH_MIN_S / 5)  # (a refresh still being written: look again soon)
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
            if self._journal_fd is not None and self._journal_bytes > self._snapshot_holds:
                self._refresh_soon()

    def _refreshing(self) -> bool:
        return self._refresher is not None and self._refresher.is_alive()

    def _refresh(self) -> None:
        """Make the snapshot current for readers, keeping the journal: the snapshot names it and
        says how many of its bytes it holds (readers replay only the lines after those). The
        state is encoded here; a thread writes it to a temporary file, fsyncs it and renames it
        over the snapshot. A failure there changes nothing: the journal holds every change."""
        started = time.monotonic()
        self._compacted_at = started
        self._snapshot_holds = self._journal_bytes
        data = snapshot_bytes(self.state, self._token, self._encoded, self._journal_bytes)
        self._refresher = threading.Thread(
            target=self._write_refresh, args=(data, started), name="planrun-state", daemon=True
        )
        self._refresher.start()

    def _write_refresh(self, data: bytes, started: float) -> None:
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            fd = create_temp(tmp)
            try:
                os.fchmod(fd, 0o600)
                write_all(fd, data)
                os.fsync(fd)  # never torn by a power cut, as every snapshot
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self._compact_cost = time.monotonic() - started

    def _await_refresh(self) -> None:
        """Wait for the refresh being written, if any: before another snapshot, and before
        the lock is released."""
        if self._refresher is not None:
            self._refresher.join()
            self._refresher = None

    def _compact(self, *, final: bool) -> None:
        """Write the full snapshot atomically, then start a fresh journal (or none if final)."""
        self._await_refresh()
        started = time.monotonic()
        state = self.state
        token = None if final else os.urandom(8).hex()
        data = snapshot_bytes(state, token, self._encoded)
        make_dirs(parent_dir(self.path))
        tmp = f"{self.path}.{os.getpid()}.tmp"
        fd = create_temp(tmp)
        try:
            os.fchmod(fd, 0o600)
            write_all(fd, data)
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
            jtmp = f"{self.journal_path}.{os.getpid()}.tmp"
            jfd = create_temp(jtmp, os.O_APPEND)
            os.fchmod(jfd, 0o600)
            header = encode_step({"journal": token, "plan": state.plan}).encode() + b"\n"
            write_all(jfd, header)
            os.replace(jtmp, self.journal_path)
            self._journal_fd = jfd
            self._journal_bytes = self._snapshot_holds = len(header)
            self._token = token
            # the journal may grow to twice the snapshot: compaction cost stays linear overall
            self._compact_at = max(self._compact_min_bytes, 2 * len(data))
        if final or self._fsync_each_change:
            # The renames made durable: the run's last state survives a power cut (and, with
            # fsync_each_change, the journal its fsync-ed lines go to). Any other snapshot's
            # rename lost with one leaves an older state, still whole (a journal applies only
            # to the snapshot it names), so those do not wait for the disk.
            fsync_dir(parent_dir(self.path))
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
                self._await_refresh()
                self._lock.release()
