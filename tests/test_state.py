"""The state store: durable across kill -9, linear in steps, locked against a second run."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from planrun.errors import ExitCode, StateError
from planrun.run.events import EventBus, iso_ts
from planrun.state import (
    StateStore,
    default_state_path,
    read_state,
    render_status_text,
    status_document,
)
from planrun.state.files import path_text
from planrun.state.model import STATE_VERSION, state_time
from tests.conftest import planrun
from tests.testkit import Event

REPO = Path(__file__).resolve().parents[1]
PLAN = "demo"


def started(steps: list[str], *, resumed: bool = False, variables: dict | None = None) -> Event:
    return Event(
        "run.started",
        PLAN,
        data={
            "run_id": "run-1",
            "digest": "sha256:abc",
            "resumed": resumed,
            "variables": variables or {"who": "world"},
            "steps": [{"id": s, "title": s, "tool": "echo", "depends_on": []} for s in steps],
        },
    )


def step_started(sid: str, attempt: int = 1) -> Event:
    return Event(
        "step.started",
        PLAN,
        sid,
        {"attempt": attempt, "fingerprint": f"fp-{sid}", "status": "running"},
    )


def step_succeeded(sid: str, result: Any, *, attempts: int = 1, var: str | None = None) -> Event:
    return Event(
        "step.succeeded",
        PLAN,
        sid,
        {
            "status": "succeeded",
            "attempts": attempts,
            "duration_s": 0.25,
            "result": result,
            "fingerprint": f"fp-{sid}",
            "output": None,
            "result_variable": var,
        },
    )


def step_failed(sid: str, error: str, *, status: str = "failed", var: str | None = None) -> Event:
    return Event(
        "step.failed",
        PLAN,
        sid,
        {
            "status": status,
            "attempts": 2,
            "duration_s": 1.5,
            "error": error,
            "detail": "$ false\nboom",
            "result": None,
            "fingerprint": f"fp-{sid}",
            "result_variable": var,
        },
    )


def finished(status: str, reason: str, duration: float = 2.0) -> Event:
    return Event(
        "run.finished",
        PLAN,
        data={"status": status, "reason": reason, "duration_s": duration, "error": None},
    )


def plan_diff(revised: list[str], steps: list[dict[str, Any]], **more: Any) -> Event:
    """A planner's first revision, as the scheduler sends it: c removed, x added."""
    data = {"removed": ["c"], "added": ["x"], "revised": revised, "revision": 1}
    return Event("plan.diff", PLAN, data={**data, **more, "steps": steps})


def store_at(tmp_path: Path, **kw: Any) -> StateStore:
    return StateStore(default_state_path(str(tmp_path), PLAN), PLAN, **kw)


def running(tmp_path: Path, steps: list[str], **kw: Any) -> StateStore:
    """A store holding the state's lock, its run started with `steps`."""
    store = store_at(tmp_path, **kw)
    store.acquire()
    store.handle(started(steps))
    return store


