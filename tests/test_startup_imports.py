"""What a plain call imports: start-up time is what users feel on every call, so the commands
that do not need a heavy library must not load it (checked with `python -X importtime`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import python_ok

PLAIN_PLAN = """\
name: plain
steps:
  - id: a
    tool: shell
    args: {cmd: "true"}
  - id: b
    tool: echo
    args: {value: "${steps.a.status}"}
    depends_on: [a]
"""

# Never needed by a shell/echo plan without servers, templates in Jinja syntax or a terminal.
NOT_FOR_A_PLAIN_RUN = {
    "jinja2",
    "mcp",
    "rich",
    "httpx",
    "httpx2",
    "httpcore2",
    "anyio",
    "dask",
    "jsonschema",
}


# A plain run that is no resume keeps no step from a previous one (the resume rules), one with
# no step needing approval asks no question, and a YAML plan needs no JSON reader (a plan from
# the plan cache no reader at all).
NOT_FOR_A_FIRST_RUN = {
    "planrun.run.resume",
    "planrun.run.approval",
    "planrun.plan.loader._json",
    "bisect",
}

# The modules of commands other than `run` and `resume`: a run builds none of them (click's lazy
# group imports a command's module when the command is asked for).
OTHER_COMMANDS = {
    "planrun.cli.queries",
    "planrun.cli.conveniences",
    "planrun.cli.cache",
    "planrun.cli.catalog",
    "planrun.cli.show",
    "planrun.cli.steplist",
}

# An interpreter's `.pth` files may import these before planrun starts (a certifi hook does),
# which would hide planrun's own import of them: they are forgotten first.
_FORGOTTEN = ("pathlib", "urllib", "fnmatch", "shlex")
_AS_MAIN = (
    "import runpy, sys\n"
    f"for m in [m for m in sys.modules if m.split('.')[0] in {_FORGOTTEN!r}]:\n"
    "    del sys.modules[m]\n"
    "sys.argv[0] = 'planrun'\n"
    "runpy.run_module('planrun', run_name='__main__', alter_sys=True)\n"
)


def imported_by(*args: str, cwd: Path) -> set[str]:
    """Top-level packages and planrun modules `python -m planrun ARGS` imports (what the
    interpreter's start-up imported before planrun's first line is left out)."""
    proc = python_ok("-X", "importtime", "-c", _AS_MAIN, *args, cwd=cwd)
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:"):
            name = line.split("|")[-1].strip()
            names.add(name if name.startswith("planrun.") else name.split(".")[0])
            if line.split("|")[-1] == " runpy":
                names.clear()  # the interpreter's own start-up, and `site`'s .pth files
    assert "planrun" in names  # the measurement works
    return names


def test_run_of_a_plain_plan_imports_no_heavy_library(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(PLAIN_PLAN)
    hits = 0
    for extra in (["--no-state"], [], ["-j", "2", "--var", "x=1"]):
        names = imported_by("run", "plan.yaml", "--quiet", *extra, cwd=tmp_path)
        # A run is no dry run, and a plan without `replan:` needs no planner.
        unwanted = NOT_FOR_A_PLAIN_RUN | {"planrun.cache.wiring", "planrun.cache.session"}
        unwanted |= {"planrun.run.dryrun", "planrun.run.planner"}
        unwanted |= {"planrun.reporters.live"}  # a terminal's live view: not with --quiet
        unwanted |= OTHER_COMMANDS  # nor another command's module
        unwanted |= NOT_FOR_A_FIRST_RUN  # nor what only a resume or a JSON plan needs
        if "planrun.plan.validate" not in names:  # a plan cache hit: the plan is not checked again
            # pathlib (with urllib.parse) costs ~5 ms a start: the state modules use text paths.
            # fnmatch (policies) and shlex (quoting) serve plans and outcomes this one has not.
            unwanted |= {"pathlib", "urllib", "fnmatch", "shlex"}
            unwanted |= {"yaml", "pydantic"}  # the plan is not read again either
            unwanted |= {"planrun.suggest"}  # nor checked: no error to suggest a name for
            hits += 1
        assert not names & unwanted, sorted(names & unwanted)
    assert hits >= 1  # the second run hits the plan cache the first one wrote


def test_validate_imports_no_run_machinery(tmp_path: Path) -> None:
    """`validate` checks; it starts nothing, so it needs neither asyncio nor the run path."""
    (tmp_path / "plan.yaml").write_text(PLAIN_PLAN)
    names = imported_by("validate", "plan.yaml", cwd=tmp_path)
    unwanted = NOT_FOR_A_PLAIN_RUN | {"asyncio", "planrun.run.runner", "planrun.run.launch"}
    unwanted |= {"planrun.cli.runcmds", "planrun.cli.options", "planrun.cli.conveniences"}
    assert not names & unwanted, sorted(names & unwanted)


def test_help_imports_no_command(tmp_path: Path) -> None:
    """`planrun --help` lists every command from the group's table: no command's module (nor
    its options), no plan machinery, no run path."""
    names = imported_by("--help", cwd=tmp_path)
    unwanted = NOT_FOR_A_PLAIN_RUN | OTHER_COMMANDS | {"yaml", "pydantic", "asyncio"}
    unwanted |= {"planrun.cli.runcmds", "planrun.cli.options", "planrun.run.runner"}
    unwanted |= {"planrun.plan.definition", "planrun.plan.validate", "planrun.plan.loader"}
    assert not names & unwanted, sorted(names & unwanted)


def test_the_run_path_imports_no_pydantic() -> None:
    """pydantic validates and writes the schema (planrun.plan.model); what runs is planrun.plan.definition, so a
    run that skips validation (a plan cache hit) never pays for importing pydantic."""
    code = (
        "import sys, planrun.run.runner, planrun.run.launch, planrun.run.scheduler, planrun.run.dryrun, "
        "planrun.plan.fanout, planrun.state, planrun.run.gate, planrun.run.replan, planrun.run.revision_check, "
        "planrun.run.checktools, planrun.reporters.jsonl; print('pydantic' in sys.modules)"
    )
    proc = python_ok("-c", code)
    assert proc.stdout.strip() == "False", proc.stderr[-2000:]


def test_importing_the_package_imports_nothing_else() -> None:
    # `python -m planrun` and the `planrun` script execute planrun/__init__.py before the
    # Ctrl-C handler of planrun.__main__ is installed: a module it imports (even
    # `__future__`) widens the moment in which Ctrl-C prints a traceback from planrun's files.
    proc = python_ok("-X", "importtime", "-c", "import planrun")
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("import time:")]
    names = [ln.split("|")[-1].strip() for ln in lines]
    assert names[-1] == "planrun", names[-5:]
    # importtime lists a module's own imports just before it, indented under it
    nested = []
    for line in reversed(lines[:-1]):
        name = line.split("|")[-1]
        if not name.startswith("  "):
            break  # a module imported before planrun (site)
        nested.append(name.strip())
    assert not nested, nested


# Block style, single quotes: the fast YAML reader's subset (double quotes go to libyaml).
BLOCK_PLAN = """\
name: block
steps:
  - id: a
    tool: shell
    args:
      cmd: 'true'
  - id: b
    tool: echo
    args:
      value: 1
    depends_on: [a]
