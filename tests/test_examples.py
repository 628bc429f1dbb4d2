"""examples/gotask: one small Python package built by a Taskfile and by the planrun plan that
replaces it, no longer than the Taskfile; both run here, and do the same."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, Result, answer_at_tty, assert_no_traceback, planrun

GOTASK = ROOT / "examples/gotask"
# The project's files, each named here for test_cli_basics' check that every example is run.
PROJECT_FILES = (
    "examples/gotask/Taskfile.yml",
    "examples/gotask/planrun.yaml",
    "examples/gotask/.env",
    "examples/gotask/.gitignore",
    "examples/gotask/src/greet/__init__.py",
    "examples/gotask/src/greet/__main__.py",
    "examples/gotask/tests/test_greet.py",
    "examples/gotask/tools/wheel.py",
)
# What a run in examples/gotask leaves there (its .gitignore): not part of the project.
BUILT = {".planrun", ".task", "dist", "build", "__pycache__"}
WHEEL = "dist/greet-0.3.1-py3-none-any.whl"
# `python` in the plan and the Taskfile is this interpreter.
STEP_ENV = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def meaningful_lines(path: Path) -> int:
    """Lines that say something: not blank, not only a comment."""
    return sum(1 for line in path.read_text().splitlines() if line.strip()[:1] not in ("", "#"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh copy of the example project (its runs write dist/, build/, .planrun/, .task/)."""
    copy = tmp_path / "greet"
    shutil.copytree(GOTASK, copy, ignore=shutil.ignore_patterns(*BUILT))
    files = [p for p in GOTASK.rglob("*") if p.is_file() and not BUILT & set(p.parts)]
    assert sorted(str(p.relative_to(ROOT)) for p in files) == sorted(PROJECT_FILES), (
        "a file was added to examples/gotask: name it in PROJECT_FILES and test it"
    )
    return copy


def run(project: Path, *args: str, tests_fail: bool = False) -> Result:
    r = planrun("run", "--output", "json", *args, cwd=project, env=STEP_ENV, timeout=120)
    if not tests_fail:  # failing unit tests print their tracebacks, shown as the step's output
        assert_no_traceback(r)
    return r


def statuses(r: Result) -> dict[str, str]:
    return {s["id"]: s["status"] for s in r.json["steps"]}


def wheel_version(path: Path) -> str:
    with zipfile.ZipFile(path) as zf:
        metadata = zf.read(f"greet-{path.name.split('-')[1]}.dist-info/METADATA").decode()
    return next(
        line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Version")
    )


def break_a_test(project: Path) -> None:
    init = project / "src/greet/__init__.py"
    init.write_text(init.read_text().replace('"Hello, ', '"Hi, '))


# ---- planrun ----------------------------------------------------------------------------------


def test_the_plan_is_no_longer_than_the_taskfile_it_replaces():
    taskfile = meaningful_lines(GOTASK / "Taskfile.yml")
    assert taskfile <= 46
    assert meaningful_lines(GOTASK / "planrun.yaml") <= taskfile


def test_the_default_target_builds_the_wheel_named_by_its_version_then_hits_the_cache(project):
    r = run(project)
    assert r.code == 0, r
    assert statuses(r) == {
        "lint": "succeeded",
        "lint[0]": "succeeded",
        "lint[1]": "succeeded",
        "test": "succeeded",
        "tidy": "succeeded",
        "wheel": "succeeded",
    }
    wheel = project / WHEEL
    assert wheel_version(wheel) == "0.3.1"
    built = wheel.read_bytes()
    assert not (project / "build/tmp").exists()  # the tests' scratch files are gone
    assert not (project / "build/index").exists()  # publish is not a default target

    # Nothing changed: every cacheable step is a hit; the cleanup runs again (it always does).
    r = run(project)
    assert r.code == 0, r
    assert statuses(r) == {
        "lint": "succeeded",  # its instances are the cached ones
        "lint[0]": "cached",
        "lint[1]": "cached",
        "test": "cached",
        "tidy": "succeeded",
        "wheel": "cached",
    }
    # A deleted output comes back from the cache, byte for byte.
    shutil.rmtree(project / "dist")
    r = run(project, "wheel")
    assert r.code == 0 and statuses(r)["wheel"] == "cached", r
    assert wheel.read_bytes() == built


