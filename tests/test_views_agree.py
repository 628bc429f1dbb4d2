"""One run, every view: `--output json`, `status` (text and JSON), `--events`, JUnit and the
HTML report list the same steps in the same order, with the same statuses and durations."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from tests.conftest import assert_no_traceback, planrun

SUB = """
name: child
steps:
  - id: grid
    matrix: {os: [linux, macos]}
    tool: echo
    args: {value: "${matrix.os}"}
  - {id: each, foreach: [1, 2], tool: echo, args: {value: "${item}"}}
"""

MIX = """
name: mix
steps:
  - {id: a, title: "Step A", tool: shell, args: {cmd: "echo a"}}
  - {id: s, tool: echo, args: {value: S}, when: "${false}"}
  - {id: c, tool: echo, args: {value: C}, cache: true}
  - {id: ig, tool: shell, args: {cmd: "exit 3"}, on_failure: ignore}
  - id: r
    tool: shell
    args: {cmd: "test -e flag || { touch flag; exit 1; }"}
    retries: 1
    retry_delay: 0.01
  - {id: m, matrix: {py: ["3.11", "3.12"]}, tool: echo, args: {value: "${matrix.py}"}}
  - {id: fe, foreach: [x, y], tool: echo, args: {value: "${item}"}}
  - {id: sp, tool: plan, args: {path: sub.yaml}}
  - {id: f, tool: shell, args: {cmd: "exit 1"}, on_failure: continue, depends_on: [a]}
  - {id: b, tool: echo, args: {value: 2}, depends_on: [f]}
"""


class _Rows(HTMLParser):
    """The report's steps (`data-step`), in page order, with their `data-status`."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, str | None] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        step = found.get("data-step")
        if step is not None:
            self.rows.setdefault(step, found.get("data-status"))


def _junit(path: Path) -> dict[str, tuple[str, float]]:
    """testcase name -> (its outcome, its time), in file order."""
    out: dict[str, tuple[str, float]] = {}
    for tc in ET.parse(path).iter("testcase"):
        kind = next(
            (k for k in ("failure", "skipped", "error") if tc.find(k) is not None), "passed"
        )
        out[str(tc.get("name"))] = (kind, float(tc.get("time") or 0))
    return out


def _mixed_run(tmp_path: Path) -> Any:
    (tmp_path / "plan.yaml").write_text(MIX.lstrip())
    (tmp_path / "sub.yaml").write_text(SUB.lstrip())
    assert planrun("run", "plan.yaml", "-j", "1", cwd=tmp_path).code == 1  # c stored
    (tmp_path / "flag").unlink()  # r fails once again, then succeeds
    r = planrun(
        "run", "plan.yaml", "-j", "1", "--output", "json", "--events", "ev.jsonl",
        "--junit", "j.xml", "--report", "r.html", cwd=tmp_path,
    )  # fmt: skip
    assert r.code == 1, r
    assert_no_traceback(r)
    return r


def test_every_view_lists_a_mixed_run_alike(tmp_path: Path) -> None:
    doc = _mixed_run(tmp_path).json
    order = [s["id"] for s in doc["steps"]]
    statuses = {s["id"]: s["status"] for s in doc["steps"]}
    assert order[:12] == [
        "a",
        "s",
        "c",
        "ig",
        "r",
        "m",
        "m[0]",
        "m[1]",
        "fe",
        "fe[0]",
        "fe[1]",
        "sp",
    ]
    assert order[12:] == [
        "sp/grid",
        "sp/grid[0]",
        "sp/grid[1]",
        "sp/each",
        "sp/each[0]",
        "sp/each[1]",
        "f",
        "b",
    ]
    # status --output json: the same document, from the state
    state = planrun("status", "plan.yaml", "--output", "json", cwd=tmp_path).json
    assert [s["id"] for s in state["steps"]] == order
    for mine, stored in zip(doc["steps"], state["steps"], strict=True):
        assert {k: stored[k] for k in ("status", "attempts", "duration_s", "error")} == {
            k: mine[k] for k in ("status", "attempts", "duration_s", "error")
        }, mine["id"]
    assert (state["status"], state["reason"], state["duration_s"]) == (
        doc["status"], doc["reason"], doc["duration_s"],
    )  # fmt: skip
    # status as text: the same rows in the same order
    text = planrun("status", "plan.yaml", cwd=tmp_path).out.splitlines()
    table = text[text.index(next(x for x in text if x.startswith("STEP"))) + 1 :]
    assert [row.split()[0] for row in table if row.strip()] == order
    # the events: each step's last word is its status
    last: dict[str, str] = {}
    for e in map(json.loads, (tmp_path / "ev.jsonl").read_text().splitlines()):
        if e.get("step") and e["event"] not in ("step.started", "step.retrying"):
            last[e["step"]] = e["status"]
    assert last == statuses
    # JUnit: one testcase per row, in the same order, each as its status maps
    junit = _junit(tmp_path / "j.xml")
    assert list(junit) == order
    outcome = {"failed": "failure", "skipped": "skipped"}
    assert {k: v[0] for k, v in junit.items()} == {
        k: outcome.get(v, "passed") for k, v in statuses.items()
    }
    for step in doc["steps"]:
        assert junit[step["id"]][1] == round(step["duration_s"] or 0.0, 3), step["id"]
    # the report: one row per step, in the same order, with the same status
    page = _Rows()
    page.feed((tmp_path / "r.html").read_text())
    assert page.rows == statuses and list(page.rows) == order


def test_every_view_shows_a_title_only_where_it_says_more_than_the_id(tmp_path: Path) -> None:
    """A step without a title is named by its id alone, a sub-plan's (`sp/grid`, whose own id
    `grid` is its title) as the plan's own: in the console, JUnit and the report alike."""
    r = _mixed_run(tmp_path)
    assert "a (Step A) succeeded" in r.err and "sp/grid (grid)" not in r.err
    out = {
        str(tc.get("name")): tc.findtext("system-out") or ""
        for tc in ET.parse(tmp_path / "j.xml").iter("testcase")
    }
    assert out["a"].splitlines()[0] == "Step A"
    assert not out["sp/grid"].startswith("grid"), out["sp/grid"]
    assert not out["sp/each[0]"].startswith("each"), out["sp/each[0]"]
    page = (tmp_path / "r.html").read_text()
    assert "a: Step A" in page
    assert "sp/grid: grid" not in page and "sp/each[0]: each" not in page
