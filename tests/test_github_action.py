"""The composite GitHub Action (`action.yml`): valid metadata for GitHub, inputs reaching the shell
only through `env:`, and its run script, executed here with bash as the runner executes it,
running the real planrun."""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "tests" / "data" / "github-action.json"
# What GitHub's runner runs for `shell: bash` (its documented default options).
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]

PLAN = """\
variables: {who: nobody, n: 0}
steps:
  - id: build
    tool: write_file
    args: {path: built.txt, content: "built for ${who} x${n}"}
  - id: test
    tool: shell
    depends_on: [build]
    args: {cmd: "cat built.txt"}
  - id: deploy
    tool: shell
    args: {cmd: "touch deployed.txt"}
"""


def action() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "action.yml").read_text())


def step(step_id: str) -> dict[str, Any]:
    (found,) = (s for s in action()["runs"]["steps"] if s.get("id") == step_id)
    return found


def test_action_metadata_is_what_github_accepts() -> None:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema)
    meta = action()
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(meta)]
    assert errors == []
    assert meta["runs"]["using"] == "composite"
    # The schema bites: an input without a description is refused.
    broken = copy.deepcopy(meta)
    del broken["inputs"]["command"]["description"]
    assert not validator.is_valid(broken)


def test_inputs_reach_the_shell_only_through_env() -> None:
    """`${{ inputs.x }}` inside `run:` would be pasted into the script before bash reads it: a
    plan name like `$(curl …)` would run. Every input goes through `env:` instead."""
    runs = [s["run"] for s in action()["runs"]["steps"] if "run" in s]
    assert runs, "the action has no shell step"
    assert [r for r in runs if "${{" in r] == []
    token_env = {
        name: value
        for s in action()["runs"]["steps"]
        for name, value in (s.get("env") or {}).items()
        if "remote-cache-token" in str(value)
    }
    assert list(token_env) == ["INPUT_REMOTE_CACHE_TOKEN"]


def test_artifacts_are_uploaded_even_when_the_run_failed() -> None:
    uploads = [s for s in action()["runs"]["steps"] if "upload-artifact" in s.get("uses", "")]
    (upload,) = uploads
    assert upload["if"].startswith("always()")
    paths = upload["with"]["path"]
    assert "report.html" in paths and "junit.xml" in paths


def evaluate(value: str, inputs: dict[str, str], runner_temp: Path) -> str:
    """The few `${{ … }}` expressions the action's env uses, as the runner evaluates them."""

    def one(match: re.Match[str]) -> str:
        expr = match.group(1)
        if expr.startswith("inputs."):
            return inputs[expr.removeprefix("inputs.")]
        if expr == "runner.temp":
            return str(runner_temp)
        if expr == "github.action_path":
            return str(ROOT)
        raise AssertionError(f"expression this test does not model: {expr}")

    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", one, str(value))


