"""`planrun run` arguments read without click: exactly what click would hand the command, or
nothing (then click reads them). Checked against click itself on many argument lists."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planrun.cli import main, run
from planrun.runargs import RUN_OPTIONS, read_run_args
from tests.conftest import planrun


def click_params(args: list[str]) -> dict[str, Any] | None:
    """What click passes to `run` for `args`, or None when click refuses them."""
    # Under the group's context, as the command line has it (click caches the help option a
    # command is first asked for with: without the group's `-h`, `run -h` would be lost).
    parent = click.Context(main, info_name="planrun", **main.context_settings)
    try:
        with run.make_context("run", list(args), parent=parent) as ctx:
            return dict(ctx.params)
    except (click.ClickException, click.exceptions.Exit):
        return None


PLAIN = [
    ["plan.yaml"],
    ["plan.yaml", "--quiet", "--no-state"],
    ["plan.yaml", "-j", "2", "-q", "-y"],
    ["--jobs=3", "plan.yaml", "build", "test"],
    ["plan.yaml", "--var", "a=1", "--var=b=x y", "--only", "s1", "--only", "s2"],
    ["--output", "json", "--dry-run", "--explain", "plan.yaml"],
    ["plan.yaml", "--events", "ev.jsonl", "--junit", "j.xml", "--state", "st.json"],
    ["plan.yaml", "--executor", "local", "--address", "tcp://h:1", "--planner", "./p"],
    ["plan.yaml", "--no-cache", "--cache-dir", "cache", "--keep-going", "--stream"],
    ["plan.yaml", "--resume", "--vars-file", "vars.yaml", "--mcp-config", "m.json"],
    [],
]

NOT_PLAIN = [
    ["plan.yaml", "--force"],  # an optional value: click decides
    ["plan.yaml", "--force", "s1"],
    ["plan.yaml", "-qy"],
    ["plan.yaml", "-j2"],
    ["plan.yaml", "-j", "0"],
    ["plan.yaml", "-j", "two"],
    ["plan.yaml", "--jobs"],
    ["plan.yaml", "--output", "xml"],
    ["plan.yaml", "--quiet=yes"],
    ["plan.yaml", "--frobnicate"],
    ["plan.yaml", "--help"],
    ["--", "plan.yaml"],
    ["plan.yaml", "--state", "adir"],  # a directory: click refuses it
    ["plan.yaml", "--cache-dir", "afile"],  # a file: click refuses it
]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")


@pytest.mark.parametrize("args", PLAIN, ids=lambda a: " ".join(a) or "no arguments")
def test_plain_arguments_are_read_as_click_reads_them(args: list[str]) -> None:
    ours = read_run_args(args)
    assert ours is not None
    assert ours == click_params(args)


@pytest.mark.parametrize("args", NOT_PLAIN, ids=" ".join)
def test_anything_else_is_left_to_click(args: list[str]) -> None:
    assert read_run_args(args) is None


WORDS = [
    *(d for opt in RUN_OPTIONS for d in opt.decls if d.startswith("-")),
    *(f"{d}=v" for opt in RUN_OPTIONS for d in opt.decls if d.startswith("--")),
    *("plan.yaml", "s1", "2", "0", "-1", "json", "text", "dask", "adir", "afile", "--", "-"),
    *("-qy", "-j2", "--jobs=4", "--output=json", "k=v", "", " 3", "²"),
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=8))
def test_whenever_we_read_arguments_click_reads_the_same(args: list[str]) -> None:
    ours = read_run_args(args)
    if ours is not None:
        assert ours == click_params(args), args


def test_a_plain_run_and_one_click_reads_behave_the_same(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(
        "name: p\nvariables: {x: 0}\nsteps:\n  - id: a\n    tool: echo\n    args: {value: '${x}'}\n"
    )
    fast = planrun(
        "run", "plan.yaml", "--var", "x=5", "--output", "json", "--no-state", cwd=tmp_path
    )
    # `-qy`: combined short flags are left to click; the run is otherwise the same.
    slow = planrun(
        "run", "plan.yaml", "--var", "x=5", "--output", "json", "--no-state", "-qy", cwd=tmp_path
    )
    assert fast.code == slow.code == 0, (fast, slow)
    assert fast.json["steps"][0]["result"] == slow.json["steps"][0]["result"] == 5
    bad = planrun("run", "plan.yaml", "-j", "0", cwd=tmp_path)
    assert bad.code == 2 and "Traceback" not in bad.err
    assert os.path.exists(tmp_path / "plan.yaml")
