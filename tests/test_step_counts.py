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


MATRIX_PLAN = """
steps:
  - id: smoke
    matrix: {os: [linux, macos]}
    tool: echo
    args: {value: "${matrix.os}"}
  - {id: after, tool: echo, args: {value: 1}, depends_on: [smoke]}
"""


def _views(tmp_path: Path) -> tuple[str, str, str, str]:
    """The count as the console, `status`, the report and JUnit say it."""
    r = planrun("run", "plan.yaml", "--report", "report.html", "--junit", "junit.xml", cwd=tmp_path)
    assert r.code == 0, r
    console = re.sub(r" in [0-9.]+m?s", "", r.err.strip().splitlines()[-1])
    status = planrun("status", "plan.yaml", cwd=tmp_path).out.splitlines()[1]
    page = unescape(re.sub(r"<[^>]+>", "", (tmp_path / "report.html").read_text()))
    report = next(line.strip() for line in page.splitlines() if "instances" in line)
    again = planrun("report", "plan.yaml", "-o", "again.html", cwd=tmp_path)
    assert again.code == 0, again
    page = unescape(re.sub(r"<[^>]+>", "", (tmp_path / "again.html").read_text()))
    assert report == next(line.strip() for line in page.splitlines() if "instances" in line)
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    junit = {p.get("name"): p.get("value") for p in suite.iter("property")}["counts"]
    return console, status, report, str(junit)


def test_every_view_words_matrix_instances_as_matrix_instances(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(MATRIX_PLAN.lstrip())
    said = "2 steps (2 succeeded); 2 matrix instances (2 succeeded)"
    console, status, report, junit = _views(tmp_path)
    assert console.endswith(f"run succeeded: {said}"), console
    assert (status, report, junit) == (said, said, said)
    # a foreach step beside it: plain "instances", as the console says it
    (tmp_path / "plan.yaml").write_text(
        MATRIX_PLAN.lstrip() + "  - {id: each, foreach: [1], tool: echo, args: {value: 1}}\n"
    )
    said = "3 steps (3 succeeded); 3 instances (3 succeeded)"
    console, status, report, junit = _views(tmp_path)
    assert console.endswith(f"run succeeded: {said}"), console
    assert (status, report, junit) == (said, said, said)


KEPT_PLAN = """
steps:
  - {id: a, tool: echo, args: {value: A}}
  - {id: s, tool: echo, args: {value: S}, when: "${false}"}
  - {id: c, tool: echo, args: {value: C}, cache: true}
  - {id: f, tool: shell, args: {cmd: "test -e fixed"}, depends_on: [a, s, c]}
"""


def test_every_view_counts_kept_skipped_and_cached_steps_as_kept(tmp_path: Path) -> None:
    """A resume keeps a succeeded step, a step skipped by `when` and a cached one alike: the
    console, `status`, the report and JUnit all say three were kept, from the state's record
    of each step (a kept step's skip or cache reason is no sign of whether it was kept)."""
    (tmp_path / "plan.yaml").write_text(KEPT_PLAN.lstrip())
    assert planrun("run", "plan.yaml", cwd=tmp_path).code == 1  # c stored in the cache
    assert planrun("run", "plan.yaml", cwd=tmp_path).code == 1  # c cached
    (tmp_path / "fixed").touch()
    r = planrun(
        "resume", "plan.yaml", "--report", "report.html", "--junit", "junit.xml", cwd=tmp_path
    )
    assert r.code == 0, r
    said = "4 steps (2 succeeded, 1 cached, 1 skipped; 3 kept from the previous run)"
    console = re.sub(r" in [0-9.]+m?s", "", r.err.strip().splitlines()[-1])
    assert console.endswith(f"run succeeded: {said}"), r.err
    status = planrun("status", "plan.yaml", cwd=tmp_path)
    assert said in status.out.splitlines(), status.out
    page = unescape(re.sub(r"<[^>]+>", "", (tmp_path / "report.html").read_text()))
    assert said in page
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props.get("counts") == said
    # the report marks the three as kept, and draws no bar for them
    again = planrun("report", "plan.yaml", "-o", "again.html", cwd=tmp_path)
    assert again.code == 0, again
    kept = re.findall(
        r'data-step="([^"]+)"[^>]*data-kept="true"', (tmp_path / "again.html").read_text()
    )
    assert sorted(set(kept)) == ["a", "c", "s"]


KEPT_FANOUT_PLAN = """
steps:
  - {id: a, tool: echo, args: {value: A}}
  - id: m
    matrix: {x: [1, 2]}
    tool: shell
    args: {cmd: "test ${matrix.x} = 1 || test -e fixed"}
    on_failure: continue
  - {id: fe, foreach: [1, 2], tool: echo, args: {value: "${item}"}}
"""


def test_kept_instances_are_not_counted_as_kept_steps(tmp_path: Path) -> None:
    """`N kept from the previous run` counts steps, as the steps' part of the count it ends:
    a foreach step kept whole is one kept step (not three), an instance kept while its step
    runs again is none; every view says so. A kept instance is named by its id alone."""
    (tmp_path / "plan.yaml").write_text(KEPT_FANOUT_PLAN.lstrip())
    assert planrun("run", "plan.yaml", cwd=tmp_path).code == 1  # m[1] failed
    (tmp_path / "fixed").touch()
    r = planrun(
        "resume", "plan.yaml", "--report", "report.html", "--junit", "junit.xml", cwd=tmp_path
    )
    assert r.code == 0, r
    said = "3 steps (3 succeeded; 2 kept from the previous run); 4 instances (4 succeeded)"
    console = re.sub(r" in [0-9.]+m?s", "", r.err.strip().splitlines()[-1])
    assert console.endswith(f"run succeeded: {said}"), r.err
    assert "fe[0] kept from the previous run" in r.err and "(fe)" not in r.err, r.err
    status = planrun("status", "plan.yaml", cwd=tmp_path)
    assert said in status.out.splitlines(), status.out
    page = unescape(re.sub(r"<[^>]+>", "", (tmp_path / "report.html").read_text()))
    assert said in page
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props.get("counts") == said
