"""Runs share no process-wide state: what one run records (report files it could not write, the
process groups of its commands) belongs to that run, and a command run through the library or
in-process leaves its caller's process as it was (no exit, no garbage-collector settings)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from planrun.run.procgroups import ProcessGroups
from planrun.run.runner import RunRequest, execute
from tests.conftest import planrun, processes_marked, python_ok, unique_sleep, wait_until

PLAN = "name: p\nsteps:\n  - {id: a, tool: echo, args: {value: 1}}\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_report_another_run_could_not_write_is_not_this_runs_failure(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PLAN)
    # A library run whose --events file cannot be written: its own failure, told to its caller.
    req = RunRequest("p.yaml", cwd=str(tmp_path), events="/dev/full", console=False)
    doc, _ = asyncio.run(execute(req))
    assert doc["status"] == "succeeded"
    # The next command in the same process wrote all its reports: it succeeds.
    result = planrun("run", "p.yaml", "-q", "--events", "e.jsonl", cwd=tmp_path)
    assert result.code == 0, result
    assert "/dev/full" not in result.err
    assert [f.split(":")[0] for f in req.report_failures.take()] == ["cannot write /dev/full"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_report_that_cannot_be_written_still_fails_the_command(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PLAN)
    result = planrun("run", "p.yaml", "-q", "--events", "/dev/full", cwd=tmp_path)
    assert result.code == 1, result
    assert "planrun: error: cannot write /dev/full" in result.err


def test_a_run_called_in_process_leaves_the_process_to_its_caller(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PLAN)
    code = (
        "import gc, json, sys\n"
        "from planrun.cli.commands import main\n"
        "before = gc.get_threshold()\n"
        "try:\n"
        "    main(['run', 'p.yaml', '-q', '--no-state'], prog_name='planrun')\n"
        "except SystemExit as exc:\n"
        "    print(json.dumps({'code': exc.code, 'gc_kept': gc.get_threshold() == before}))\n"
    )
    proc = python_ok("-c", code, cwd=tmp_path)
    assert json.loads(proc.stdout.splitlines()[-1]) == {"code": 0, "gc_kept": True}


def test_an_interrupt_signals_the_groups_of_its_own_run_only() -> None:
    sleeps = [unique_sleep(600), unique_sleep(600)]
    procs = [subprocess.Popen(["/bin/sh", "-c", cmd], start_new_session=True) for cmd in sleeps]
    try:
        mine, other = ProcessGroups(), ProcessGroups()
        mine.add(procs[0].pid)
        other.add(procs[1].pid)
        mine.interrupt(signal.SIGTERM)
        assert procs[0].wait(timeout=60) == -signal.SIGTERM  # a bound: it sleeps 600 s
        assert procs[1].poll() is None and other.stop_signal is None
        other.kill_all()
        wait_until(lambda: procs[1].poll() is not None, what="the other run's command to end")
        assert procs[1].returncode == -signal.SIGKILL
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


HANDLED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGPIPE")


@pytest.mark.parametrize(
    "plan",
    [PLAN, "steps:\n  - {id: bad, tool: shell, args: {cmd: 'exit 3'}}\n"],
    ids=["succeeds", "fails"],
)
def test_a_run_puts_back_the_signal_handlers_it_found(tmp_path: Path, plan: str) -> None:
    """A library caller's handlers (here: one of its own for each signal) are its handlers
    again once a command returns, whether the run succeeded or failed."""
    (tmp_path / "p.yaml").write_text(plan)
    code = (
        "import json, signal\n"
        "from planrun.cli.commands import main\n"
        f"names = {HANDLED!r}\n"
        "def mine(signum, frame): pass\n"
        "for n in names: signal.signal(getattr(signal, n), mine)\n"
        "try:\n"
        "    main(['run', 'p.yaml', '-q', '--no-state'], prog_name='planrun')\n"
        "except SystemExit as exc:\n"
        "    kept = [n for n in names if signal.getsignal(getattr(signal, n)) is mine]\n"
        "    print(json.dumps({'code': exc.code, 'kept': kept}))\n"
    )
    proc = python_ok("-c", code, cwd=tmp_path)
    found = json.loads(proc.stdout.splitlines()[-1])
    assert found["kept"] == list(HANDLED), found


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None, reason="distributed is not installed"
)
def test_a_run_that_lost_its_dask_scheduler_leaves_dasks_logging_as_it_found_it(
    tmp_path: Path,
) -> None:
    """planrun quiets Dask's client while its scheduler is gone (its reconnection attempts
    would log on planrun's stderr); once the command returns, the caller's `distributed.client`
    logger is as it was (it stayed at level CRITICAL for the rest of the process)."""
    from tests.test_dask_executor import start_cluster, stop_cluster

    (tmp_path / "cluster").mkdir()
    own = start_cluster(tmp_path / "cluster", n_workers=1)
    sleeper = unique_sleep(600)
    (tmp_path / "p.yaml").write_text(
        f"steps:\n  - {{id: a, tool: shell, args: {{cmd: 'touch started; {sleeper}'}}}}\n"
    )
    code = (
        "import json, logging, sys\n"
        "import distributed\n"
        "from planrun.cli.commands import main\n"
        "client = logging.getLogger('distributed.client')\n"
        "before = [client.level, len(client.filters)]\n"
        "try:\n"
        "    main(['run', 'p.yaml', '-q', '--no-state', '--address', sys.argv[1]],"
        " prog_name='planrun')\n"
        "except SystemExit as exc:\n"
        "    after = [client.level, len(client.filters)]\n"
        "    print(json.dumps({'code': exc.code, 'before': before, 'after': after}))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, own.address],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until((tmp_path / "started").exists, what="the step on the worker")
        own.procs[0].kill()  # the scheduler
        out, err = proc.communicate(timeout=120)  # a bound on a hang
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in processes_marked(sleeper):  # out of planrun's reach with the scheduler gone
            p.kill()
        stop_cluster(own)
    found = json.loads(out.splitlines()[-1])
    assert found["code"] == 1, err
    assert found["after"] == found["before"], found


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None, reason="distributed is not installed"
)
def test_a_run_on_its_own_local_dask_cluster_leaves_the_environment_as_it_found_it(
    tmp_path: Path,
) -> None:
    """Dask's nanny sets its workers' variables (OMP_NUM_THREADS=1, PYTHONHASHSEED, ...) in
    its own process's os.environ before it starts them: with no --address, that process is
    planrun's, and the caller's. They stayed after the run, in every command the caller
    started later (and in the tests run after tests/test_dask_executor.py's LocalCluster test)."""
    (tmp_path / "p.yaml").write_text(PLAN)
    code = (
        "import json, os\n"
        "from planrun.cli.commands import main\n"
        "before = dict(os.environ)\n"
        "try:\n"
        "    main(['run', 'p.yaml', '-q', '--no-state', '--executor', 'dask'], prog_name='planrun')\n"
        "except SystemExit as exc:\n"
        "    names = set(before) | set(os.environ)\n"
        "    changed = sorted(n for n in names if before.get(n) != os.environ.get(n))\n"
        "    print(json.dumps({'code': exc.code, 'changed': changed}))\n"
    )
    proc = python_ok("-c", code, cwd=tmp_path)
    assert json.loads(proc.stdout.splitlines()[-1]) == {"code": 0, "changed": []}


def test_a_runs_python_modules_are_its_own(tmp_path: Path) -> None:
    """Each run imports its `python` steps' modules afresh, and leaves sys.path as it found it:
    a second run in another directory called the first one's helpers.py (and every directory
    a run had imported from stayed on sys.path)."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "helpers.py").write_text(f"def f():\n    return {name!r}\n")
        (tmp_path / name / "p.yaml").write_text(
            "steps:\n  - {id: s, tool: python, args: {function: 'helpers:f'}}\n"
        )
    code = (
        "import json, os, sys\n"
        "import planrun\n"
        "path = list(sys.path)\n"
        "got = []\n"
        "for d in ('a', 'b', 'a'):\n"
        "    doc, _ = planrun.run_plan('p.yaml', cwd=os.path.abspath(d), no_state=True)\n"
        "    got.append(doc['steps'][0]['result'])\n"
        "print(json.dumps({'got': got, 'path_kept': sys.path == path,"
        " 'imported': 'helpers' in sys.modules}))\n"
    )
    proc = python_ok("-c", code, cwd=tmp_path)
    found = json.loads(proc.stdout.splitlines()[-1])
    assert found == {"got": ["a", "b", "a"], "path_kept": True, "imported": False}, found
