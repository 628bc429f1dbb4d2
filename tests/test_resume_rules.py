"""Resume rules as a user sees them: what is kept, what runs again and why, what each report
says after a resume, approval on resume, a "no" at the prompt, two replans at once, budgets."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import (
    answer_at_tty,
    assert_no_process_left,
    assert_no_traceback,
    kill_9,
    planrun,
    spawn_planrun,
    unique_mark,
    wait_for_file,
    wait_until,
)
from tests.test_cache_run import started_reasons, statuses
from tests.testkit import run_plan, write_indented_plan


def _log(tmp_path: Path) -> list[str]:
    f = tmp_path / "log"
    return f.read_text().split() if f.exists() else []


def _events(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


# ---- secrets -------------------------------------------------------------------------------

SECRET_PLAN = """
secrets: [token]
variables: {token: s3cret-value}
steps:
  - {id: a, tool: shell, args: {cmd: "echo a >> log; echo hdr-${token}"}, result_variable: got}
  - id: b
    tool: shell
    args: {cmd: "test -f fixed && printf '%s' '${got.stdout | trim}' > seen"}
    on_failure: continue
  - {id: c, tool: shell, args: {cmd: "echo c >> log; test -n '${token}'"}}
"""


def test_a_step_still_to_run_gets_the_real_value_not_the_masked_one(run, write, tmp_path):
    write("p.yaml", SECRET_PLAN)
    r = run("run", "p.yaml", "-j", "1")
    assert r.code == 1, r
    assert _log(tmp_path) == ["a", "c"]
    state = (tmp_path / ".planrun/state/p.json").read_text()
    assert "s3cret-value" not in state and "hdr-***" in state  # stored masked
    (tmp_path / "fixed").touch()
    r = run("resume", "p.yaml", "-j", "1", "--events", "ev.jsonl")
    assert r.code == 0, r
    assert (tmp_path / "seen").read_text() == "hdr-s3cret-value"  # never hdr-***
    # a ran again (its recorded result held a secret b reads); c, whose input held the
    # secret but which nothing needs again, is kept
    assert _log(tmp_path) == ["a", "c", "a"]
    assert "running 'a' again: result held a secret" in r.err
    started = {e["step"]: e for e in _events(tmp_path / "ev.jsonl") if e["event"] == "step.started"}
    assert started["a"]["reason"] == "result held a secret"
    assert set(started) == {"a", "b"}
    assert "s3cret-value" not in (tmp_path / "ev.jsonl").read_text()


# ---- what a resume keeps -------------------------------------------------------------------

KEEP_PLAN = """
variables: {go: false}
steps:
  - {id: gate, tool: shell, args: {cmd: "echo gate >> log"}, when: "${go}"}
  - {id: below, tool: shell, args: {cmd: "echo below >> log"}, depends_on: [gate]}
  - {id: flaky, tool: shell, args: {cmd: "echo flaky >> log; exit 3"}, on_failure: ignore}
  - {id: after, tool: shell, args: {cmd: "echo after >> log"}, depends_on: [flaky]}
  - {id: last, tool: shell, args: {cmd: "test -f fixed && echo last >> log"}}
