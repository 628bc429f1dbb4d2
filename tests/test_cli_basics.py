"""The CLI surface: help and exit codes, start-up imports, `schema`, and every example plan run for real."""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import ROOT, assert_no_traceback, planrun, serve_http

EXAMPLES = ROOT / "examples"
PLANS = ROOT / "plans"

# ---- help, exit codes, start-up ----------------------------------------------------------


@pytest.mark.e2e  # a real `python -m planrun` process
def test_help_shows_every_command_and_the_exit_code_table(run):
    r = run("--help")
    assert r.code == 0, r
    for command in (
        "run",
        "resume",
        "validate",
        "graph",
        "status",
        "list",
        "schema",
        "tools",
        "mcp",
    ):
        assert f"  {command} " in r.out, (command, r.out)
    table = r.out[r.out.index("Exit codes:") :]
    for code, words in [
        ("0", "success"),
        ("1", "the run failed"),
        ("2", "usage error"),
        ("3", "invalid plan"),
        ("4", "state error"),
        ("5", "blocked"),
        ("130", "interrupted"),
    ]:
        assert any(line.split()[:1] == [code] and words in line for line in table.splitlines()), (
            code,
            table,
        )


@pytest.mark.parametrize(
    "command", ["run", "resume", "validate", "graph", "status", "list", "schema", "tools", "mcp"]
)
def test_every_command_has_help(run, command):
    r = run(command, "--help")
    assert r.code == 0 and "Usage:" in r.out, r


def test_help_imports_no_heavy_library(tmp_path):
    """`planrun --help` must stay fast: pydantic, jinja2, mcp, rich, httpx2... load lazily."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "planrun", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "planrun" in imported  # the measurement works
    heavy = {
        "pydantic",
        "pydantic_core",
        "jinja2",
        "mcp",
        "rich",
        "httpx",
        "httpx2",
        "dask",
        "distributed",
        "anyio",
        "yaml",
        "jsonschema",
    }
    assert not imported & heavy, sorted(imported & heavy)


def test_help_imports_checked_through_sys_modules(tmp_path):
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom planrun.cli.commands import main\n"
        "r = CliRunner().invoke(main, ['--help'])\nassert r.exit_code == 0, r.output\n"
        "print(' '.join(sorted(m for m in sys.modules if '.' not in m)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stdout.split())
    assert not loaded & {"pydantic", "jinja2", "mcp", "rich", "httpx", "httpx2", "dask"}, loaded


def test_version(run):
    r = run("--version")
    assert r.code == 0 and r.out.startswith("planrun, version "), r


@pytest.mark.e2e  # a real `python -m planrun` process
def test_help_among_other_arguments_and_of_an_unknown_command(run):
    r = run("run", "plan.yaml", "--help")
    assert r.code == 0 and r.out.startswith("Usage: planrun run [OPTIONS] [PLAN] [ID]..."), r
    r = run("frobnicate", "--help")
    assert r.code == 2 and r.err.strip() and not r.out, r
    assert_no_traceback(r)


@pytest.mark.e2e  # a real `python -m planrun` process
def test_a_misspelt_command_is_a_usage_error_naming_the_closest_command(run):
    """The group loads a command only when asked for it; a name it does not know is still
    compared with every command's name."""
    r = run("rnu")
    assert r.code == 2 and "'rnu'" in r.err and "'run'" in r.err, r
    r = run("statsu", "plan.yaml")
    assert r.code == 2 and "'status'" in r.err, r


def test_help_into_a_closed_pipe_exits_1_quietly(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # `planrun --help | head -0`: no reader at all
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "planrun", "--help"],
            cwd=tmp_path,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr


