"""Shared fixtures: write a plan file, run the real `planrun` command in a directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)

    def __str__(self) -> str:  # shown by pytest when an assertion fails
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def planrun(
    *args: str,
    cwd: Path | str,
    timeout: float = 60,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> Result:
    """Run `python -m planrun ARGS` in `cwd` and capture everything."""
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "planrun", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        input=stdin if stdin is not None else "",
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def write(tmp_path: Path):  # type: ignore[no-untyped-def]
    """write("plan.yaml", yaml_text) -> path; dedents the text."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
        return path

    return _write


@pytest.fixture
def run(tmp_path: Path):  # type: ignore[no-untyped-def]
    """run(*args) -> Result, with tmp_path as the working directory."""

    def _run(*args: str, **kw: Any) -> Result:
        return planrun(*args, cwd=kw.pop("cwd", tmp_path), **kw)

    return _run


def assert_no_traceback(result: Result) -> None:
    assert "Traceback" not in result.err and "Traceback" not in result.out, str(result)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A real `dask scheduler` and two `dask worker` processes on 127.0.0.1, for the session."""
    pytest.importorskip("distributed")
    from tests.test_dask_executor import start_cluster, stop_cluster

    c = start_cluster(tmp_path_factory.mktemp("dask-cluster"))
    try:
        yield c
    finally:
        stop_cluster(c)


def spawn_planrun(*args: str, cwd: Path, **popen: Any) -> subprocess.Popen[Any]:
    """Start `python -m planrun ARGS` in `cwd` without waiting (to signal or kill it)."""
    return subprocess.Popen([sys.executable, "-m", "planrun", *args], cwd=cwd, **popen)


def wait_for_file(path: Path, timeout: float = 15, interval: float = 0.05) -> None:
    """Poll until `path` exists (a step's side effect shows the run got that far)."""
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(interval)