"""


def test_steps_below_a_when_skip_or_an_ignored_failure_are_kept(run, write, tmp_path):
    write("p.yaml", KEEP_PLAN)
    r = run("run", "p.yaml", "-j", "1")
    assert r.code == 1, r
    first = _log(tmp_path)
    assert sorted(first) == ["after", "below", "flaky"]
    (tmp_path / "fixed").touch()
    r = run("resume", "p.yaml", "-j", "1", "--output", "json")
    assert r.code == 0, r
    assert _log(tmp_path) == [*first, "last"]  # nothing but the failed step ran
    assert "a step it depends on ran again" not in r.err
    statuses = {s["id"]: s["status"] for s in r.json["steps"]}
    assert statuses == {
        "gate": "skipped",
        "below": "succeeded",
        "flaky": "ignored",
        "after": "succeeded",
        "last": "succeeded",
    }
    flaky = next(s for s in r.json["steps"] if s["id"] == "flaky")
    assert "exited with code 3" in flaky["error"]  # kept with its recorded error
    # the run succeeded: resuming it again runs nothing, ignored step included
    r = run("resume", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert _log(tmp_path) == [*first, "last"]
    assert r.json["status"] == "succeeded"


def test_a_changed_condition_runs_the_step_and_what_depends_on_it(run, write, tmp_path):
    write("p.yaml", KEEP_PLAN)
    (tmp_path / "fixed").touch()
    assert run("run", "p.yaml", "-j", "1").code == 0
    before = _log(tmp_path)
    r = run("resume", "p.yaml", "-j", "1", "--var", "go=true")
    assert r.code == 0, r
    assert _log(tmp_path)[len(before) :] == ["gate", "below"]
    assert "running 'gate' again: its condition changed" in r.err
    assert "running 'below' again: a step it depends on ran again" in r.err


@pytest.mark.slow
def test_kill_9_with_when_and_ignored_steps_then_resume_reruns_no_succeeded_step(write, tmp_path):
    """The crash harness: conditions skip some steps, some fail ignored; after kill -9 at a
    random moment, resume must never run a step that had succeeded."""
    n = 100
    lines = ["variables: {on: false}", "steps:"]
    for i in range(n):
        dep = f", depends_on: [s{i - 2}]" if i >= 2 else ""
        if i % 7 == 3:
            extra = ', when: "${on}"'
        elif i % 11 == 5:
            extra = ", on_failure: ignore"
        else:
            extra = ""
        cmd = f"echo s{i} >> log" + ("; exit 1" if i % 11 == 5 else "")
        lines.append(f"  - {{id: s{i}, tool: shell, args: {{cmd: '{cmd}'}}{dep}{extra}}}")
    write("p.yaml", "\n".join(lines) + "\n")
    rng = random.Random(11)
    checked = 0
    for _ in range(3):
        shutil.rmtree(tmp_path / ".planrun", ignore_errors=True)
        (tmp_path / "log").unlink(missing_ok=True)
        proc = spawn_planrun(
            "run", "p.yaml", "-q", "-j", "2", cwd=tmp_path, stderr=subprocess.DEVNULL
        )
        # kill once a random number of steps has run: a condition, so the kill lands mid-run
        # on a fast machine as on a loaded one
        target = rng.randint(5, 60)
        wait_for_file(tmp_path / "log", interval=0.005)
        deadline = time.monotonic() + 120  # a bound on a hang, not a speed
        while len(_log(tmp_path)) < target and proc.poll() is None:
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.002)  # polling period, not a synchronisation
        # and wait until the commands it had started are gone: they live on (each in its own
        # session) and may still write to the log, or hold planrun's descriptors
        kill_9(proc)
        status = planrun("status", "p.yaml", "--output", "json", cwd=tmp_path)
        assert status.code == 0, status.err
        done = {
            s["id"]
            for s in json.loads(status.out)["steps"]
            if s["status"] in ("succeeded", "ignored")
        }
        before = _log(tmp_path)
        r = planrun("resume", "p.yaml", "-q", "-j", "2", cwd=tmp_path, timeout=120)
        assert r.code == 0, r.err
        again = set(_log(tmp_path)[len(before) :])
        assert not done & again, sorted(done & again)
        ran = {f"s{i}" for i in range(n) if i % 7 != 3}
        assert set(_log(tmp_path)) == ran
        if 0 < len(done) < len(ran):
            checked += 1
        r = planrun("resume", "p.yaml", "-q", cwd=tmp_path, timeout=60)  # finished: no-op
        assert (
            r.code == 0
            and set(_log(tmp_path)) == ran
            and len(_log(tmp_path)) == len(before) + len(again)
        )
    assert checked >= 2  # the kills really landed mid-run


@pytest.mark.slow  # a real run killed with SIGKILL
def test_a_command_running_when_planrun_is_killed_ends_on_its_own(write, tmp_path):
    """kill -9 cannot stop a step's command (it runs in its own session): it may write after
    planrun died. The harness above must wait for it (kill_9) before reading the log."""
    # The command writes only once planrun is gone (killed and reaped): a set time it slept
    # could run out before the kill on a loaded machine, and the log be complete anyway.
    cmd = "touch started; while kill -0 $PPID 2>/dev/null; do sleep 0.02; done; echo late >> log"
    write("p.yaml", f"steps:\n  - {{id: a, tool: shell, args: {{cmd: {json.dumps(cmd)}}}}}\n")
    proc = spawn_planrun("run", "p.yaml", "-q", cwd=tmp_path, stderr=subprocess.DEVNULL)
    wait_for_file(tmp_path / "started")
    assert _log(tmp_path) == []
    kill_9(proc)
    assert proc.returncode == -signal.SIGKILL
    assert _log(tmp_path) == ["late"]  # written by the orphaned command before kill_9 returned


FORKING_STEP = """
import os
import signal
import threading
from pathlib import Path


