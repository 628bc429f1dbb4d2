"""`matrix` (one instance per combination) and `max_parallel` (at most N instances at once)."""

from __future__ import annotations

import json
import sys

from planrun.plan.fanout import combinations
from tests.conftest import assert_no_traceback
from tests.testkit import most_at_once

PY = sys.executable

MATRIX = """
steps:
  - id: smoke
    matrix:
      os: [linux, macos]
      py: ["3.11", "3.12"]
      exclude: [{os: macos, py: "3.11"}]
    tool: echo
    args: {value: "${matrix.os}-${matrix.py | replace('.', '')}-${index}"}
    result_variable: combos
  - {id: after, tool: echo, args: {value: "${combos}"}}
"""


def test_combinations_first_name_slowest_and_exclude():
    m = {"a": [1, 2], "b": ["x", "y"], "exclude": [{"a": 2, "b": "x"}]}
    assert combinations(m) == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "y"}]
    assert combinations({"a": []}) == []


def test_matrix_runs_one_instance_per_combination(run, write):
    write("plan.yaml", MATRIX)
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 0, r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert [i for i in steps if i.startswith("smoke[")] == ["smoke[0]", "smoke[1]", "smoke[2]"]
    assert steps["after"]["result"] == ["linux-311-0", "linux-312-1", "macos-312-2"]


def test_matrix_in_dry_run_and_graph(run, write):
    write("plan.yaml", MATRIX)
    r = run("run", "plan.yaml", "--dry-run")
    assert r.code == 0, r
    assert "smoke[2]" in r.out and "macos-312-2" in r.out
    g = run("graph", "plan.yaml", "--format", "json")
    assert g.code == 0, g
    assert "smoke[2]" in g.out


