"""The pre-commit hook `planrun-validate` (`.pre-commit-hooks.yaml`), run by the real
`pre-commit try-repo` against a snapshot of this checkout, in a throw-away git repository."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import planrun

ROOT = Path(__file__).resolve().parent.parent

VALID_PLAN = """\
steps:
  - id: hello
    tool: echo
    args: {value: hi}
"""
INVALID_PLAN = """\
steps:
  - id: hello
    tool: no_such_tool
"""


def git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def repo_from_worktree(dest: Path) -> Path:
    """A committed git repository holding this checkout's files as they are now (tracked and
    new, not ignored): what a user's `repo:` line would point at."""
    files = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    for name in filter(None, files.split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    git("init", "-q", "-b", "main", cwd=dest)
    git("add", "-A", cwd=dest)
    git("commit", "-q", "-m", "snapshot", cwd=dest)
    return dest


def test_manifest_declares_the_validate_hook() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = (h for h in hooks if h["id"] == "planrun-validate")
    assert hook["language"] == "python"
    assert hook["entry"] == "planrun validate"


@pytest.mark.slow
def test_try_repo_fails_an_invalid_plan_and_passes_the_valid_ones(tmp_path: Path) -> None:
    """One `pre-commit try-repo` over valid plans, an invalid one and YAML that is no plan:
    it exits 1 with the invalid plan's error alone (the valid plans gave none, the other YAML
    was not given to planrun). One call: try-repo installs planrun afresh each time."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (dev extras)")
    hook_repo = repo_from_worktree(tmp_path / "hook-repo")
    project = tmp_path / "project"
    project.mkdir()
    git("init", "-q", "-b", "main", cwd=project)
    (project / "planrun.yaml").write_text(VALID_PLAN)
    (project / "plans").mkdir()
    (project / "plans" / "deploy.yml").write_text(VALID_PLAN)
    (project / "plans" / "broken.yaml").write_text(INVALID_PLAN)
    # YAML that is no plan: the hook's file pattern leaves it alone.
    (project / "config").mkdir()
    (project / "config" / "settings.yaml").write_text("colour: blue\n")
    git("add", "-A", cwd=project)

    # Its own store, so no state in ~/.cache/pre-commit leaks in or out.
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    env.pop("PYTHONPATH", None)  # the hook runs the planrun pre-commit installed, not ours
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo)]
        + ["planrun-validate", "--all-files", "--color", "never", "--verbose"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    error_lines = [line for line in proc.stdout.splitlines() if ": error: " in line]
    assert error_lines == [
        "plans/broken.yaml:3:11: error: step 'hello': unknown tool 'no_such_tool'"
    ], out
    assert "Traceback" not in out
    assert "settings.yaml" not in out


def test_hook_skips_the_hidden_directories_planrun_list_skips(tmp_path: Path) -> None:
    """`planrun list` leaves out directories under plans/ whose names start with a dot; the
    hook, which checks what it shows, leaves them out too (files with such names stay)."""
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    pattern, exclude = re.compile(hook["files"]), re.compile(hook["exclude"])
    names = ["plans/.hidden/h.yaml", "plans/a/.b/c.yml", "plans/.d.yaml", "plans/a/b.yml"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("steps:\n  - {id: s, tool: echo, args: {value: 1}}\n")
    listed = {line.split()[0] for line in planrun("list", cwd=tmp_path).out.splitlines()}
    checked = {n for n in names if pattern.search(n) and not exclude.search(n)}
    assert listed == {"plans/.d.yaml", "plans/a/b.yml"}
    assert checked == listed


def test_hook_file_pattern_matches_plan_files_only() -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    pattern, exclude = re.compile(hook["files"]), re.compile(hook["exclude"])
    plans = ["planrun.yaml", "planrun.yml", "planrun.json", "sub/planrun.yaml"]
    plans += ["plans/ci.yaml", "plans/a/b.yml", "svc/plans/x.json"]
    others = ["config/settings.yaml", "docker-compose.yml", "plans.yaml", "myplanrun.yaml"]
    others += ["plans/readme.md", "package.json", ".planrun/plans/0123abcd.json"]
    others += ["sub/.planrun/plans/0123abcd.json"]

    def checked(path: str) -> bool:
        return bool(pattern.search(path)) and not exclude.search(path)

    assert [p for p in plans if not checked(p)] == []
    assert [p for p in others if checked(p)] == []
