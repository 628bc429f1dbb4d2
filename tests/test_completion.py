"""Shell completion, driven the way bash drives it: COMP_WORDS / COMP_CWORD and _PLANRUN_COMPLETE."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import planrun

PLAN = """
steps:
  - {id: build, tool: echo, args: {value: 1}}
  - {id: bench, tool: echo, args: {value: 1}}
  - {id: test, tool: echo, args: {value: 1}}
"""


def complete(cwd, line: str) -> list[str]:
    """What `planrun LINE<TAB>` offers (the last word is the one being completed)."""
    words = ["planrun", *line.split(" ")]
    r = planrun(
        cwd=cwd,
        env={
            "_PLANRUN_COMPLETE": "bash_complete",
            "COMP_WORDS": " ".join(words),
            "COMP_CWORD": str(len(words) - 1),
        },
    )
    assert r.code == 0, r
    return [line.split(",", 1)[1] for line in r.out.splitlines() if "," in line]


def test_commands_and_options(tmp_path):
    assert {"run", "resume", "report", "completion", "init", "list"} <= set(complete(tmp_path, ""))
    assert {"--only", "--report", "--dry-run"} <= set(complete(tmp_path, "run --"))


def test_step_ids_of_the_default_plan_as_targets_and_after_only(tmp_path):
    (tmp_path / "planrun.yaml").write_text(PLAN)
    assert complete(tmp_path, "run b") == ["build", "bench"]
    assert complete(tmp_path, "run --only t") == ["test"]
    assert complete(tmp_path, "run build t") == ["test"]


def test_run_offers_step_ids_not_directories_until_the_word_looks_like_a_path(tmp_path):
    (tmp_path / "planrun.yaml").write_text(PLAN)
    (tmp_path / "ci.yaml").write_text("steps: []\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "build-logs").mkdir()
    assert complete(tmp_path, "run ") == ["build", "bench", "test"]
    assert complete(tmp_path, "run b") == ["build", "bench"]
    assert complete(tmp_path, "run ./") == [
        "./build-logs/",
        "./ci.yaml",
        "./planrun.yaml",
        "./src/",
    ]
    assert complete(tmp_path, "run src/") == []
    assert complete(tmp_path, "run ci") == ["ci.yaml"]  # no step id starts so: plan files


def test_run_in_a_subdirectory_offers_the_step_ids_of_the_plan_above(tmp_path):
    (tmp_path / "planrun.yaml").write_text(PLAN)
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert complete(tmp_path / "a" / "b", "run ") == ["build", "bench", "test"]
    assert complete(tmp_path / "a" / "b", "run --only t") == ["test"]


def test_step_ids_of_the_plan_on_the_command_line(tmp_path):
    (tmp_path / "ci.yaml").write_text("steps: [{id: deploy, tool: echo, args: {value: 1}}]\n")
    (tmp_path / "planrun.yaml").write_text(PLAN)
    assert complete(tmp_path, "run ci.yaml ") == ["deploy"]
    assert complete(tmp_path, "run ci.yaml --only d") == ["deploy"]
    assert complete(tmp_path, "-C sub run ") == []  # no plan in sub/ (no such dir): nothing


def test_plan_files(tmp_path):
    (tmp_path / "ci.yaml").write_text("steps: []\n")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "nightly.yml").write_text("steps: []\n")
    assert complete(tmp_path, "validate ") == ["ci.yaml", "plans/"]
    assert complete(tmp_path, "graph plans/") == ["plans/nightly.yml"]
    assert complete(tmp_path, "run c") == ["ci.yaml"]


def test_a_broken_plan_completes_nothing_and_never_fails(tmp_path):
    (tmp_path / "planrun.yaml").write_text("steps: [{id: a\n")
    assert complete(tmp_path, "run --only ") == []


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(tmp_path, shell):
    r = planrun("completion", shell, cwd=tmp_path)
    assert r.code == 0 and "_PLANRUN_COMPLETE" in r.out, r
    assert planrun("completion", "tcsh", cwd=tmp_path).code == 2


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_script_loads_and_completes_in_bash(tmp_path):
    """The printed script, sourced in a real bash, fills COMPREPLY with step ids."""
    (tmp_path / "planrun.yaml").write_text(PLAN)
    script = planrun("completion", "bash", cwd=tmp_path).out
    (tmp_path / "planrun-completion.bash").write_text(script)
    import sys

    shim = tmp_path / "bin" / "planrun"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m planrun "$@"\n')
    shim.chmod(0o755)
    test = (
        "source ./planrun-completion.bash\n"
        "COMP_WORDS=(planrun run --only b); COMP_CWORD=3\n"
        "_planrun_completion planrun\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    import os

    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", test], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["build", "bench"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_run_targets_without_directories(tmp_path):
    """In a real bash, `planrun run <TAB>` in a subdirectory: the step ids of the plan above."""
    import os
    import sys

    (tmp_path / "planrun.yaml").write_text(PLAN)
    here = tmp_path / "pkg"
    (here / "src").mkdir(parents=True)
    (here / "planrun-completion.bash").write_text(planrun("completion", "bash", cwd=here).out)
    shim = tmp_path / "bin" / "planrun"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m planrun "$@"\n')
    shim.chmod(0o755)
    test = (
        "source ./planrun-completion.bash\n"
        "COMP_WORDS=(planrun run ''); COMP_CWORD=2\n"
        "_planrun_completion planrun\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", test], cwd=here, capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["build", "bench", "test"]