def test_the_version_param_names_the_wheel(project):
    # A param is a string: 1.10 stays 1.10 (as a bare --var it would be the number 1.1).
    r = run(project, "wheel", "--var", "version=1.10")
    assert r.code == 0, r
    assert wheel_version(project / "dist/greet-1.10-py3-none-any.whl") == "1.10"


def test_the_cleanup_runs_after_the_tests_fail(project):
    break_a_test(project)
    r = run(project, tests_fail=True)
    assert r.code == 1 and r.json["reason"] == "step_failed", r
    steps = statuses(r)
    assert steps["test"] == "failed" and steps["tidy"] == "succeeded", r
    assert steps["wheel"] == "pending", r  # the abort started nothing else
    assert not (project / "build/tmp").exists()
    assert not (project / "dist").exists()


def test_words_after_a_double_dash_reach_the_tests(project):
    r = run(project, "test", "--", "-k", "logged")
    assert r.code == 0, r
    assert "Ran 1 test" in r.json["steps"][-1]["result"]["stderr"], r


def test_publish_asks_its_own_question_and_never_runs_unasked(project, monkeypatch):
    # No terminal to ask at: blocked (exit 5), nothing published.
    r = run(project, "publish")
    assert r.code == 5 and r.json["status"] == "blocked", r
    assert not (project / "build/index").exists()
    # At a terminal, the question is the step's text, rendered; "y" publishes.
    monkeypatch.setenv("PATH", STEP_ENV["PATH"])  # answer_at_tty's process has os.environ
    code, _, seen = answer_at_tty(project, ["run", "publish"], ["y"])
    assert code == 0, seen
    assert "Publish greet 0.3.1 to build/index?" in seen
    assert (project / "build/index/greet-0.3.1-py3-none-any.whl").is_file()


def test_publish_with_yes_copies_the_wheel_to_the_index_named_in_dotenv(project):
    r = run(project, "publish", "--yes")
    assert r.code == 0, r
    assert (project / "build/index/greet-0.3.1-py3-none-any.whl").read_bytes() == (
        project / WHEEL
    ).read_bytes()
    # The environment planrun runs in wins over the .env file.
    r = planrun("run", "publish", "--yes", cwd=project, env={**STEP_ENV, "INDEX_DIR": "elsewhere"})
    assert r.code == 0, r
    assert (project / "elsewhere/greet-0.3.1-py3-none-any.whl").is_file()


# ---- the Taskfile, when go-task is installed --------------------------------------------------


# go-task as the dev extra installs it (go-task-bin): beside this interpreter, whether or not
# its directory is on PATH (a pyenv interpreter's is reached through shims made by a rehash).
TASK = shutil.which("task", path=os.path.dirname(sys.executable)) or shutil.which("task")


def task(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert TASK is not None
    return subprocess.run(
        [TASK, *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        # go-task lets the environment win over the Taskfile's env: (planrun's plan env wins
        # over it): the PYTHONPATH these tests run with would hide the Taskfile's `src`.
        env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **STEP_ENV},
    )


needs_task = pytest.mark.skipif(
    TASK is None, reason="go-task is not installed (pip install go-task-bin)"
)


@needs_task
def test_the_taskfile_builds_the_same_wheel_and_cleans_up_the_same_way(project, tmp_path):
    by_planrun = tmp_path / "by-planrun"
    shutil.copytree(project, by_planrun)
    assert run(by_planrun).code == 0

    done = task(project)
    assert done.returncode == 0, done.stderr
    assert (project / WHEEL).read_bytes() == (by_planrun / WHEEL).read_bytes()
    assert not (project / "build/tmp").exists()
    again = task(project)
    assert again.returncode == 0 and 'Task "wheel" is up to date' in again.stderr, again.stderr

    blocked = task(project, "publish")  # no terminal: refused, as planrun blocks
    assert blocked.returncode != 0 and not (project / "build/index").exists()
    assert task(project, "publish", "--yes").returncode == 0
    assert (project / "build/index/greet-0.3.1-py3-none-any.whl").is_file()

    break_a_test(project)
    failed = task(project)
    assert failed.returncode != 0
    assert not (project / "build/tmp").exists()  # `defer` ran after the failure
