"""Small helpers the tests of several concerns share (plans, documents, refused commands).

Not `helpers.py`: pytest puts tests/ on sys.path, so a plan's `python` step importing its own
`helpers` module (examples/helpers.py, a test's) would find this one instead."""

from __future__ import annotations

import ast
import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, get_args

from planrun.run.events import ENVELOPE, RunEvent
from tests.conftest import (
    MEMORY_LIMIT,
    Result,
    assert_no_traceback,
    planrun,
    planrun_process,
)


@functools.cache
def parsed_source(path: Path) -> ast.Module:
    """A module of planrun's parsed once per test process: the tests of its layout and of its
    event names walk every module (read only: the tree is shared)."""
    return ast.parse(path.read_text(), str(path))


def steps_by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in doc["steps"]}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# Each event kind by its documented name (`step.succeeded`), for Event.
_KINDS: dict[str, Any] = {kind._field_defaults["event"]: kind for kind in get_args(RunEvent)}


def Event(  # noqa: N802 - builds one of planrun.run.events' kinds
    event: str,
    plan: str,
    step: str | None = None,
    data: dict[str, Any] | None = None,
    ts: float | None = None,
) -> RunEvent:
    """The event of that documented name with that data, as its JSON document would give it
    (keys it does not know are left out); `ts` now by default."""
    kind = _KINDS[event]
    fields = {k: v for k, v in (data or {}).items() if k in kind._fields and k not in ENVELOPE}
    if step is not None:
        fields["step"] = step
    elif "step" in kind._fields and "step" not in kind._field_defaults:
        fields["step"] = ""
    made: RunEvent = kind(plan=plan, ts=time.time() if ts is None else ts, **fields)
    return made


def most_at_once(events: Path, counted: Any) -> int:
    """The most steps `counted(step_id)` selects that an events file shows running at once
    (started, not yet ended). A bound that is not kept starts its steps in one turn of the
    loop, before any can end: the events' order shows it however slow the machine."""
    running: set[str] = set()
    most = 0
    for event in read_jsonl(events):
        step = event.get("step")
        if not isinstance(step, str) or not counted(step):
            continue
        if event["event"] == "step.started":
            running.add(step)
            most = max(most, len(running))
        elif event["event"] != "step.output":
            running.discard(step)
    return most


def run_plan(cwd: Path, *args: str, plan_file: str = "plan.yaml", **kw: Any) -> Any:
    r = planrun("run", plan_file, *args, cwd=cwd, **kw)
    assert_no_traceback(r)
    return r


def write_indented_plan(root: Path, text: str, name: str = "plan.yaml") -> Path:
    """Write a plan (its text dedented by the four spaces the tests indent it with)."""
    (root / name).write_text(text.replace("\n    ", "\n").lstrip())
    return root


def cache_entry_files(root: Path) -> list[Path]:
    return sorted((root / ".planrun/cache/entries").glob("*.json"))


def one_line_error(r: Any) -> str:
    """The single stderr line of a refused command (no traceback, nothing else)."""
    assert_no_traceback(r)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1, r
    return lines[0]


# ---- the default plan and targets ---------------------------------------------------------

YML_PLAN = "name: from-yml\nsteps: [{id: y, tool: echo, args: {value: 1}}]\n"


def bounded_planrun(cwd: Path, *args: str, timeout: float = 180) -> Result:
    """`python -m planrun ARGS` in a real process with its address space capped. `timeout`
    bounds a hang (the bugs these tests guard against held planrun for hours), not a speed: a
    loaded CI machine takes tens of seconds for what takes one here."""
    return planrun_process(*args, cwd=cwd, timeout=timeout, capped=True)


def write_p_yaml(tmp_path: Path, text: str) -> None:
    (tmp_path / "p.yaml").write_text(textwrap.dedent(text).lstrip())


