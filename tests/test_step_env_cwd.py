"""Plan and step `env`, step `cwd`, and `${…}` in paths (cwd, dotenv names, a plan step's path)."""

from __future__ import annotations

import os
import sys

import pytest

from tests.conftest import assert_no_traceback
from tests.testkit import steps_by_id


def _steps(r):  # type: ignore[no-untyped-def]
    return {s["id"]: s for s in r.json["steps"]}


def test_env_precedence_dotenv_process_plan_step_args(run, write, monkeypatch):
    write(".env", "A=dotenv\nB=dotenv\nC=dotenv\nD=dotenv\nE=dotenv\n")
    write(
        "p.yaml",
        """
        dotenv: [.env]
        variables: {who: plan-var}
        env: {C: plan, D: plan, E: plan}
        steps:
          - id: r
            run: echo $A $B $C $D $E
            env: {D: "step-${who}", E: step}
          - id: s
            tool: shell
            args: {cmd: echo $A $B $C $D $E, env: {E: args}}
            env: {D: step}
        """,
    )
    env = {k: v for k, v in os.environ.items() if k not in "ABCDE"}
    r = run("run", "p.yaml", "--output", "json", env={**env, "B": "process", "C": "process"})
    assert r.code == 0, r
    steps = _steps(r)
    assert steps["r"]["result"]["stdout"] == "dotenv process plan step-plan-var step\n"
    assert steps["s"]["result"]["stdout"] == "dotenv process plan step args\n"