def hold():
    if Path("forked").exists():
        return "resumed"
    child = os.fork()  # as multiprocessing does: the child holds copies of planrun's descriptors
    if child == 0:
        signal.pause()
        os._exit(0)
    Path("forked").write_text(str(child))
    threading.Event().wait(600)  # until planrun is killed
"""


@pytest.mark.slow  # a real run killed with SIGKILL
def test_resume_after_kill_9_while_a_process_forked_by_a_step_still_runs(write, tmp_path):
    """The killed run's lock file is still flock-ed (by the fork, which inherited it): the run
    is dead all the same, and resume takes the state over."""
    write("forking.py", FORKING_STEP)
    write("p.yaml", "steps:\n  - {id: hold, tool: python, args: {function: 'forking:hold'}}\n")
    proc = spawn_planrun("run", "p.yaml", "-q", cwd=tmp_path, stderr=subprocess.DEVNULL)
    forked = None
    try:
        wait_until(
            lambda: (tmp_path / "forked").exists() and (tmp_path / "forked").read_text(),
            what="the step to fork",
        )
        forked = int((tmp_path / "forked").read_text())
        proc.kill()  # not kill_9: the fork must outlive the run here
        proc.wait()
        r = planrun("resume", "p.yaml", "--output", "json", cwd=tmp_path, timeout=60)
        assert r.code == 0, r.err  # not "locked by another run (pid <the killed run>)"
        assert r.json["steps"][0]["result"] == "resumed"
    finally:
        if forked is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(forked, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- reports after a resume ----------------------------------------------------------------

REPORT_PLAN = """
steps:
  - {id: a, tool: echo, args: {value: A}, result_variable: ra}
  - {id: c, tool: echo, args: {value: "${ra}-c"}, depends_on: [a]}
  - {id: d, tool: echo, args: {value: D}}