def test_matrix_validation(run, write):
    write(
        "plan.yaml",
        """
        steps:
          - id: a
            foreach: [1]
            matrix: {x: [1]}
            tool: echo
          - id: b
            matrix: {x: 1}
            tool: echo
          - id: c
            matrix: {x: [1]}
            tool: echo
            args: {value: "${matrix.x} ${item}"}
          - id: d
            max_paralel: 2
            tool: echo
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    out = r.out
    assert "plan.yaml:4:5: error: step 'a': a step has 'foreach' or 'matrix', not both" in out, r
    assert "plan.yaml:7:" in out and "matrix.x" in out
    assert "plan.yaml:12:" in out and "undefined name 'item'" in out
    assert "plan.yaml:14:5:" in out and "did you mean 'max_parallel'" in out
    assert_no_traceback(r)


def test_a_bad_matrix_or_foreach_is_one_error_not_also_undefined_names(run, write):
    # The step's args read `matrix` / `item`: a badly written list must not make them
    # "undefined" too (one mistake, one line).
    write(
        "plan.yaml",
        """
        steps:
          - {id: a, run: "echo ${matrix.x}", matrix: [1]}
          - {id: b, run: "echo ${matrix.x}", matrix: {x: [1], exclude: 3}}
          - {id: c, run: "echo ${item} ${index}", foreach: 3}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert "undefined name" not in r.out, r.out
    assert len(r.out.splitlines()) == 3, r.out
    assert_no_traceback(r)


def test_reading_a_name_the_matrix_does_not_have_is_a_validation_error(run, write):
    # The names are known before the run: `${matrix.os}` in a matrix of `py` alone can only
    # fail every instance, so validate says so at its place, with the close name.
    write(
        "plan.yaml",
        """
        steps:
          - id: a
            matrix: {python: ["3.11"], exclude: []}
            title: "py ${matrix.pyton}"
            run: echo ${matrix['os']} ${matrix.python | replace('.', '')} ${matrix.exclude}
          - id: b
            matrix: {python: ["3.11"]}
            run: echo ${matrix.python} ${matrix | length} ${matrix.get('x', 1)} ${index}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "plan.yaml:4:12: error: step 'a': title: undefined name 'matrix.pyton'"
        " (did you mean 'python'?)",
        "plan.yaml:5:10: error: step 'a': run: undefined name 'matrix.os'",
        "plan.yaml:5:10: error: step 'a': run: undefined name 'matrix.exclude'",
    ], r.out
    assert_no_traceback(r)


def test_an_exclude_name_not_in_the_matrix_gets_a_did_you_mean(run, write):
    write(
        "plan.yaml",
        """
        steps:
          - {id: a, run: echo, matrix: {python: [1], exclude: [{pyton: 1}]}}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "plan.yaml:2:57: error: step 'a': matrix: exclude names 'pyton', which is not in the"
        " matrix (did you mean 'python'?)"
    ], r.out


def test_a_matrix_name_include_is_a_name_and_gets_a_warning(run, write):
    # GitHub Actions' `include` adds combinations; in planrun only `exclude` is special, so
    # `include` is one more name to combine. It runs as written, with a warning saying so.
    write(
        "plan.yaml",
        """
        steps:
          - id: a
            matrix: {py: [1, 2], include: [{py: 3}]}
            tool: echo
            args: {value: "${matrix.py}"}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 0, r
    assert "plan.yaml:3:26: warning: step 'a': matrix: 'include' is a name to combine" in r.out, r
    done = run("run", "plan.yaml", "--output", "json")
    assert done.code == 0, done
    assert [s["result"] for s in done.json["steps"] if s["id"].startswith("a[")] == [1, 2]


def test_max_parallel_one_runs_instances_in_order(run, write, tmp_path):
    # Each instance appends its number, and fails when another is inside at the same time.
    script = tmp_path / "one.py"
    script.write_text(
        "import os, sys\n"
        "lock = 'inside'\n"
        "try:\n"
        "    fd = os.open(lock, os.O_CREAT | os.O_EXCL)\n"
        "except FileExistsError:\n"
        "    sys.exit('two at once')\n"
        "open('order', 'a').write(sys.argv[1] + '\\n')\n"
        "os.close(fd); os.remove(lock)\n"
    )
    write(
        "plan.yaml",
        f"""
        steps:
          - id: each
            foreach: [0, 1, 2, 3, 4, 5]
            max_parallel: 1
            tool: shell
            args: {{cmd: ["{PY}", "one.py", "${{item}}"]}}
        """,
    )
    r = run("run", "plan.yaml", "-j", "4", "--events", "ev.jsonl")
    assert r.code == 0, r
    assert (tmp_path / "order").read_text().split() == ["0", "1", "2", "3", "4", "5"]
    assert most_at_once(tmp_path / "ev.jsonl", lambda step: "[" in step) == 1


PACED = """
    steps:
      - {id: m, matrix: {x: [a, b, c]}, max_parallel: 2, run: "echo ${matrix.x}"}
      - {id: one, foreach: [p, q], max_parallel: 1, run: "echo ${item}"}
      - {id: free, run: "true"}
      - {id: after, run: "true", depends_on: [m]}
      - {id: next, run: "true", depends_on: [free]}
"""


def test_the_dry_run_starts_at_most_max_parallel_instances_per_wave(run, write):
    # Waves are a run whose steps all take the same time: a step's `max_parallel` holds its
    # instances back there too (1: one per wave, in order), and what depends on the step
    # starts after its last one; a step that does not wait for it starts as before.
    write("plan.yaml", PACED)
    r = run("run", "plan.yaml", "--dry-run", "--output", "json")
    assert r.code == 0, r
    assert r.json["waves"] == [
        ["m[0]", "m[1]", "one[0]", "free"],
        ["m[2]", "one[1]", "next"],
        ["after"],
    ]
    text = run("run", "plan.yaml", "--dry-run").out
    assert "wave 2 (3 in parallel)" in text, text


def _ascii_waves(text: str) -> list[list[str]]:
    """The entries of `graph`'s waves: a step's instances where it lists them, else the step."""
    waves: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("wave "):
            waves.append([])
        elif line.lstrip().startswith(("├", "└")):
            if waves[-1] and "[" not in waves[-1][-1]:
                waves[-1].pop()  # the step's line: its instances stand for it
            waves[-1].append(line.split()[2])
        else:
            waves[-1].append(line.replace("∥", "").split()[1])
    return waves


def test_graph_paces_instances_per_wave_as_the_dry_run_does(run, write):
    # graph's waves were step-level: `m` in wave 1 with all its instances, `after` in wave 2,
    # where the dry run (and a run whose steps take the same time) has it in wave 3
    write("plan.yaml", PACED)
    dry = run("run", "plan.yaml", "--dry-run", "--output", "json")
    r = run("graph", "plan.yaml")
    assert r.code == 0, r
    assert _ascii_waves(r.out) == dry.json["waves"], r.out
    assert r.out.splitlines()[:12] == [
        "wave 1  ∥ 4 in parallel",
        "  ∥ ○ m  [shell]",
        "      ├ ○ m[0]",
        "      └ ○ m[1]",
        "  ∥ ○ one  [shell]",
        "      └ ○ one[0]",
        "  ∥ ○ free  [shell]",
        "wave 2  ∥ 3 in parallel",
        "  ∥ ○ m  (continued: max_parallel 2)",
        "      └ ○ m[2]",
        "  ∥ ○ one  (continued: max_parallel 1)",
        "      └ ○ one[1]",
    ], r.out


def test_max_parallel_two_lets_two_run_at_once(run, write, tmp_path):
    # Instance 0 waits until instance 1 has started: that only ends if two run at once;
    # instance 2 must not start before one of them ended.
    script = tmp_path / "two.py"
    script.write_text(
        "import os, sys, time\n"
        "n = sys.argv[1]\n"
        "open('started-' + n, 'w').close()\n"
        "if n == '0':\n"
        "    deadline = time.monotonic() + 50\n"  # a bound, under the harness's 60 s
        "    while not os.path.exists('started-1'):\n"
        "        if time.monotonic() > deadline: sys.exit('1 never started')\n"
        "        time.sleep(0.01)\n"
        "if n == '2' and not os.path.exists('done-0') and not os.path.exists('done-1'):\n"
        "    sys.exit('three at once')\n"
        "if n == '1':\n"
        "    deadline = time.monotonic() + 50\n"  # a bound, under the harness's 60 s
        "    while not os.path.exists('started-0'):\n"
        "        if time.monotonic() > deadline: sys.exit('0 never started')\n"
        "        time.sleep(0.01)\n"
        "open('done-' + n, 'w').close()\n"
    )
    write(
        "plan.yaml",
        f"""
        steps:
          - id: each
            matrix: {{n: [0, 1, 2]}}
            max_parallel: 2
            tool: shell
            args: {{cmd: ["{PY}", "two.py", "${{matrix.n}}"]}}
        """,
    )
    r = run("run", "plan.yaml", "-j", "4", "--events", "ev.jsonl")
    assert r.code == 0, r
    assert most_at_once(tmp_path / "ev.jsonl", lambda step: "[" in step) == 2


def test_a_written_matrix_too_large_to_run_is_a_validation_error(run, write):
    write(
        "plan.json",
        json.dumps(
            {
                "steps": [
                    {"id": "s", "run": "echo", "matrix": {"a": [*range(400)], "b": [*range(400)]}}
                ]
            }
        ),
    )
    r = run("validate", "plan.json")
    assert r.code == 3, r
    assert "step 's': matrix gives 160,000 combinations; a step runs at most 100,000" in r.out


EMPTY_MATRIX = """
steps:
  - id: smoke
    matrix:
      os: [linux]
      exclude: [{os: linux}]
    tool: echo
    args: {value: "${matrix.os}"}
  - {id: lint, foreach: [], tool: echo, args: {value: "${item}"}}
"""


def test_dry_run_words_a_matrix_step_as_a_matrix(run, write):
    write("plan.yaml", EMPTY_MATRIX)
    r = run("run", "plan.yaml", "--dry-run")
    assert r.code == 0, r
    assert "matrix: no combination left: runs nothing, result []" in r.out
    assert "foreach: an empty list: runs nothing, result []" in r.out  # lint keeps its words
    assert r.out.count("foreach:") == 1
    doc = run("run", "plan.yaml", "--dry-run", "--output", "json").json
    entries = {e["id"]: e for e in doc["steps"]}
    assert entries["smoke"]["matrix"] == [] and "foreach" not in entries["smoke"]
    assert entries["lint"]["foreach"] == []
    write("plan.yaml", MATRIX)
    r = run("run", "plan.yaml", "--dry-run")
    assert "2 steps (3 matrix instances)" in r.out, r


def test_graph_words_a_matrix_step_as_a_matrix(run, write):
    write("plan.yaml", EMPTY_MATRIX)
    r = run("graph", "plan.yaml")
    assert r.code == 0, r
    assert "(no instances: no combination left)" in r.out
    assert "(no instances: the list is empty)" in r.out  # lint's
    write("plan.yaml", MATRIX)
    r = run("graph", "plan.yaml", "--format", "mermaid")
    assert "matrix: 3 instances" in r.out and "foreach" not in r.out, r
    r = run("graph", "plan.yaml", "--format", "dot")
    assert "matrix: 3 instances" in r.out and "foreach" not in r.out, r


def test_console_words_a_matrix_step_as_a_matrix(run, write):
    write("plan.yaml", EMPTY_MATRIX)
    r = run("run", "plan.yaml")
    assert r.code == 0, r
    assert "smoke started [echo]: matrix, no combination left" in r.err
    assert "lint started [echo]: foreach, empty" in r.err
    write("plan.yaml", MATRIX)
    r = run("run", "plan.yaml")
    assert "smoke started [echo]: matrix, 3 instances" in r.err, r
    assert "; 3 matrix instances (3 succeeded)" in r.err, r


SUB_PLAN_MATRIX = """
name: child
steps:
  - id: grid
    matrix: {os: [linux, macos]}
    tool: echo
    args: {value: "${matrix.os}"}
  - {id: each, foreach: [1, 2], tool: echo, args: {value: "${item}"}}
"""


def test_a_matrix_step_in_a_sub_plan_is_worded_as_a_matrix(run, write, tmp_path):
    """The parent's views know the sub-plan's steps only from their events: a matrix step's
    step.started says it is one, and the console and JUnit word it so (its foreach sibling
    stays foreach)."""
    write("sub.yaml", SUB_PLAN_MATRIX)
    write("plan.yaml", "steps:\n  - {id: sp, tool: plan, args: {path: sub.yaml}}\n")
    r = run("run", "plan.yaml", "--events", "ev.jsonl", "--junit", "j.xml")
    assert r.code == 0, r
    assert "sp/grid started [echo]: matrix, 2 instances" in r.err, r
    assert "sp/each started [echo]: foreach, 2 instances" in r.err, r
    started = {
        e["step"]: e
        for e in map(json.loads, (tmp_path / "ev.jsonl").read_text().splitlines())
        if e["event"] == "step.started"
    }
    assert started["sp/grid"].get("matrix") is True
    assert "matrix" not in started["sp/each"]
    assert "foreach" not in (tmp_path / "j.xml").read_text()


EXPRESSION_MATRIX = """
variables: {versions: ["3.11", "3.12"]}
steps:
  - {id: oses, tool: echo, args: {value: [linux, macos]}, result_variable: os_list}
  - id: smoke
    title: "Smoke ${matrix.os} py${matrix.py}"
    matrix:
      os: "${os_list}"
      py: "${versions}"
      exclude: [{os: macos, py: "3.11"}]
    tool: shell
    args: {cmd: "test ${matrix.os}-${matrix.py} != macos-3.12 || test -f ok && echo ${matrix.os}-${matrix.py}"}
    result_variable: combos
  - id: known
    matrix: {py: "${versions}"}
    run: echo ${matrix.py}
"""


def test_a_matrix_list_may_be_an_expression_as_a_foreach_may(run, write, tmp_path):
    """`matrix: {py: "${versions}"}` was refused by the schema (`expected a list`), while a
    matrix is "as foreach", whose list may be one `${...}` (a variable, or a result: resolved
    when the step's dependencies are done)."""
    write("plan.yaml", EXPRESSION_MATRIX)
    assert run("validate", "plan.yaml").code == 0
    dry = run("run", "plan.yaml", "--dry-run", "--output", "json")
    assert dry.code == 0, dry
    steps = {s["id"]: s for s in dry.json["steps"]}
    assert [s for s in steps if s.startswith("known[")] == ["known[0]", "known[1]"]
    assert steps["known[1]"]["matrix"] == {"py": "3.12"}
    assert steps["smoke[*]"]["depends_on"] == ["oses"]  # reads a result: known later
    assert steps["smoke[*]"]["matrix"] == "<matrix over <oses result>>"
    assert steps["smoke[*]"]["title"] == "Smoke <matrix.os> py<matrix.py>"
    graph = run("graph", "plan.yaml", "--format", "json")
    assert graph.code == 0, graph
    nodes = {n["id"]: n for n in graph.json["nodes"]}
    assert nodes["known"]["instances"] == ["known[0]", "known[1]"]
    assert nodes["smoke"]["instances"] == ["smoke[*]"]
    assert nodes["smoke"]["matrix"] == "<matrix over <oses result>>"
    assert {"from": "oses", "to": "smoke", "kind": "data"} in graph.json["edges"]
    show = run("show", "plan.yaml", "known", "--output", "json")
    assert show.code == 0, show
    assert show.json["matrix"] == {"py": "${versions}"}
    assert [i["id"] for i in show.json["instances"]] == ["known[0]", "known[1]"]

    # One at a time: with two, macos-3.12 could fail (and abort the run) while linux-3.11 still
    # ran, and the resume would then have nothing to keep.
    first = run("run", "plan.yaml", "--output", "json", "-j", "1")
    assert first.code == 1, first  # macos-3.12 fails until `ok` exists
    (tmp_path / "ok").write_text("")
    again = run("resume", "plan.yaml", "--output", "json")
    assert again.code == 0, again
    done = {s["id"]: s for s in again.json["steps"]}
    assert done["smoke"]["result"] == [
        {"stdout": f"{c}\n", "stderr": "", "exit_code": 0}
        for c in ("linux-3.11", "linux-3.12", "macos-3.12")
    ]
    assert "smoke[2]" in again.err and "smoke[0] (Smoke linux py3.11) kept" in again.err
    assert [done[f"known[{n}]"]["result"]["stdout"] for n in (0, 1)] == ["3.11\n", "3.12\n"]
    # a --var changes the list: the instances follow it
    other = run("run", "plan.yaml", "known", "--var", "versions=[a, b, c]", "--output", "json")
    assert other.code == 0, other
    assert [s["id"] for s in other.json["steps"] if s["id"].startswith("known[")] == [
        "known[0]",
        "known[1]",
        "known[2]",
    ]


def test_a_matrix_expression_is_checked_as_a_foreach_expression_is(run, write):
    write(
        "plan.yaml",
        """
        variables: {versions: ["3.11"], one: "3.11"}
        steps:
          - {id: a, run: "echo ${matrix.py}", matrix: {py: "versions"}}
          - {id: b, run: "echo ${matrix.py}", matrix: {py: "${verisons}"}}
          - {id: c, run: "echo ${matrix.py}", matrix: {py: "${matrix.x}"}}
          - {id: d, run: "echo ${matrix.py}", matrix: {py: "${one}"}}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert_no_traceback(r)
    assert r.out.splitlines() == [
        "plan.yaml:3:52: error: step 'a': matrix.py: a string must be exactly one "
        "${expression} giving a list",
        "plan.yaml:4:52: error: step 'b': matrix.py: undefined name 'verisons' "
        "(did you mean 'versions'?)",
        "plan.yaml:5:52: error: step 'c': matrix.py: undefined name 'matrix'",
    ]
    run_d = run("run", "plan.yaml", "d", "--output", "json")
    assert run_d.code == 3  # the plan is invalid as a whole
    write(
        "ok.yaml",
        'variables: {one: "3.11"}\nsteps:\n  - {id: d, run: "echo", matrix: {py: "${one}"}}\n',
    )
    r = run("run", "ok.yaml")
    assert r.code == 1, r
    assert "matrix.py gave a string, not a list" in r.err, r.err