def test_run_options_in_every_spelling(run, tmp_path):  # click reads them alike in process
    (tmp_path / "plan.yaml").write_text(
        "name: p\nvariables: {x: 0}\nsteps:\n  - id: a\n    tool: echo\n    args: {value: '${x}'}\n"
    )
    for spelling in (
        ["--var", "x=5", "-j", "2", "-q", "-y"],
        ["--var=x=5", "--jobs=2", "-qy"],
        ["-qyj", "2", "--var", "x=5"],
    ):
        r = run("run", "plan.yaml", "--output", "json", "--no-state", *spelling)
        assert r.code == 0 and r.json["steps"][0]["result"] == 5, (spelling, r)
    for bad in (["-j", "0"], ["--jobs"], ["--output", "xml"], ["--state", "."], ["--quiet=yes"]):
        r = run("run", "plan.yaml", *bad)
        assert r.code == 2 and r.err.strip() and not r.out, (bad, r)
        assert_no_traceback(r)


@pytest.mark.e2e  # a real `python -m planrun` process
def test_shell_completion_answers_whatever_the_other_arguments(run):
    for args in (["--help"], ["run", "plan.yaml"], ["--version"]):
        r = run(*args, env={"_PLANRUN_COMPLETE": "bash_source"})
        assert r.code == 0 and "_PLANRUN_COMPLETE" in r.out and "Usage:" not in r.out, r


@pytest.mark.slow  # a real process per command
@pytest.mark.e2e  # a real `python -m planrun` process
def test_bad_option_and_unknown_command_exit_2(run):
    for args in (
        ["--frobnicate"],
        ["frobnicate"],
        ["validate"],
        ["graph"],
        ["-C", "/nonexistent/dir", "schema"],
    ):
        r = run(*args)
        assert r.code == 2, (args, r)
        assert_no_traceback(r)


@pytest.mark.e2e  # a real `python -m planrun` process
def test_dash_C_changes_the_working_directory(run):
    r = run("-C", str(EXAMPLES), "validate", "diamond.yaml", "subplan.yaml")
    assert r.code == 0, r


# ---- schema -------------------------------------------------------------------------------


@functools.cache
def _schema() -> dict:
    r = planrun("schema", cwd=ROOT)
    assert r.code == 0, r
    return json.loads(r.out)


def test_schema_is_draft_2020_12():
    schema = _schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "steps" in schema["properties"] and schema["additionalProperties"] is False


def _plan_files() -> list[Path]:
    return sorted([*EXAMPLES.rglob("*.yaml"), *PLANS.glob("*.yaml")])


