"""`--help` and `--version` come from stored texts (no click at start-up), which must stay what
click prints for the commands as they are today."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from planrun.helptext import TEXTS
from planrun.quickhelp import generate_texts
from tests.conftest import planrun, planrun_process, python_ok

REGENERATE = "planrun/helptext.py is stale: run `python -m planrun.quickhelp` and commit it"


def click_prints(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """What click itself prints for `planrun ARGS` (the click command, not the stored text)."""
    code = "from planrun.cli import main; main(prog_name='planrun')"
    return python_ok("-c", code, *args, cwd=cwd, env={**os.environ, **(env or {})}).stdout


def test_the_stored_texts_are_what_click_prints_for_every_command() -> None:
    assert generate_texts() == TEXTS, REGENERATE


@pytest.mark.parametrize(
    "args", [["--help"], ["-h"], ["run", "--help"], ["cache", "prune", "-h"], ["--version"]]
)
def test_the_command_prints_the_stored_text_without_importing_click(
    tmp_path: Path, args: list[str]
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = python_ok("-X", "importtime", "-m", "planrun", *args, cwd=tmp_path, env=env)
    assert proc.stdout == click_prints(*args, cwd=tmp_path)
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()}
    assert "planrun.quickhelp" in imported  # the measurement works
    assert "click" not in imported


def test_a_narrow_terminal_gets_clicks_own_wrapping(tmp_path: Path) -> None:
    narrow = {"COLUMNS": "60"}
    r = planrun("run", "--help", cwd=tmp_path, env=narrow)
    assert r.code == 0
    assert r.out == click_prints("run", "--help", cwd=tmp_path, env=narrow)
    assert r.out != TEXTS["run"]  # wrapped at 58 columns, not the stored 78


def test_help_among_other_arguments_still_goes_through_click(tmp_path: Path) -> None:
    r = planrun("run", "plan.yaml", "--help", cwd=tmp_path)
    assert r.code == 0 and r.out == TEXTS["run"], r
    r = planrun("frobnicate", "--help", cwd=tmp_path)
    assert r.code == 2 and "Traceback" not in r.err, r


def test_shell_completion_stays_clicks_whatever_the_arguments(tmp_path: Path) -> None:
    # With click's completion variable set, click answers (here: the bash script), never the
    # stored help nor the click-free run.
    for args in (["--help"], ["run", "plan.yaml"]):
        r = planrun_process(*args, cwd=tmp_path, env={"_PLANRUN_COMPLETE": "bash_source"})
        assert r.code == 0 and "_PLANRUN_COMPLETE" in r.out and "Usage:" not in r.out, r