"""


def test_a_plan_the_fast_reader_reads_imports_no_pyyaml(tmp_path: Path) -> None:
    """A fresh checkout has no plan cache: its plan is read and checked, but a plan in the
    fast YAML reader's subset needs no PyYAML (its import costs a fresh run ~10%)."""
    (tmp_path / "plan.yaml").write_text(BLOCK_PLAN)
    for args in (["validate", "plan.yaml"], ["run", "plan.yaml", "--quiet", "--no-state"]):
        for stale in (tmp_path / ".planrun").glob("plans/*"):
            stale.unlink()  # no plan cache: the plan is read from its YAML every time
        names = imported_by(*args, cwd=tmp_path)
        assert "planrun.plan.validate" in names  # the plan was checked, not taken from the cache
        assert "yaml" not in names, args


def test_checking_a_valid_plan_imports_no_pydantic(tmp_path: Path) -> None:
    """A fresh checkout (no `.planrun/`, as in CI) checks its plan: planrun.plan.fastcheck takes a
    valid one without pydantic (importing it and building the models costs ~500 M
    instructions); a plan with an error still gets pydantic's verdict, in planrun's words."""
    (tmp_path / "plan.yaml").write_text(PLAIN_PLAN)
    for args in (["validate", "plan.yaml"], ["run", "plan.yaml", "--quiet"]):
        shutil.rmtree(tmp_path / ".planrun", ignore_errors=True)
        names = imported_by(*args, cwd=tmp_path)
        assert "planrun.plan.validate" in names
        assert "pydantic" not in names, args
    (tmp_path / "bad.yaml").write_text(PLAIN_PLAN.replace("depends_on: [a]", "retries: -1"))
    argv = [sys.executable, "-X", "importtime", "-c", _AS_MAIN, "validate", "bad.yaml"]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "expected 0 or more, got -1" in proc.stdout + proc.stderr
    assert "| pydantic\n" in proc.stderr