def one_step_error(r: Result) -> str:
    assert r.code == 1, r
    assert_no_traceback(r)
    assert "internal error" not in r.err + r.out, r
    step = json.loads(r.out)["steps"][0]
    assert step["status"] == "failed", r
    assert "\n" not in step["error"], step
    return str(step["error"])


def cached_run(run: Any, write: Any, tmp_path: Path) -> Path:
    write("p.yaml", CACHED_OUTPUT_PLAN)
    assert run("run", "p.yaml", "-q").code == 0
    (tmp_path / "out/f.txt").unlink()
    return only_cache_entry(tmp_path)


def only_cache_entry(tmp_path: Path) -> Path:
    (entry,) = (tmp_path / ".planrun/cache/entries").iterdir()
    return entry


CACHED_OUTPUT_PLAN = """
name: p
steps:
  - id: a
    tool: shell
    args: {cmd: "mkdir -p out && printf hi > out/f.txt"}
    outputs: ["out/f.txt"]
"""


DEEP_JSON = "[" * 100_000 + "]" * 100_000


def run_then_resume(run, tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    """Let the step that waits for a file `go` pass, then resume the plan: it must succeed."""
    (tmp_path / "go").write_text("")
    again = run("resume", "p.yaml", *args)
    assert again.code == 0, str(again)
    return again


# Split in the plans (`A""B` in sh, `${'B'}` in an expression) so the plan text never holds
# the value: only what planrun makes of it can.
RESULT_TOKEN = "ResultToken-q7w3"


ALL_REPORTS = (
    "--output",
    "json",
    "--events",
    "ev.jsonl",
    "--junit",
    "junit.xml",
    "--report",
    "r.html",
)


def shown_and_stored(run, tmp_path: Path, *results) -> str:  # type: ignore[no-untyped-def]
    outs = [text for r in results for text in (r.out, r.err)]
    for fmt in ("text", "json"):
        s = run("status", "p.yaml", "--output", fmt)
        outs += [s.out, s.err]
    return written_by_planrun(tmp_path, *outs)


def written_by_planrun(tmp_path: Path, *outputs: str) -> str:
    """Everything under `.planrun/` and the report files, with the given outputs."""
    texts = list(outputs)
    for f in sorted(tmp_path.rglob("*")):
        if f.is_file() and (".planrun" in f.parts or f.suffix in (".jsonl", ".xml", ".html")):
            texts.append(f.read_text(errors="replace"))
    return "\n".join(texts)


def peak_run(
    cwd: Path, *args: str, capped: bool = False, timeout: float | None = None
) -> tuple[Any, int]:
    """Run `python -m planrun ARGS` in a real process; its result and its peak RSS in bytes.
    `capped`: its memory capped at MEMORY_LIMIT; `timeout`: killed (exit -9) after that long,
    so that a hang fails the test instead of stalling it.

    planrun is started by a small launcher process, which reads its peak with wait4: a process
    started straight from the test process would count the test process's own high-water mark
    (Linux carries a parent's into a child at exec, fork or vfork alike)."""
    out, err, peak = cwd / "out.txt", cwd / "err.txt", cwd / "peak.txt"
    peak.unlink(missing_ok=True)
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(peak), "1" if capped else "0"]
            + [sys.executable, "-m", "planrun", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=o,
            stderr=e,
            env={**os.environ, "NO_COLOR": "1"},
            start_new_session=True,  # a timeout kills the launcher and planrun together
        )
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if not peak.exists():  # killed by the timeout
        return Result(-9, out.read_text(), err.read_text()), 0
    rss_kib, code = (int(word) for word in peak.read_text().split())
    return Result(code, out.read_text(), err.read_text()), rss_kib << 10


_LAUNCHER = f"""
import os, resource, subprocess, sys
if sys.argv[2] == "1":
    resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}))
child = subprocess.Popen(sys.argv[3:])
_pid, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{{usage.ru_maxrss}} {{os.waitstatus_to_exitcode(status)}}")
"""
