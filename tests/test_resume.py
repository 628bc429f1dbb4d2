"""State and resume: failures, Ctrl-C, kill -9, locks, corrupt and foreign state."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import (
    assert_no_process_left,
    assert_no_traceback,
    kill_9,
    planrun,
    spawn_planrun,
    unique_sleep,
    wait_for_command,
    wait_for_file,
    wait_until,
)

CHAIN = """
steps:
  - {id: a, tool: shell, args: {cmd: "echo a >> log"}}
  - {id: b, tool: shell, args: {cmd: "test -f fixed && echo b >> log"}, depends_on: [a]}
  - {id: c, tool: shell, args: {cmd: "echo c >> log"}, depends_on: [b]}
"""


def _log(tmp_path: Path) -> list[str]:
    f = tmp_path / "log"
    return f.read_text().split() if f.exists() else []


@pytest.mark.slow  # a real process per command
@pytest.mark.e2e  # a real `python -m planrun` process
def test_fail_fix_resume_runs_only_what_is_left(run, write, tmp_path):
    write("p.yaml", CHAIN)
    r = run("run", "p.yaml")
    assert r.code == 1 and "planrun resume p.yaml" in r.err, r
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert state["plan"] == "p" and state["status"] == "failed"
    assert {k: v["status"] for k, v in state["steps"].items()} == {
        "a": "succeeded",
        "b": "failed",
        "c": "pending",
    }
    assert oct((tmp_path / ".planrun/state/p.json").stat().st_mode & 0o777) == "0o600"
    (tmp_path / "fixed").touch()
    r = run("resume", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert _log(tmp_path) == ["a", "b", "c"]
    assert "a" in r.err and "kept" in r.err
    # a finished, successful run resumed runs nothing and exits 0
    r = run("resume", "p.yaml")
    assert r.code == 0
    assert _log(tmp_path) == ["a", "b", "c"]
    # run --resume is the same command
    r = run("run", "p.yaml", "--resume")
    assert r.code == 0 and _log(tmp_path) == ["a", "b", "c"]


def test_resume_without_state_exits_4(run, write):
    write("p.yaml", CHAIN)
    r = run("resume", "p.yaml")
    assert r.code == 4 and "planrun run" in r.err, r
    assert_no_traceback(r)
    r = run("status", "p.yaml")
    assert r.code == 4, r


def test_corrupt_state_is_left_untouched(run, write, tmp_path):
    write("p.yaml", CHAIN)
    state = tmp_path / ".planrun/state/p.json"
    state.parent.mkdir(parents=True)
    state.write_bytes(b'{"version": 1, "plan": "p", "steps": {')
    before = state.read_bytes()
    r = run("resume", "p.yaml")
    assert r.code == 4, r
    assert_no_traceback(r)
    assert state.read_bytes() == before
    r = run("status", "p.yaml")
    assert r.code == 4 and state.read_bytes() == before


def test_foreign_state_is_refused(run, write, tmp_path):
    write("one.yaml", "steps:\n  - {id: x, tool: echo, args: {value: 1}}\n")
    write("two.yaml", "steps:\n  - {id: x, tool: echo, args: {value: 1}}\n")
    assert run("run", "one.yaml", "--state", "shared.json").code == 0
    before = (tmp_path / "shared.json").read_bytes()
    r = run("resume", "two.yaml", "--state", "shared.json")
    assert r.code == 4 and "one" in r.err, r
    assert (tmp_path / "shared.json").read_bytes() == before


@pytest.mark.slow  # real signals to a real run
def test_second_run_on_the_same_state_exits_4_naming_the_holder(write, tmp_path):
    # The first run holds the lock until it is interrupted (its step would sleep 600 s): with
    # a step of 5 s, a loaded machine could reach the second run after the first had ended.
    write("p.yaml", "steps:\n  - {id: slow, tool: sleep, args: {seconds: 600}}\n")
    first = subprocess.Popen(
        [sys.executable, "-m", "planrun", "run", "p.yaml", "-q"],
        cwd=tmp_path,
        stderr=subprocess.DEVNULL,
    )
    try:
        lock = tmp_path / ".planrun/state/p.json.lock"
        wait_until(
            lambda: lock.exists() and str(first.pid) in lock.read_text(), what="the lock's holder"
        )
        second = planrun("run", "p.yaml", cwd=tmp_path)
        assert second.code == 4, second.err
        assert str(first.pid) in second.err
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=60)  # a bound on a hang


@pytest.mark.slow  # real signals to a real run
def test_sigint_interrupts_saves_and_resume_completes(write, tmp_path):
    sleeper = unique_sleep(600)
    write(
        "p.yaml",
        """
        steps:
          - {id: quick, tool: shell, args: {cmd: "echo quick >> log"}}
          - {id: long, tool: shell, args: {cmd: "touch long-started; sleep 30; echo long >> log"}, depends_on: [quick]}
          - {id: after, tool: shell, args: {cmd: "echo after >> log"}, depends_on: [long]}
    """.replace("sleep 30", sleeper),
    )
    proc = spawn_planrun(
        "run",
        "p.yaml",
        "--output",
        "json",
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_command(sleeper)  # exec'd: a Ctrl-C before could be lost in the shell's fork
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)  # a bound: the step would take 600 s
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    doc = json.loads(out)
    assert doc["status"] == "interrupted" and doc["reason"] == "interrupted"
    assert {s["id"]: s["status"] for s in doc["steps"]} == {
        "quick": "succeeded",
        "long": "interrupted",
        "after": "pending",
    }
    assert "planrun resume" in err
    assert_no_process_left(sleeper)
    (tmp_path / "p.yaml").write_text((tmp_path / "p.yaml").read_text().replace(f"{sleeper}; ", ""))
    r = planrun("resume", "p.yaml", cwd=tmp_path)
    assert r.code == 0, r.err
    assert _log(tmp_path) == ["quick", "long", "after"]


@pytest.mark.slow  # many generated cases: the full suite runs it
def test_kill_9_at_random_points_then_resume(write, tmp_path):
    steps = "\n".join(
        f"  - {{id: s{i}, tool: shell, args: {{cmd: 'echo s{i} >> log'}}"
        + (f", depends_on: [s{i - 2}]" if i >= 2 else "")
        + "}"
        for i in range(120)
    )
    write("p.yaml", "steps:\n" + steps + "\n")
    rng = random.Random(7)
    checked = 0
    for _ in range(3):
        import shutil

        shutil.rmtree(tmp_path / ".planrun", ignore_errors=True)
        (tmp_path / "log").unlink(missing_ok=True)
        proc = spawn_planrun(
            "run",
            "p.yaml",
            "-q",
            "-j",
            "2",
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # kill once a random number of steps has run: a condition, so the kill lands mid-run
        # on a fast machine as on a loaded one
        target = rng.randint(1, 80)
        wait_until(
            lambda: len(_log(tmp_path)) >= target or proc.poll() is not None,  # noqa: B023
            timeout=60,
            interval=0.002,
            what="the run to get that far",
        )
        kill_9(proc)  # and wait for the commands it had started (they outlive it)
        status = planrun("status", "p.yaml", "--output", "json", cwd=tmp_path, timeout=30)
        assert status.code == 0, status.err
        succeeded = {s["id"] for s in json.loads(status.out)["steps"] if s["status"] == "succeeded"}
        before = _log(tmp_path)
        r = planrun("resume", "p.yaml", "-q", cwd=tmp_path, timeout=120)
        assert r.code == 0, r.err
        after = _log(tmp_path)
        rerun = after[len(before) :]
        assert not succeeded & set(rerun), sorted(succeeded & set(rerun))
        assert set(after) == {f"s{i}" for i in range(120)}
        if 0 < len(succeeded) < 120:
            checked += 1
    assert checked >= 2  # the kills really landed mid-run


def test_no_state_writes_nothing(run, write, tmp_path):
    write("p.yaml", "steps:\n  - {id: x, tool: echo, args: {value: 1}}\n")
    assert run("run", "p.yaml", "--no-state").code == 0
    # no state; only the plan cache (docs/state.md) may be there
    assert [p.name for p in tmp_path.glob(".planrun/*")] in ([], ["plans"])


def test_one_megabyte_result_round_trips(run, write, tmp_path):
    big = "x" * 1_000_000
    write("vars.json", json.dumps({"big": big}))
    write("p.yaml", "steps:\n  - {id: big, tool: echo, args: {value: '${big}'}}\n")
    assert run("run", "p.yaml", "--vars-file", "vars.json").code == 0
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert state["steps"]["big"]["result"] == big
    r = run("status", "p.yaml", "--output", "json")
    assert r.json["steps"][0]["result"] == big


@pytest.mark.slow  # a real process per command
@pytest.mark.e2e  # a real `python -m planrun` process
def test_status_and_list(run, write, tmp_path):
    write("plans/one.yaml", "title: First\nsteps:\n  - {id: x, tool: echo, args: {value: 1}}\n")
    write(
        "plans/two.yaml",
        "steps:\n  - {id: x, tool: shell, args: {cmd: 'exit 1'}}\n  - {id: y, tool: echo}\n",
    )
    assert run("run", "plans/one.yaml").code == 0
    r = run("status", "plans/one.yaml")
    assert r.code == 0 and "succeeded" in r.out, r
    doc = run("status", "plans/one.yaml", "--output", "json").json
    assert set(doc) >= {"plan", "status", "reason", "duration_s", "steps", "variables"}
    assert doc["steps"][0]["id"] == "x"
    rows = run("list", "--output", "json").json
    assert rows == [
        {
            "path": "plans/one.yaml",
            "name": "one",
            "title": "First",
            "steps": 1,
            "last_status": "succeeded",
        },
        {"path": "plans/two.yaml", "name": "two", "title": None, "steps": 2, "last_status": None},
    ]
    r = run("list")
    assert "one.yaml" in r.out and "never run" in r.out


def _status_rows(text: str) -> dict[str, dict[str, str]]:
    """`status`'s table: {step id: {column header: cell}}, cut at the headers' columns."""
    lines = text.split("\n\n", 1)[1].splitlines()
    starts = [
        i for i, ch in enumerate(lines[0]) if ch != " " and (i == 0 or lines[0][i - 1] == " ")
    ]
    heads = lines[0].split()
    rows = {}
    for line in lines[1:]:
        if not line.strip():
            break
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        rows[cells[0]] = dict(zip(heads, cells, strict=True))
    return rows


def test_status_keeps_its_error_column_for_errors(run, write, tmp_path):
    write("p.yaml", CHAIN)
    assert run("run", "p.yaml").code == 1
    rows = _status_rows(run("status", "p.yaml").out)
    assert "exited with code 1" in rows["b"]["ERROR"], rows
    (tmp_path / "fixed").touch()
    assert run("resume", "p.yaml").code == 0
    rows = _status_rows(run("status", "p.yaml").out)
    # `a` was kept from the first run: not an error, a note
    assert rows["a"]["ERROR"] == "" and rows["a"]["NOTE"] == "unchanged since last run", rows
    assert rows["b"]["ERROR"] == rows["c"]["ERROR"] == "", rows
    doc = run("status", "p.yaml", "--output", "json").json
    assert [step["error"] for step in doc["steps"]] == [None, None, None], doc


def test_status_of_a_plan_that_no_longer_parses_says_why_it_finds_no_state(run, write):
    """The state is kept under the plan's name; a plan file that does not parse has none, so
    status looks under the file's stem and says why, with the parse error's place."""
    write("p.yaml", "name: m\nsteps:\n  - {id: a, tool: echo, args: {value: 1}}\n")
    assert run("run", "p.yaml").code == 0
    write("p.yaml", "name: m\nsteps: [\n")
    r = run("status", "p.yaml")
    assert r.code == 4, r
    assert "no state for plan 'p'" in r.err, r
    assert "p.yaml does not parse (p.yaml:" in r.err, r
    assert "so its name is the file's" in r.err, r


@pytest.mark.slow  # real signals to a real run
def test_sigterm_and_a_second_ctrl_c(write, tmp_path):
    sleeper = unique_sleep(600)
    cmd = (
        "trap '' TERM; trap 'touch interrupted' INT; "
        f"while :; do {sleeper}; done"  # sleeps on after a Ctrl-C
    )
    write(
        "p.yaml",
        f"""
        steps:
          - {{id: quick, tool: shell, args: {{cmd: "echo quick >> log"}}}}
          - {{id: stubborn, tool: shell, args: {{cmd: {json.dumps(cmd)}}}, depends_on: [quick]}}
        """,
    )
    # SIGTERM: the step ignores it, so the run ends with the grace period (1 s here). A Ctrl-C:
    # the step notes it and sleeps on, and the grace is 10 minutes, so only a second Ctrl-C
    # (sent once the first has reached the step: two sent back to back may arrive as one) ends
    # the run within the bound.
    for signals, grace in (([signal.SIGTERM], "1s"), ([signal.SIGINT] * 2, "10m")):
        proc = spawn_planrun(
            "run", "p.yaml", "-q", "--grace", grace, cwd=tmp_path, stderr=subprocess.PIPE, text=True
        )
        try:
            wait_for_command(sleeper)
            proc.send_signal(signals[0])
            for sig in signals[1:]:
                wait_for_file(tmp_path / "interrupted")
                proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)  # a bound on a hang: the step sleeps 600 s
        finally:
            kill_9(proc)
        assert proc.returncode == 130, err
        assert "Traceback" not in err
        status = planrun("status", "p.yaml", "--output", "json", cwd=tmp_path)
        assert status.code == 0, status.err
        steps = {s["id"]: s["status"] for s in json.loads(status.out)["steps"]}
        assert steps["quick"] == "succeeded" and steps["stubborn"] in ("interrupted", "running")
        assert_no_process_left(sleeper)
        (tmp_path / "log").unlink()


@pytest.mark.slow  # real signals to a real run
def test_the_json_file_itself_is_current_after_kill_9(write, tmp_path):
    sleep = unique_sleep(21)  # pkill'ed below: no other test's or checkout's sleep
    write(
        "p.yaml",
        f"""
        steps:
          - {{id: quick, tool: shell, args: {{cmd: "echo quick >> log"}}}}
          - {{id: long, tool: shell, args: {{cmd: "{sleep}"}}, depends_on: [quick]}}
    """,
    )
    proc = spawn_planrun("run", "p.yaml", "-q", cwd=tmp_path, stderr=subprocess.DEVNULL)
    snapshot = tmp_path / ".planrun/state/p.json"

    def long_running_in_the_snapshot() -> bool:
        try:  # the snapshot alone, no journal replay: refreshed while the run goes on
            steps = json.loads(snapshot.read_text())["steps"]
        except (OSError, ValueError, KeyError):
            return False
        return steps.get("long", {}).get("status") == "running"

    wait_until(long_running_in_the_snapshot, what="the snapshot to show 'long' running")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    subprocess.run(["pkill", "-f", sleep])
    raw = json.loads(snapshot.read_text())  # no journal replay
    assert {k: v["status"] for k, v in raw["steps"].items()} == {
        "quick": "succeeded",
        "long": "running",
    }


def test_a_step_to_run_again_that_never_starts_is_pending_everywhere(run, write, tmp_path):
    # Two failed steps; the resume aborts at the first, so the second never starts again.
    # Its previous `failed` record is not what this run did: the state, `status` and JUnit
    # say `pending`, as --output json does.
    plan = """
        name: again
        steps:
          - {id: a, tool: shell, args: {cmd: "exit 1"}, on_failure: ON}
          - {id: b, tool: shell, args: {cmd: "exit 1"}, on_failure: ON}
          - {id: c, tool: echo, args: {value: 1}}
        """
    write("p.yaml", plan.replace("ON", "continue"))
    assert run("run", "p.yaml", "-j", "1").code == 1
    write("p.yaml", plan.replace("ON", "abort"))
    r = run("resume", "p.yaml", "-j", "1", "--output", "json", "--junit", "j.xml")
    assert r.code == 1, r
    doc = {s["id"]: s["status"] for s in r.json["steps"]}
    assert doc == {"a": "failed", "b": "pending", "c": "succeeded"}, doc
    status = run("status", "p.yaml", "--output", "json")
    assert {s["id"]: s["status"] for s in status.json["steps"]} == doc, status
    junit = (tmp_path / "j.xml").read_text()
    assert junit.count("<failure") == 1, junit


def test_a_foreach_instance_to_run_again_that_never_starts_is_pending_everywhere(
    run, write, tmp_path
):
    # f[0] and f[2] failed; the resume keeps f[1], runs f[0] again and aborts there, so f[2]
    # never starts: `status` says pending for it, as --output json does, and f[1] keeps its
    # record (its times included).
    plan = """
        name: again
        steps:
          - {id: f, tool: shell, foreach: [1, 2, 3], args: {cmd: "test ${item} = 2"}, on_failure: ON}
        """
    write("p.yaml", plan.replace("ON", "continue"))
    assert run("run", "p.yaml", "-j", "1").code == 1
    state = tmp_path / ".planrun/state/again.json"
    before = json.loads(state.read_text())["steps"]["f[1]"]
    write("p.yaml", plan.replace("ON", "abort"))
    r = run("resume", "p.yaml", "-j", "1", "--output", "json")
    doc = {s["id"]: s["status"] for s in r.json["steps"]}
    assert doc == {"f": "failed", "f[0]": "failed", "f[1]": "succeeded", "f[2]": "pending"}, doc
    after = {s["id"]: s for s in run("status", "p.yaml", "--output", "json").json["steps"]}
    assert {k: v["status"] for k, v in after.items()} == doc, after
    kept = json.loads(state.read_text())["steps"]["f[1]"]
    assert kept["started_at"] == before["started_at"] is not None, (before, kept)


@pytest.mark.slow  # a real SIGINT to a real run
def test_ctrl_c_inside_a_sub_plan_then_resume_continues_it(write, tmp_path):
    sleeper = unique_sleep(600)
    write(
        "child.yaml",
        """
        steps:
          - {id: c1, tool: shell, args: {cmd: "echo c1 >> log"}}
          - {id: c2, tool: shell, args: {cmd: "test -e go || SLEEP; echo c2 >> log"},
             depends_on: [c1]}
        """.replace("SLEEP", sleeper),
    )
    write(
        "p.yaml",
        """
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
          - {id: after, tool: shell, args: {cmd: "echo after >> log"}, depends_on: [sub]}
        """,
    )
    proc = spawn_planrun(
        "run", "p.yaml", "--output", "json", cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    wait_for_command(sleeper)  # exec'd: a Ctrl-C before could be lost in the shell's fork
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)  # a bound: c2 would sleep 600 s
    assert proc.returncode == 130
    assert {s["id"]: s["status"] for s in json.loads(out)["steps"]} == {
        "sub": "interrupted",
        "sub/c1": "succeeded",
        "sub/c2": "interrupted",
        "after": "pending",
    }
    (tmp_path / "go").touch()
    r = planrun("resume", "p.yaml", cwd=tmp_path)
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split() == ["c1", "c2", "after"]


@pytest.mark.slow  # a real run killed with SIGKILL
def test_a_step_killed_while_waiting_to_retry_is_interrupted_without_an_error(tmp_path):
    """As when the run is interrupted: the step did not fail, its failed attempt is in its
    attempts log; `status` shows it `interrupted` with error null, and `resume` runs it."""
    (tmp_path / "p.yaml").write_text(
        "name: p\nsteps:\n  - {id: flaky, run: 'test -f fixed', retries: 3, retry_delay: 1h}\n"
    )
    proc = spawn_planrun("run", "p.yaml", "-q", "--events", "ev.jsonl", cwd=tmp_path)
    events = tmp_path / "ev.jsonl"
    wait_until(lambda: events.exists() and "step.retrying" in events.read_text())
    kill_9(proc)
    status = planrun("status", "p.yaml", "--output", "json", cwd=tmp_path)
    assert status.code == 0, status
    (step,) = status.json["steps"]
    assert (step["status"], step["attempts"], step["error"]) == ("interrupted", 1, None), step
    (tmp_path / "fixed").touch()
    again = planrun("resume", "p.yaml", cwd=tmp_path)
    assert again.code == 0 and "running 'flaky' again: interrupted last time" in again.err, again
