"""One count of a run's steps, said the same way by the console, `status`, the report and
JUnit: the plan's steps by status, foreach instances counted apart and named so."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html import unescape
from pathlib import Path

from planrun.run.stepcounts import count_steps, counts_text
from tests.conftest import assert_no_traceback, planrun

PLAN = """
steps:
  - {id: prep, tool: shell, args: {cmd: "echo prep"}}
  - id: build
    tool: shell
    args: {cmd: "cat src.txt > out.txt"}
    sources: [src.txt]
    outputs: [out.txt]
    depends_on: [prep]
  - id: lint
    tool: shell
    foreach: [a, b, c]
    args: {cmd: "echo lint ${item}"}
    cache: true
    depends_on: [build]
  - {id: check, tool: shell, args: {cmd: "echo check"}, depends_on: [lint]}
  - {id: pack, tool: shell, args: {cmd: "echo pack"}, depends_on: [check]}
"""


def test_every_view_counts_a_run_the_same_way(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(PLAN.lstrip())
    (tmp_path / "src.txt").write_text("x\n")
    assert planrun("run", "plan.yaml", cwd=tmp_path).code == 0
    r = planrun("run", "plan.yaml", "--report", "report.html", "--junit", "junit.xml", cwd=tmp_path)
    assert r.code == 0, r
    assert_no_traceback(r)
    said = "5 steps (4 succeeded, 1 cached); 3 foreach instances (3 cached)"
    console = re.sub(r" in [0-9.]+m?s", "", r.err.strip().splitlines()[-1])  # the duration
    assert console.endswith(f"run succeeded: {said}"), r.err
    status = planrun("status", "plan.yaml", cwd=tmp_path)
    assert said in status.out.splitlines(), status.out
    page = unescape(re.sub(r"<[^>]+>", "", (tmp_path / "report.html").read_text()))
    assert said in page
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props.get("counts") == said


def test_the_count_itself() -> None:
    counts = count_steps(
        {
            "a": "succeeded",
            "b": "cached",
            "fan": "failed",
            "fan[0]": "succeeded",
            "fan[1]": "failed",
            "sub": "succeeded",
            "sub/inner": "succeeded",  # a sub-plan's step: its parent step is counted
            "c": "retrying",
            "d": "pending",
        },
        kept={"a"},
    )
    assert counts_text(counts) == (
        "6 steps (2 succeeded, 1 cached, 1 failed, 1 unfinished, 1 pending;"
        " 1 kept from the previous run); 2 foreach instances (1 succeeded, 1 failed)"
    )
    assert counts_text(count_steps({"a": "succeeded"})) == "1 step (1 succeeded)"