"""


def test_every_report_shows_kept_steps_as_what_they_are(run, write, tmp_path):
    write("p.yaml", REPORT_PLAN)
    assert run("run", "p.yaml").code == 0
    write("p.yaml", REPORT_PLAN.replace("{id: d, tool: echo, args: {value: D}}", BROKEN_D))
    r = run("resume", "p.yaml", "-j", "1", "--output", "json", "--junit", "j.xml")
    assert r.code == 1, r
    doc = {s["id"]: s for s in r.json["steps"]}
    assert {k: v["status"] for k, v in doc.items()} == {
        "a": "succeeded",
        "c": "succeeded",
        "d": "failed",
    }
    assert doc["c"]["result"] == "A-c" and doc["c"]["attempts"] == 1
    assert "2 succeeded, 1 failed; 2 kept from the previous run" in r.err
    cases = {tc.get("name"): tc for tc in ET.parse(tmp_path / "j.xml").iter("testcase")}
    assert cases["c"].find("skipped") is None and cases["c"].find("failure") is None
    assert "kept from a previous run" in (cases["c"].findtext("system-out") or "")
    assert cases["d"].find("failure") is not None
    status = run("status", "p.yaml", "--output", "json").json
    assert {s["id"]: s["status"] for s in status["steps"]} == {
        "a": "succeeded",
        "c": "succeeded",
        "d": "failed",
    }
    assert {s["id"]: s["result"] for s in status["steps"]}["c"] == "A-c"


BROKEN_D = '{id: d, tool: shell, args: {cmd: "exit 4"}}'


# ---- approval and resume -------------------------------------------------------------------

GATED = """
steps:
  - {id: deploy, tool: shell, args: {cmd: "echo deploy >> log"}, approval: true}
  - {id: check, tool: shell, args: {cmd: "test -f fixed && echo check >> log"}, depends_on: [deploy]}
"""


def test_resume_of_a_plan_that_never_ran_is_a_state_error_not_blocked(run, write):
    write("p.yaml", GATED)
    r = run("resume", "p.yaml")
    assert r.code == 4, r
    assert "no saved state" in r.err
    assert "start it with 'planrun run p.yaml'" in r.err
    assert_no_traceback(r)


def test_a_kept_approval_step_is_not_asked_about_again(run, write, tmp_path):
    write("p.yaml", GATED)
    assert run("run", "p.yaml", "--yes").code == 1
    (tmp_path / "fixed").touch()
    r = run("resume", "p.yaml", "--output", "json")  # no --yes, no TTY
    assert r.code == 0, r
    assert _log(tmp_path) == ["deploy", "check"]
    # changed, it runs again: then it needs approval again
    write("p.yaml", GATED.replace("echo deploy", "echo deploy2"))
    r = run("resume", "p.yaml", "--output", "json")
    assert r.code == 5 and r.json["reason"] == "approval_required", r
    assert {s["id"]: s["status"] for s in r.json["steps"]} == {
        "deploy": "pending",
        "check": "pending",
    }


GATED_LAST = """
steps:
  - {id: build, tool: shell, args: {cmd: "echo build >> log"}}
  - {id: check, tool: shell, args: {cmd: "test -f fixed"}, depends_on: [build]}
  - {id: ship, tool: echo, args: {value: 1}, approval: true, depends_on: [check]}