def test_cwd_runs_the_step_there_and_sources_outputs_are_relative_to_it(run, write, tmp_path):
    write("pkg/src/a.py", "print(1)\n")
    write(
        "p.yaml",
        """
        variables: {sub: pkg}
        steps:
          - id: build
            run: ["mkdir -p dist", "pwd > dist/where.txt", "cat src/a.py >> dist/where.txt"]
            cwd: ${sub}
            sources: ["src/**/*.py"]
            outputs: ["dist/*.txt"]
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    out = tmp_path / "pkg" / "dist" / "where.txt"
    assert out.read_text() == f"{os.path.realpath(tmp_path / 'pkg')}\nprint(1)\n"
    assert run("run", "p.yaml", "--output", "json").json["steps"][0]["status"] == "cached"
    out.unlink()  # restored by the cache, in the step's directory
    r = run("run", "p.yaml", "--output", "json")
    assert r.json["steps"][0]["status"] == "cached", r
    assert out.exists()
    write("pkg/src/a.py", "print(2)\n")  # a source in the step's directory changed
    r = run("run", "p.yaml", "--output", "json", "--explain")
    assert r.json["steps"][0]["status"] == "succeeded", r


def test_a_shell_steps_args_cwd_is_its_directory_for_sources(run, write, tmp_path):
    write("pkg/in.txt", "x")
    write(
        "p.yaml",
        """
        steps:
          - id: s
            tool: shell
            args: {cmd: "cp in.txt out.txt", cwd: pkg}
            sources: [in.txt]
            outputs: [out.txt]
        """,
    )
    assert run("run", "p.yaml").code == 0
    assert (tmp_path / "pkg" / "out.txt").read_text() == "x"
    write("pkg/in.txt", "y")
    r = run("run", "p.yaml", "--output", "json")
    assert r.json["steps"][0]["status"] == "succeeded", r
    assert (tmp_path / "pkg" / "out.txt").read_text() == "y"


def test_the_cache_key_covers_env_and_cwd(run, write, tmp_path):
    write("a/x", "")
    write("b/x", "")
    plan = """
        env: {MODE: MODE_VALUE}
        steps:
          - id: s
            run: echo $MODE >> ../log.txt
            cwd: DIR_VALUE
            cache: true
        """
    write("p.yaml", plan.replace("MODE_VALUE", "one").replace("DIR_VALUE", "a"))
    assert run("run", "p.yaml").code == 0
    assert run("run", "p.yaml", "--output", "json").json["steps"][0]["status"] == "cached"
    write("p.yaml", plan.replace("MODE_VALUE", "two").replace("DIR_VALUE", "a"))
    assert run("run", "p.yaml", "--output", "json").json["steps"][0]["status"] == "succeeded"
    write("p.yaml", plan.replace("MODE_VALUE", "two").replace("DIR_VALUE", "b"))
    assert run("run", "p.yaml", "--output", "json").json["steps"][0]["status"] == "succeeded"
    assert (tmp_path / "log.txt").read_text() == "one\ntwo\ntwo\n"


def test_dotenv_names_and_plan_step_cwd_and_path_render_variables(run, write, tmp_path):
    write("conf/prod.env", "WHO=prod\n")
    write("sub/child.yaml", "steps:\n  - {id: c, run: pwd > where.txt}\n")
    write("work/.keep", "")
    write(
        "p.yaml",
        """
        variables: {stage: prod, child: child}
        dotenv: ["conf/${stage}.env"]
        steps:
          - id: who
            run: echo $WHO
          - id: sub
            tool: plan
            args: {path: "sub/${child}.yaml"}
            cwd: work
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert _steps(r)["who"]["result"]["stdout"] == "prod\n"
    assert (tmp_path / "work" / "where.txt").read_text().strip() == os.path.realpath(
        tmp_path / "work"
    )
    assert not (tmp_path / "sub" / "where.txt").exists()
    r = run("run", "p.yaml", "--dry-run")
    assert "sub/child.yaml" in r.out, r


@pytest.mark.parametrize(
    "executor",
    [False, pytest.param(True, marks=pytest.mark.slow, id="dask")],
    ids=["local", "dask"],
)
def test_a_sub_plans_steps_get_the_parents_dotenv_plan_env_and_step_env(
    run, write, tmp_path, request, executor
):
    where = ("--address", request.getfixturevalue("cluster").address) if executor else ()
    # A plan step's sub-plan runs in the environment the parent's steps get (dotenv under
    # the process environment, the plan's `env` over it, the plan step's own `env` over that),
    # as if it were started there; the sub-plan's own dotenv and `env` apply on top as usual.
    write(".env", "A=dotenv\nB=dotenv\nC=dotenv\nD=dotenv\n")
    write("sub/.env", "A=child-dotenv\nB=child-dotenv\n")
    write(
        "sub/child.yaml",
        """
        dotenv: [sub/.env]
        env: {D: child-plan}
        steps:
          - {id: c, run: 'echo $A $B $C $D $E', title: "sees ${env.C}"}
        """,
    )
    write(
        "p.yaml",
        """
        dotenv: [.env]
        env: {B: plan, C: plan}
        steps:
          - {id: sub, tool: plan, args: {path: sub/child.yaml}, env: {C: step, E: step}}
        """,
    )
    env = {k: v for k, v in os.environ.items() if k not in "ABCDE"}
    r = run("run", "p.yaml", "--output", "json", *where, env=env)
    assert r.code == 0, r
    # A: the child's dotenv is under the environment it was started in (as for any plan);
    # B: the parent's plan env wins over the child's dotenv; C: the plan step's env wins.
    assert "dotenv plan step child-plan step" in r.err, r.err
    assert "sees step" in r.err, r.err


def test_undefined_names_in_paths_and_env_are_validation_errors(run, write):
    write(
        "p.yaml",
        """
        variables: {stage: prod}
        dotenv: ["${stag}.env"]
        env: {A: "${nope}"}
        steps:
          - id: s
            run: echo
            cwd: ${stgae}
            env: {B: "${stage}", C: 3}
            cdw: x
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert_no_traceback(r)
    assert "p.yaml:2:10: error: dotenv[0]: undefined name 'stag'" in r.out, r.out
    assert "p.yaml:3:10: error: env.A: undefined name 'nope'" in r.out, r.out
    assert "p.yaml:7:10: error: step 's': cwd: undefined name 'stgae'" in r.out, r.out
    assert "p.yaml:8:29: error: step 's': env.C: expected a string, got 3" in r.out, r.out
    assert "did you mean 'cwd'?" in r.out, r.out
    assert "did you mean 'stage'?" in r.out, r.out


def test_env_names_a_command_cannot_receive_are_validation_errors(run, write):
    write(
        "p.yaml",
        """
        env: {"": x}
        steps:
          - id: s
            run: echo
            env: {"A=B": x}
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert_no_traceback(r)
    assert "p.yaml:1:7: error: env: '' is not an environment variable name" in r.out, r.out
    assert "p.yaml:5:11: error: step 's': env: 'A=B' is not an environment variable name" in r.out


def test_args_on_a_run_step_are_an_error_not_ignored(run, write):
    write(
        "p.yaml",
        """
        steps:
          - id: s
            run: echo run
            args: {cmd: echo args}
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert "p.yaml:4:5: error: step 's': a 'run' step takes no 'args'" in r.out, r.out
    assert run("run", "p.yaml").code == 3


def test_env_or_cwd_on_a_tool_that_ignores_them_is_an_error_not_ignored(run, write):
    write(
        "p.yaml",
        """
        env: {PLAN: "ok"}
        steps:
          - {id: e, tool: echo, args: {value: 1}, env: {A: b}}
          - {id: r, tool: read_file, args: {path: x.txt}, cwd: sub}
          - {id: s, tool: echo, args: {value: 1}, cwd: sub, sources: [a.txt]}
          - {id: p, tool: plan, args: {path: c.yaml}, env: {A: b}}
          - {id: y, tool: python, args: {function: "os:getcwd"}, env: {A: b}}
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    lines = r.out.splitlines()
    assert lines[0].startswith("p.yaml:3:43: error: step 'e': 'echo' takes no env"), r.out
    assert lines[1].startswith("p.yaml:4:51: error: step 'r': 'read_file' takes no cwd"), r.out
    assert len(lines) == 2, (
        r.out
    )  # a plan's env, python's and plan's env, cwd placing sources: fine


def test_a_cwd_that_puts_sources_or_outputs_where_they_may_not_be_is_a_validation_error(
    run, write, tmp_path
):
    # `outputs: ["../o.txt"]` is refused at its place before anything runs; so is `o.txt`
    # under `cwd: ../other` (the same path), and a source under an absolute cwd, which
    # would otherwise fail the step only when it runs, after the steps before it.
    write(
        "p.yaml",
        """
        steps:
          - {id: first, run: "echo first > first.txt"}
          - {id: out, cwd: ../other, outputs: [o.txt], run: "true", depends_on: [first]}
          - {id: src, cwd: /tmp, sources: [s.txt], run: "true"}
          - {id: shell, tool: shell, args: {cmd: "true", cwd: ..}, outputs: [o.txt]}
          - {id: fine, cwd: sub, sources: [../common/x], outputs: [../sub2/o.txt], run: "true"}
          - {id: later, cwd: "${where}", outputs: [o.txt], run: "true"}
        variables: {where: sub}
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "p.yaml:3:40: error: step 'out': outputs[0] 'o.txt' under cwd '../other' is "
        "'../other/o.txt': output pattern '../other/o.txt' must stay inside the working directory",
        "p.yaml:4:36: error: step 'src': sources[0] 's.txt' under cwd '/tmp' is '/tmp/s.txt': "
        "pattern '/tmp/s.txt' must be relative to the working directory",
        "p.yaml:5:70: error: step 'shell': outputs[0] 'o.txt' under args.cwd '..' is '../o.txt': "
        "output pattern '../o.txt' must stay inside the working directory",
    ], r.out
    assert run("run", "p.yaml").code == 3
    assert not (tmp_path / "first.txt").exists()  # nothing ran


ENV_MODULE = """
import os
import subprocess


def seen():
    child = subprocess.run(["sh", "-c", "echo $D"], capture_output=True, text=True).stdout
    return {k: os.environ.get(k) for k in "ABCDEF"} | {"child": child.strip()}
"""


def test_a_python_steps_environment_has_dotenv_plan_and_step_env(run, write, monkeypatch):
    write("envseen.py", ENV_MODULE)
    write(".env", "A=dotenv\nB=dotenv\nC=dotenv\nD=dotenv\n")
    write(
        "p.yaml",
        """
        dotenv: [.env]
        variables: {who: var}
        env: {C: plan, D: plan}
        steps:
          - id: own
            tool: python
            args: {function: "envseen:seen"}
            env: {D: "step-${who}", F: "${env.A}"}
          - id: plain
            tool: python
            args: {function: "envseen:seen"}
            depends_on: [own]
        """,
    )
    env = {k: v for k, v in os.environ.items() if k not in "ABCDEF"}
    r = run("run", "p.yaml", "--output", "json", env={**env, "B": "process", "C": "process"})
    assert r.code == 0, r
    steps = _steps(r)
    assert steps["own"]["result"] == {
        "A": "dotenv",
        "B": "process",
        "C": "plan",
        "D": "step-var",
        "E": None,
        "F": "dotenv",
        "child": "step-var",  # a process the function starts inherits it
    }
    assert steps["plain"]["result"] == {
        "A": "dotenv",
        "B": "process",
        "C": "plan",
        "D": "plan",
        "E": None,
        "F": None,
        "child": "plan",
    }
    assert "D" not in os.environ  # planrun's own environment is as it was


def test_a_python_steps_env_is_in_its_cache_key(run, write):
    write("envkey.py", "import os\n\ndef get():\n    return os.environ.get('MODE')\n")
    plan = """
        steps:
          - id: k
            tool: python
            args: {function: "envkey:get"}
            env: {MODE: %s}
            cache: true
        """
    write("p.yaml", plan % "one")
    assert _steps(run("run", "p.yaml", "--output", "json"))["k"]["result"] == "one"
    write("p.yaml", plan % "two")
    r = run("run", "p.yaml", "--output", "json")
    assert _steps(r)["k"] == {**_steps(r)["k"], "status": "succeeded", "result": "two"}, r


def test_python_steps_with_different_environments_take_turns(monkeypatch):
    """One process has one os.environ: a call with another environment waits for the
    calls using the current one; calls with the same one share it."""
    import asyncio

    from planrun.tools.environ import EnvironGate

    monkeypatch.delenv("GATE_X", raising=False)

    async def scenario() -> list[str]:
        gate = EnvironGate()
        seen: list[str] = []
        first = await gate.enter({"GATE_X": "a"})
        second = await gate.enter({"GATE_X": "a"})  # the same environment: at once
        other = asyncio.ensure_future(gate.enter({"GATE_X": "b"}))
        await asyncio.sleep(0)
        assert not other.done()
        seen.append(os.environ["GATE_X"])
        first()
        second()
        third = await other
        seen.append(os.environ["GATE_X"])
        third()
        seen.append(os.environ.get("GATE_X", "unset"))
        return seen

    assert asyncio.run(scenario()) == ["a", "b", "unset"]


# ---- shell ---------------------------------------------------------------------------------------


def test_shell_env_is_merged_over_planruns_environment_and_output_is_verbatim(run, write, tmp_path):
    write(
        "p.yaml",
        r"""
        steps:
          - id: s
            tool: shell
            args:
              cmd: 'printf "%s|%s|%s|" "$FROM_PARENT" "$MINE" "$(pwd)"; command -v sh >/dev/null && printf "  path ok\n\n"; printf " err \n" >&2'
              env: {MINE: set-by-step, OVERRIDDEN: step}
          - {id: dollar, tool: shell, args: {cmd: 'echo "$${OVERRIDDEN:-unset}" $(echo sub)'}}
        """,
    )
    r = run(
        "run", "p.yaml", "--output", "json", env={"FROM_PARENT": "parent", "OVERRIDDEN": "parent"}
    )
    assert r.code == 0, r
    s = steps_by_id(r.json)
    assert s["s"]["result"]["stdout"] == f"parent|set-by-step|{tmp_path.resolve()}|  path ok\n\n"
    assert s["s"]["result"]["stderr"] == " err \n"
    assert s["dollar"]["result"]["stdout"] == "parent sub\n"


ECHO_BACK_PLANNER = """
import json, sys
ctx = json.load(sys.stdin)
done = set(ctx["completed"]) | {ctx["failed_step"]["id"]}
rest = [s for s in ctx["plan"]["steps"] if s["id"] not in done]  # as given, env and all
for s in rest:
    s["depends_on"] = ["fixed"]
print(json.dumps([{"id": "fixed", "run": "echo fixed $PLAN_VAR"}, *rest]))
"""


def test_a_planner_may_hand_back_the_steps_it_was_given(run, write):
    write("planner.py", ECHO_BACK_PLANNER)
    write(
        "p.yaml",
        f"""
        env: {{PLAN_VAR: set}}
        replan: {{command: ["{sys.executable}", "planner.py"]}}
        steps:
          - {{id: b, run: exit 1, on_failure: replan}}
          - {{id: c, tool: echo, args: {{value: 1}}, depends_on: [b]}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert steps["fixed"]["result"]["stdout"] == "fixed set\n"
    assert steps["c"]["status"] == "succeeded"