@pytest.mark.parametrize("path", _plan_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_and_plan_matches_the_schema(path):
    validator = jsonschema.Draft202012Validator(_schema())
    errors = [
        f"{list(e.absolute_path)}: {e.message}"
        for e in validator.iter_errors(yaml.safe_load(path.read_text()))
    ]
    assert errors == []


def test_schema_accepts_mcp_cli_plans_and_rejects_what_validate_rejects():
    validator = jsonschema.Draft202012Validator(_schema())
    mcp_cli = {
        "id": "p",
        "title": "T",
        "variables": {"x": 1},
        "steps": [
            {
                "index": 1,
                "title": "a",
                "tool": "echo",
                "args": {},
                "depends_on": [],
                "result_variable": "r",
            },
            {"index": "2", "title": "b", "tool": "echo", "depends_on": [1]},
        ],
    }
    assert list(validator.iter_errors(mcp_cli)) == []
    ok_step = {"id": "a", "tool": "echo", "timeout": "1m30s", "retry_delay": 0.5}
    assert list(validator.iter_errors({"steps": [ok_step]})) == []
    for bad in (
        {"steps": [{"id": "a", "tool": "echo", "depnds_on": []}]},
        {"steps": [{"id": "a", "tool": "echo", "on_failure": "explode"}]},
        {"steps": [{"id": "a", "tool": "echo", "timeout": "5 minutes"}]},
        {"steps": [{"id": "a b", "tool": "echo"}]},
        {"steps": [{"id": "a"}]},
        {"version": 2, "steps": []},
        {"defaults": {"timeot": 1}, "steps": []},
    ):
        assert list(validator.iter_errors(bad)), bad


# ---- examples: each one validated and run ----------------------------------------------------


@pytest.fixture
def http_server() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 serving examples/ (what http.yaml's comment suggests)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(EXAMPLES))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    with serve_http(handler) as url:
        yield url


def _run_example(*args: str, cwd: Path) -> dict:
    r = planrun("run", "--no-state", "--output", "json", *args, cwd=cwd, timeout=60)
    assert_no_traceback(r)
    assert r.code == 0, r
    doc = r.json
    assert doc["status"] == "succeeded" and doc["reason"] == "completed", r
    return doc


def _steps(doc: dict) -> dict[str, dict]:
    return {s["id"]: s for s in doc["steps"]}


EXERCISED: set[str] = set()


def exercises(*names: str):  # type: ignore[no-untyped-def]
    """Mark the example files a test runs, for test_every_example_file_is_exercised."""
    EXERCISED.update(names)
    return lambda fn: fn


@pytest.mark.parametrize("path", sorted(EXAMPLES.rglob("*.yaml")), ids=lambda p: p.name)
def test_example_validates(path):
    if path.name == "planrun.yaml":  # a project's default plan: validated where it is run
        r = planrun("validate", cwd=path.parent)
    else:
        r = planrun("validate", str(path.relative_to(ROOT)), cwd=ROOT)
    assert r.code == 0 and r.out == "", r


@pytest.mark.e2e  # a real `python -m planrun` process
@exercises("hello.yaml")
def test_example_hello(tmp_path):
    doc = _run_example(str(EXAMPLES / "hello.yaml"), "--var", "who=tests", cwd=tmp_path)
    assert doc["variables"]["greeting"] == "Hello, tests!"


@exercises("diamond.yaml")
def test_example_diamond(tmp_path):
    doc = _run_example(str(EXAMPLES / "diamond.yaml"), cwd=tmp_path)
    assert _steps(doc)["report"]["result"] == "lint succeeded, test succeeded"
    graph = planrun("graph", str(EXAMPLES / "diamond.yaml"), "--format", "json", cwd=tmp_path).json
    assert graph["waves"] == [["fetch"], ["lint", "test"], ["report"]]


@exercises("dataflow.yaml")
def test_example_dataflow(tmp_path):
    path = str(EXAMPLES / "dataflow.yaml")
    doc = _run_example(path, cwd=tmp_path)
    assert _steps(doc)["summary"]["result"] == {"doubled": 20, "total": 26, "text": "total is 26"}
    assert _steps(_run_example(path, "--var", "base=1", cwd=tmp_path))["sum"]["result"] == 8
    graph = planrun("graph", path, "--format", "json", cwd=tmp_path).json
    assert {e["kind"] for e in graph["edges"]} == {"data"}  # no depends_on in the file
    assert "depends_on" not in (EXAMPLES / "dataflow.yaml").read_text().split("steps:")[1]


@exercises("conditional.yaml")
def test_example_conditional(tmp_path):
    path = str(EXAMPLES / "conditional.yaml")
    steps = _steps(_run_example(path, cwd=tmp_path))
    assert steps["deploy_prod"]["status"] == "skipped"
    assert steps["deploy_staging"]["status"] == "succeeded"
    assert steps["done"]["result"] == "prod=skipped staging=succeeded"
    steps = _steps(_run_example(path, "--var", "target=prod", "--var", "notify=true", cwd=tmp_path))
    assert steps["deploy_prod"]["status"] == "succeeded"
    assert steps["deploy_staging"]["status"] == "skipped"
    assert steps["notify"]["status"] == "succeeded"


@exercises("parallel.yaml")
def test_example_parallel(tmp_path):
    events = tmp_path / "e.jsonl"
    doc = _run_example(str(EXAMPLES / "parallel.yaml"), "--events", str(events), cwd=tmp_path)
    assert _steps(doc)["collect"]["result"] == "a,b,c"
    # Four jobs at once, not one after another: all four start before any of them ends.
    kinds = [(e["event"], e.get("step")) for e in map(json.loads, events.read_text().splitlines())]
    jobs = {"job_a", "job_b", "job_c", "job_d"}
    first_end = next(i for i, (kind, step) in enumerate(kinds) if kind == "step.succeeded")
    assert {step for kind, step in kinds[:first_end] if kind == "step.started"} == jobs, kinds


@exercises("retries.yaml")
def test_example_retries(tmp_path):
    doc = _run_example(str(EXAMPLES / "retries.yaml"), cwd=tmp_path)
    flaky = _steps(doc)["flaky"]
    assert flaky["attempts"] == 3 and flaky["result"]["stdout"] == "attempt 3 succeeds\n"
    assert not (tmp_path / ".planrun-retries-counter").exists()  # cleaned up


@exercises("failure-policies.yaml")
def test_example_failure_policies(tmp_path):
    path = str(EXAMPLES / "failure-policies.yaml")
    steps = _steps(_run_example(path, cwd=tmp_path))
    assert steps["probe"]["status"] == "ignored" and steps["probe"]["result"] is None
    assert steps["build"]["result"] == "cache: none"
    assert steps["optional"]["status"] == "skipped"
    assert steps["package"]["result"] == "packaged after ignored probe"
    # As documented in the file: with the `continue` step enabled the run fails (exit 1),
    # its dependent is skipped, and the other branch still finishes.
    r = planrun(
        "run", "--no-state", "--output", "json", path, "--var", "try_optional=true", cwd=tmp_path
    )
    assert r.code == 1, r
    steps = _steps(r.json)
    assert steps["optional"]["status"] == "failed"
    assert steps["after_optional"]["status"] == "skipped"
    assert steps["package"]["status"] == "succeeded"


@exercises("subplan.yaml", "sub/greet.yaml")
def test_example_subplan(tmp_path):
    doc = _run_example("subplan.yaml", cwd=EXAMPLES)
    assert _steps(doc)["both"]["result"] == ["Hello, ANN!", "Hello, BOB?"]
    # The same thing from elsewhere with -C, and the sub-plan on its own.
    r = planrun(
        "-C", str(EXAMPLES), "run", "--no-state", "--output", "json", "subplan.yaml", cwd=tmp_path
    )
    assert r.code == 0 and r.json["variables"]["second"]["greeting"] == "Hello, BOB?", r
    doc = _run_example(str(EXAMPLES / "sub" / "greet.yaml"), "--var", "who=you", cwd=tmp_path)
    assert doc["variables"]["greeting"] == "Hello, YOU!"


@exercises("http.yaml")
def test_example_http(tmp_path, http_server):
    doc = _run_example(
        str(EXAMPLES / "http.yaml"), "--var", f"base_url={http_server}", cwd=tmp_path
    )
    summary = _steps(doc)["summary"]["result"]
    assert summary["fetched"] == 200 and summary["missing"] == 404
    assert summary["size"] == len((EXAMPLES / "diamond.yaml").read_text())


@exercises("python-step.yaml", "helpers.py")
def test_example_python_step(tmp_path):
    # No .pyc files left in examples/ by the import of helpers.py.
    r = planrun(
        "-C",
        str(EXAMPLES),
        "run",
        "--no-state",
        "--output",
        "json",
        "python-step.yaml",
        cwd=tmp_path,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert r.code == 0, r
    steps = _steps(r.json)
    assert steps["stats"]["result"] == {"count": 8, "mean": 3.875, "median": 3.5, "max": 9}
    assert steps["slug"]["result"] == "mean-is-3.875"


@exercises("replan/plan.yaml", "replan/planner.py")
def test_example_replan():
    # Its planner command is a path relative to the repository root.
    doc = _run_example("examples/replan/plan.yaml", cwd=ROOT)
    assert [(s["id"], s["status"]) for s in doc["steps"]] == [
        ("fetch_mirror", "succeeded"),
        ("report", "succeeded"),
    ]
    assert _steps(doc)["report"]["result"] == "got mirror-data"


@pytest.mark.slow  # a plan that starts planrun three times
def test_plans_ci_runs(tmp_path):
    """plans/ci.yaml runs from the repository root; its only output goes where we say."""
    r = planrun(
        "run",
        "--no-state",
        "--output",
        "json",
        "plans/ci.yaml",
        "--var",
        f"python={sys.executable}",
        "--var",
        f"out_dir={tmp_path}",
        cwd=ROOT,
        timeout=120,
    )
    assert r.code == 0, r
    info = json.loads((tmp_path / "build-info.json").read_text())
    assert info["smoke"] == "succeeded" and info["modules"].endswith("modules")


def test_plans_are_listed():
    r = planrun("list", "--output", "json", cwd=ROOT)
    assert r.code == 0, r
    assert "ci" in {row["name"] for row in r.json}


def test_a_count_of_one_is_worded_in_the_singular(run, write):
    write("one.yaml", "steps:\n  - {id: a, tool: echo, args: {value: 1}}\n")
    r = run("list", ".")
    assert r.code == 0 and "one.yaml     1 step   never run" in r.out, r
    r = run("run", "one.yaml", "--dry-run")
    assert r.code == 0 and "plan one: 1 step in 1 wave (dry run)" in r.out, r
    r = run("run", "one.yaml")
    assert r.code == 0, r
    r = run("status", "one.yaml")
    assert r.code == 0 and "\n1 step (1 succeeded)\n" in r.out, r
    for shown in (run("list", ".").out, run("run", "one.yaml", "--dry-run").out):
        assert " 1 steps" not in shown and " 1 waves" not in shown, shown


def test_every_example_file_is_exercised():
    """Each file in examples/ is run by a test here, or named (examples/NAME) by another test file."""
    files = {
        str(p.relative_to(EXAMPLES))
        for p in EXAMPLES.rglob("*")
        # not the plan cache, nor what a run in examples/gotask builds (its .gitignore)
        if p.is_file() and not {"__pycache__", ".planrun", ".task", "dist", "build"} & set(p.parts)
    }
    others = "\n".join(
        p.read_text() for p in (ROOT / "tests").glob("test_*.py") if p.name != Path(__file__).name
    )
    missing = sorted(f for f in files if f not in EXERCISED and f"examples/{f}" not in others)
    assert missing == []
    assert files >= EXERCISED, EXERCISED - files


def test_mcp_cli_plan_runs_unchanged(run, write):
    write(
        "mcp-cli.json",
        json.dumps(
            {
                "id": "mcp-cli-plan",
                "title": "Written by mcp-cli's planner",
                "variables": {"name": "world"},
                "steps": [
                    {
                        "index": "1",
                        "title": "Greet",
                        "tool": "echo",
                        "args": {"value": "hello ${name}"},
                        "depends_on": [],
                        "result_variable": "greeting",
                    },
                    {
                        "index": "2",
                        "title": "Shout",
                        "tool": "echo",
                        "args": {"value": "${greeting | upper}"},
                        "depends_on": ["1"],
                        "result_variable": "loud",
                    },
                ],
            }
        ),
    )
    assert run("validate", "mcp-cli.json").code == 0
    r = run("run", "--no-state", "--output", "json", "mcp-cli.json")
    assert r.code == 0, r
    assert r.json["plan"] == "mcp-cli-plan"
    assert [(s["id"], s["result"]) for s in r.json["steps"]] == [
        ("1", "hello world"),
        ("2", "HELLO WORLD"),
    ]


def test_help_describes_every_command_in_a_whole_sentence(tmp_path):
    """`planrun --help` (at 80 columns, or into a pipe) never cuts a description short."""
    r = planrun("--help", cwd=tmp_path, env={"COLUMNS": "80"})
    assert r.code == 0, r
    commands = r.out.split("Commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(commands) >= 10, r.out
    for line in commands:
        name, _, text = line.strip().partition(" ")
        assert text.strip().endswith(".") and not text.endswith("..."), line