def run_step(
    workspace: Path,
    path_dir: Path | None = None,
    job_env: dict[str, str] | None = None,
    **given: str,
) -> tuple[subprocess.CompletedProcess[str], dict[str, str], Path]:
    """Run the action's `planrun` step with bash in `workspace`, its env built from the
    inputs (defaults, then `given`) as the runner builds it: (process, GITHUB_OUTPUT, outdir)."""
    meta = action()
    inputs = {name: str(spec.get("default", "")) for name, spec in meta["inputs"].items()}
    inputs.update({name.replace("_", "-"): value for name, value in given.items()})
    runner_temp = workspace.parent / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    planrun_step = step("planrun")
    env = {k: evaluate(v, inputs, runner_temp) for k, v in planrun_step["env"].items()}
    bindir = path_dir or workspace.parent / "bin"
    if path_dir is None:  # `planrun` as pip installs it: this interpreter, this checkout
        bindir.mkdir(exist_ok=True)
        (bindir / "planrun").write_text(f'#!/bin/sh\nexec {sys.executable} -m planrun "$@"\n')
        (bindir / "planrun").chmod(0o755)
    output_file = runner_temp / "github_output"
    output_file.write_text("")
    script = runner_temp / "step.sh"
    script.write_text(planrun_step["run"])
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PLANRUN_", "INPUT_"))}
    proc = subprocess.run(
        [*BASH, str(script)],
        cwd=workspace,
        env={
            **base,
            "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT),
            "GITHUB_OUTPUT": str(output_file),
            "RUNNER_TEMP": str(runner_temp),
            **(job_env or {}),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    outputs = dict(
        line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line
    )
    return proc, outputs, runner_temp / "planrun"


def command_line(out: str) -> list[str]:
    """The command the step says it runs (its `+ planrun …` line), split as bash would."""
    (line,) = [ln for ln in out.splitlines() if ln.startswith("+ planrun")]
    return shlex.split(line.removeprefix("+ "))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    (ws / "build.yaml").write_text(PLAN)
    return ws


def test_run_with_targets_and_vars_runs_planrun_for_real(workspace: Path) -> None:
    proc, outputs, outdir = run_step(
        workspace,
        command="run",
        plan="build.yaml",
        targets="test\n",
        vars="who=world $(touch pwned)\r\nn=3\n\n",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert command_line(proc.stdout) == [
        "planrun",
        "run",
        "build.yaml",
        "--only",
        "test",
        "--var",
        "who=world $(touch pwned)",
        "--var",
        "n=3",
        "--junit",
        str(outdir / "junit.xml"),
        "--report",
        str(outdir / "report.html"),
    ]
    assert (workspace / "built.txt").read_text() == "built for world $(touch pwned) x3"
    assert not (workspace / "pwned").exists() and not (workspace / "deployed.txt").exists()
    assert outputs["exit-code"] == "0"
    cases = ET.parse(outdir / "junit.xml").getroot().iter("testcase")
    assert sorted(c.get("name") or "" for c in cases) == ["build", "test"]
    assert (outdir / "report.html").read_text().lstrip().lower().startswith("<!doctype html")


def test_a_failed_run_fails_the_step_with_planrun_exit_code(workspace: Path) -> None:
    (workspace / "build.yaml").write_text(PLAN.replace("cat built.txt", "exit 7"))
    proc, outputs, outdir = run_step(workspace, command="run", plan="build.yaml")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert outputs["exit-code"] == "1"
    assert (outdir / "junit.xml").exists() and (outdir / "report.html").exists()


def test_validate_reports_github_annotations_and_exit_3(workspace: Path) -> None:
    (workspace / "planrun.yaml").write_text("steps:\n  - id: a\n    tool: no_such_tool\n")
    proc, outputs, _ = run_step(workspace, command="validate")
    assert command_line(proc.stdout) == ["planrun", "validate", "--format", "github"]
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert outputs["exit-code"] == "3"
    assert "::error file=planrun.yaml,line=3,col=11::" in proc.stdout


def test_an_unknown_command_is_one_line_and_exit_2(workspace: Path) -> None:
    proc, outputs, _ = run_step(workspace, command="deploy; rm -rf /")
    assert proc.returncode == 2
    assert outputs["exit-code"] == "2"
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_remote_cache_settings_and_token_go_by_env_never_argv(workspace: Path) -> None:
    """A stand-in `planrun` records what it was given: the token only in
    PLANRUN_REMOTE_CACHE_TOKEN, never in argv, nor left in the INPUT_ variable."""
    bindir = workspace.parent / "recorder"
    bindir.mkdir()
    record = workspace.parent / "record.json"
    (bindir / "planrun").write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ)}}, open({str(record)!r}, 'w'))\n"
    )
    (bindir / "planrun").chmod(0o755)
    token, key = "tok-SECRET-123", "sign-SECRET-456"
    proc, outputs, _ = run_step(
        workspace,
        path_dir=bindir,
        command="run",
        remote_cache="https://cache.example.invalid/planrun",
        remote_cache_read_only="true",
        remote_cache_token=token,
        cache_signing_key=key,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = json.loads(record.read_text())
    env = seen["env"]
    assert env["PLANRUN_REMOTE_CACHE"] == "https://cache.example.invalid/planrun"
    assert env["PLANRUN_REMOTE_CACHE_READ_ONLY"] == "1"
    assert env["PLANRUN_REMOTE_CACHE_TOKEN"] == token
    assert env["PLANRUN_CACHE_SIGNING_KEY"] == key
    others = {k: v for k, v in env.items() if k not in ("PLANRUN_REMOTE_CACHE_TOKEN",)}
    assert [k for k, v in others.items() if token in v] == []
    assert [a for a in seen["argv"] if token in a or key in a] == []
    assert token not in proc.stdout + proc.stderr


def test_empty_remote_inputs_leave_the_job_environment_alone(workspace: Path) -> None:
    """An input left empty sets nothing, so a job-level PLANRUN_REMOTE_CACHE still counts."""
    bindir = workspace.parent / "recorder"
    bindir.mkdir()
    record = workspace.parent / "record.json"
    (bindir / "planrun").write_text(
        f"#!{sys.executable}\nimport json, os\n"
        f"json.dump(dict(os.environ), open({str(record)!r}, 'w'))\n"
    )
    (bindir / "planrun").chmod(0o755)
    job_env = {"PLANRUN_REMOTE_CACHE": "https://job.example.invalid/c"}
    proc, _, _ = run_step(workspace, path_dir=bindir, job_env=job_env, command="run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = json.loads(record.read_text())
    names = ("PLANRUN_REMOTE_CACHE", "PLANRUN_REMOTE_CACHE_READ_ONLY")
    names += ("PLANRUN_REMOTE_CACHE_TOKEN", "PLANRUN_CACHE_SIGNING_KEY")
    assert {k: env[k] for k in names if k in env} == job_env


def recorded_env(workspace: Path, **given: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    """Run the step with a stand-in `planrun` that records its environment: (process, the
    environment it got, or None when it did not run)."""
    bindir = workspace.parent / "recorder"
    bindir.mkdir(exist_ok=True)
    record = workspace.parent / "record.json"
    record.unlink(missing_ok=True)
    (bindir / "planrun").write_text(
        f"#!{sys.executable}\nimport json, os\n"
        f"json.dump(dict(os.environ), open({str(record)!r}, 'w'))\n"
    )
    (bindir / "planrun").chmod(0o755)
    proc, _, _ = run_step(workspace, path_dir=bindir, command="run", **given)
    return proc, json.loads(record.read_text()) if record.exists() else None


@pytest.mark.parametrize("value", ["true", "True", "TRUE", "1", "yes", " true "])
def test_read_only_input_spelt_any_usual_way_is_read_only(workspace: Path, value: str) -> None:
    proc, env = recorded_env(workspace, remote_cache_read_only=value)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert env["PLANRUN_REMOTE_CACHE_READ_ONLY"] == "1"


@pytest.mark.parametrize("value", ["false", "False", "0", "no", ""])
def test_read_only_input_off_leaves_the_job_setting(workspace: Path, value: str) -> None:
    proc, env = recorded_env(workspace, remote_cache_read_only=value)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PLANRUN_REMOTE_CACHE_READ_ONLY" not in env


@pytest.mark.parametrize("value", ["flase", "ture", "pull_request"])
def test_a_read_only_input_neither_true_nor_false_stops_the_step(
    workspace: Path, value: str
) -> None:
    """A misspelt guard must not let a pull-request build upload: exit 2, one annotation,
    planrun never started."""
    proc, env = recorded_env(workspace, remote_cache_read_only=value)
    assert proc.returncode == 2 and env is None, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("::error::") and "remote-cache-read-only" in line


def test_a_password_in_a_url_given_in_args_is_not_in_the_printed_command(
    workspace: Path,
) -> None:
    """`args` may name the remote with a user and password (`--remote-cache=https://ci:PW@…`):
    planrun gets the URL whole, the `+ planrun …` line shows it without them."""
    bindir = workspace.parent / "recorder"
    bindir.mkdir()
    record = workspace.parent / "argv.json"
    (bindir / "planrun").write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n"
    )
    (bindir / "planrun").chmod(0o755)
    url = "https://ci:s3cretPW@cache.example.invalid/planrun"
    args = f"--remote-cache={url}\n--remote-cache\n{url}\n"
    proc, _, _ = run_step(workspace, path_dir=bindir, command="run", args=args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    argv = json.loads(record.read_text())
    assert f"--remote-cache={url}" in argv and url in argv
    assert "s3cretPW" not in proc.stdout + proc.stderr
    shown = command_line(proc.stdout)
    assert "--remote-cache=https://cache.example.invalid/planrun" in shown
    assert "https://cache.example.invalid/planrun" in shown