def run_child(script: str, *args: str, **kw: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ------------------------------------------------------------------ round trip


def test_round_trip_of_a_run(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    store.acquire()
    bus = EventBus()
    bus.subscribe(store.handle)
    bus.emit(started(["read", "build", "lint", "deploy", "notify"]))
    bus.emit(step_started("read"))
    bus.emit(step_succeeded("read", {"text": "héllo", "n": [1, 2]}, var="code"))
    bus.emit(step_started("build"))
    bus.emit(Event("step.retrying", PLAN, "build", {"attempt": 1, "error": "flaky", "delay_s": 1}))
    bus.emit(step_started("build", attempt=2))
    bus.emit(step_failed("build", "command exited with code 1", status="ignored", var="art"))
    bus.emit(
        Event("step.skipped", PLAN, "lint", {"status": "skipped", "reason": "condition false"})
    )
    bus.emit(step_started("deploy"))
    bus.emit(step_failed("deploy", "command exited with code 2\nsecond line"))
    bus.emit(Event("step.interrupted", PLAN, "notify", {"status": "interrupted", "attempts": 1}))
    bus.emit(finished("failed", "step_failed", 3.5))
    store.close()

    state = StateStore(store.path, PLAN).load()
    assert state is not None
    assert state.version == STATE_VERSION
    assert (state.plan, state.run_id, state.digest) == (PLAN, "run-1", "sha256:abc")
    assert (state.status, state.reason, state.duration_s) == ("failed", "step_failed", 3.5)
    assert list(state.steps) == ["read", "build", "lint", "deploy", "notify"]
    read = state.steps["read"]
    assert (read.status, read.attempts, read.result) == (
        "succeeded",
        1,
        {"text": "héllo", "n": [1, 2]},
    )
    assert read.fingerprint == "fp-read" and read.result_variable == "code"
    assert read.started_at and read.started_at.endswith("Z") and len(read.started_at) == 24
    assert read.ended_at and read.duration_s == 0.25
    assert (state.steps["build"].status, state.steps["build"].attempts) == ("ignored", 2)
    assert state.steps["lint"].status == "skipped"
    assert state.steps["lint"].reason == "condition false"
    assert state.steps["deploy"].error == "command exited with code 2\nsecond line"
    assert state.steps["notify"].status == "interrupted"
    # result variables bound as the run saw them; ignored -> null
    assert state.variables == {"who": "world", "code": {"text": "héllo", "n": [1, 2]}, "art": None}
    assert state.pid == os.getpid()
    # close() compacted: a readable snapshot, no journal, no lock left behind
    assert json.loads(Path(store.path).read_text())["status"] == "failed"
    assert not Path(store.journal_path).exists()
    assert not Path(store.lock_path).exists()


def test_snapshot_is_valid_json_from_run_start(tmp_path: Path) -> None:
    store = running(tmp_path, ["a", "b"])
    doc = json.loads(Path(store.path).read_text())
    assert doc["status"] == "running" and list(doc["steps"]) == ["a", "b"]
    store.handle(step_started("a"))
    # the snapshot stays valid while the journal carries the change
    assert json.loads(Path(store.path).read_text())["steps"]["a"]["status"] == "pending"
    assert read_state(store.path, PLAN).steps["a"].status == "running"  # type: ignore[union-attr]
    store.close()
    assert not Path(store.journal_path).exists()


def test_resume_keeps_listed_steps_and_marks_new_ones_pending(tmp_path: Path) -> None:
    store = running(tmp_path, ["a", "b", "c"])
    store.handle(step_started("a"))
    store.handle(step_succeeded("a", 1))
    store.handle(step_started("b"))
    store.handle(step_failed("b", "boom"))
    store.handle(finished("failed", "step_failed"))
    store.close()

    again = StateStore(store.path, PLAN)
    again.acquire()
    assert again.load() is not None
    again.handle(started(["a", "b", "d"], resumed=True))
    st = again.state
    assert st.status == "running" and st.reason is None and st.duration_s is None
    assert list(st.steps) == ["a", "b", "d"]
    assert (st.steps["a"].status, st.steps["a"].result) == ("succeeded", 1)
    assert (st.steps["b"].status, st.steps["d"].status) == ("failed", "pending")
    again.handle(
        Event(
            "step.resumed", PLAN, "a", {"status": "succeeded", "result": 1, "fingerprint": "fp-a"}
        )
    )
    # nothing of the earlier attempt shows through a step that does not run this time
    again.handle(
        Event("step.skipped", PLAN, "b", {"status": "skipped", "reason": "condition false"})
    )
    b = again.state.steps["b"]
    assert (b.status, b.error, b.attempts, b.started_at) == ("skipped", None, 0, None)
    again.close()
    assert StateStore(store.path, PLAN).load().steps["a"].reason == "unchanged since last run"  # type: ignore[union-attr]


def test_plan_diff_records_a_revision(tmp_path: Path) -> None:
    store = running(tmp_path, ["a", "b", "c"])
    store.handle(step_succeeded("a", "ok"))
    store.handle(step_failed("b", "boom"))
    # as the replanner sends it: the whole revised plan, kept steps included
    new_steps = [
        {"id": "a", "tool": "echo"},
        {"id": "x", "tool": "echo"},
        {"id": "b", "tool": "echo", "args": {"value": 2}},
    ]
    store.handle(plan_diff(["b"], new_steps, error="boom"))
    store.release()  # error path: no compaction, the journal stays
    assert Path(store.journal_path).exists()

    state = StateStore(store.path, PLAN).load()
    assert state is not None
    assert list(state.steps) == ["a", "x", "b"]
    assert state.steps["a"].status == "succeeded"
    assert state.steps["b"].status == "pending" and state.steps["x"].status == "pending"
    assert state.revisions == [
        {
            "revision": 1,
            "diff": {"removed": ["c"], "added": ["x"], "revised": ["b"]},
            "error": "boom",
            "steps": new_steps,
        }
    ]
    assert status_document(state)["revisions"] == state.revisions


# ------------------------------------------------------------------ crashes


def test_load_after_crash_with_journal_and_torn_last_line(tmp_path: Path) -> None:
    store = running(tmp_path, ["a", "b", "c"])
    store.handle(step_started("a"))
    store.handle(step_succeeded("a", "A"))
    store.handle(step_started("b"))
    # simulate kill -9 in the middle of the next write: a partial line, no newline
    with open(store.journal_path, "ab") as f:
        f.write(b'{"op":"step","id":"b","state":{"status":"succ')
    recorded = read_state(store.path, PLAN)
    assert recorded is not None
    assert recorded.steps["a"].status == "succeeded" and recorded.steps["a"].result == "A"
    assert recorded.steps["b"].status == "running"  # its writer still holds the lock: live
    store.release()
    after = read_state(store.path, PLAN)  # the writer is gone: the run was interrupted
    assert after is not None and (after.status, after.reason) == ("interrupted", "interrupted")
    assert [st.status for st in after.steps.values()] == ["succeeded", "interrupted", "pending"]
    assert read_state(store.path, PLAN, as_recorded=True).status == "running"  # type: ignore[union-attr]


def test_kill_between_snapshot_and_journal_replace_applies_nothing_twice(tmp_path: Path) -> None:
    store = running(tmp_path, ["a", "b"])
    store.handle(step_succeeded("a", 1))
    diff = {"removed": [], "added": ["c"], "revised": [], "revision": 1, "error": "e"}
    store.handle(Event("plan.diff", PLAN, data={**diff, "steps": [{"id": "c"}]}))  # new steps only
    old_journal = Path(store.journal_path).read_bytes()
    store._compact(final=False)  # the compaction a kill -9 cuts short...
    Path(store.journal_path).write_bytes(old_journal)  # ...after the snapshot, before the journal
    state = read_state(store.path, PLAN)
    assert state is not None
    assert len(state.revisions) == 1 and list(state.steps) == ["a", "b", "c"]
    assert state.steps["a"].result == 1
    store.release()


def test_corrupt_journal_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    store = running(tmp_path, ["a", "b"])
    store.handle(step_succeeded("a", 1))
    store.release()
    with open(store.journal_path, "ab") as f:
        f.write(b"garbage\n")
        f.write(b'{"op":"run","changes":{"status":"failed"}}\n')
    before = Path(store.journal_path).read_bytes()
    with pytest.raises(StateError, match="corrupt at line 3"):
        StateStore(store.path, PLAN).load()
    assert Path(store.journal_path).read_bytes() == before


def test_run_left_running_by_a_dead_process_loads_as_interrupted(tmp_path: Path) -> None:
    store = running(tmp_path, ["a", "b"])
    store.handle(step_started("a"))
    store.release()
    doc = json.loads(Path(store.path).read_text())
    doc["pid"] = dead_pid()  # as if the run had been killed
    Path(store.path).write_text(json.dumps(doc))
    state = StateStore(store.path, PLAN).load()
    assert state is not None
    assert (state.status, state.reason) == ("interrupted", "interrupted")
    assert (state.steps["a"].status, state.steps["b"].status) == ("interrupted", "pending")
    # as recorded, without the dead-writer view
    recorded = read_state(store.path, PLAN, as_recorded=True)
    assert recorded is not None and recorded.status == "running"
    assert recorded.steps["a"].status == "running"


KILL_CHILD = """
    import os, sys, time
    from pathlib import Path
    from tests.testkit import Event
    from planrun.state import StateStore

    path, n = Path(sys.argv[1]), int(sys.argv[2])
    store = StateStore(path, "demo", compact_min_bytes=16 * 1024)
    store.acquire()  # the previous round's lock is stale: taken over
    store.load()  # the previous round's state must load
    steps = [f"s{i}" for i in range(n)]
    store.handle(Event("run.started", "demo", data={"run_id": str(os.getpid()), "digest": "d",
        "resumed": False, "variables": {}, "steps": [{"id": s} for s in steps]}))
    print("ready", flush=True)
    for i, s in enumerate(steps):
        store.handle(Event("step.started", "demo", s, {"attempt": 1, "fingerprint": "f"}))
        store.handle(Event("step.succeeded", "demo", s, {"status": "succeeded", "attempts": 1,
            "duration_s": 0.001, "result": {"i": i, "pad": "x" * (i % 300)}, "fingerprint": "f"}))
        print(i, flush=True)  # handle() returned: this change must survive the kill
        time.sleep(0.0001)
    store.handle(Event("run.finished", "demo", data={"status": "succeeded", "reason": "completed",
        "duration_s": 1.0}))
    store.close()
    print("done", flush=True)
"""


def _succeeded_prefix(statuses: list[str]) -> int:
    done = 0
    while done < len(statuses) and statuses[done] == "succeeded":
        done += 1
    return done


@pytest.mark.slow  # many generated cases: the full suite runs it
def test_real_kill_9_at_random_moments_leaves_a_loadable_prefix(tmp_path: Path) -> None:
    """Kill a writing process at random instants (while importing, loading, writing the first
    snapshot, appending, compacting mid-run); every time the state loads and holds exactly the
    acknowledged changes, plus at most the one in flight."""
    path = Path(default_state_path(str(tmp_path), PLAN))
    n = 5000
    rng = random.Random(20261126)
    previous: list[str] | None = None
    mid_run_kills = 0
    for _round in range(10):
        child = run_child(KILL_CHILD, str(path), str(n))
        head = ""
        if _round % 2:  # mid-run for sure, however slow the machine is
            assert child.stdout is not None
            head = child.stdout.readline()
            time.sleep(rng.uniform(0.0, 0.8))
        else:  # any moment from interpreter start-up on
            time.sleep(rng.uniform(0.05, 1.2))
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate()
        lines = (head + out).split()
        if "done" in lines:
            assert child.returncode == -signal.SIGKILL or child.returncode == 0, err
        else:
            assert child.returncode == -signal.SIGKILL, err

        state = StateStore(path, PLAN).load()
        assert json.loads(path.read_bytes())["plan"] == PLAN if path.exists() else state is None
        if "ready" not in lines:
            # killed before its run started: the old state, or the new run's first snapshot
            statuses = [st.status for st in state.steps.values()] if state else None
            assert statuses in (previous, ["pending"] * n), statuses and statuses[:5]
            previous = statuses if statuses is not None else previous
            continue
        assert state is not None
        statuses = [st.status for st in state.steps.values()]
        if "done" in lines:
            assert state.status == "succeeded" and set(statuses) == {"succeeded"}
            previous = statuses
            continue
        mid_run_kills += 1
        acknowledged = max((int(x) for x in lines if x.isdigit()), default=-1)
        done = _succeeded_prefix(statuses)
        # a prefix: everything acknowledged is there, at most one change more, nothing after it
        assert acknowledged <= done - 1 <= acknowledged + 1, (done, acknowledged)
        if done < n:
            assert statuses[done] in ("pending", "interrupted")  # started-then-killed: interrupted
            assert set(statuses[done + 1 :]) <= {"pending"}
        assert all(state.steps[f"s{i}"].result["i"] == i for i in range(done))  # type: ignore[index]
        assert state.status == "interrupted"  # the writer is dead
        previous = statuses
    assert mid_run_kills >= 3


HELD_CHILD = """
    import sys
    from pathlib import Path
    from tests.testkit import Event
    from planrun.state import StateStore

    store = StateStore(Path(sys.argv[1]), "demo")
    store.acquire()
    store.handle(Event("run.started", "demo", data={"run_id": "1", "digest": "d",
        "resumed": False, "variables": {}, "steps": [{"id": "s0"}, {"id": "s1"}]}))
    store.handle(Event("step.started", "demo", "s0", {"attempt": 1, "fingerprint": "f"}))
    print("ready", flush=True)
    sys.stdin.read()  # a run that goes on until it is killed
"""


def test_killed_run_not_yet_reaped_is_not_live(tmp_path: Path) -> None:
    """A zombie still answers kill(pid, 0); an orphaned planrun can stay one for long."""
    path = Path(default_state_path(str(tmp_path), PLAN))
    child = run_child(HELD_CHILD, str(path), stdin=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert StateStore(path, PLAN).load().status == "running"  # type: ignore[union-attr]
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60  # a bound: SIGKILL is carried out at once
        while Path(f"/proc/{child.pid}/stat").read_bytes().split(b") ")[1][:1] != b"Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        state = StateStore(path, PLAN).load()  # not reaped yet: a zombie
        assert state is not None and state.status == "interrupted"
    finally:
        child.kill()
        child.communicate()


def test_reader_during_a_live_run_sees_consistent_progress(tmp_path: Path) -> None:
    """`planrun status` while a run writes: every load works (torn tail, compaction races)."""
    path = Path(default_state_path(str(tmp_path), PLAN))
    child = run_child(KILL_CHILD, str(path), "3000")
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        seen: list[int] = []
        # Read until the run is seen moving (a condition); the deadline only bounds a hang.
        deadline = time.monotonic() + 60
        while not (len(seen) > 5 and seen[-1] > seen[0]):
            assert time.monotonic() < deadline, f"no progress seen: {seen[:3]}...{seen[-3:]}"
            state = StateStore(path, PLAN).load()
            assert state is not None
            statuses = [st.status for st in state.steps.values()]
            done = _succeeded_prefix(statuses)
            assert set(statuses[done + 1 :]) <= {"pending"}
            if state.status == "running":
                assert statuses[done] in ("pending", "running")
            seen.append(done)
        assert len(seen) > 5 and seen[-1] > seen[0]
    finally:
        child.kill()
        child.communicate()


DISK_FULL_CHILD = """
    import resource, signal, sys
    from pathlib import Path
    from planrun.errors import StateError
    from tests.testkit import Event
    from planrun.state import StateStore

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the limit, write() fails with EFBIG
    store = StateStore(Path(sys.argv[1]), "demo")
    store.acquire()
    store.handle(Event("run.started", "demo", data={"steps": [{"id": f"s{i}"} for i in range(50)]}))
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))  # a "full disk"
    for i in range(50):
        try:
            store.handle(Event("step.succeeded", "demo", f"s{i}", {"status": "succeeded",
                "result": "x" * (i * 5000)}))
            print("ok", i, flush=True)
        except StateError as exc:
            print("error", i, exc, flush=True)
    try:
        store.close()
    except StateError as exc:
        print("close-error", exc, flush=True)
"""


def test_disk_full_is_a_state_error_and_leaves_a_loadable_state(tmp_path: Path) -> None:
    path = Path(default_state_path(str(tmp_path), PLAN))
    child = run_child(DISK_FULL_CHILD, str(path))
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    oks = [int(line.split()[1]) for line in out.splitlines() if line.startswith("ok")]
    errors = [line for line in out.splitlines() if line.startswith("error")]
    assert oks and errors, out
    assert f"cannot write state file {path}" in errors[0]
    state = StateStore(path, PLAN).load()  # every line in the journal is whole
    assert state is not None
    assert [sid for sid, st in state.steps.items() if st.status == "succeeded"] == [
        f"s{i}" for i in oks
    ]
    assert all(state.steps[f"s{i}"].result == "x" * (i * 5000) for i in oks)


# ------------------------------------------------------------------ bad state files


def test_corrupt_snapshot_is_an_error_and_untouched(tmp_path: Path) -> None:
    store = running(tmp_path, ["a"])
    store.handle(step_succeeded("a", 1))
    store.close()
    good = Path(store.path).read_bytes()
    for bad in (
        good[: len(good) // 2],
        b"",
        b"[1, 2]",
        b'{"version": 1, "plan": "demo", "steps": 3}',
    ):
        Path(store.path).write_bytes(bad)
        with pytest.raises(StateError) as info:
            StateStore(store.path, PLAN).load()
        assert "corrupt" in str(info.value) and str(store.path) in str(info.value)
        assert info.value.exit_code == ExitCode.STATE_ERROR
        assert Path(store.path).read_bytes() == bad


def test_corrupt_snapshot_with_a_journal_is_untouched_by_load_and_acquire(tmp_path: Path) -> None:
    store = running(tmp_path, ["a"])
    store.handle(step_succeeded("a", 1))
    store.release()
    Path(store.path).write_bytes(Path(store.path).read_bytes()[:-10])
    files = {p: p.read_bytes() for p in Path(store.path).parent.iterdir()}
    again = StateStore(store.path, PLAN)
    with pytest.raises(StateError, match="corrupt"):
        again.acquire()  # a run never takes over a file that is not its plan's state
    with pytest.raises(StateError, match="corrupt"):
        again.load()
    again.close()  # loaded nothing, wrote nothing: close must not write either
    assert {p: p.read_bytes() for p in Path(store.path).parent.iterdir()} == files


def test_foreign_plan_name(tmp_path: Path) -> None:
    other = StateStore(default_state_path(str(tmp_path), PLAN), "other")
    other.handle(started(["a"]))
    other.close()
    before = Path(other.path).read_bytes()
    with pytest.raises(StateError) as info:
        StateStore(other.path, PLAN).load()
    assert str(info.value) == f"state file {other.path} belongs to plan 'other', not 'demo'"
    assert Path(other.path).read_bytes() == before


def test_newer_format_version(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    store.handle(started(["a"]))
    store.close()
    doc = json.loads(Path(store.path).read_text())
    doc["version"] = STATE_VERSION + 1
    Path(store.path).write_text(json.dumps(doc))
    before = Path(store.path).read_bytes()
    with pytest.raises(StateError, match="newer"):
        StateStore(store.path, PLAN).load()
    assert Path(store.path).read_bytes() == before


def test_no_state_file_loads_none(tmp_path: Path) -> None:
    assert store_at(tmp_path).load() is None
    assert not (tmp_path / ".planrun").exists()


# ------------------------------------------------------------------ locks

HOLD_LOCK = """
    import sys, time
    from pathlib import Path
    from planrun.state import StateStore
    from planrun.errors import StateError

    store = StateStore(Path(sys.argv[1]), "demo")
    try:
        store.acquire()
    except StateError as exc:
        print("locked", exc, flush=True)
        sys.exit(4)
    print("acquired", flush=True)
    time.sleep(float(sys.argv[2]))
    store.close()
"""


def test_lock_held_by_a_live_process_names_its_pid(tmp_path: Path) -> None:
    path = Path(default_state_path(str(tmp_path), PLAN))
    holder = run_child(HOLD_LOCK, str(path), "60")
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "acquired"
        with pytest.raises(StateError) as info:
            StateStore(path, PLAN).acquire()
        assert str(info.value) == f"state file {path} is locked by another run (pid {holder.pid})"
        assert info.value.exit_code == ExitCode.STATE_ERROR
    finally:
        holder.kill()
        holder.wait()
    # killed with SIGKILL: its lock file is left behind, and taken over
    assert path.with_name(path.name + ".lock").read_text().split()[0] == str(holder.pid)
    store = StateStore(path, PLAN)
    store.acquire()
    assert Path(store.lock_path).read_text().split()[0] == str(os.getpid())
    store.close()
    assert not Path(store.lock_path).exists()


def test_stale_lock_of_a_dead_pid_is_taken_over(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    Path(store.path).parent.mkdir(parents=True)
    Path(store.lock_path).write_text(f"{dead_pid()}\n")
    store.acquire()
    assert Path(store.lock_path).read_text().split()[0] == str(os.getpid())
    store.release()
    assert not Path(store.lock_path).exists()


HOLD_AND_FORK = """
    import os, signal, sys
    from pathlib import Path
    from planrun.state import StateStore

    store = StateStore(Path(sys.argv[1]), "demo")
    store.acquire()
    # A forked child holds a copy of the lock's descriptor, as every process planrun starts
    # does until it execs (and for its whole life if it never does: a python step forking).
    child = os.fork()
    if child == 0:
        signal.pause()
        os._exit(0)
    print(child, flush=True)
    signal.pause()
"""


def _kill_pid(pid: int | None) -> None:
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _killed_run_with_its_lock_inherited(path: Path) -> int:
    """A run killed with SIGKILL while a process it forked lives on: the lock file names the
    dead run, and its flock is still held (by the fork). Returns the fork's pid."""
    holder = run_child(HOLD_AND_FORK, str(path))
    assert holder.stdout is not None
    line = holder.stdout.readline()
    holder.kill()
    holder.wait()
    for pipe in (holder.stdout, holder.stderr):  # the fork holds their other ends
        if pipe is not None:
            pipe.close()
    assert line.strip().isdigit(), line
    lock = path.with_name(path.name + ".lock")
    assert lock.read_text().split()[0] == str(holder.pid)
    fd = os.open(lock, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):  # the kernel still sees it held
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    return int(line)


@pytest.fixture
def inherited_lock(tmp_path: Path) -> Iterator[Path]:
    """A state path whose lock a killed run left held by a process it forked (ended after)."""
    path = Path(default_state_path(str(tmp_path), PLAN))
    inheritor = _killed_run_with_its_lock_inherited(path)
    try:
        yield path
    finally:
        _kill_pid(inheritor)


def test_a_killed_runs_lock_still_held_by_a_process_it_forked_is_taken_over(
    inherited_lock: Path,
) -> None:
    path = inherited_lock
    store = StateStore(path, PLAN)
    store.acquire()  # not "locked by another run (pid <the dead run>)"
    assert Path(store.lock_path).read_text().split()[0] == str(os.getpid())
    with pytest.raises(StateError, match=f"pid {os.getpid()}"):
        StateStore(path, PLAN).acquire()  # and really held: by us now
    store.close()
    assert not Path(store.lock_path).exists()


def test_racing_processes_take_over_a_killed_runs_inherited_lock_once(
    inherited_lock: Path,
) -> None:
    assert sorted(_race_for_the_lock(inherited_lock)) == ["acquired"] + ["locked"] * 7


def test_releasing_a_lock_taken_over_leaves_the_new_holders_file(tmp_path: Path) -> None:
    # A process forked by a killed run holds a copy of its store; if that copy ever releases,
    # the lock file now at the path is the new run's, not its own, and must stay.
    old = store_at(tmp_path)
    old.acquire()
    os.unlink(old.lock_path)  # what a takeover of old's lock file does
    new = store_at(tmp_path)
    new.acquire()
    old.release()
    assert Path(new.lock_path).read_text().split()[0] == str(os.getpid())
    with pytest.raises(StateError, match="locked by another run"):
        store_at(tmp_path).acquire()
    new.close()
    assert not Path(new.lock_path).exists()


def test_second_store_in_the_same_process_is_refused(tmp_path: Path) -> None:
    first = store_at(tmp_path)
    first.acquire()
    with pytest.raises(StateError, match=f"pid {os.getpid()}"):
        store_at(tmp_path).acquire()
    first.close()
    store_at(tmp_path).acquire()  # free again


def _race_for_the_lock(path: Path) -> list[str]:
    """Eight processes try to lock `path` at once: what each said first."""
    children = [run_child(HOLD_LOCK, str(path), "60") for _ in range(8)]
    try:
        # the winner holds the lock until killed, so a slow starter cannot win it later
        return [c.stdout.readline().split()[0] for c in children if c.stdout is not None]
    finally:
        for c in children:
            c.kill()
            c.communicate()


def test_racing_processes_get_the_lock_once(tmp_path: Path) -> None:
    path = Path(default_state_path(str(tmp_path), PLAN))
    assert sorted(_race_for_the_lock(path)) == ["acquired"] + ["locked"] * 7


# ------------------------------------------------------------------ content and files


def test_one_megabyte_result_round_trips_exactly(tmp_path: Path) -> None:
    big = "".join(chr(32 + (i * 7919) % 95) for i in range(1 << 20)) + '\n\u00e9\u4e2d\U0001f600"\\'
    for close in (True, False):
        store = StateStore(default_state_path(str(tmp_path), f"big{close}"), f"big{close}")
        store.acquire()
        store.handle(Event("run.started", store.plan_name, data={"steps": [{"id": "a"}]}))
        store.handle(
            Event("step.succeeded", store.plan_name, "a", {"status": "succeeded", "result": big})
        )
        store.close() if close else store.release()
        state = StateStore(store.path, store.plan_name).load()
        assert state is not None and state.steps["a"].result == big


def test_files_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        store = store_at(tmp_path)
        store.acquire()
        store.handle(started(["a"]))
        store.handle(step_succeeded("a", "secret-ish"))
        for p in (store.path, store.journal_path, store.lock_path):
            assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p
        assert stat.S_IMODE(Path(store.path).parent.stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / ".planrun").stat().st_mode) == 0o700
        store.close()
        assert stat.S_IMODE(Path(store.path).stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_timestamps_match_the_event_stream() -> None:
    rng = random.Random(7)
    stamps = [rng.uniform(1.6e9, 1.9e9) for _ in range(20_000)] + [
        1.7e9 + i * 5e-4 for i in range(20_000)
    ]
    assert [state_time(t) for t in stamps] == [iso_ts(t) for t in stamps]
    # ... and both are what datetime formats (the fast path formats each second once)
    reference = [
        datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" for t in stamps
    ]
    assert [iso_ts(t) for t in stamps] == reference
    edges = [1.7e9 + 0.9999995, 1.7e9 + 0.9999994, 1.7e9 - 0.0000004, 1.7e9 + 59.9996]
    assert [iso_ts(t) for t in edges] == [
        datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" for t in edges
    ]


def test_state_paths_are_spelled_as_pathlib_spells_them() -> None:
    # Messages name the state file as they did when the state modules used pathlib.
    for raw in [
        "/w/s.json",
        "/w/./s.json",
        "/w//x/s.json",
        "s.json",
        "./s.json",
        "a/../s.json",
        "/",
        "/w/",
        ".",
    ]:
        assert path_text(raw) == str(Path(raw)), raw
    assert path_text(Path("/w/s.json")) == "/w/s.json"


def test_default_state_path() -> None:
    assert default_state_path("/w", "refactor-auth") == "/w/.planrun/state/refactor-auth.json"
    assert Path(default_state_path("/w", "../x")).parent == Path("/w/.planrun/state")


# ------------------------------------------------------------------ speed


def _timed_run(tmp_path: Path, n: int, **kw: Any) -> dict[str, float]:
    """Record a run of n steps (2n step events); wall and CPU seconds of each phase."""
    name = f"speed{n}{'-'.join(kw)}"
    store = StateStore(default_state_path(str(tmp_path), name), name, **kw)
    store.acquire()
    ids = [f"step-{i}" for i in range(n)]
    events = []
    for i, sid in enumerate(ids):
        events.append(
            Event("step.started", name, sid, {"attempt": 1, "fingerprint": "9f86d081884c7d65"})
        )
        events.append(
            Event(
                "step.succeeded",
                name,
                sid,
                {
                    "status": "succeeded",
                    "attempts": 1,
                    "duration_s": 0.012,
                    "result": {"stdout": f"line {i}\n", "stderr": "", "exit_code": 0},
                    "fingerprint": "9f86d081884c7d65",
                    "output": None,
                    "result_variable": None,
                },
            )
        )
    clocks = (time.perf_counter, time.process_time)
    t0 = [c() for c in clocks]
    store.handle(
        Event("run.started", name, data={"steps": [{"id": s} for s in ids], "variables": {}})
    )
    t1 = [c() for c in clocks]
    for e in events:
        store.handle(e)
    t2 = [c() for c in clocks]
    store.handle(Event("run.finished", name, data={"status": "succeeded", "reason": "completed"}))
    store.close()
    t3 = [c() for c in clocks]
    loaded = StateStore(store.path, name).load()
    t4 = [c() for c in clocks]
    assert loaded is not None and loaded.steps[ids[-1]].status == "succeeded"
    return {
        "per_event": (t2[0] - t1[0]) / len(events),
        "per_event_cpu": (t2[1] - t1[1]) / len(events),
        "total": t3[0] - t0[0],
        "total_cpu": t3[1] - t0[1],
        "load": t4[0] - t3[0],
    }


@pytest.mark.slow  # 10,000 steps
def test_ten_thousand_steps_cost_is_linear(tmp_path: Path) -> None:
    # What it costs per event is measured by bench/bench_state.py, not asserted here; only the
    # growth is, as a ratio of CPU times (a busy machine slows both runs alike).
    small = _timed_run(tmp_path, 1_000)
    big = _timed_run(tmp_path, 10_000)
    _timed_run(tmp_path, 300, fsync_each_change=True)
    assert big["total_cpu"] < 40 * small["total_cpu"]  # linear is 10x; quadratic would be ~100x


# ------------------------------------------------------------------ documents


def test_status_document_and_text(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    store.handle(started(["read", "build", "test"]))
    store.handle(step_started("read"))
    store.handle(step_succeeded("read", "text", var="code"))
    store.handle(step_started("build"))
    store.handle(step_failed("build", "command exited with code 1\n$ make"))
    store.handle(
        Event(
            "step.skipped", PLAN, "test", {"status": "skipped", "reason": "upstream failed: build"}
        )
    )
    store.handle(finished("failed", "step_failed", 1.75))
    doc = status_document(store.state)
    assert list(doc) == ["plan", "status", "reason", "duration_s", "error", "steps", "variables"]
    assert doc["plan"] == PLAN and doc["status"] == "failed" and doc["reason"] == "step_failed"
    assert doc["duration_s"] == 1.75
    assert doc["steps"] == [
        {
            "id": "read",
            "status": "succeeded",
            "attempts": 1,
            "duration_s": 0.25,
            "result": "text",
            "error": None,
        },
        {
            "id": "build",
            "status": "failed",
            "attempts": 2,
            "duration_s": 1.5,
            "result": None,
            "error": "command exited with code 1\n$ make",
        },
        {
            "id": "test",
            "status": "skipped",
            "attempts": 0,
            "duration_s": None,
            "result": None,
            "error": None,
        },
    ]
    assert doc["variables"] == {"who": "world", "code": "text"}
    json.dumps(doc)

    text = render_status_text(store.state)
    assert text.startswith("plan demo: failed (step_failed), 1.75s")
    lines = text.splitlines()
    build = next(line for line in lines if line.startswith("build"))
    assert build.split()[:4] == ["build", "failed", "2", "1.50s"]
    assert build.endswith("command exited with code 1")  # first line of the error only
    assert any(line.startswith("test") and "upstream failed: build" in line for line in lines)
    store.close()


def test_a_lock_whose_holder_is_on_another_host_or_pid_namespace_is_never_taken_over(
    inherited_lock: Path,
) -> None:
    # A pid is only known dead on its own host and in its own pid namespace: a run on another
    # machine sharing the directory (NFS) or in another container has a pid this process cannot
    # see, and its flock must keep holding the state.
    path = inherited_lock
    lock = path.with_name(path.name + ".lock")
    dead_pid = lock.read_text().split()[0]
    lock.write_text(f"{dead_pid}\nanother-host pid:[4026531836]\n")
    with pytest.raises(StateError, match=f"locked by another run \\(pid {dead_pid}"):
        StateStore(path, PLAN).acquire()
    assert lock.read_text().split()[0] == dead_pid  # left alone


def test_a_run_holding_the_lock_on_another_host_shows_as_running(tmp_path: Path) -> None:
    # Its pid means nothing here: `status` must not call it interrupted because no local
    # process has that pid.
    path = Path(default_state_path(str(tmp_path), PLAN))
    child = run_child(HELD_CHILD, str(path), stdin=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        lock = path.with_name(path.name + ".lock")
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()  # reaped: the pid is dead here
        lock.write_text(f"{child.pid}\nanother-host pid:[4026531836]\n")
        state = StateStore(path, PLAN).load()
        assert state is not None and state.status == "running"
        lock.write_text(f"{child.pid}\n")  # without where it runs: known dead here
        state = StateStore(path, PLAN).load()
        assert state is not None and state.status == "interrupted"
    finally:
        child.kill()
        child.communicate()


def test_snapshots_reuse_step_json_and_match_a_fresh_encoding(tmp_path: Path) -> None:
    # A snapshot reuses each step's JSON from its journal line; after every kind of change
    # (a step's events, a revision that resets and adds steps, the run's end) the file must
    # be exactly what encoding the whole state afresh gives.
    from planrun.state.journal import snapshot_bytes

    store = running(tmp_path, ["a", "b", "c"])
    store.handle(step_started("a"))
    store.handle(step_succeeded("a", {"n": 1}))
    store.handle(step_started("b"))
    store.handle(step_failed("b", "boom"))
    store._refresh()  # as during a run
    store._await_refresh()
    store.handle(plan_diff(["a", "b"], [{"id": "a"}, {"id": "x"}, {"id": "b"}]))
    store.handle(step_started("b", attempt=2))
    store.handle(step_succeeded("b", 2, attempts=2))
    store.handle(finished("succeeded", "completed"))
    store.close()  # the final snapshot
    written = Path(store.path).read_bytes()
    state = StateStore(store.path, PLAN).load()
    assert state is not None and list(state.steps) == ["a", "x", "b"]
    assert state.steps["b"].status == "succeeded" and state.steps["x"].status == "pending"
    assert state.steps["a"].status == "pending"  # reset by the revision, no event since
    assert written == snapshot_bytes(state, None)


def test_a_refresh_encodes_no_step_a_journal_line_already_encoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each refresh of a long run's snapshot lists every step: a step's id and state, encoded
    # once for its journal line, must not be encoded again by every refresh.
    import planrun.state.journal as journal

    store = running(tmp_path, ["a", "b"])
    store.handle(step_started("a"))
    store.handle(step_succeeded("a", {"n": 1}))
    store.handle(step_started("b"))
    encoded: list[Any] = []

    def counting(value: Any) -> str:
        encoded.append(value)
        return state_encode(value)

    state_encode = journal.encode_step
    monkeypatch.setattr(journal, "encode_step", counting)
    store._refresh()  # as during a run
    store._await_refresh()
    assert not [v for v in encoded if v in ("a", "b") or isinstance(v, dict) and "status" in v]
    monkeypatch.undo()
    store.handle(step_succeeded("b", 2))
    store.handle(finished("succeeded", "completed"))
    store.close()
    state = StateStore(store.path, PLAN).load()
    assert state is not None
    assert Path(store.path).read_bytes() == journal.snapshot_bytes(state, None)


def test_a_refresh_keeps_the_journal_and_a_load_applies_no_line_twice(tmp_path: Path) -> None:
    # A refresh makes the JSON file itself current (what a script reading it after a kill -9
    # sees) and the run goes on appending to the same journal: the snapshot says how many of
    # the journal's bytes it holds, and a load replays only the lines after them.
    store = running(tmp_path, ["a", "b", "c"])
    store.handle(step_started("a"))
    store.handle(step_succeeded("a", {"n": 1}))
    store.handle(step_started("b"))
    store._refresh()
    store._await_refresh()
    doc = json.loads(Path(store.path).read_bytes())
    assert doc["steps"]["a"]["status"] == "succeeded" and doc["steps"]["b"]["status"] == "running"
    assert doc["journal_held"] == len(Path(store.path + ".journal").read_bytes())
    store.handle(step_failed("b", "boom"))
    store.handle(step_started("b", attempt=2))
    store.handle(step_succeeded("b", 2, attempts=2))
    store._refresh()
    store._await_refresh()
    store.handle(step_started("c"))  # after the second refresh: in the journal only
    loaded = read_state(store.path, PLAN, as_recorded=True)  # as `status` reads a live run
    assert loaded is not None
    assert {k: v.to_json() for k, v in loaded.steps.items()} == {
        k: v.to_json() for k, v in store.state.steps.items()
    }
    assert loaded.steps["b"].attempts == 2 and loaded.steps["c"].status == "running"
    store.handle(step_succeeded("c", 3))
    store.handle(finished("succeeded", "completed"))
    store.close()
    final = json.loads(Path(store.path).read_bytes())
    assert "journal_held" not in final and not Path(store.path + ".journal").exists()


def test_a_refresh_on_a_slow_disk_never_holds_up_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An fsync on a busy disk can take a second: a refresh's is done by a thread of its own,
    # while the run's changes go on being recorded; the next snapshot, and the lock's release,
    # wait for it.
    import threading

    store = running(tmp_path, ["a", "b"])
    store.handle(step_started("a"))
    before = Path(store.path).read_bytes()
    slow, entered, real_fsync = threading.Event(), threading.Event(), os.fsync

    def fsync(fd: int) -> None:
        if threading.current_thread() is not threading.main_thread():
            entered.set()
            assert slow.wait(60)  # a bound on a hang
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    store._refresh()
    try:
        assert entered.wait(60)  # the refresh's fsync runs off the run's thread...
        store.handle(step_succeeded("a", 1))  # ...which records changes meanwhile
        store.handle(step_started("b"))
        assert Path(store.path).read_bytes() == before  # not renamed before it is on disk
        loaded = read_state(store.path, PLAN, as_recorded=True)
        assert loaded is not None and loaded.steps["b"].status == "running"
    finally:
        slow.set()
    store.handle(step_succeeded("b", 2))
    store.handle(finished("succeeded", "completed"))
    store.close()
    state = read_state(store.path, PLAN)
    assert state is not None and state.status == "succeeded"
    assert [s.status for s in state.steps.values()] == ["succeeded", "succeeded"]


@pytest.mark.parametrize(("each_change", "expected"), [(False, 1), (True, 3)])
def test_the_directory_waits_for_the_disk_after_the_last_snapshot_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, each_change: bool, expected: int
) -> None:
    # A snapshot's rename lost with the power leaves an older snapshot, whole (its journal
    # still matches, or is ignored): only the run's last one is made durable at once. With
    # each change fsync-ed, every journal those changes go to must survive too.
    synced_dirs: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            synced_dirs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    store = store_at(tmp_path, fsync_each_change=each_change)
    store.acquire()
    store.handle(started(["a"]))  # the run's first snapshot
    store.handle(step_started("a"))
    store._compact(final=False)  # as when the journal has grown large
    store.handle(step_succeeded("a", 1))
    store.handle(finished("succeeded", "completed"))
    store.close()  # the last snapshot
    assert len(synced_dirs) == expected
    state = read_state(store.path, PLAN)
    assert state is not None and state.steps["a"].status == "succeeded"


def test_a_step_record_of_the_wrong_shape_is_corrupt_and_unknown_keys_are_dropped(
    tmp_path: Path,
) -> None:
    # Each step record is checked field by field as it loads (one clear line naming the field),
    # and a key this version does not know is left out of the step, whatever its value.
    store = running(tmp_path, ["a"])
    store.handle(step_succeeded("a", 1))
    store.close()
    doc = json.loads(Path(store.path).read_text())
    record = doc["steps"]["a"]
    for key, value, says in (
        ("title", 3, "step title is a number, not a string"),
        ("cache_key", ["k"], "step cache_key is a list, not a string"),
        ("error", True, "step error is a boolean, not a string"),
        ("attempts", "1", "step attempts is not a whole number"),
        ("duration_s", "1", "step duration_s is a string, not a number"),
    ):
        doc["steps"]["a"] = {**record, key: value}
        Path(store.path).write_text(json.dumps(doc))
        with pytest.raises(StateError, match=f"corrupt: {says}"):
            StateStore(store.path, PLAN).load()
    doc["steps"]["a"] = {**record, "from_a_newer_version": {"x": 1}, "title": "A"}
    Path(store.path).write_text(json.dumps(doc))
    state = StateStore(store.path, PLAN).load()
    assert state is not None and state.steps["a"].title == "A"
    assert state.steps["a"].to_json() == {**record, "title": "A"}


def test_plan_names_a_file_name_cannot_hold_get_state_files_of_their_own(tmp_path: Path) -> None:
    # A name with '/' is flattened to a file name; two plans named 'ci/build' and 'ci_build'
    # must still not share one state file (the second would be refused as foreign), and a name
    # too long for a file name must not stop the run.
    names = ["ci/build", "ci_build", "ci\\build", "..", "_", "n" * 300, "n" * 300 + "x"]
    for i, name in enumerate(names):
        (tmp_path / f"p{i}.yaml").write_text(
            f"name: {json.dumps(name)}\nsteps:\n  - {{id: a, tool: echo}}\n"
        )
        r = planrun("run", f"p{i}.yaml", cwd=tmp_path)
        assert r.code == 0, r
    for i, name in enumerate(names):
        r = planrun("status", f"p{i}.yaml", "--output", "json", cwd=tmp_path)
        assert r.code == 0 and r.json["plan"] == name, r
    files = sorted(p.name for p in (tmp_path / ".planrun" / "state").iterdir())
    assert len(files) == len(names) and "ci_build.json" in files
    assert all(len(f.encode()) <= 255 and "/" not in f for f in files)
    assert {default_state_path(str(tmp_path), n) for n in names} == {
        str(tmp_path / ".planrun" / "state" / f) for f in files
    }


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_state_file_holding_what_json_cannot_is_corrupt(tmp_path: Path, value: str) -> None:
    """A state file edited to hold NaN or infinity (Python's reader takes them) is corrupt:
    `status --output json` must not print a document no JSON reader takes."""
    (tmp_path / "p.yaml").write_text(
        "name: odd\nsteps:\n  - {id: a, tool: echo, args: {value: 1.5}}\n"
    )
    assert planrun("run", "p.yaml", "-q", cwd=tmp_path).code == 0
    state = tmp_path / ".planrun" / "state" / "odd.json"
    text = state.read_text()
    assert '"result":1.5' in text
    state.write_text(text.replace('"result":1.5', f'"result":{value}'))
    r = planrun("status", "p.yaml", "--output", "json", cwd=tmp_path)
    assert r.code == ExitCode.STATE_ERROR, r
    assert "Traceback" not in r.out + r.err, r

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the document: {r.out}")

    doc = json.loads(r.out, parse_constant=refuse)  # the error document is itself JSON
    assert "corrupt" in doc["error"], r
