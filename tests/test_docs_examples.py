"""Every plan shown in README.md and docs/ is checked here, so a page cannot go stale silently.

A fenced YAML block that shows planrun's format says what it is after `yaml` on its opening line
(a renderer reads only the first word):

    ```yaml plan       a whole plan: `planrun validate` accepts it
    ```yaml plan run   a whole plan, cheap and portable: it also runs, and succeeds
    ```yaml steps      one or more steps (`- id: ...`): validated as the plan's `steps:`
    ```yaml keys       plan-level keys: validated as a plan with those keys and no steps

`given=NAME,...` names variables that the text around the block supplies (given as `--var`).
A YAML block that is not planrun's format (a CI workflow, a pre-commit config) carries no mark;
one that looks like a plan (a top-level `steps:`, or a list of `- id:` steps) must carry one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from tests.conftest import ROOT, assert_no_traceback, planrun

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.S | re.M)
KINDS = {"plan", "steps", "keys"}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    kind: str | None
    runs: bool
    given: tuple[str, ...]
    text: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def yaml_blocks() -> list[Block]:
    blocks = []
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            if m.group(1) != "yaml":
                continue
            words = m.group(2).split()
            given = next(
                (w.split("=", 1)[1].split(",") for w in words if w.startswith("given=")), []
            )
            kind = next((w for w in words if w in KINDS), None)
            blocks.append(
                Block(
                    page=str(page.relative_to(ROOT)),
                    line=text.count("\n", 0, m.start()) + 1,
                    kind=kind,
                    runs="run" in words,
                    given=tuple(given),
                    text=m.group(3),
                )
            )
    return blocks


BLOCKS = yaml_blocks()
MARKED = [b for b in BLOCKS if b.kind]


def looks_like_a_plan(block: Block) -> bool:
    return bool(re.search(r"^steps:|^ {0,2}- id:", block.text, re.M))


def plan_text(block: Block) -> str:
    if block.kind == "steps":
        return "steps:\n" + block.text
    if block.kind == "keys":
        return block.text + "steps: []\n"
    return block.text


def test_every_plan_on_a_page_is_marked():
    unmarked = [str(b) for b in BLOCKS if not b.kind and looks_like_a_plan(b)]
    assert unmarked == [], "mark each as ```yaml plan|steps|keys (tests/test_docs_examples.py)"
    assert [str(b) for b in MARKED if b.kind != "plan" and b.runs] == []  # only whole plans run


@pytest.mark.parametrize("block", MARKED, ids=str)
def test_the_plan_on_the_page_is_valid(block, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_text(block))
    given = [arg for name in block.given for arg in ("--var", f"{name}=x")]
    r = planrun("validate", str(plan), *given, cwd=tmp_path)
    assert_no_traceback(r)
    # `steps: []` is valid with a warning (the plan has no steps); anything else is the page's.
    assert r.code == 0 and "error" not in r.out, f"{block}\n{r}"


@pytest.mark.parametrize("block", [b for b in MARKED if b.runs], ids=str)
def test_the_plan_on_the_page_runs(block, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_text(block))
    r = planrun("run", str(plan), "--output", "json", "--no-state", cwd=tmp_path)
    assert_no_traceback(r)
    assert r.code == 0 and r.json["status"] == "succeeded", f"{block}\n{r}"
