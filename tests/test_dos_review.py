"""Hostile plan text, expressions and values: one clear line, the documented exit code, no
traceback, no hang, bounded memory. Every run here is a real process under a memory limit."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import Result, assert_no_traceback, planrun_process


def bounded_planrun(cwd: Path, *args: str, timeout: float = 180) -> Result:
    """`python -m planrun ARGS` in a real process with its address space capped. `timeout`
    bounds a hang (the bugs these tests guard against held planrun for hours), not a speed: a
    loaded CI machine takes tens of seconds for what takes one here."""
    return planrun_process(*args, cwd=cwd, timeout=timeout, capped=True)


def _plan(tmp_path: Path, text: str) -> None:
    (tmp_path / "p.yaml").write_text(textwrap.dedent(text).lstrip())


def _one_step_error(r: Result) -> str:
    assert r.code == 1, r
    assert_no_traceback(r)
    assert "internal error" not in r.err + r.out, r
    step = json.loads(r.out)["steps"][0]
    assert step["status"] == "failed", r
    assert "\n" not in step["error"], step
    return str(step["error"])


def test_an_integer_too_long_to_print_fails_its_step_not_the_run(tmp_path: Path) -> None:
    # Python refuses to turn an int of more than 4300 digits into text; an expression could
    # compute one (the bound on ints was 64,000 bits), and printing it was an internal error.
    _plan(
        tmp_path,
        """
        variables: {n: 5000, m: 6000, k: 4300}
        steps:
          - {id: a, tool: echo, args: {value: "${ 10 ** n }"}, on_failure: continue}
          - {id: b, tool: shell, args: {cmd: "echo ${ 7 ** m }"}, on_failure: continue}
          - {id: c, tool: echo, args: {value: "x${ 10 ** k }"}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 1 and "internal error" not in r.out + r.err, r
    assert_no_traceback(r)
    for step in json.loads(r.out)["steps"]:
        assert step["status"] == "failed" and "too large" in step["error"], step
    r = bounded_planrun(tmp_path, "run", "--dry-run", "p.yaml")
    assert r.code == 0 and "internal error" not in r.err, r
    assert_no_traceback(r)
    (tmp_path / "p.yaml").write_text(
        "steps:\n  - {id: a, tool: echo, args: {value: 'x${ 10 ** 4300 }'}}\n"
    )
    r = bounded_planrun(tmp_path, "validate", "p.yaml")
    assert r.code == 3 and r.out.startswith("p.yaml:2:") and "too large" in r.out, r


def test_the_largest_allowed_integer_still_prints(tmp_path: Path) -> None:
    _plan(
        tmp_path,
        """
        steps:
          - {id: a, tool: echo, args: {value: "${ (2 ** 13998) | string | length }"}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 0, r
    assert json.loads(r.out)["steps"][0]["result"] == 4214


def test_map_cannot_multiply_a_bounded_item_into_unbounded_memory(tmp_path: Path) -> None:
    # Each `center` result is within the bound; a map over a range made 100,000 of them.
    _plan(
        tmp_path,
        """
        variables: {w: 999999}
        steps:
          - {id: a, tool: echo, args: {value: "${ range(100000) | map('center', w) | list | length }"}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    error = _one_step_error(r)
    assert "too large" in error and "MemoryError" not in error, r


def test_join_of_a_range_or_a_map_is_bounded(tmp_path: Path) -> None:
    _plan(
        tmp_path,
        """
        variables: {s: "abcdefghij"}
        steps:
          - id: a
            tool: echo
            args: {value: "${ range(100000) | join(s * 100000) | length }"}
            on_failure: continue
          - id: b
            tool: echo
            args: {value: "${ (s * 100000).join(range(100000) | map('string')) | length }"}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 1, r
    assert_no_traceback(r)
    for step in json.loads(r.out)["steps"]:
        assert step["status"] == "failed" and "too large" in step["error"], step
        assert "MemoryError" not in step["error"], step


def test_tojson_indent_cannot_multiply_by_depth(tmp_path: Path) -> None:
    deep = "[" * 60 + "1" + "]" * 60
    _plan(
        tmp_path,
        f"""
        steps:
          - {{id: a, tool: echo, args: {{value: "${{ {deep} | tojson(indent=999999) | length }}"}}}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    error = _one_step_error(r)
    assert "too large" in error and "MemoryError" not in error, r


def test_wordwrap_cannot_repeat_a_big_wrapstring(tmp_path: Path) -> None:
    _plan(
        tmp_path,
        """
        variables: {s: "a b c d e f g h i j "}
        steps:
          - id: a
            tool: echo
            args: {value: "${ (s * 50000) | wordwrap(1, wrapstring=s * 50000) | length }"}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    error = _one_step_error(r)
    assert "too large" in error and "MemoryError" not in error, r


def test_legitimate_chains_over_big_data_still_work(tmp_path: Path) -> None:
    _plan(
        tmp_path,
        """
        steps:
          - {id: a, tool: shell, args: {cmd: "seq 1 100000"}, result_variable: r}
          - id: b
            tool: echo
            args:
              value: "${ r.stdout.split() | map('trim') | map('int') | select('odd') | list | length }"
          - id: c
            tool: echo
            args: {value: "${ r.stdout.split() | map('string') | join(',') | length }"}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 0, r
    steps = json.loads(r.out)["steps"]
    assert steps[1]["result"] == 50000
    assert steps[2]["result"] == len(",".join(str(i) for i in range(1, 100001)))


def test_a_huge_plan_or_vars_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    # Sparse: a gigabyte on paper, nothing on disk. Reading it whole ate all memory.
    with (tmp_path / "big.yaml").open("wb") as f:
        f.truncate(1 << 30)
    r = bounded_planrun(tmp_path, "validate", "big.yaml")
    assert r.code == 3 and "internal error" not in r.out + r.err, r
    assert r.out.startswith("big.yaml:1:1: error:") and "larger than" in r.out, r
    assert_no_traceback(r)
    _plan(tmp_path, "steps: []\n")
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--vars-file", "big.yaml", "--no-state")
    assert r.code == 2 and "internal error" not in r.err and "larger than" in r.err, r
    assert len(r.err.strip().splitlines()) == 1, r
    assert_no_traceback(r)
    (tmp_path / "mcp.json").symlink_to(tmp_path / "big.yaml")
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--mcp-config", "mcp.json", "--no-state")
    assert r.code == 2 and "internal error" not in r.err and "larger than" in r.err, r
    assert_no_traceback(r)


def test_an_mcp_config_with_a_huge_number_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(
        '{"mcpServers": {"a": {"command": "x", "n": 1' + "0" * 5000 + "}}}"
    )
    _plan(tmp_path, "steps: []\n")
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--mcp-config", "mcp.json", "--no-state")
    assert r.code == 2 and "internal error" not in r.err, r
    assert r.err.startswith("planrun: error: ") and "mcp.json" in r.err, r
    assert len(r.err.strip().splitlines()) == 1, r
    assert_no_traceback(r)


def test_a_planner_printing_a_huge_number_or_deep_json_fails_the_replan(tmp_path: Path) -> None:
    for i, body in enumerate(["[1" + "0" * 5000 + "]", "[" * 100000 + "]" * 100000]):
        (tmp_path / "planner.py").write_text(f"print({body!r})\n")
        _plan(
            tmp_path,
            f"""
            replan: {{command: ["{sys.executable}", "planner.py"], timeout: 20s}}
            limits: {{max_replans: 1}}
            steps:
              - {{id: a, tool: shell, args: {{cmd: "exit 9"}}, on_failure: replan}}
            """,
        )
        r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
        assert r.code == 1 and "internal error" not in r.out + r.err, (i, r)
        assert json.loads(r.out)["reason"] == "replan_budget", (i, r)
        assert_no_traceback(r)


def test_a_lone_surrogate_escape_in_json_is_an_error_at_its_position(tmp_path: Path) -> None:
    # YAML refuses "\ud800"; JSON read it, and printing or storing it was an internal error.
    (tmp_path / "p.json").write_text(
        '{"name": "t",\n "steps": [{"id": "a", "tool": "echo", "args": {"value": "x\\ud800"}}]}'
    )
    for args in (["validate", "p.json"], ["run", "p.json", "--output", "json"]):
        r = bounded_planrun(tmp_path, *args)
        assert r.code == 3 and "internal error" not in r.out + r.err, r
        assert_no_traceback(r)
    r = bounded_planrun(tmp_path, "validate", "p.json")
    assert r.out.startswith("p.json:2:60: error:") and "surrogate" in r.out, r
    # A pair is one character; an escaped backslash before 'ud800' is no escape at all.
    ok = '{"steps": [{"id": "a", "tool": "echo", "args": {"value": "\\ud83d\\ude00 \\\\ud800"}}]}'
    (tmp_path / "p.json").write_text(ok)
    r = bounded_planrun(tmp_path, "run", "p.json", "--output", "json", "--no-state")
    assert r.code == 0 and json.loads(r.out)["steps"][0]["result"] == "\U0001f600 \\ud800", r
    (tmp_path / "v.json").write_text('{"x": "\\udc00"}')
    _plan(tmp_path, "steps: []\n")
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--vars-file", "v.json", "--output", "json")
    assert r.code == 2 and "internal error" not in r.out + r.err and "surrogate" in r.err, r


def test_a_plan_that_writes_and_runs_a_new_copy_of_itself_stops(tmp_path: Path) -> None:
    # Every level is a different file, so "includes itself" never fired: it nested forever.
    _plan(
        tmp_path,
        """
        variables: {n: 0}
        steps:
          - {id: copy, tool: shell, args: {cmd: "cp p.yaml p${n + 1}.yaml"}}
          - id: deeper
            tool: plan
            args: {path: "p${n + 1}.yaml", variables: {n: "${n + 1}"}}
            depends_on: [copy]
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json", timeout=60)
    assert r.code == 1 and "internal error" not in r.out + r.err, r
    assert_no_traceback(r)
    assert "nested more than" in json.loads(r.out)["steps"][-1]["error"], r
    assert len(list(tmp_path.glob("p*.yaml"))) <= 40


@pytest.mark.slow  # two plans of 600,000 values
def test_a_yaml_plan_with_millions_of_values_is_refused_early(tmp_path: Path) -> None:
    # 14 MB of "[1,1,1,...]" took 3.3 GB and 35 s to compose (libyaml nodes are heavy).
    items = ",".join(["1"] * 600_000)
    (tmp_path / "p.yaml").write_text(f"steps: []\nvariables:\n  x: [{items}]\n")
    r = bounded_planrun(tmp_path, "validate", "p.yaml", timeout=60)
    assert r.code == 3 and "internal error" not in r.out + r.err, r
    assert r.out.startswith("p.yaml:3:6: error:") and "too many values" in r.out, r
    assert_no_traceback(r)
    block = "".join("  - 1\n" for _ in range(600_000))
    (tmp_path / "p.yaml").write_text(f"steps: []\nvariables:\n x:\n{block}")
    r = bounded_planrun(tmp_path, "validate", "p.yaml", timeout=60)
    assert r.code == 3 and "too many values" in r.out, r


def test_sleep_refuses_nan_and_infinity(tmp_path: Path) -> None:
    # NaN slept not at all and succeeded; infinity (1e308 * 10) slept forever.
    _plan(
        tmp_path,
        """
        variables: {big: 1.0e+308}
        steps:
          - {id: a, tool: sleep, args: {seconds: .nan}, on_failure: continue}
          - {id: b, tool: sleep, args: {seconds: "${ big * 10 }"}, on_failure: continue}
          - {id: c, tool: sleep, args: {seconds: "${ 2 ** 1100 }"}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 1, r
    assert_no_traceback(r)
    for step in json.loads(r.out)["steps"]:
        assert step["status"] == "failed" and "sleep: 'seconds'" in step["error"], step


def test_a_lone_surrogate_made_by_an_expression_prints_escaped(tmp_path: Path) -> None:
    # A Jinja string literal can spell half a surrogate pair; printing it (dry run, console,
    # the HTML report) was an internal error.
    (tmp_path / "p.yaml").write_text(
        "steps:\n  - {id: a, tool: echo, args: {value: \"${ 'x\\\\ud800' }\"}}\n"
    )
    r = bounded_planrun(tmp_path, "run", "--dry-run", "p.yaml")
    assert r.code == 0 and "internal error" not in r.err and "\\ud800" in r.out, r
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--stream")
    assert r.code == 0 and "internal error" not in r.err, r
    r = bounded_planrun(tmp_path, "report", "p.yaml")
    assert r.code == 0 and "internal error" not in r.err, r
    assert "\\ud800" in (tmp_path / "planrun-report.html").read_text(encoding="utf-8")
    assert_no_traceback(r)


def test_a_foreach_over_too_many_items_fails_its_step(tmp_path: Path) -> None:
    # A million instances took more than 600 MB (about 1.5 kB each) before the first ran.
    (tmp_path / "v.json").write_text(json.dumps({"xs": list(range(100_001))}))
    _plan(
        tmp_path,
        """
        variables: {xs: []}
        steps:
          - {id: a, tool: echo, foreach: "${xs}", args: {value: "${item}"}}
        """,
    )
    r = bounded_planrun(
        tmp_path, "run", "p.yaml", "--no-state", "--vars-file", "v.json", "--output", "json"
    )
    error = _one_step_error(r)
    assert "100,001" in error and "100,000" in error, r


@pytest.mark.slow  # ~2.4 s of big inputs
def test_filters_over_a_big_input_are_not_refused(tmp_path: Path) -> None:
    # The bound on what a filter yields grows with its input: a big vars file may be mapped.
    words = [f"word{i:06d}" for i in range(150_000)]
    (tmp_path / "v.json").write_text(json.dumps({"ws": words, "ns": list(range(250_000))}))
    _plan(
        tmp_path,
        """
        variables: {ws: [], ns: []}
        steps:
          - {id: a, tool: echo, args: {value: "${ ws | map('upper') | list | length }"}}
          - {id: b, tool: echo, args: {value: "${ ns | map('string') | join(',') | length }"}}
        """,
    )
    r = bounded_planrun(
        tmp_path, "run", "p.yaml", "--no-state", "--vars-file", "v.json", "--output", "json"
    )
    assert r.code == 0, r
    steps = json.loads(r.out)["steps"]
    assert steps[0]["result"] == 150_000
    assert steps[1]["result"] == len(",".join(str(i) for i in range(250_000)))


def test_wordwrap_of_one_long_word_is_refused_not_quadratic(tmp_path: Path) -> None:
    # textwrap copies the rest of a long word for every piece it breaks off: a 1,000,000-char
    # word at width 1 held the event loop 14 s (past the step's timeout); longer, for hours.
    _plan(
        tmp_path,
        """
        variables: {s: "abc"}
        steps:
          - id: a
            tool: echo
            args: {value: "${ (s * 333333) | wordwrap(1) | length }"}
            on_failure: continue
          - {id: b, tool: echo, args: {value: "${ ('ab ' * 300000) | wordwrap(5) | length }"}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 1, r
    steps = {step["id"]: step for step in json.loads(r.out)["steps"]}
    a, b = steps["a"], steps["b"]
    assert a["status"] == "failed" and "too large" in a["error"], a
    assert b["status"] == "succeeded", b  # many short words are cheap at any width