"""


def test_a_resume_blocked_at_its_gate_shows_kept_steps_as_kept_in_every_view(run, write, tmp_path):
    """Blocked before any step starts (no --yes, no TTY), the resumed run's kept step is
    `succeeded` and the one it would run again `pending` in --output json, status and JUnit
    alike: not the previous run's `failed`, nor JUnit's `not started`."""
    write("p.yaml", GATED_LAST)
    assert run("run", "p.yaml", "--yes").code == 1
    (tmp_path / "fixed").touch()
    r = run("resume", "p.yaml", "--output", "json", "--junit", "j.xml", "--events", "ev.jsonl")
    assert r.code == 5 and r.json["reason"] == "approval_required", r
    want = {"build": "succeeded", "check": "pending", "ship": "pending"}
    assert {s["id"]: s["status"] for s in r.json["steps"]} == want, r
    status = run("status", "p.yaml", "--output", "json")
    assert {s["id"]: s["status"] for s in status.json["steps"]} == want, status
    cases = {tc.get("name"): tc for tc in ET.parse(tmp_path / "j.xml").iter("testcase")}
    assert cases["build"].find("skipped") is None, ET.tostring(cases["build"])
    assert "kept from a previous run" in (cases["build"].findtext("system-out") or "")
    assert cases["check"].find("skipped") is not None
    started = _events(tmp_path / "ev.jsonl")[0]
    assert started["event"] == "run.started" and started["kept"] == ["build"], started
    assert _log(tmp_path) == ["build"]


def test_an_approval_step_added_by_the_planner_is_required_not_denied(run, write, tmp_path):
    write(
        "planner.py",
        'import json\nprint(json.dumps([{"id": "ship", "tool": "echo", "approval": True}]))\n',
    )
    write(
        "p.yaml",
        f"""
        replan: {{command: ["{sys.executable}", "planner.py"]}}
        steps:
          - {{id: build, tool: shell, args: {{cmd: "exit 1"}}, on_failure: replan}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 5, r
    assert r.json["status"] == "blocked" and r.json["reason"] == "approval_required"
    assert "approval required for step 'ship'" in r.json["error"]
    assert "denied" not in r.json["error"] + r.err


def test_no_at_the_prompt_stops_the_running_steps_like_abort(write, tmp_path):
    mark = unique_mark()
    write(
        "p.yaml",
        f"""
        steps:
          - {{id: slow, tool: shell, args: {{cmd: "touch started; : {mark}; sleep 600; touch finished"}}}}
          - {{id: ready, tool: shell, args: {{cmd: "while [ ! -f started ]; do sleep 0.02; done"}}}}
          - {{id: deploy, tool: echo, args: {{value: 1}}, approval: true, depends_on: [ready]}}
        """,
    )
    # `slow` outlasts answer_at_tty's timeout: a run that waited for it fails the test.
    code, out = answer_at_tty(tmp_path, ["run", "p.yaml", "--output", "json"], ["n"], 60)[:2]
    assert code == 5, out
    doc = json.loads(out)
    assert doc["status"] == "blocked" and doc["reason"] == "denied"
    assert {s["id"]: s["status"] for s in doc["steps"]} == {
        "slow": "interrupted",
        "ready": "succeeded",
        "deploy": "interrupted",
    }
    assert not (tmp_path / "finished").exists()
    assert_no_process_left(mark)


# ---- two replans at once, budgets per invocation -------------------------------------------

RECORDING_PLANNER = r"""
import json, os, sys
ctx = json.load(sys.stdin)
with open("calls.jsonl", "a") as fh:
    fh.write(json.dumps(ctx) + "\n")
mode = open("mode").read().strip() if os.path.exists("mode") else "ok"
if mode == "fail":
    print(json.dumps([{"id": "try", "tool": "shell", "args": {"cmd": "exit 1"},
                       "on_failure": "replan"}]))
else:
    print(json.dumps([{"id": "fix", "tool": "echo", "args": {"value": "fixed"}}]))
"""


def _calls(tmp_path: Path) -> list[dict]:
    f = tmp_path / "calls.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def test_max_replans_is_per_invocation(run, write, tmp_path):
    write("planner.py", RECORDING_PLANNER)
    (tmp_path / "mode").write_text("fail")
    write(
        "p.yaml",
        f"""
        replan: {{command: ["{sys.executable}", "planner.py"]}}
        limits: {{max_replans: 1}}
        steps:
          - {{id: fetch, tool: shell, args: {{cmd: "exit 9"}}, on_failure: replan}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1 and r.json["reason"] == "replan_budget", r
    (tmp_path / "mode").write_text("ok")
    r = run("resume", "p.yaml", "--output", "json")
    assert r.code == 0, r  # a fresh max_replans: the planner is asked once more
    assert len(_calls(tmp_path)) == 2
    assert [s["id"] for s in r.json["steps"]] == ["fix"]


def test_max_steps_and_tool_caps_are_per_invocation(run, write, tmp_path):
    write(
        "p.yaml",
        """
        limits: {max_steps: 3, tool_caps: {shell: 2}}
        steps:
          - {id: s1, tool: shell, args: {cmd: "echo s1 >> log"}}
          - {id: s2, tool: shell, args: {cmd: "echo s2 >> log"}, depends_on: [s1]}
          - {id: s3, tool: shell, args: {cmd: "echo s3 >> log"}, depends_on: [s2]}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1 and r.json["reason"] == "step_budget", r
    assert "tool_caps.shell is 2" in r.json["error"]
    r = run("resume", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert _log(tmp_path) == ["s1", "s2", "s3"]


# ---- state and resume ----------------------------------------------------------------------------


def test_a_plan_changed_under_the_same_name_is_resumed_by_fingerprints(run, write, tmp_path):
    plan = """
        name: build
        steps:
          - {id: a, tool: shell, args: {cmd: "echo a >> log"}}
          - {id: b, tool: shell, args: {cmd: "echo B >> log"}, depends_on: [a]}
          - {id: c, tool: shell, args: {cmd: "echo c >> log"}, depends_on: [b]}
          - {id: d, tool: shell, args: {cmd: "echo d >> log; test -e ok"}}
          - {id: old, tool: shell, args: {cmd: "echo old >> log"}}
        """
    write("p.yaml", plan)
    assert run("run", "p.yaml", "-j", "1").code == 1
    assert (tmp_path / "log").read_text().split() == ["a", "B", "c", "d"]
    (tmp_path / "ok").touch()
    changed = plan.replace("echo B", "echo b2").replace(
        '- {id: old, tool: shell, args: {cmd: "echo old >> log"}}',
        '- {id: new, tool: shell, args: {cmd: "echo new >> log"}}',
    )
    write("other-file-name.yaml", changed)
    r = run("resume", "other-file-name.yaml", "--output", "json", "-j", "1")
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split()[4:] == ["b2", "c", "d", "new"]
    assert [s["id"] for s in r.json["steps"]] == ["a", "b", "c", "d", "new"]
    assert all(s["status"] == "succeeded" for s in r.json["steps"]), r.json


def test_a_kept_step_reading_a_masked_result_is_kept_whatever_characters_the_mask_has(
    run, write, tmp_path
):
    # `show` prints the secret (its result is recorded masked), `use` reads that result in a
    # shell command and succeeds, `flaky` fails. On resume only `flaky` is still to run: nothing
    # reads the masked result, so `show` and `use` are kept. (The masked value `***` holds
    # glob characters, so a shell command gets it another way than a plain word: that must not
    # make `use` look changed.)
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - {id: show, tool: shell, args: {cmd: "echo show >> log; echo ${token}"},
             result_variable: shown}
          - {id: use, tool: shell, args: {cmd: "echo use >> log; test '${shown.stdout | trim}' = x"},
             on_failure: ignore}
          - {id: flaky, tool: shell, args: {cmd: "echo flaky >> log; test -e ok"},
             on_failure: continue}
        """,
    )
    r = run("run", "p.yaml", "--var", "token=PlainWord42", "-j", "1")
    assert r.code == 1, r
    (tmp_path / "ok").touch()
    r = run("resume", "p.yaml", "--var", "token=PlainWord42", "--output", "json")
    assert r.code == 0, r
    log = (tmp_path / "log").read_text().split()
    assert log == ["show", "use", "flaky", "flaky"], (log, r.err)
    assert {s["id"]: s["status"] for s in r.json["steps"]} == {
        "show": "succeeded",
        "use": "ignored",
        "flaky": "succeeded",
    }


def test_a_sub_plan_started_again_on_resume_keeps_its_steps_that_succeeded(run, write, tmp_path):
    # A sub-plan follows the rules of a plan run on its own: resumed, its steps that
    # succeeded with unchanged fingerprints are kept, the failed one runs again.
    write(
        "child.yaml",
        """
        steps:
          - {id: c1, tool: shell, args: {cmd: "echo c1 >> log"}}
          - {id: c2, tool: shell, args: {cmd: "echo c2 >> log; test -e ok"}, depends_on: [c1]}
        """,
    )
    write(
        "p.yaml",
        """
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
          - {id: after, tool: shell, args: {cmd: "echo after >> log"}, depends_on: [sub]}
        """,
    )
    assert run("run", "p.yaml").code == 1
    (tmp_path / "ok").touch()
    r = run("resume", "p.yaml", "--output", "json", "--junit", "junit.xml")
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split() == ["c1", "c2", "c2", "after"]
    assert "sub/c1 kept from the previous run" in r.err, r.err
    want = {"sub": "succeeded", "sub/c1": "succeeded", "sub/c2": "succeeded", "after": "succeeded"}
    assert {s["id"]: s["status"] for s in r.json["steps"]} == want
    status = run("status", "p.yaml", "--output", "json")
    assert {s["id"]: s["status"] for s in status.json["steps"]} == want
    assert 'name="sub/c1"' in (tmp_path / "junit.xml").read_text()

    # --force on the `plan` step runs the whole sub-plan again, as on its own
    r = run("resume", "p.yaml", "--force=sub")
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split()[4:] == ["c1", "c2", "after"]


def test_a_sub_plan_kept_whole_on_resume_keeps_its_steps_in_every_view(run, write, tmp_path):
    # A `plan` step kept from the previous run is kept with its sub-plan's steps (as a
    # foreach step with its instances): they stay in the run document, the state (status,
    # report) and JUnit as kept, not dropped; a matrix of sub-plans too.
    write(
        "child.yaml",
        """
        steps:
          - {id: c1, title: "First ${greet}", tool: shell, args: {cmd: "echo c1 >> log"}}
        variables: {greet: hi}
        """,
    )
    write(
        "p.yaml",
        """
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
          - {id: subs, matrix: {g: [a, b]}, tool: plan,
             args: {path: child.yaml, variables: {greet: "${matrix.g}"}}}
          - {id: after, tool: shell, args: {cmd: "test -e ok"}, depends_on: [sub, subs]}
        """,
    )
    first = run("run", "p.yaml", "--output", "json")
    assert first.code == 1
    rows = ["sub", "sub/c1", "subs", "subs[0]", "subs[0]/c1", "subs[1]", "subs[1]/c1", "after"]
    assert [s["id"] for s in first.json["steps"]] == rows
    assert [s["id"] for s in run("status", "p.yaml", "--output", "json").json["steps"]] == rows
    (tmp_path / "ok").touch()
    r = run("resume", "p.yaml", "--output", "json", "--junit", "junit.xml")
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split() == ["c1"] * 3  # nothing ran again
    assert "sub/c1 (First hi) kept from the previous run" in r.err, r.err
    assert [(s["id"], s["status"]) for s in r.json["steps"]] == [(sid, "succeeded") for sid in rows]
    status = run("status", "p.yaml", "--output", "json")
    assert [s["id"] for s in status.json["steps"]] == rows
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert state["steps"]["subs[1]/c1"]["title"] == "First b"
    assert state["steps"]["sub/c1"]["started_at"] is not None  # its record, times included
    assert 'name="subs[1]/c1"' in (tmp_path / "junit.xml").read_text()


def test_resume_dry_run_says_what_the_resume_keeps_and_why_the_rest_runs(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: shell, args: {cmd: "echo a >> log"}}
          - {id: b, tool: shell, args: {cmd: "echo b >> log; test -e ok"}, depends_on: [a]}
          - {id: c, tool: shell, args: {cmd: "echo c >> log"}, depends_on: [b]}
        """,
    )
    assert run("resume", "p.yaml", "--dry-run").code == 4  # nothing to resume yet
    assert run("run", "p.yaml").code == 1
    r = run("resume", "p.yaml", "--dry-run", "--output", "json")
    assert r.code == 0, r
    assert [(s["id"], s["resume"]) for s in r.json["steps"]] == [
        ("a", "kept"),
        ("b", "failed last time"),
        ("c", "a step it depends on ran again"),
    ]
    text = run("resume", "p.yaml", "--dry-run")
    assert "resume: kept" in text.out and "resume: runs again: failed last time" in text.out
    assert (tmp_path / "log").read_text().split() == ["a", "b"]  # the dry run ran nothing


def test_resume_dry_run_shows_the_results_of_kept_steps_not_placeholders(run, write, tmp_path):
    # A kept step's result is known: the steps still to run are shown with it (args, title,
    # a foreach list), as the resume will run them; a result of a step that runs again is
    # still a placeholder.
    write(
        "p.yaml",
        """
        steps:
          - {id: ver, tool: echo, args: {value: "1.2"}, result_variable: version}
          - {id: files, tool: echo, args: {value: [a, b]}, result_variable: names}
          - {id: again, tool: shell, args: {cmd: "test -e ok && echo x"}, result_variable: late}
          - id: pack
            title: "Pack ${version}"
            tool: echo
            args: {value: "pack ${version} ${late}"}
            depends_on: [again]
          - {id: each, foreach: "${names}", tool: echo, args: {value: "${item}"}, depends_on: [again]}
        """,
    )
    assert run("run", "p.yaml").code == 1
    r = run("resume", "p.yaml", "--dry-run", "--output", "json")
    assert r.code == 0, r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert steps["pack"]["args"] == {"value": "pack 1.2 <again result>"}
    assert steps["pack"]["title"] == "Pack 1.2"
    assert steps["each[1]"]["args"] == {"value": "b"}
    assert "pack 1.2" in run("resume", "p.yaml", "--dry-run").out


# ---- resume and --force --------------------------------------------------------------------

GATED_BUILD = """
    steps:
      - {id: build, tool: shell, args: {cmd: "echo built"}, cache: true}
      - {id: gate, tool: shell, args: {cmd: "test -f ok"}, depends_on: [build]}
      - {id: after, tool: shell, args: {cmd: "echo after"}, depends_on: [gate]}
"""


@pytest.mark.parametrize("force", [("--force",), ("--force=build",)])
def test_resume_with_force_runs_the_forced_steps_again(
    tmp_path: Path, force: tuple[str, ...]
) -> None:
    """`--force` runs every selected step and `--force=ID` that step, on resume too: a forced step is
    not kept from the previous run, and what depends on it runs again."""
    write_indented_plan(tmp_path, GATED_BUILD)
    assert run_plan(tmp_path).code == 1
    (tmp_path / "ok").write_text("")
    r = planrun(
        "resume", "plan.yaml", *force, "--output", "json", "--events", "e.jsonl", cwd=tmp_path
    )
    assert r.code == 0, r
    assert statuses(r) == {"build": "succeeded", "gate": "succeeded", "after": "succeeded"}
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "forced"
    assert "running 'build' again: forced" in r.err


def test_resume_without_force_still_keeps_what_succeeded(tmp_path: Path) -> None:
    write_indented_plan(tmp_path, GATED_BUILD)
    assert run_plan(tmp_path).code == 1
    (tmp_path / "ok").write_text("")
    r = planrun("resume", "plan.yaml", "--force=after", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"build": "succeeded", "gate": "succeeded", "after": "succeeded"}
    assert "build kept from the previous run" in r.err


def test_resume_with_force_on_a_foreach_step_runs_its_instances(tmp_path: Path) -> None:
    write_indented_plan(
        tmp_path,
        """
    variables: {pkgs: [a, b]}
    steps:
      - {id: lint, tool: shell, foreach: "${pkgs}", args: {cmd: "echo ${item}"}, cache: true}
      - {id: gate, tool: shell, args: {cmd: "test -f ok"}, depends_on: [lint]}
    """,
    )
    assert run_plan(tmp_path).code == 1
    (tmp_path / "ok").write_text("")
    r = planrun("resume", "plan.yaml", "--force=lint[1]", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {
        "lint": "succeeded",
        "lint[0]": "succeeded",  # kept from the previous run
        "lint[1]": "succeeded",
        "gate": "succeeded",
    }
    assert "running 'lint[1]' again: forced" in r.err and "lint[0] kept" in r.err
    assert "running 'lint[0]'" not in r.err
