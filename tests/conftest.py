"""Shared fixtures: write a plan file, run the real `planrun` command in a directory."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")


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


def wait_until(
    condition: Callable[[], T], timeout: float = 15, interval: float = 0.02, what: str = ""
) -> T:
    """Poll `condition` until it returns something truthy, and return that; fail on timeout.

    Tests wait on what they need to see (a file, a line, a process), never for a fixed time.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(interval)


def wait_for_file(path: Path, timeout: float = 15, interval: float = 0.02) -> None:
    """Wait until `path` exists (a step's side effect shows the run got that far)."""
    wait_until(path.exists, timeout, interval, f"{path} to exist")


def unique_mark() -> str:
    """A word that is unique to one test, to tag the commands it starts (`: MARK; cmd`)."""
    return f"planrun-test-{uuid.uuid4().hex[:12]}"


def processes_marked(mark: str) -> list[Any]:
    """Live (not zombie) processes whose command line contains `mark`."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and mark in " ".join(
                proc.info["cmdline"] or []
            ):
                found.append(proc)
    return found


def assert_no_process_left(mark: str, timeout: float = 10) -> None:
    """No process tagged with `mark` outlives the test (waits for them to go, then fails).

    Whatever is still alive at the deadline is killed, so one failure leaves nothing behind.
    """
    import psutil

    deadline = time.monotonic() + timeout
    left = processes_marked(mark)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = processes_marked(mark)
    if left:
        described = [(p.pid, " ".join(p.cmdline())) for p in left if p.is_running()]
        for proc in left:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        raise AssertionError(f"processes left behind: {described}")
